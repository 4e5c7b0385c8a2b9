"use strict";
// HTTP headers from decisions, per draft-ietf-httpapi-ratelimit-headers-10:
//
//   RateLimit-Policy: "user";q=10;w=60, "org";q=1000;w=60     (one item per limit)
//   RateLimit: "user";r=3;t=6, "org";r=990;t=60
//   Retry-After: 6                                             (429 only)
//
// `q` is the limit's quota (the decision's `limit`), `w` its window in seconds (below),
// `r` the remaining units, and `t` "the number of seconds until additional quota ... is made
// available" (draft-10 §4.1.2) — not the time to a full reset. From the five reply fields and
// the rule's numbers:
//  - refused: t = ceil(retry_after_ms / 1000), the same as Retry-After (the draft says
//    Retry-After should not point before t);
//  - nothing spent (remaining = limit): no t (no quota is coming, the key is fresh);
//  - GCRA / TOKENBUCKET (emission interval T = period/count) and QUEUE (T = interval): the
//    key's lead over now is reset_after_ms and each T of it is one unit, so the next unit is
//    back after reset_after_ms - (limit - remaining - 1) * T;
//  - FIXED: at the window's end, reset_after_ms;
//  - SLIDING: the previous and current counts are not in the reply; an upper bound that holds
//    whatever they are: if the current window has a count (reset_after_ms > window_ms) the
//    current window ends in reset_after_ms - window_ms and one more unit is back at most
//    window_ms / (limit - remaining) later; else only the previous window weighs, and a unit is
//    back within reset_after_ms / (limit - remaining). Both before the full reset: for a
//    limit of 100 with 10 spent, the current window's end plus a tenth of a window instead of
//    two windows, or a tenth of what is left of the previous window's weight. (Exact would
//    need the two counts: RL.INFO, another round trip.)
//  - LOG: reset_after_ms (when the newest entry ages out: exact when one request is logged,
//    an upper bound otherwise; the oldest entry's age is not in the reply).
// All in milliseconds, then rounded up to whole seconds, so a client that waits t seconds
// finds the quota there.
//
// The legacy fields (`X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`, on
// request) describe the single tightest limit (a refusing one with the longest wait, else
// the fewest remaining); X-RateLimit-Reset is the Unix time in seconds at which that limit is
// back to full (reset_after_ms), as GitHub and express-rate-limit send it.
Object.defineProperty(exports, "__esModule", { value: true });
exports.windowSeconds = windowSeconds;
exports.quota = quota;
exports.nextQuotaMs = nextQuotaMs;
exports.resetParameter = resetParameter;
exports.sfString = sfString;
exports.tightest = tightest;
exports.rateLimitHeaders = rateLimitHeaders;
const big = (v) => BigInt(v);
const ceilDiv = (a, b) => (a <= 0n ? 0n : (a + b - 1n) / b);
const seconds = (ms) => Number(ceilDiv(big(ms), 1000n));
/** The policy window `w` in seconds: for GCRA / TOKENBUCKET / QUEUE the time an exhausted
 * key takes to refill completely (limit x emission interval), else the window. */
function windowSeconds(rule) {
    switch (rule.algorithm) {
        case 'gcra':
            return Math.max(1, Number(ceilDiv(big(rule.burst) * big(rule.periodMs), big(rule.count) * 1000n)));
        case 'tokenbucket':
            return Math.max(1, Number(ceilDiv(big(rule.capacity) * big(rule.refillPeriodMs), big(rule.refillTokens) * 1000n)));
        case 'queue':
            return Math.max(1, Number(ceilDiv(big(rule.capacity) * big(rule.intervalMs), 1000n)));
        default:
            return Math.max(1, seconds(rule.windowMs));
    }
}
/** The quota `q` of a rule (what a fresh key admits at once). */
function quota(rule) {
    switch (rule.algorithm) {
        case 'gcra': return Number(rule.burst);
        case 'tokenbucket':
        case 'queue': return Number(rule.capacity);
        default: return Number(rule.limit);
    }
}
/** Milliseconds until additional quota is available (see the top of this file); null when
 * the quota is full and none is coming. */
function nextQuotaMs(d, rule) {
    if (!d.allowed)
        return d.retryAfterMs;
    if (d.remaining >= d.limit)
        return null;
    const reset = big(d.resetAfterMs);
    const spentBeyondOne = big(d.limit - d.remaining - 1);
    const gcraLike = (period, count) => {
        // reset - spentBeyondOne * period / count, rounded up, in [0, reset]
        const v = ceilDiv(reset * count - spentBeyondOne * period, count);
        return Number(v > reset ? reset : v);
    };
    if (!rule)
        return d.resetAfterMs;
    switch (rule.algorithm) {
        case 'gcra': return gcraLike(big(rule.periodMs), big(rule.count));
        case 'tokenbucket': return gcraLike(big(rule.refillPeriodMs), big(rule.refillTokens));
        case 'queue': return gcraLike(big(rule.intervalMs), 1n);
        case 'sliding': {
            const w = big(rule.windowMs);
            const units = big(d.limit - d.remaining);
            const v = reset > w ? reset - w + ceilDiv(w, units) : ceilDiv(reset, units);
            return Number(v > reset ? reset : v);
        }
        default: return d.resetAfterMs;
    }
}
/** The `t` parameter in seconds (null: omit it). */
function resetParameter(d, rule) {
    const ms = nextQuotaMs(d, rule);
    return ms === null ? null : seconds(ms);
}
/** A structured-field string (RFC 8941 §3.3.3): printable ASCII, `"` and `\` escaped. */
function sfString(s) {
    const clean = s.replace(/[^\x20-\x7e]/g, '?');
    return `"${clean.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}
/** The tightest of several decisions: a refusing one with the longest wait, else the one
 * with the fewest remaining (then the longest reset). */
function tightest(items) {
    let best;
    const rank = (x) => [x.decision.allowed ? 1 : 0, x.decision.allowed ? x.decision.remaining : -x.decision.retryAfterMs,
        -x.decision.resetAfterMs];
    for (const it of items) {
        if (!best) {
            best = it;
            continue;
        }
        const a = rank(it);
        const b = rank(best);
        for (let i = 0; i < a.length; i++) {
            if (a[i] !== b[i]) {
                if (a[i] < b[i])
                    best = it;
                break;
            }
        }
    }
    return best;
}
/** The response headers for the decisions of one request. */
function rateLimitHeaders(items, o = {}) {
    const h = {};
    if (!items.length)
        return h;
    if (o.draft !== false) {
        h['RateLimit-Policy'] = items.map((it) => {
            const q = it.rule ? quota(it.rule) : it.decision.limit;
            return `${sfString(it.name)};q=${q}${it.rule ? `;w=${windowSeconds(it.rule)}` : ''}`;
        }).join(', ');
        h.RateLimit = items.map((it) => {
            const t = resetParameter(it.basis ?? it.decision, it.rule);
            return `${sfString(it.name)};r=${Math.max(0, it.decision.remaining)}${t === null ? '' : `;t=${t}`}`;
        }).join(', ');
    }
    if (o.legacy) {
        const t = tightest(items);
        h['X-RateLimit-Limit'] = String(t.decision.limit);
        h['X-RateLimit-Remaining'] = String(Math.max(0, Math.min(...items.map((i) => i.decision.remaining))));
        h['X-RateLimit-Reset'] = String(Math.ceil(((o.nowMs ?? Date.now()) + t.decision.resetAfterMs) / 1000));
    }
    const refused = items.filter((i) => !i.decision.allowed);
    if (refused.length)
        h['Retry-After'] = String(Math.max(...refused.map((i) => seconds(i.decision.retryAfterMs))));
    return h;
}
