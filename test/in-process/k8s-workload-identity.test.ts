// The Kubernetes example of an agent without a secret (k8s/examples/workload-identity/agent.yaml): valid
// objects by the Kubernetes schemas, and a projected service-account token whose audience, lifetime and path
// are what the exchange and the agent client expect.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadYamlObjects, ROOT, unknownFields, validateWithModel } from '../support/k8s.js';

const FILE = path.join(ROOT, 'k8s/examples/workload-identity/agent.yaml');

describe('k8s/examples/workload-identity', () => {
  const objects = loadYamlObjects(FILE);

  it('holds a ServiceAccount and a Deployment that the Kubernetes schemas accept', async () => {
    expect(objects.map((o) => o.kind).sort()).toEqual(['Deployment', 'ServiceAccount']);
    for (const object of objects) {
      await validateWithModel(object);
      expect(unknownFields(object), object.kind).toEqual([]);
    }
  });

  it('mounts a projected token for the exchange (its issuer as audience, a bounded life) where the client reads it', () => {
    const deployment = objects.find((o) => o.kind === 'Deployment')!;
    const pod = deployment.spec.template.spec;
    expect(pod.serviceAccountName).toBe(objects.find((o) => o.kind === 'ServiceAccount')!.metadata.name);
    expect(pod.automountServiceAccountToken).toBe(false);
    const volume = pod.volumes.find((v: { projected?: unknown }) => v.projected);
    const source = volume.projected.sources[0].serviceAccountToken;
    const env = Object.fromEntries(pod.containers[0].env.map((e: { name: string; value: string }) => [e.name, e.value]));
    expect(source.audience).toBe(env.ACE_SERVICE_URL);
    // At least 10 minutes (the kubelet's minimum) and within WORKLOAD_TOKEN_MAX_LIFETIME_SECONDS' default.
    expect(source.expirationSeconds).toBeGreaterThanOrEqual(600);
    expect(source.expirationSeconds).toBeLessThanOrEqual(86_400);
    const mount = pod.containers[0].volumeMounts.find((m: { name: string }) => m.name === volume.name);
    expect(path.posix.join(mount.mountPath, source.path)).toBe(env.ACE_WORKLOAD_TOKEN_FILE);
  });
});
