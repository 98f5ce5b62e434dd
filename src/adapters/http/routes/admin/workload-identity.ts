// Admin API, workload identity: trusted issuers (create, list, delete) and the bindings of their subjects to agents.
import { Type } from '@sinclair/typebox';
import { ServiceError } from '../../../../core/errors.js';
import { WorkloadBindingCreate, WorkloadBindingList, WorkloadBindingQuery, WorkloadBindingView, WorkloadIssuerCreate, WorkloadIssuerList, WorkloadIssuerView } from '../../schemas/admin.js';
import { compileValidator } from '../../schemas/validate.js';
import type { ClientKeyService } from '../../../../core/agents/client-key-service.js';
import type { TrustedIssuer, WorkloadBinding } from '../../../../core/ports/client-keys.js';
import { parseJsonBody } from '../../json-body.js';
import { JSON_BODY_REFUSALS, refusals } from '../../responses.js';
import { json, type Handler, type RouteDeclaration } from '../../types.js';
import { admin, by, change, GUARD_REFUSALS, jsonBody, ok, uuidParam } from './common.js';
import { keySource, presentKeySource } from './client-keys.js';

const presentIssuer = (i: TrustedIssuer) => ({ issuer_id: i.id, issuer: i.issuer, audience: i.audience, ...presentKeySource(i.source), created_at: i.createdAt.toISOString() });

const presentBinding = (b: WorkloadBinding) => ({ issuer_id: b.issuerId, subject: b.subject, agent_id: b.agentId, created_at: b.createdAt.toISOString() });

export const workloadIdentityRouteTable = {
  workloadIssuerCreate: {
    ...admin, method: 'POST', path: '/admin/v1/workload-issuers', name: 'admin_workload_issuers', operationId: 'adminCreateWorkloadIssuer',
    summary: 'Trust a workload identity issuer (Kubernetes service accounts, SPIFFE, a CI OIDC issuer)', body: jsonBody(WorkloadIssuerCreate), audit: change('workload_issuer.created'),
    responses: { 201: ok('Created.', WorkloadIssuerView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, validation_error: '', conflict: 'this issuer is trusted already, or instances of an older release are still connected (agents without secrets wait for the rollout).' }) },
  },
  workloadIssuerList: {
    ...admin, method: 'GET', path: '/admin/v1/workload-issuers', name: 'admin_workload_issuers', operationId: 'adminListWorkloadIssuers',
    summary: 'List trusted workload identity issuers', responses: { 200: ok('Every trusted issuer.', WorkloadIssuerList), ...refusals(GUARD_REFUSALS) },
  },
  workloadIssuerDelete: {
    ...admin, method: 'DELETE', path: '/admin/v1/workload-issuers/:issuer_id', name: 'admin_workload_issuer', operationId: 'adminDeleteWorkloadIssuer',
    summary: 'Stop trusting an issuer (its bindings go, and the bound agents\' tokens are taken back)', params: { issuer_id: Type.String({ format: 'uuid' }) }, audit: change('workload_issuer.deleted'),
    responses: { 204: { description: 'Deleted.' }, ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  workloadBindingCreate: {
    ...admin, method: 'POST', path: '/admin/v1/workload-issuers/:issuer_id/bindings', name: 'admin_workload_bindings', operationId: 'adminBindWorkload',
    summary: "Let a workload (the issuer's subject) act as an agent", params: { issuer_id: Type.String({ format: 'uuid' }) }, body: jsonBody(WorkloadBindingCreate), audit: change('workload_binding.created'),
    responses: { 201: ok('Bound.', WorkloadBindingView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '', conflict: 'the subject is bound already, or instances of an older release are still connected (agents without secrets wait for the rollout).' }) },
  },
  workloadBindingList: {
    ...admin, method: 'GET', path: '/admin/v1/workload-issuers/:issuer_id/bindings', name: 'admin_workload_bindings', operationId: 'adminListWorkloadBindings',
    summary: "List an issuer's bindings", params: { issuer_id: Type.String({ format: 'uuid' }) },
    responses: { 200: ok('Its bindings.', WorkloadBindingList), ...refusals(GUARD_REFUSALS) },
  },
  workloadBindingDelete: {
    ...admin, method: 'DELETE', path: '/admin/v1/workload-issuers/:issuer_id/bindings', name: 'admin_workload_bindings', operationId: 'adminUnbindWorkload',
    summary: 'Unbind a workload (?subject=...): its agent\'s tokens are taken back', params: { issuer_id: Type.String({ format: 'uuid' }) }, query: WorkloadBindingQuery, audit: change('workload_binding.deleted'),
    responses: { 204: { description: 'Unbound.' }, ...refusals({ ...GUARD_REFUSALS, not_found: '', validation_error: '' }) },
  },
} satisfies Record<string, RouteDeclaration>;

export function workloadIdentityHandlers(deps: { clientKeys: ClientKeyService }): Record<keyof typeof workloadIdentityRouteTable, Handler> {
  const workloadIssuerCreate = compileValidator(workloadIdentityRouteTable.workloadIssuerCreate.body.schema);
  const workloadBindingCreate = compileValidator(workloadIdentityRouteTable.workloadBindingCreate.body.schema);
  return {
    workloadIssuerCreate: async (r) => {
      const body = workloadIssuerCreate(parseJsonBody(r));
      const issuer = await deps.clientKeys.createIssuer({ issuer: body.issuer, audience: body.audience, source: keySource(body) }, by(r, body));
      return json(201, presentIssuer(issuer));
    },
    workloadIssuerList: async () => json(200, { workload_issuers: (await deps.clientKeys.listIssuers()).map(presentIssuer) }),
    workloadIssuerDelete: async (r) => {
      await deps.clientKeys.deleteIssuer(uuidParam(r, 'issuer_id'), by(r));
      return { status: 204 };
    },
    workloadBindingCreate: async (r) => {
      const body = workloadBindingCreate(parseJsonBody(r));
      const binding = await deps.clientKeys.bind(uuidParam(r, 'issuer_id'), body.subject, body.agent_id, by(r));
      return json(201, presentBinding(binding));
    },
    workloadBindingList: async (r) => json(200, { bindings: (await deps.clientKeys.listBindings(uuidParam(r, 'issuer_id'))).map(presentBinding) }),
    workloadBindingDelete: async (r) => {
      const subject = new URLSearchParams(r.query).get('subject');
      if (!subject) throw new ServiceError('validation_error', 'The subject query parameter is required.');
      await deps.clientKeys.unbind(uuidParam(r, 'issuer_id'), subject, by(r));
      return { status: 204 };
    },
  };
}
