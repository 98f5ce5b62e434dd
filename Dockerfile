# Agent Credential Exchange Service: container image.
#
# Base: Debian 12 "bookworm" (glibc 2.36) with Node 22 LTS (module ABI 127). The uWebSockets.js build
# in use (uws-pack 20.0.8, docs/http-front-end.md) has ABI 127 binaries built for glibc >= 2.27. Pin a
# digest (node:22-bookworm-slim@sha256:...) in CI for reproducible builds; the tag is kept here so
# base-image security updates arrive on rebuild.
#
# Built with buildah/podman: pass `--format docker`. The default OCI image format has no HEALTHCHECK
# and buildah drops it (with a warning); Kubernetes ignores it either way (it uses the probes in k8s/).
ARG NODE_IMAGE=node:22-bookworm-slim

# ---- deps: production node_modules only, pruned to what this platform loads ----
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# The protocol, client and middleware are workspaces the server depends on: npm ci links them from
# packages/ (each workspace's package.json is copied in both stages; test/e2e/k8s-manifests.test.ts checks).
COPY packages/protocol/package.json packages/protocol/
COPY packages/middleware/package.json packages/middleware/
COPY packages/client/package.json packages/client/
# --ignore-scripts: no dependency declares an install script (native code ships prebuilt); this keeps
# a future one from running unreviewed.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund
# The one install step that does run: the postgres driver's switchover crash fix (the script's header).
COPY scripts/patch-postgres-driver.mjs scripts/
RUN node scripts/patch-postgres-driver.mjs
# uWebSockets.js (the uws-pack repack) ships 24 binaries (linux x64/arm64/arm, darwin x64/arm64, win32
# x64, each for four Node ABIs), ~133 MB. Keep the one this image's Node loads (computed, so arm64
# builds work too), fail the build when it is missing or does not load on this glibc, and drop type
# declarations and source maps nobody reads at run time. LICENSE files stay.
RUN set -eu; \
    uws=node_modules/uWebSockets.js; \
    keep="uws_$(node -p 'process.platform + "_" + process.arch + "_" + process.versions.modules').node"; \
    test -f "$uws/dist/bin/$keep"; \
    find "$uws/dist/bin" -type f ! -name "$keep" -delete; \
    find node_modules -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete; \
    node --input-type=module -e "import { App } from 'uWebSockets.js'; if (!String(App).includes('[native code]')) { console.error('uWS native binary did not load'); process.exit(1); }"

# ---- build: compile TypeScript to dist/ ----
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/protocol/package.json packages/protocol/
COPY packages/middleware/package.json packages/middleware/
COPY packages/client/package.json packages/client/
RUN npm ci --ignore-scripts --no-audit --no-fund
# .dockerignore lets in only what the compiler needs (tsconfigs, src, workers, scripts, packages).
# `npm run build` compiles src/ and workers/ only (tsconfig.json); bench, kit and test helpers have their
# own tsconfigs and are never built here. Its last step runs PGlite's initdb once (~12 s, ~700 MiB) and
# packs the embedded default's pristine cluster into dist, so that no first start runs initdb
# (docs/storage.md#memory-of-the-embedded-default).
COPY . .
RUN npm run build \
 && find dist packages/*/dist -type f \( -name '*.d.ts' -o -name '*.d.ts.map' \) -delete

# ---- runtime: compiled JavaScript, production dependencies, no package managers ----
FROM ${NODE_IMAGE} AS runtime
# npm, corepack and yarn are never used at run time. Deleting them does not shrink the download (they
# live in the shared base layers) but keeps them out of the filesystem that scanners and intruders see.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
           /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
           /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* \
 && mkdir -p /data \
 && chown 1000:1000 /data
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    ADMIN_PORT=8081 \
    DATA_DIR=/data
WORKDIR /app
# Code and dependencies stay owned by root: the service user can read them, never rewrite them.
COPY package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The workspace packages node_modules links to: their manifests and compiled JavaScript only (the server
# imports the protocol package; the middleware's dist carries its own copy of it).
COPY --from=build /app/packages/protocol/package.json ./packages/protocol/
COPY --from=build /app/packages/protocol/dist ./packages/protocol/dist
COPY --from=build /app/packages/middleware/package.json ./packages/middleware/
COPY --from=build /app/packages/middleware/dist ./packages/middleware/dist
COPY --from=build /app/packages/client/package.json ./packages/client/
COPY --from=build /app/packages/client/dist ./packages/client/dist
# The only writable place (embedded PGlite data, generated admin token / key-encryption key when they
# are not given). The root filesystem can be mounted read-only.
VOLUME ["/data"]
# uid 1000 is the image's "node" user; numeric so Kubernetes' runAsNonRoot can verify it.
USER 1000:1000
# 8080 public API; 8081 admin API, /metrics, /healthz, /readyz (binds ADMIN_HOST, 127.0.0.1 by default:
# publish it only after setting ADMIN_HOST=0.0.0.0 on a private network).
EXPOSE 8080 8081
# The service drains on SIGTERM (readyz turns 503, in-flight requests finish, SHUTDOWN_TIMEOUT_MS cap).
STOPSIGNAL SIGTERM
# No curl in slim images: node itself asks the liveness endpoint.
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.ADMIN_PORT || 8081) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/src/main.js"]
