"use strict";
// HTTP headers from decisions, per draft-ietf-httpapi-ratelimit-headers-10:
//
//   RateLimit-Policy: "user";q=10;w=60, "org";q=1000;w=60     (one item per limit)
//   RateLimit: "user";r=3;t=6, "org";r=990;t=60
//   Retry-After: 6                                             (429 only)
//
// `q` is the limit's quota (the decision's `limit`), `w` its window in seconds, rounded up
// (SLIDING / FIXED / LOG: window_ms; GCRA / TOKENBUCKET / QUEUE: limit x emission interval,
// the time an exhausted key takes to be fresh again), `r` the remaining units, and `t` "the
// number of seconds until additional quota ... is made available" (draft-10 §4.1.2). The
// rule is the one both client packages (Node and Python) implement, from the five reply
// fields and the rule's numbers, in ms, then rounded up to whole seconds:
//  - refused: retry_after_ms, the same as Retry-After;
//  - admitted, nothing spent (remaining >= limit): 0;
//  - GCRA / TOKENBUCKET (emission interval T = period/count, exact) and QUEUE (T = interval):
//    reset_after_ms - (limit - remaining - 1) * T, the next unit's return (the key's lead
//    over now is reset_after_ms and each T of it is one unit);
//  - FIXED: reset_after_ms, the window's end;
//  - SLIDING: reset_after_ms - window_ms when reset_after_ms > window_ms (the current window
//    has a count: its end), else reset_after_ms;
//  - LOG: reset_after_ms;
//  - then t is clamped to at most w.
// Retry-After (refused only) is the longest retry_after_ms of the refusing limits, rounded
// up: the module's own answer, never computed here.
//
// The legacy fields (`X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`, on
// request) describe the single tightest limit (a refusing one with the longest wait, else
// the fewest remaining); X-RateLimit-Reset is the Unix time in seconds at which that limit is
// back to full (reset_after_ms), as GitHub and express-rate-limit send it.
Object.defineProperty(exports, "__esModule", { value: true });
exports.windowSeconds = windowSeconds;
exports.quota = quota;
exports.emissionInterval = emissionInterval;
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
/** For the GCRA family (GCRA, TOKENBUCKET, QUEUE): the time one unit takes to come back, as
 * the exact fraction [numerator, denominator] in ms; null for windows and logs. */
function emissionInterval(rule) {
    switch (rule.algorithm) {
        case 'gcra': return [big(rule.periodMs), big(rule.count)];
        case 'tokenbucket': return [big(rule.refillPeriodMs), big(rule.refillTokens)];
        case 'queue': return [big(rule.intervalMs), 1n];
        default: return null;
    }
}
/** Milliseconds until additional quota is available (see the top of this file), before the
 * clamp to the policy window; 0 when nothing is spent. */
function nextQuotaMs(d, rule) {
    if (!d.allowed)
        return d.retryAfterMs;
    if (d.remaining >= d.limit || d.resetAfterMs <= 0)
        return 0;
    if (!rule)
        return d.resetAfterMs;
    const reset = big(d.resetAfterMs);
    const ei = emissionInterval(rule);
    if (ei) {
        // reset - (limit - remaining - 1) * num / den, rounded up, at least 0
        const [num, den] = ei;
        return Number(ceilDiv(reset * den - big(d.limit - d.remaining - 1) * num, den));
    }
    if (rule.algorithm === 'sliding') {
        const w = big(rule.windowMs);
        return Number(reset > w ? reset - w : reset);
    }
    return d.resetAfterMs; // FIXED, LOG
}
/** The `t` parameter in seconds: nextQuotaMs rounded up, at most the policy window `w`
 * (when the rule is known). */
function resetParameter(d, rule) {
    const t = seconds(nextQuotaMs(d, rule));
    return rule ? Math.min(t, windowSeconds(rule)) : t;
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
            const t = resetParameter(it.timing ?? it.decision, it.rule);
            return `${sfString(it.name)};r=${Math.max(0, it.decision.remaining)};t=${t}`;
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
