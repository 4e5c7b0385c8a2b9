// Express middleware (Express 4 and 5; any Connect-style framework).
//
//   app.use(expressRateLimit({ limiter, limits: [...], exempt: ['/health', '/webhooks/*'] }));
//   app.use('/api', expressRateLimit({ ..., routes: [{ path: '/login', ... }] }));  // /api/login
//   app.post('/login', expressRateLimit({ limiter, limits: [loginLimit] }), handler);  // per route

import { createGuard, type Guard, type GuardOptions, type RequestContext, type RouteOverride } from './guard.js';

// Structural types, so that the package needs no Express types.
interface Req {
  method: string;
  url: string;
  /** Express: the path of `url` (inside `app.use('/api', mw)`, without the mount). */
  path?: string;
  originalUrl?: string;
  headers: RequestContext['headers'];
  socket: { remoteAddress?: string };
}
interface Res {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body?: string): unknown;
  headersSent?: boolean;
}
type Next = (err?: unknown) => void;

export interface ExpressOptions extends GuardOptions {
  /** Per-request override (e.g. from `req.route`), in addition to `routes`. */
  route?: (req: any) => RouteOverride | false | undefined; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export function pathOf(url: string | undefined): string {
  const u = url ?? '/';
  const q = u.indexOf('?');
  return q < 0 ? u : u.slice(0, q);
}

/** The middleware, with `close()` (gives back the leases it holds) and its `guard`. */
export type ExpressMiddleware = ((req: Req, res: Res, next: Next) => void) & { close(): Promise<void>; guard: Guard };

export function expressRateLimit(options: ExpressOptions): ExpressMiddleware {
  const guard = createGuard(options);
  const rateLimit = function rateLimit(req: Req, res: Res, next: Next) {
    guard.check({
      req,
      method: req.method,
      // The path the app sees where the middleware is mounted: inside app.use('/api', mw)
      // Express strips the mount from req.url (req.path), so a route or exemption '/login'
      // matches a request to /api/login. Never req.originalUrl.
      path: typeof req.path === 'string' ? req.path : pathOf(req.url),
      headers: req.headers,
      remoteAddress: req.socket?.remoteAddress,
    }, options.route?.(req)).then((r) => {
      if (res.headersSent) return next();
      for (const [k, v] of Object.entries(r.headers)) res.setHeader(k, v);
      if (r.status === 200) {
        // a QUEUE limit shapes: the request proceeds at its turn
        if (r.delayMs > 0) { setTimeout(next, r.delayMs); return undefined; }
        return next();
      }
      res.statusCode = r.status;
      res.setHeader('Content-Type', 'application/problem+json');
      res.end(JSON.stringify(r.body));
    }, next);
  } as ExpressMiddleware;
  rateLimit.close = () => guard.close();
  rateLimit.guard = guard;
  return rateLimit;
}
