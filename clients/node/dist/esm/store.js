// A Store for express-rate-limit (v7 and v8) backed by RL.FIXED.
//
//   app.use(rateLimit({ windowMs: 60_000, limit: 100, standardHeaders: 'draft-8',
//                      store: new RedisRateLimitStore({ limiter }) }));
//
// What maps and what does not:
//  - increment(key) is one RL.FIXED key limit windowMs: atomic, with the TTL set in the same
//    call. express-rate-limit counts every hit and refuses when totalHits > limit; RL.FIXED
//    refuses by itself and counts only admitted requests. So an admitted hit reports
//    totalHits = limit - remaining (the window's count) and a refused one limit + 1. The
//    store must know the limit: the middleware's `limit` when it is a number (read in init),
//    else the store's own `limit` option (a per-request `limit` function cannot be used).
//  - Windows are aligned to multiples of windowMs since the epoch (RL.FIXED), not started by
//    each client's first hit as in MemoryStore; resetTime is the window's end.
//  - decrement(key) (skipSuccessfulRequests / skipFailedRequests) is `REFUND 1`, of the
//    module's "beyond yes or no" options; a module without it answers `ERR syntax error`,
//    and decrement then does nothing (a warning, once). The hits this store refused were
//    never counted, so their decrement (express-rate-limit decrements its own 429 with
//    skipFailedRequests) is matched against them in memory and sends nothing.
//  - get(key) is RL.INFO; resetKey(key) is DEL; resetAll is not offered (it would need a
//    SCAN of every node).
import { isUnsupportedOption } from './limiter.js';
export class RedisRateLimitStore {
    prefix;
    localKeys = false;
    limit;
    windowMs;
    limiter;
    stagger;
    logger;
    refundUnsupported = false;
    /** Refused hits per key not yet matched by a decrement, with when they stop mattering. */
    refused = new Map();
    constructor(o) {
        this.limiter = o.limiter;
        this.prefix = o.prefix ?? 'rl:erl:';
        this.limit = o.limit;
        this.windowMs = o.windowMs;
        this.stagger = !!o.stagger;
        this.logger = o.logger ?? console;
    }
    init(options) {
        if (this.windowMs === undefined && typeof options.windowMs === 'number')
            this.windowMs = options.windowMs;
        const l = options.limit ?? options.max;
        if (this.limit === undefined && typeof l === 'number')
            this.limit = l;
    }
    rule() {
        if (!this.limit || !this.windowMs) {
            throw new Error('redis-ratelimit store: limit and windowMs must be numbers (pass `limit` to the store when the middleware\'s is a function)');
        }
        return { limit: this.limit, windowMs: this.windowMs, stagger: this.stagger || undefined };
    }
    async increment(key) {
        const r = this.rule();
        const d = await this.limiter.fixed(this.prefix + key, r);
        const resetTime = new Date(Date.now() + d.resetAfterMs);
        if (d.allowed)
            return { totalHits: d.limit - d.remaining, resetTime };
        const now = Date.now();
        const prev = this.refused.get(key);
        this.refused.set(key, { n: (prev && prev.until > now ? prev.n : 0) + 1, until: now + Math.max(d.retryAfterMs, 1) });
        if (this.refused.size > 10000) {
            for (const [k, v] of this.refused)
                if (v.until <= now)
                    this.refused.delete(k);
        }
        return { totalHits: d.limit + 1, resetTime };
    }
    async decrement(key) {
        const pending = this.refused.get(key);
        if (pending && pending.until > Date.now() && pending.n > 0) {
            if (--pending.n === 0)
                this.refused.delete(key);
            return;
        }
        if (this.refundUnsupported)
            return;
        try {
            await this.limiter.fixed(this.prefix + key, { ...this.rule(), refund: 1 });
        }
        catch (err) {
            if (!isUnsupportedOption(err))
                throw err;
            this.refundUnsupported = true;
            this.logger.warn('redis-ratelimit store: the module has no REFUND yet; decrement() does nothing');
        }
    }
    async get(key) {
        const info = await this.limiter.info(this.prefix + key);
        if (!info || info.algorithm !== 'fixed')
            return undefined;
        return { totalHits: Number(info.count), resetTime: new Date(Date.now() + Number(info.ttl_ms)) };
    }
    async resetKey(key) {
        this.refused.delete(key);
        await this.limiter.reset(this.prefix + key);
    }
}
