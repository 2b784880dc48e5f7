// A real OpenID provider for the tests: the npm oidc-provider package, on a loopback port it
// picks itself (printed as one JSON line on stdout: {"issuer": ...}), with two users, a client
// for the web pages, dynamic client registration for MCP clients, resource indicators (RFC
// 8707: access tokens are JWTs whose aud is the resource asked for), introspection and
// revocation. Its login form is the package's own development form: any password signs in a
// user who exists. Usage: [TOKEN_FORMAT=opaque] node provider.mjs RESOURCE|loopback WEB_REDIRECT_URI
// [SCOPES...] (access tokens are JWTs unless TOKEN_FORMAT says opaque). A WEB_REDIRECT_URI on
// 127.0.0.1 without a port takes any port (RFC 8252 7.3, the package's rule for a "native"
// client), for a server started after the provider on a port of its own choosing.
import http from 'node:http';
import crypto from 'node:crypto';
import Provider, { errors } from 'oidc-provider';

const [resource, webRedirect, ...extraScopes] = process.argv.slice(2);
const users = {
  alice: { sub: 'alice', email: 'alice@example.com', email_verified: true,
           preferred_username: 'alice', groups: ['editors'] },
  bob: { sub: 'bob', email: 'bob@example.com', email_verified: true,
         preferred_username: 'bob', groups: ['readers'] },
};
const kbScopes = extraScopes.length ? extraScopes
  : ['kb:support:read', 'kb:support:write', 'kb:support:review'];

const redirect = new URL(webRedirect);
const anyPort = redirect.hostname === '127.0.0.1' && redirect.port === '';

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key-1', use: 'sig',
                alg: 'RS256' };
  const provider = new Provider(issuer, {
    clients: [{
      client_id: 'kb-web', client_secret: 'kb-web-secret',
      redirect_uris: [webRedirect], response_types: ['code'],
      application_type: anyPort ? 'native' : 'web',
      grant_types: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_method: 'client_secret_basic',
    }, {
      // The resource server's own credentials, for introspection.
      client_id: 'kb-server', client_secret: 'kb-server-secret', redirect_uris: [],
      response_types: [], grant_types: [], token_endpoint_auth_method: 'client_secret_basic',
    }],
    jwks: { keys: [jwk] },
    scopes: ['openid', 'email', 'profile', 'offline_access', ...kbScopes],
    claims: { email: ['email', 'email_verified'], profile: ['preferred_username', 'groups'],
              openid: ['sub'] },
    findAccount: async (ctx, id) => users[id] && {
      accountId: id, claims: async () => ({ ...users[id] }),
    },
    pkce: { required: () => true },
    ttl: { AccessToken: 600, IdToken: 600, Session: 3600, Grant: 3600, Interaction: 600 },
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => (resource === 'loopback' ? undefined : resource),
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, indicator) => {
          // RESOURCE "loopback": any MCP endpoint on this machine, for a server started after
          // the provider on a port of its own choosing.
          const known = resource === 'loopback'
            ? /^http:\/\/127\.0\.0\.1:\d+\/mcp$/.test(indicator) : indicator === resource;
          if (!known) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
          return { scope: kbScopes.join(' '), audience: indicator,
                   accessTokenFormat: process.env.TOKEN_FORMAT || 'jwt', accessTokenTTL: 600,
                   jwt: { sign: { alg: 'RS256' } } };
        },
      },
    },
    extraTokenClaims: async (ctx, token) => {
      const user = users[token.accountId];
      return user ? { email: user.email, preferred_username: user.preferred_username,
                      groups: user.groups } : undefined;
    },
  });
  provider.proxy = false;
  server.on('request', provider.callback());
  process.stdout.write(JSON.stringify({ issuer }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
