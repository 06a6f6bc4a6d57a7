/**
 * API Gateway HTTP APIs on loopback: each request becomes the payload-2.0 event the
 * synthesized route's Lambda gets on AWS, and its result becomes the HTTP response.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listen, type Listening } from './emulators.ts';
import type { TemplateResolver } from './resolve.ts';

interface Route {
  readonly method: string;
  readonly pattern: RegExp;
  readonly params: string[];
  readonly routeKey: string;
  readonly functionArn: string;
}

export interface HttpApiServer {
  readonly server: Listening;
  /** Local ids of the APIs served, to rewrite their execute-api URLs. */
  readonly apiIds: string[];
}

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
    const raw = resource.Properties as { RouteKey: string; Target?: unknown };
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
    routes.push({ method, pattern, params, routeKey: raw.RouteKey, functionArn });
  }

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
    const route = routes.find((r) => (r.method === req.method || r.method === 'ANY') && r.pattern.test(url.pathname));
    if (!route) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ message: 'Not Found' }));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const match = route.pattern.exec(url.pathname)!;
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : String(v)]));
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
        http: { method: req.method, path: url.pathname, protocol: 'HTTP/1.1', sourceIp: req.socket.remoteAddress ?? '127.0.0.1', userAgent: headers['user-agent'] ?? '' },
        requestId: crypto.randomUUID(),
        routeKey: route.routeKey,
        stage: '$default',
        timeEpoch: Date.now(),
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
  return { server: await listen(server, port, 'approval API (HTTP API on loopback)'), apiIds };
}
