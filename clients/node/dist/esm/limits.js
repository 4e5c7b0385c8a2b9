// Limits written as strings, as Flask-Limiter and slowapi write them:
//
//   '10/second'   '10 per second'   '100/5 minutes'   '10/second; 1000/day'
//
// Each item is a SLIDING rule (limit = the count, window = the period) unless the limit says
// `algorithm: 'fixed'` (a FIXED window) or `'gcra'` (burst = count = the count, period =
// the period). Units: second(s), minute(s), hour(s), day(s); anything else is an error.
const UNIT_MS = { second: 1000, minute: 60_000, hour: 3_600_000, day: 86_400_000 };
const ITEM = /^(\d+)\s*(?:\/|\s+per\s+)\s*(?:(\d+)\s*)?([a-z]+)$/i;
/** The rules of a limit string, in its order (TypeError when it is not one). */
export function parseLimitString(text, algorithm = 'sliding') {
    if (typeof text !== 'string')
        throw new TypeError('redis-ratelimit: a limit string must be a string');
    if (!['sliding', 'fixed', 'gcra'].includes(algorithm)) {
        throw new TypeError(`redis-ratelimit: a limit string makes sliding, fixed or gcra rules, not ${String(algorithm)}`);
    }
    const items = text.split(/[;,]/).map((s) => s.trim()).filter((s) => s !== '');
    if (!items.length)
        throw new TypeError(`redis-ratelimit: empty limit string ${JSON.stringify(text)}`);
    return items.map((item) => {
        const m = ITEM.exec(item);
        const unit = m?.[3].toLowerCase().replace(/s$/, '');
        if (!m || unit === undefined || !(unit in UNIT_MS)) {
            throw new TypeError(`redis-ratelimit: cannot read the limit ${JSON.stringify(item)} (write e.g. "10/second", "10 per minute", "100/5 minutes"; units second, minute, hour, day)`);
        }
        const count = Number(m[1]);
        const times = m[2] === undefined ? 1 : Number(m[2]);
        if (!Number.isSafeInteger(count) || count < 1 || !Number.isSafeInteger(times) || times < 1) {
            throw new TypeError(`redis-ratelimit: the limit ${JSON.stringify(item)} needs a count and a period of at least 1`);
        }
        const periodMs = times * UNIT_MS[unit];
        if (algorithm === 'gcra')
            return { algorithm: 'gcra', burst: count, count, periodMs };
        return { algorithm, limit: count, windowMs: periodMs };
    });
}
