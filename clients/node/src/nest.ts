// A NestJS guard (Nest 10 and later, on the Express or the Fastify platform). Nothing is
// imported from Nest at load time: `@nestjs/common` is loaded on the first refusal (for its
// HttpException, so that Nest's exception layer writes the 429 / 403 / 503).
//
//   app.useGlobalGuards(new RateLimitGuard({ limiter, limits: [...] }));
//   // or as a provider: { provide: APP_GUARD, useFactory: () => new RateLimitGuard({ ... }) }
//
//   @RateLimit({ limits: [{ name: 'login', rule: '10/minute', key: keys.ip() }] })   // per handler
//   @Post('login') login() { ... }
//   @RateLimit(false)                                                             // exempt
//
// On shutdown `await guard.close()` (Nest calls `onApplicationShutdown` for a guard given as
// a provider) gives back the leases it holds.

import { createGuard, type Guard, type GuardOptions, type RouteOverride } from './guard.js';
import { pathOf } from './express.js';

/* eslint-disable @typescript-eslint/no-explicit-any */

/** The metadata key of `@RateLimit(...)`. */
export const RATE_LIMIT_METADATA = 'redis-ratelimit:route';

// Without reflect-metadata (Nest always loads it) the metadata lives in this map.
const own = new WeakMap<object, RouteOverride | false>();
const reflect = (): any => (Reflect as any).defineMetadata ? Reflect : undefined;

/** Per-handler (or per-controller) limits: added to the guard's as a route's (`replace:
 * true` replaces them); `false` exempts. A method or class decorator; without TypeScript
 * decorators, call it by hand: `RateLimit(o)(Cls.prototype, 'method', descriptor)`. */
export function RateLimit(override: RouteOverride | false): (target: any, key?: string | symbol, descriptor?: PropertyDescriptor) => any {
  return (target, _key, descriptor) => {
    const where = descriptor ? descriptor.value : target;
    const r = reflect();
    if (r) r.defineMetadata(RATE_LIMIT_METADATA, override, where);
    else own.set(where, override);
    return descriptor ?? target;
  };
}

function routeOf(fn: any): RouteOverride | false | undefined {
  if (!fn) return undefined;
  const r = reflect();
  const v = r ? r.getMetadata(RATE_LIMIT_METADATA, fn) : undefined;
  return v !== undefined ? v : own.get(fn);
}

export interface NestGuardOptions extends GuardOptions {
  /** Per-request override, in addition to `routes` and `@RateLimit`. */
  route?: (context: any) => RouteOverride | false | undefined;
}

/** Nest's `CanActivate`: decides each request, sets the headers, and throws Nest's
 * `HttpException` (429, 403 or 503, with the problem body) when refused. */
export class RateLimitGuard {
  readonly guard: Guard;

  constructor(private readonly options: NestGuardOptions) {
    this.guard = createGuard(options);
  }

  async canActivate(context: any): Promise<boolean> {
    if (typeof context.getType === 'function' && context.getType() !== 'http') return true;
    const http = context.switchToHttp();
    const req = http.getRequest();
    const res = http.getResponse();
    const handler = routeOf(context.getHandler?.());
    const cls = routeOf(context.getClass?.());
    let route = handler !== undefined ? handler : cls;
    const extra = this.options.route?.(context);
    if (extra !== undefined) route = extra;
    const raw = req.raw ?? req; // Fastify's request wraps the Node request
    const r = await this.guard.check({
      req,
      method: req.method,
      path: pathOf(raw.originalUrl ?? raw.url ?? req.url),
      headers: req.headers,
      remoteAddress: raw.socket?.remoteAddress ?? req.socket?.remoteAddress,
    }, route);
    setHeaders(res, r.headers);
    if (r.status === 200) {
      if (r.delayMs > 0) await new Promise((resolve) => { setTimeout(resolve, r.delayMs); });
      return true;
    }
    setHeaders(res, { 'Content-Type': 'application/problem+json' });
    const { HttpException } = await import('@nestjs/common' as string);
    throw new HttpException(r.body, r.status);
  }

  /** Gives back the leases this guard holds. */
  close(): Promise<void> { return this.guard.close(); }
  /** Nest calls it on shutdown for a guard given as a provider. */
  onApplicationShutdown(): Promise<void> { return this.close(); }
}

function setHeaders(res: any, headers: Record<string, string>): void {
  for (const [k, v] of Object.entries(headers)) {
    if (typeof res.setHeader === 'function') res.setHeader(k, v); // Express, Node
    else if (typeof res.header === 'function') res.header(k, v); // Fastify's reply
  }
}
