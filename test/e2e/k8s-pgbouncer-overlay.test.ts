// The production overlay with PgBouncer in front of the external Postgres (k8s/overlays/production-pgbouncer):
// it renders over the production overlay, its objects pass the Kubernetes schemas, the service's settings
// still load, and the pooler is in transaction mode with nothing else the service would need.
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { ROOT, renderKustomization, unknownFields, validateWithModel, type K8sObject } from '../support/k8s.js';

const DIR = path.join(ROOT, 'k8s/overlays/production-pgbouncer');

describe('k8s overlay production-pgbouncer', () => {
  const objects: K8sObject[] = renderKustomization(DIR);
  const find = (kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name);

  it('adds a PgBouncer Deployment and Service to the production objects, in the production namespace', async () => {
    for (const [kind, name] of [['Deployment', 'ace'], ['Deployment', 'ace-pgbouncer'], ['Service', 'ace-pgbouncer'], ['Ingress', 'ace']]) {
      expect(find(kind, name), `${kind}/${name}`).toBeDefined();
    }
    for (const obj of objects) {
      expect(obj.metadata.namespace, `${obj.kind}/${obj.metadata.name}`).toBe('ace-production');
      if (!obj.apiVersion.includes('monitoring.coreos.com')) {
        await validateWithModel(obj);
        expect(unknownFields(obj), `${obj.kind}/${obj.metadata.name}`).toEqual([]);
      }
    }
    const bouncer = find('Deployment', 'ace-pgbouncer')!;
    const service = find('Service', 'ace-pgbouncer')!;
    expect(service.spec.selector).toEqual(bouncer.spec.template.metadata.labels);
    expect(bouncer.spec.template.spec.containers[0].ports[0].containerPort).toBe(6432);
  });

  it('the service settings load, and the documented pooler configuration is transaction mode with no extra setting', () => {
    const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('ace-config'))!;
    const config = loadConfig({ ...cm.data, DATABASE_URL: 'postgres://ace:pw@ace-pgbouncer:6432/ace', ADMIN_TOKEN: 'x'.repeat(32), KEY_ENCRYPTION_KEY: '11'.repeat(32), REDIS_URL: 'redis://redis:6379' });
    expect(config.databasePoolSize).toBe(10);
    const text = readFileSync(path.join(DIR, 'pgbouncer.yaml'), 'utf8');
    expect(text).toMatch(/^# {3}pool_mode = transaction$/m);
    expect(text).not.toMatch(/^# {3}(max_prepared_statements|ignore_startup_parameters)/m);
  });

  it('the documented pgbouncer.ini retries a failed server login within a second or two (its default, 15 s, keeps clients out after Postgres is back)', () => {
    const text = readFileSync(path.join(DIR, 'pgbouncer.yaml'), 'utf8');
    const retry = /^# {3}server_login_retry = (\d+)$/m.exec(text)?.[1];
    expect(retry, 'pgbouncer.yaml documents server_login_retry').toBeDefined();
    expect(Number(retry)).toBeGreaterThanOrEqual(1);
    expect(Number(retry)).toBeLessThanOrEqual(2);
    expect(readFileSync(path.join(DIR, '../../../docs/operations.md'), 'utf8')).toContain(`\`server_login_retry = ${retry}\``);
  });

  it('connections at full scale, every pool counted: clients within max_client_conn of one PgBouncer, servers within Postgres\' max_connections', () => {
    const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('ace-config'))!;
    const config = loadConfig({ ...cm.data, DATABASE_URL: 'postgres://ace:pw@ace-pgbouncer:6432/ace', ADMIN_TOKEN: 'x'.repeat(32), KEY_ENCRYPTION_KEY: '11'.repeat(32), REDIS_URL: 'redis://redis:6379' });
    const ini = (name: string) => Number(new RegExp(`^# {3}${name} = (\\d+)$`, 'm').exec(readFileSync(path.join(DIR, 'pgbouncer.yaml'), 'utf8'))?.[1]);
    const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler')!;
    const surge = Number(find('Deployment', 'ace')!.spec.strategy.rollingUpdate.maxSurge);
    // Each process holds the store's pool and the audit trail's, both through the pooler.
    const clients = (hpa.spec.maxReplicas + surge) * config.workers * (config.databasePoolSize + config.audit.poolSize);
    expect(clients).toBeLessThanOrEqual(ini('max_client_conn')); // even if every pod reaches the same replica
    // One database/user pair: each PgBouncer replica opens at most default_pool_size server connections.
    const servers = find('Deployment', 'ace-pgbouncer')!.spec.replicas * ini('default_pool_size');
    expect(servers).toBeLessThanOrEqual(100 - 3 - 5); // superuser_reserved_connections, operators
    const comment = readFileSync(path.join(DIR, 'config.env'), 'utf8');
    expect(comment).toContain(`x (${config.databasePoolSize} + ${config.audit.poolSize} audit) = ${clients} client connections`);
    expect(comment).toContain(`default_pool_size ${ini('default_pool_size')} = ${servers}`);
  });
});
