// An MCP server (Streamable HTTP, the official MCP TypeScript SDK) behind the platform middleware, with no
// glue: `expressAgentAuth` verifies the agent's token and sets `req.auth` (the SDK's AuthInfo), the SDK's
// transport hands it to every handler as `extra.authInfo`, and the verifier answers the RFC 9728 metadata
// that MCP clients discover the authorization server from. One tool, `whoami`, says who called it.
//
//   ACE_PUBLIC_URL=http://localhost:8080 SCOPES_FILE=./scopes.yaml ACE_FEED_TOKEN=acef_... \
//   MCP_RESOURCE=http://127.0.0.1:3001/mcp PORT=3001 node examples/mcp-server/server.mjs
//
// MCP_RESOURCE is this server's resource identifier: register it first
// (`ace platform update <platform_id> --resource http://127.0.0.1:3001/mcp`); `ready()` checks that the
// service knows it. The scope file needs a rule for `POST /mcp` (e.g. scope `mcp:call`).
import express from 'express';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createVerifier, expressAgentAuth } from '@agent-credential-exchange/middleware';

/** The MCP server of one request (stateless: no session), with its one tool. */
function whoamiServer() {
  const server = new McpServer({ name: 'whoami', version: '1.0.0' });
  server.registerTool('whoami', { description: 'Says which agent called, for which resource, with which scopes.' }, async (extra) => {
    const auth = extra.authInfo;
    const caller = {
      agent_id: auth?.extra?.agentId,
      platform_id: auth?.extra?.platformId,
      client_id: auth?.clientId,
      scopes: auth?.scopes,
      resource: auth?.resource?.href,
    };
    return { content: [{ type: 'text', text: JSON.stringify(caller) }], structuredContent: caller };
  });
  return server;
}

/** The Express app: the middleware in front of every route, the MCP endpoint at /mcp. */
export function mcpApp(verifier) {
  const app = express();
  app.use(expressAgentAuth(verifier));
  app.use(express.json());
  app.post('/mcp', async (req, res) => {
    const server = whoamiServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  // Stateless: no server-sent event stream and no session to end (the MCP transport's 405).
  app.get('/mcp', (_req, res) => void res.status(405).set('allow', 'POST').end());
  app.delete('/mcp', (_req, res) => void res.status(405).set('allow', 'POST').end());
  return app;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const port = Number(process.env.PORT ?? 3001);
  const verifier = createVerifier({
    serviceUrl: process.env.ACE_PUBLIC_URL ?? 'http://localhost:8080',
    ...(process.env.ACE_ISSUER ? { issuer: process.env.ACE_ISSUER } : {}),
    scopesFile: process.env.SCOPES_FILE ?? './scopes.yaml',
    feedToken: process.env.ACE_FEED_TOKEN,
    resource: process.env.MCP_RESOURCE ?? `http://127.0.0.1:${port}/mcp`,
  });
  await verifier.ready();
  mcpApp(verifier).listen(port, '127.0.0.1', () => console.log(`MCP server on http://127.0.0.1:${port}/mcp`));
}
