/**
 * API Gateway HTTP APIs on loopback: each request becomes the payload-2.0 event the
 * synthesized route's Lambda gets on AWS, and its result becomes the HTTP response.
 *
 * JWT authorizers and Cognito, locally. A route whose AWS::ApiGatewayV2::Route has
 * AuthorizationType JWT is checked here as API Gateway checks it: the bearer token from the
 * authorizer's identity source (the Authorization header), its signature, expiry, issuer
 * and audience (`aud`, or `client_id` for an access token), and the route's scopes. No or a bad
 * token gets 401 {"message":"Unauthorized"}, a missing scope 403 {"message":"Forbidden"}, and
 * the Lambda sees the claims in requestContext.authorizer.jwt.claims, flattened to strings as
 * API Gateway does.
 *
 * There is no Cognito on loopback, so this server stands in for the user pools' managed-login
 * domains. Each AWS::Cognito::UserPoolDomain's https://<domain>.auth.<region>.amazoncognito.com
 * is rewritten in everything resolved after start (a function's environment, for one) to
 * <this server>/_local/cognito/<domain>, which serves the OAuth endpoints a page uses:
 *   GET  .../oauth2/authorize  a sign-in form: a user name (no password: every local user is
 *                              trusted, as everything on loopback is) and a box per group of the
 *                              pool (AWS::Cognito::UserPoolGroup), none ticked: membership is
 *                              something the person chooses, as an admin grants it on AWS;
 *   POST .../oauth2/authorize  issues a one-time code and redirects to the client's callback;
 *   POST .../oauth2/token      exchanges the code (authorization_code grant, PKCE S256 checked
 *                              when the request had a code_challenge) for an ID and an access token,
 *                              both with `cognito:groups` when the user is in a group;
 *   GET  .../logout            redirects to one of the client's sign-out URLs.
 * And POST /_local/sign-in {"username"?, "groups"?, "clientId"?} returns the same tokens at once,
 * for scripts and tests that have no browser. Without clientId it picks the app's only client,
 * or else the only client whose pool has exactly the groups asked for (none by default: the
 * arena's; ["approvers"]: the approval page's). The client ids, callback URLs, groups and issuers
 * come from the synthesized template, so a page that would be misconfigured on AWS fails here
 * too. Tokens are RS256, signed with a key made when the server starts and never written
 * anywhere; a token outlives neither the process nor a restart.
 */
import { createHash, generateKeyPairSync, randomBytes, randomUUID, sign, verify, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listen, type Listening } from './emulators.ts';
import { LOCAL_REGION, type TemplateResolver } from './resolve.ts';

interface JwtCheck {
  readonly issuer: string;
  readonly audience: readonly string[];
  /** Lower-cased header names, from `$request.header.<Name>` identity sources. */
  readonly headers: readonly string[];
  /** The route's AuthorizationScopes: the token needs one of them. Empty = any token. */
  readonly scopes: readonly string[];
}

interface Route {
  readonly method: string;
  readonly pattern: RegExp;
  readonly params: string[];
  readonly routeKey: string;
  readonly functionArn: string;
  readonly jwt?: () => JwtCheck;
}

export interface HttpApiServer {
  readonly server: Listening;
  /** Local ids of the APIs served, to rewrite their execute-api URLs. */
  readonly apiIds: string[];
}

/** Path prefix of the local stand-ins (Cognito, sign-in): nothing on AWS answers here. */
export const LOCAL_PREFIX = '/_local';
/** Lifetime of a local token, as Cognito's default for ID and access tokens. */
const TOKEN_SECONDS = 3600;
/** Lifetime of an authorization code, as Cognito's. */
const CODE_MS = 5 * 60 * 1000;
const USER_NAME = /^[A-Za-z0-9._@+-]{1,64}$/;
const DEFAULT_USER = 'local-user';

export async function startHttpApi(
  port: number,
  resolver: TemplateResolver,
  invoke: (functionArn: string, event: unknown) => Promise<unknown>,
): Promise<HttpApiServer> {
  const routes: Route[] = [];
  const apiIds: string[] = [];
  for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::ApiGatewayV2::Api')) {
    apiIds.push(resolver.refOf(stack, logicalId, resource));
  }
  const integrations = new Map<string, string>();
  for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::ApiGatewayV2::Integration')) {
    const props = resolver.resolve(stack, resource.Properties ?? {}) as { IntegrationUri?: string };
    integrations.set(`${stack}/${logicalId}`, String(props.IntegrationUri));
  }
  for (const { stack, resource } of resolver.resourcesOfType('AWS::ApiGatewayV2::Route')) {
    const raw = resource.Properties as {
      RouteKey: string;
      Target?: unknown;
      AuthorizationType?: string;
      AuthorizerId?: unknown;
      AuthorizationScopes?: unknown;
    };
    const target = JSON.stringify(raw.Target ?? '');
    const integration = /"Ref":"([^"]+)"/.exec(target)?.[1];
    const functionArn = integration ? integrations.get(`${stack}/${integration}`) : undefined;
    if (!functionArn) continue;
    const [method, path] = raw.RouteKey.split(' ') as [string, string];
    const params: string[] = [];
    const pattern = new RegExp(
      `^${path.replace(/\{([^}+]+)(\+?)\}/g, (_m, name: string, greedy: string) => {
        params.push(name);
        // {name+} is API Gateway's greedy parameter: the rest of the path, slashes included.
        return greedy ? '(.+)' : '([^/]+)';
      })}$`,
    );
    const jwt = raw.AuthorizationType === 'JWT' ? jwtCheckOf(resolver, stack, raw) : undefined;
    routes.push({ method, pattern, params, routeKey: raw.RouteKey, functionArn, jwt });
  }
  const cognito = new LocalCognito(resolver);

  const server = createServer((req, res) => {
    serve(req, res).catch(() => {
      // A dropped connection or a malformed request: answer if still possible, never crash.
      if (!res.headersSent) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: 'Bad Request' }));
      } else {
        res.destroy();
      }
    });
  });

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname.startsWith(`${LOCAL_PREFIX}/`)) {
      await cognito.serve(req, res, url, await readBody(req));
      return;
    }
    const route = routes.find((r) => (r.method === req.method || r.method === 'ANY') && r.pattern.test(url.pathname));
    if (!route) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ message: 'Not Found' }));
      return;
    }
    const body = await readBody(req);
    const match = route.pattern.exec(url.pathname)!;
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : String(v)]));
    let authorizer: { jwt: { claims: Record<string, string>; scopes: string[] | null } } | undefined;
    if (route.jwt) {
      const checked = cognito.authorize(route.jwt(), headers);
      if (!checked.ok) {
        res.writeHead(checked.status, {
          'content-type': 'application/json',
          ...(checked.status === 401 ? { 'www-authenticate': `Bearer error="invalid_token" error_description="${checked.reason}"` } : {}),
        });
        res.end(JSON.stringify({ message: checked.status === 401 ? 'Unauthorized' : 'Forbidden' }));
        return;
      }
      authorizer = { jwt: { claims: checked.claims, scopes: checked.scopes } };
    }
    const query = Object.fromEntries(url.searchParams.entries());
    const event = {
      version: '2.0',
      routeKey: route.routeKey,
      rawPath: url.pathname,
      rawQueryString: url.search.slice(1),
      headers,
      queryStringParameters: Object.keys(query).length ? query : undefined,
      pathParameters: Object.fromEntries(route.params.map((p, i) => [p, decodeURIComponent(match[i + 1]!)])),
      requestContext: {
        http: {
          method: req.method,
          path: url.pathname,
          protocol: 'HTTP/1.1',
          sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
          userAgent: headers['user-agent'] ?? '',
        },
        requestId: crypto.randomUUID(),
        routeKey: route.routeKey,
        stage: '$default',
        timeEpoch: Date.now(),
        ...(authorizer ? { authorizer } : {}),
      },
      body: body.length ? body.toString('base64') : undefined,
      isBase64Encoded: body.length > 0,
    };
    try {
      const result = (await invoke(route.functionArn, event)) as {
        statusCode?: number;
        headers?: Record<string, string>;
        body?: string;
        isBase64Encoded?: boolean;
      };
      res.writeHead(result?.statusCode ?? 200, result?.headers ?? { 'content-type': 'application/json' });
      res.end(result?.isBase64Encoded ? Buffer.from(result.body ?? '', 'base64') : (result?.body ?? ''));
    } catch {
      // As API Gateway does when the integration fails: no internals in the response.
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ message: 'Internal Server Error' }));
    }
  }
  const listening = await listen(server, port, 'HTTP APIs (approval, arena) on loopback');
  // Before the runtime resolves the functions' environments, so a page learns the local domain.
  for (const domain of cognito.domains()) {
    resolver.rewrite(`https://${domain}.auth.${LOCAL_REGION}.amazoncognito.com`, `${listening.url}${LOCAL_PREFIX}/cognito/${domain}`);
  }
  return { server: listening, apiIds };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The route's authorizer (a Ref in the same stack), resolved when first used: URLs are rewritten after start. */
function jwtCheckOf(resolver: TemplateResolver, stack: string, route: { AuthorizerId?: unknown; AuthorizationScopes?: unknown }): () => JwtCheck {
  let check: JwtCheck | undefined;
  return () => {
    if (check) return check;
    const ref = (route.AuthorizerId as { Ref?: string } | undefined)?.Ref;
    const resource = ref ? resolver.template(stack).Resources[ref] : undefined;
    if (resource?.Type !== 'AWS::ApiGatewayV2::Authorizer') {
      throw new Error(`a JWT route of ${stack} names no authorizer of its stack (AuthorizerId ${JSON.stringify(route.AuthorizerId)})`);
    }
    const props = resolver.resolve(stack, resource.Properties ?? {}) as {
      JwtConfiguration?: { Issuer?: string; Audience?: string[] };
      IdentitySource?: string[];
    };
    const sources = props.IdentitySource ?? ['$request.header.Authorization'];
    check = {
      issuer: String(props.JwtConfiguration?.Issuer ?? ''),
      audience: (props.JwtConfiguration?.Audience ?? []).map(String),
      headers: sources.map((s) => /^\$request\.header\.(.+)$/.exec(s)?.[1]?.toLowerCase()).filter((h): h is string => !!h),
      scopes: Array.isArray(route.AuthorizationScopes) ? route.AuthorizationScopes.map(String) : [],
    };
    return check;
  };
}

// ---- the local stand-in for Cognito --------------------------------------------------------

interface LocalClient {
  readonly clientId: string;
  /** The Ref of the client's user pool: its id in the issuer URL. */
  readonly userPool: string;
  readonly issuer: string;
  readonly callbackUrls: readonly string[];
  readonly logoutUrls: readonly string[];
  readonly scopes: readonly string[];
}

interface IssuedCode {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly username: string;
  readonly groups: readonly string[];
  readonly scopes: readonly string[];
  readonly challenge?: string;
  readonly expiresAt: number;
}

type Authorized = { ok: true; claims: Record<string, string>; scopes: string[] | null } | { ok: false; status: 401 | 403; reason: string };

const base64url = (data: Buffer | string) => Buffer.from(data).toString('base64url');

/**
 * API Gateway hands JWT claims to the integration as strings: numbers and booleans as their
 * text, an array as its items joined by spaces in brackets ("[admin players]").
 */
function flattenClaim(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return `[${value.map(String).join(' ')}]`;
  if (value !== null && typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

class LocalCognito {
  private keys: { privateKey: KeyObject; publicKey: KeyObject } | undefined;
  private clientList: LocalClient[] | undefined;
  private readonly codes = new Map<string, IssuedCode>();

  constructor(private readonly resolver: TemplateResolver) {}

  /** The managed-login domains of the app (their local Refs), each with its user pool. */
  domains(): string[] {
    return this.resolver
      .resourcesOfType('AWS::Cognito::UserPoolDomain')
      .map(({ stack, logicalId, resource }) => this.resolver.refOf(stack, logicalId, resource));
  }

  /** The groups of a user pool (its Ref), from the template's AWS::Cognito::UserPoolGroup resources. */
  groupsOf(pool: string): string[] {
    const groups: string[] = [];
    for (const { stack, resource } of this.resolver.resourcesOfType('AWS::Cognito::UserPoolGroup')) {
      const props = this.resolver.resolve(stack, resource.Properties ?? {}) as { UserPoolId?: string; GroupName?: string };
      if (String(props.UserPoolId) === pool && props.GroupName) groups.push(String(props.GroupName));
    }
    return groups.sort();
  }

  /** The groups asked for, each checked against the pool's; a message naming the first unknown one. */
  private checkGroups(pool: string, asked: readonly string[]): string | undefined {
    const known = this.groupsOf(pool);
    const unknown = asked.find((group) => !known.includes(group));
    return unknown === undefined ? undefined : `group ${JSON.stringify(unknown)} is not a group of this user pool (its groups: ${known.join(', ') || 'none'})`;
  }

  private poolOfDomain(domain: string): string | undefined {
    for (const { stack, logicalId, resource } of this.resolver.resourcesOfType('AWS::Cognito::UserPoolDomain')) {
      if (this.resolver.refOf(stack, logicalId, resource) === domain) {
        return String(this.resolver.resolve(stack, resource.Properties?.UserPoolId));
      }
    }
    return undefined;
  }

  /** The app clients, resolved at first use, after every URL rewrite is in place. */
  private clients(): LocalClient[] {
    this.clientList ??= this.resolver.resourcesOfType('AWS::Cognito::UserPoolClient').map(({ stack, logicalId, resource }) => {
      const props = this.resolver.resolve(stack, resource.Properties ?? {}) as {
        UserPoolId?: string;
        CallbackURLs?: string[];
        LogoutURLs?: string[];
        AllowedOAuthScopes?: string[];
      };
      const userPool = String(props.UserPoolId);
      return {
        clientId: this.resolver.refOf(stack, logicalId, resource),
        userPool,
        // What Cognito writes as `iss`; the Arena's authorizer names the same URL.
        issuer: `https://cognito-idp.${LOCAL_REGION}.amazonaws.com/${userPool}`,
        callbackUrls: props.CallbackURLs ?? [],
        logoutUrls: props.LogoutURLs ?? [],
        scopes: props.AllowedOAuthScopes ?? ['openid'],
      };
    });
    return this.clientList;
  }

  private keyPair(): { privateKey: KeyObject; publicKey: KeyObject } {
    this.keys ??= generateKeyPairSync('rsa', { modulusLength: 2048 });
    return this.keys;
  }

  private signJwt(claims: Record<string, unknown>): string {
    const head = base64url(JSON.stringify({ alg: 'RS256', kid: 'local', typ: 'JWT' }));
    const body = base64url(JSON.stringify(claims));
    const signature = sign('sha256', Buffer.from(`${head}.${body}`), this.keyPair().privateKey);
    return `${head}.${body}.${base64url(signature)}`;
  }

  /** An ID and an access token shaped as Cognito's, for `username` (in `groups`) of `client`. */
  private tokens(client: LocalClient, username: string, scopes: readonly string[], groups: readonly string[] = []) {
    const now = Math.floor(Date.now() / 1000);
    // A stable subject per pool and user name, as a real user keeps one sub.
    const sub = createHash('sha256')
      .update(`${client.userPool}\n${username}`)
      .digest('hex')
      .replace(/^(.{8})(.{4})(.{4})(.{4})(.{12}).*$/, '$1-$2-$3-$4-$5');
    const common = {
      sub,
      ...(groups.length ? { 'cognito:groups': [...groups] } : {}),
      iss: client.issuer,
      auth_time: now,
      iat: now,
      exp: now + TOKEN_SECONDS,
      origin_jti: randomUUID(),
      event_id: randomUUID(),
    };
    return {
      id_token: this.signJwt({ ...common, aud: client.clientId, token_use: 'id', 'cognito:username': username, jti: randomUUID() }),
      access_token: this.signJwt({ ...common, client_id: client.clientId, token_use: 'access', scope: scopes.join(' '), username, jti: randomUUID() }),
      token_type: 'Bearer',
      expires_in: TOKEN_SECONDS,
    };
  }

  /** A route's JWT check (module comment). */
  authorize(check: JwtCheck, headers: Record<string, string>): Authorized {
    const raw = check.headers.map((h) => headers[h]).find((v) => v !== undefined && v !== '');
    if (!raw) return { ok: false, status: 401, reason: 'no token in the identity source' };
    const token = raw.replace(/^Bearer\s+/i, '');
    const parts = token.split('.');
    if (parts.length !== 3) return { ok: false, status: 401, reason: 'not a JWT' };
    let header: { alg?: string };
    let claims: Record<string, unknown>;
    try {
      header = JSON.parse(Buffer.from(parts[0]!, 'base64url').toString('utf8')) as { alg?: string };
      claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    } catch {
      return { ok: false, status: 401, reason: 'not a JWT' };
    }
    // Only the algorithm this server signs with: never "none", never a key chosen by the token.
    if (header.alg !== 'RS256') return { ok: false, status: 401, reason: `unsupported algorithm ${String(header.alg)}` };
    const signed = verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), this.keyPair().publicKey, Buffer.from(parts[2]!, 'base64url'));
    if (!signed) return { ok: false, status: 401, reason: 'signature is invalid' };
    const now = Date.now() / 1000;
    if (typeof claims.exp !== 'number' || claims.exp <= now) return { ok: false, status: 401, reason: 'the token has expired' };
    if (typeof claims.nbf === 'number' && claims.nbf > now) return { ok: false, status: 401, reason: 'the token is not valid yet' };
    if (claims.iss !== check.issuer) return { ok: false, status: 401, reason: `issuer ${String(claims.iss)} is not ${check.issuer}` };
    const audiences = [claims.aud, claims.client_id].flat().filter((a): a is string => typeof a === 'string');
    if (!audiences.some((a) => check.audience.includes(a))) return { ok: false, status: 401, reason: 'the audience does not match' };
    const scopes = typeof claims.scope === 'string' ? claims.scope.split(' ').filter(Boolean) : null;
    if (check.scopes.length > 0 && !check.scopes.some((s) => scopes?.includes(s))) return { ok: false, status: 403, reason: 'a required scope is missing' };
    return { ok: true, claims: Object.fromEntries(Object.entries(claims).map(([k, v]) => [k, flattenClaim(v)])), scopes };
  }

  /** Everything under /_local/ (module comment). */
  async serve(req: IncomingMessage, res: ServerResponse, url: URL, body: Buffer): Promise<void> {
    const path = url.pathname.slice(LOCAL_PREFIX.length);
    if (path === '/sign-in' && req.method === 'POST') return this.signIn(res, body);
    const match = /^\/cognito\/([^/]+)(\/oauth2\/authorize|\/oauth2\/token|\/logout)$/.exec(path);
    const pool = match ? this.poolOfDomain(decodeURIComponent(match[1]!)) : undefined;
    if (!match || !pool) return sendJson(res, 404, { message: 'Not Found' });
    const endpoint = match[2]!;
    if (endpoint === '/oauth2/authorize' && (req.method === 'GET' || req.method === 'POST')) {
      const form = req.method === 'POST' ? new URLSearchParams(body.toString('utf8')) : url.searchParams;
      return this.authorizeEndpoint(res, pool, url, form, req.method === 'POST');
    }
    if (endpoint === '/oauth2/token' && req.method === 'POST') return this.tokenEndpoint(res, pool, new URLSearchParams(body.toString('utf8')));
    if (endpoint === '/logout' && req.method === 'GET') {
      const client = this.clients().find((c) => c.clientId === url.searchParams.get('client_id') && c.userPool === pool);
      const target = url.searchParams.get('logout_uri') ?? '';
      if (!client?.logoutUrls.includes(target))
        return sendJson(res, 400, { error: 'invalid_request', error_description: 'unknown client_id or logout_uri not among its sign-out URLs' });
      res.writeHead(302, { location: target });
      res.end();
      return;
    }
    sendJson(res, 405, { message: 'Method Not Allowed' });
  }

  private signIn(res: ServerResponse, body: Buffer): void {
    let request: { username?: unknown; clientId?: unknown; groups?: unknown } = {};
    try {
      if (body.length) request = JSON.parse(body.toString('utf8')) as typeof request;
    } catch {
      return sendJson(res, 400, { message: 'the body must be JSON: {"username"?: string, "groups"?: string[], "clientId"?: string}' });
    }
    const username = request.username ?? DEFAULT_USER;
    if (typeof username !== 'string' || !USER_NAME.test(username)) {
      return sendJson(res, 400, { message: `username must match ${USER_NAME} (got ${JSON.stringify(username)})` });
    }
    const groups = request.groups ?? [];
    if (!Array.isArray(groups) || !groups.every((g): g is string => typeof g === 'string')) {
      return sendJson(res, 400, { message: `groups must be a list of group names (got ${JSON.stringify(request.groups)})` });
    }
    const clients = this.clients();
    const sameGroups = (c: LocalClient) => JSON.stringify(this.groupsOf(c.userPool)) === JSON.stringify([...new Set(groups)].sort());
    const fitting = clients.length === 1 ? clients : clients.filter(sameGroups);
    const client = request.clientId === undefined ? (fitting.length === 1 ? fitting[0] : undefined) : clients.find((c) => c.clientId === request.clientId);
    if (!client) {
      const known = clients.map((c) => `${c.clientId} (groups: ${this.groupsOf(c.userPool).join(', ') || 'none'})`).join(', ');
      return sendJson(res, 400, {
        message: `clientId must be one of ${known || '(no user pool client in the app)'} (got ${JSON.stringify(request.clientId)})`,
      });
    }
    const unknown = this.checkGroups(client.userPool, groups);
    if (unknown) return sendJson(res, 400, { message: unknown });
    sendJson(res, 200, this.tokens(client, username, client.scopes, groups));
  }

  private authorizeEndpoint(res: ServerResponse, pool: string, url: URL, form: URLSearchParams, submitted: boolean): void {
    const client = this.clients().find((c) => c.clientId === form.get('client_id') && c.userPool === pool);
    const redirectUri = form.get('redirect_uri') ?? '';
    // As on AWS: a bad client or redirect URI is shown, never redirected to.
    if (!client) return sendHtml(res, 400, 'Sign-in error', `<p>Unknown client_id ${escapeHtml(form.get('client_id') ?? '')} for this user pool.</p>`);
    if (!client.callbackUrls.includes(redirectUri)) {
      return sendHtml(res, 400, 'Sign-in error', `<p>redirect_uri ${escapeHtml(redirectUri)} is not among the client's callback URLs.</p>`);
    }
    const back = (params: Record<string, string>) => {
      const target = new URL(redirectUri);
      for (const [k, v] of Object.entries(params)) target.searchParams.set(k, v);
      const state = form.get('state');
      if (state !== null) target.searchParams.set('state', state);
      res.writeHead(302, { location: target.toString() });
      res.end();
    };
    if (form.get('response_type') !== 'code') return back({ error: 'unsupported_response_type' });
    const scopes = (form.get('scope') ?? client.scopes.join(' ')).split(/[ +]/).filter(Boolean);
    if (scopes.some((s) => !client.scopes.includes(s))) return back({ error: 'invalid_scope' });
    const challenge = form.get('code_challenge') ?? undefined;
    if (challenge !== undefined && form.get('code_challenge_method') !== 'S256') {
      return back({ error: 'invalid_request', error_description: 'code_challenge_method must be S256' });
    }
    if (!submitted) {
      const hidden = [...form.entries()].map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`).join('');
      const groups = this.groupsOf(pool)
        .map((g) => `<label><input type="checkbox" name="groups" value="${escapeHtml(g)}"> member of ${escapeHtml(g)}</label> `)
        .join('');
      return sendHtml(
        res,
        200,
        'Local sign-in',
        `<p>Local mode: no password. Sign in as any user name${groups ? ', in the groups you tick' : ''}.</p><form method="post" action="${escapeHtml(url.pathname)}">${hidden}` +
          `<label>User name <input id="username" name="username" value="${DEFAULT_USER}"></label> ${groups}<button id="local-sign-in" type="submit">Sign in</button></form>`,
      );
    }
    const username = form.get('username') || DEFAULT_USER;
    if (!USER_NAME.test(username)) return sendHtml(res, 400, 'Sign-in error', `<p>The user name must match ${escapeHtml(String(USER_NAME))}.</p>`);
    const groups = [...new Set(form.getAll('groups'))];
    const unknown = this.checkGroups(pool, groups);
    if (unknown) return sendHtml(res, 400, 'Sign-in error', `<p>${escapeHtml(unknown)}.</p>`);
    const code = randomBytes(24).toString('base64url');
    this.codes.set(code, { clientId: client.clientId, redirectUri, username, groups, scopes, challenge, expiresAt: Date.now() + CODE_MS });
    back({ code });
  }

  private tokenEndpoint(res: ServerResponse, pool: string, form: URLSearchParams): void {
    if (form.get('grant_type') !== 'authorization_code') return sendJson(res, 400, { error: 'unsupported_grant_type' });
    const code = form.get('code') ?? '';
    const issued = this.codes.get(code);
    // One use only, as on AWS, whether or not the exchange succeeds.
    this.codes.delete(code);
    const client = this.clients().find((c) => c.clientId === form.get('client_id') && c.userPool === pool);
    if (!client) return sendJson(res, 400, { error: 'invalid_client' });
    if (!issued || issued.expiresAt < Date.now() || issued.clientId !== client.clientId || issued.redirectUri !== form.get('redirect_uri')) {
      return sendJson(res, 400, { error: 'invalid_grant' });
    }
    if (issued.challenge !== undefined) {
      const verifier = form.get('code_verifier') ?? '';
      if (base64url(createHash('sha256').update(verifier).digest()) !== issued.challenge) {
        return sendJson(res, 400, { error: 'invalid_grant', error_description: 'code_verifier does not match the code_challenge' });
      }
    }
    sendJson(res, 200, this.tokens(client, issued.username, issued.scopes, issued.groups));
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

function escapeHtml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;').replaceAll("'", '&#39;');
}

function sendHtml(res: ServerResponse, status: number, title: string, content: string): void {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-security-policy': "default-src 'none'; form-action 'self'",
  });
  res.end(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1>${content}</body></html>`,
  );
}
