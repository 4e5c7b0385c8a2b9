// A Fastify plugin (Fastify 4 and 5), registered like a fastify-plugin plugin: its onRequest
// hook applies to every route of the instance it is registered on (not encapsulated).
//
//   await app.register(fastifyRateLimit, { limiter, limits: [...], exempt: ['/health'] });
//   app.post('/login', { config: { rateLimit: { limits: [loginLimit] } } }, handler);
//   app.get('/health', { config: { rateLimit: false } }, handler);

import { createGuard, type GuardOptions, type RouteOverride } from './guard.js';
import { pathOf } from './express.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type Done = (err?: Error) => void;

export type FastifyRateLimitOptions = GuardOptions;

function plugin(fastify: any, options: FastifyRateLimitOptions, done: Done): void {
  let guard;
  try {
    guard = createGuard(options);
  } catch (err) {
    done(err as Error);
    return;
  }
  const g = guard;
  // Registered inside a prefixed context (register(child, { prefix: '/api' })), routes and
  // exemptions match the path below the prefix, as Express's mount.
  const prefix: string = typeof fastify.prefix === 'string' ? fastify.prefix.replace(/\/+$/, '') : '';
  const local = (p: string): string => (prefix && (p === prefix || p.startsWith(`${prefix}/`))
    ? p.slice(prefix.length) || '/' : p);
  // closing the app gives back the leases the plugin holds
  fastify.addHook('onClose', async () => { await g.close(); });
  fastify.addHook('onRequest', async (request: any, reply: any) => {
    const config = request.routeOptions?.config ?? request.context?.config ?? {};
    const route = config.rateLimit as RouteOverride | false | undefined;
    const r = await g.check({
      req: request,
      method: request.method,
      path: local(pathOf(request.raw?.url ?? request.url)),
      headers: request.headers,
      remoteAddress: request.raw?.socket?.remoteAddress ?? request.socket?.remoteAddress,
    }, route);
    reply.headers(r.headers);
    if (r.status !== 200) {
      reply.code(r.status).type('application/problem+json').send(JSON.stringify(r.body));
      return reply;
    }
    // a QUEUE limit shapes: the request proceeds at its turn
    if (r.delayMs > 0) await new Promise((resolve) => { setTimeout(resolve, r.delayMs); });
    return undefined;
  });
  done();
}

// What fastify-plugin sets: no encapsulation (the hook reaches the parent's routes), a name.
const p = plugin as any;
p[Symbol.for('skip-override')] = true;
p[Symbol.for('fastify.display-name')] = 'redis-ratelimit-module';
p[Symbol.for('plugin-meta')] = { name: 'redis-ratelimit-module', fastify: '>=4' };

export const fastifyRateLimit: (fastify: any, options: FastifyRateLimitOptions, done: Done) => void = plugin;
