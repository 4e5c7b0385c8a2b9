// A programmatic limiter in the style of rate-limiter-flexible (`consume` resolves, or
// rejects when refused), for code outside an HTTP middleware: queue workers, WebSocket
// messages, outgoing calls.
//
//   const api = createRateLimiter({ limiter, name: 'api', rule: '10/second; 1000/day' });
//   try {
//     const r = await api.consume(userId, 2);        // { remaining, msBeforeNext, decisions }
//   } catch (err) {
//     if (err instanceof RateLimitedError) retryLater(err.msBeforeNext); else throw err;
//   }
//   await api.reward(userId, 2);                      // REFUND: the work did not happen
//   await api.block(userId, 60_000);                  // RL.PAUSE: refuse everything for a minute
//
// Several rules (a limit string of several items, or an array) are checked by one atomic
// RL.ALL: all admit, or nothing is spent. Keys are `<keyPrefix><name>:<key>` (several rules:
// `<name>-1`, `<name>-2`, ...), as the middleware names them.
import { quota } from './headers.js';
import { parseLimitString } from './limits.js';
/** `consume` was refused: `msBeforeNext` says when to retry. A cost above a rule's limit is
 * refused with `msBeforeNext` Infinity (never admissible). */
export class RateLimitedError extends Error {
    remaining;
    msBeforeNext;
    decisions;
    name = 'RateLimitedError';
    constructor(remaining, msBeforeNext, decisions) {
        super(`redis-ratelimit: refused, retry in ${msBeforeNext} ms`);
        this.remaining = remaining;
        this.msBeforeNext = msBeforeNext;
        this.decisions = decisions;
    }
}
export function createRateLimiter(o) {
    const { limiter } = o;
    if (!limiter || typeof limiter.check !== 'function')
        throw new TypeError('redis-ratelimit: createRateLimiter needs `limiter` (createLimiter(client))');
    const rules = typeof o.rule === 'string' ? parseLimitString(o.rule, o.algorithm)
        : Array.isArray(o.rule) ? o.rule : [o.rule];
    if (!rules.length)
        throw new TypeError('redis-ratelimit: createRateLimiter needs a rule');
    const name = o.name ?? 'limit';
    const prefix = o.keyPrefix ?? 'rl:';
    const keysOf = (key) => rules.map((_, i) => `${prefix}${rules.length > 1 ? `${name}-${i + 1}` : name}:${key}`);
    const timeoutMs = o.timeoutMs;
    const result = (ds) => {
        const refused = ds.filter((d) => !d.allowed);
        return { remaining: Math.max(0, Math.min(...ds.map((d) => d.remaining))),
            msBeforeNext: refused.length ? Math.max(...refused.map((d) => d.retryAfterMs)) : 0, decisions: ds };
    };
    const decide = async (key, cost) => {
        const ks = keysOf(key);
        if (ks.length === 1)
            return [await limiter.check(ks[0], rules[0], { cost, timeoutMs })];
        return (await limiter.all(ks.map((k, i) => ({ key: k, rule: rules[i], cost })), { timeoutMs })).decisions;
    };
    return {
        rules,
        async consume(key, cost = 1) {
            if (!Number.isSafeInteger(cost) || cost < 1)
                throw new TypeError('redis-ratelimit: consume needs a cost >= 1 (get() peeks)');
            const over = rules.filter((r) => cost > quota(r));
            if (over.length) {
                throw new RateLimitedError(0, Infinity, []); // never admissible: nothing asked
            }
            const r = result(await decide(key, cost));
            if (r.msBeforeNext > 0 || r.decisions.some((d) => !d.allowed))
                throw new RateLimitedError(r.remaining, Math.max(1, r.msBeforeNext), r.decisions);
            return r;
        },
        async get(key) { return result(await decide(key, 0)); },
        async reward(key, units = 1) {
            const ks = keysOf(key);
            await Promise.all(ks.map((k, i) => limiter.check(k, rules[i], { refund: units, timeoutMs })));
        },
        async block(key, ms) { await Promise.all(keysOf(key).map((k) => limiter.pause(k, ms, { timeoutMs }))); },
        async delete(key) { await Promise.all(keysOf(key).map((k) => limiter.reset(k, { timeoutMs }))); },
    };
}
