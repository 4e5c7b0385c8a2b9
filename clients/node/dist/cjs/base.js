"use strict";
// What the limiter and the policies both need, below both of them (so that neither imports
// the other for it): the timeout of a call, its error, integer arguments, and the shape of
// the limiter that `Policies` and the policy rule cache send through.
Object.defineProperty(exports, "__esModule", { value: true });
exports.TimeoutError = void 0;
exports.withTimeout = withTimeout;
exports.int = int;
/** A command did not answer within its timeout. */
class TimeoutError extends Error {
    timeoutMs;
    name = 'TimeoutError';
    constructor(timeoutMs) {
        super(`redis-ratelimit: no reply within ${timeoutMs} ms`);
        this.timeoutMs = timeoutMs;
    }
}
exports.TimeoutError = TimeoutError;
/** @internal */
function withTimeout(p, ms) {
    if (!ms || ms <= 0 || !Number.isFinite(ms))
        return p;
    return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new TimeoutError(ms)), ms);
        p.then((v) => { clearTimeout(timer); resolve(v); }, (e) => { clearTimeout(timer); reject(e); });
    });
}
/** An integer argument as the decimal string the module reads (TypeError otherwise). */
function int(name, v) {
    if (typeof v === 'bigint')
        return v.toString();
    if (typeof v === 'number' && Number.isSafeInteger(v))
        return String(v);
    throw new TypeError(`redis-ratelimit: ${name} must be an integer, got ${String(v)}`);
}
