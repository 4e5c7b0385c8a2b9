"use strict";
// Express middleware (Express 4 and 5; any Connect-style framework).
//
//   app.use(expressRateLimit({ limiter, limits: [...], exempt: ['/health', '/webhooks/*'] }));
//   app.use('/api', expressRateLimit({ ..., routes: [{ path: '/login', ... }] }));  // /api/login
//   app.post('/login', expressRateLimit({ limiter, limits: [loginLimit] }), handler);  // per route
Object.defineProperty(exports, "__esModule", { value: true });
exports.pathOf = pathOf;
exports.expressRateLimit = expressRateLimit;
const guard_js_1 = require("./guard.js");
function pathOf(url) {
    const u = url ?? '/';
    const q = u.indexOf('?');
    return q < 0 ? u : u.slice(0, q);
}
function expressRateLimit(options) {
    const guard = (0, guard_js_1.createGuard)(options);
    const rateLimit = function rateLimit(req, res, next) {
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
            if (res.headersSent)
                return next();
            for (const [k, v] of Object.entries(r.headers))
                res.setHeader(k, v);
            if (r.status === 200) {
                // a QUEUE limit shapes: the request proceeds at its turn
                if (r.delayMs > 0) {
                    setTimeout(next, r.delayMs);
                    return undefined;
                }
                return next();
            }
            res.statusCode = r.status;
            res.setHeader('Content-Type', 'application/problem+json');
            res.end(JSON.stringify(r.body));
        }, next);
    };
    rateLimit.close = () => guard.close();
    rateLimit.guard = guard;
    return rateLimit;
}
