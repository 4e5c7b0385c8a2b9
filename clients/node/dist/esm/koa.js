// Koa middleware (Koa 2 and 3).
//
//   app.use(koaRateLimit({ limiter, limits: [{ name: 'user', rule: '10/second; 1000/day', key: ... }] }));
//   app.use(mount('/api', apiApp));   // koa-mount: routes and exemptions match ctx.path below the mount
//   router.post('/login', koaRateLimit({ limiter, limits: [loginLimit] }), handler);   // per route
//   await middleware.close();         // on shutdown: gives back the leases it holds
import { createGuard } from './guard.js';
export function koaRateLimit(options) {
    const guard = createGuard(options);
    const mw = (async (ctx, next) => {
        const r = await guard.check({
            req: ctx,
            method: ctx.method,
            // the path below a koa-mount (ctx.path), never ctx.originalUrl
            path: ctx.path,
            headers: ctx.headers,
            remoteAddress: ctx.req?.socket?.remoteAddress,
        }, options.route?.(ctx));
        ctx.set(r.headers);
        if (r.status !== 200) {
            ctx.status = r.status;
            ctx.type = 'application/problem+json';
            ctx.body = JSON.stringify(r.body);
            return;
        }
        // a QUEUE limit shapes: the request proceeds at its turn
        if (r.delayMs > 0)
            await new Promise((resolve) => { setTimeout(resolve, r.delayMs); });
        await next();
    });
    mw.close = () => guard.close();
    mw.guard = guard;
    return mw;
}
