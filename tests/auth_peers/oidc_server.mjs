// A real, independently written authorization server for mcpsync's auth tests:
// panva/oidc-provider (pinned in tests/node) on 127.0.0.1, an ephemeral port.
//
// Owns: configuring oidc-provider the way an MCP deployment would (dynamic client
// registration, PKCE required, RFC 8707 resource indicators issuing JWT access tokens
// whose audience is the MCP server, refresh tokens, client_credentials, the device
// authorization grant) plus an
// auto-consent interaction so the authorization step completes with plain HTTP requests
// (GET /authorize -> 303 /interaction/<uid> -> 303 ... -> 303 redirect_uri?code&state&iss).
//
// Run:  node tests/auth_peers/oidc_server.mjs
// Env:  OIDC_SCOPES      resource scopes (default "mcp:read mcp:write")
//       OIDC_AT_TTL      access-token lifetime in seconds (default 3600)
//       OIDC_CLIENTS     JSON list of pre-registered client metadata (default [])
//       OIDC_DPOP_NONCE  "1": the token endpoint demands a DPoP nonce (RFC 9449 section 8)
// Prints one JSON line on stdout when ready: {"issuer": "...", "port": N}.
// GET /test/stats returns counters: authorizations, logins, consents, registrations,
// tokens per grant type. Stops on SIGTERM/SIGINT or when stdin closes.

import http from 'node:http';

const { default: Provider } = await import(
  new URL('../node/node_modules/oidc-provider/lib/index.js', import.meta.url)
);

const resourceScopes = process.env.OIDC_SCOPES || 'mcp:read mcp:write';
const accessTokenTTL = Number(process.env.OIDC_AT_TTL || 3600);
const clients = JSON.parse(process.env.OIDC_CLIENTS || '[]');

const stats = {
  authorizations: 0, logins: 0, consents: 0, registrations: 0, tokens: {}, resources: [],
};

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients,
  scopes: ['openid', 'offline_access', ...resourceScopes.split(' ')],
  cookies: { keys: ['mcpsync-test-cookie-key'] },
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    deviceFlow: { enabled: true }, // RFC 8628: /device/auth, user pages at /device
    dPoP: { enabled: true, nonceSecret: Buffer.alloc(32, 7), requireNonce: () => process.env.OIDC_DPOP_NONCE === '1' }, // RFC 9449
    resourceIndicators: {
      enabled: true,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, resourceIndicator) => {
        // any loopback MCP server may ask; the token's audience is exactly the indicator
        if (!/^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?(\/|$)/.test(resourceIndicator)) {
          throw new Provider.errors.InvalidTarget('unknown resource');
        }
        stats.resources.push(resourceIndicator);
        return {
          scope: resourceScopes,
          audience: resourceIndicator,
          accessTokenTTL,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  interactions: { url: async (ctx, interaction) => `/interaction/${interaction.uid}` },
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
});
provider.on('authorization.success', () => { stats.authorizations += 1; });
provider.on('registration_create.success', () => { stats.registrations += 1; });
provider.on('grant.success', (ctx) => {
  const gt = ctx.oidc.params.grant_type;
  stats.tokens[gt] = (stats.tokens[gt] || 0) + 1;
});

const providerCallback = provider.callback();

async function autoConsent(req, res) {
  const { prompt, params, session, grantId } = await provider.interactionDetails(req, res);
  if (prompt.name === 'login') {
    stats.logins += 1;
    await provider.interactionFinished(req, res, { login: { accountId: 'test-user' } }, { mergeWithLastSubmission: false });
    return;
  }
  stats.consents += 1;
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const d = prompt.details;
  if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
  if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(d.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
}

server.on('request', (req, res) => {
  if (req.method === 'GET' && req.url === '/test/stats') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify(stats));
    return;
  }
  if (req.method === 'GET' && req.url.startsWith('/interaction/')) {
    autoConsent(req, res).catch((err) => {
      res.statusCode = 500;
      res.end(String(err && err.message));
    });
    return;
  }
  providerCallback(req, res);
});

const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.resume();
process.stdout.write(`${JSON.stringify({ issuer, port })}\n`);
