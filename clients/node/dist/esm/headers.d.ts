import type { Decision, Rule } from './types.js';
export interface HeaderItem {
    /** The policy name (a structured-field string). */
    name: string;
    /** The rule, for `w` and `t`; without it `w` is omitted and t = reset_after_ms. */
    rule?: Rule;
    decision: Decision;
    /** The decision `t` is computed from, when not `decision` (a leased limit: `r` counts the
     * units the process holds, `t` is the claim reply's own). */
    timing?: Decision;
}
export interface HeaderOptions {
    /** `RateLimit-Policy` and `RateLimit` (default true). */
    draft?: boolean;
    /** `X-RateLimit-Limit`, `-Remaining`, `-Reset` (default false). */
    legacy?: boolean;
    /** The current time for X-RateLimit-Reset (default Date.now()). */
    nowMs?: number;
}
/** The policy window `w` in seconds: for GCRA / TOKENBUCKET / QUEUE the time an exhausted
 * key takes to refill completely (limit x emission interval), else the window. */
export declare function windowSeconds(rule: Rule): number;
/** The quota `q` of a rule (what a fresh key admits at once). */
export declare function quota(rule: Rule): number;
/** For the GCRA family (GCRA, TOKENBUCKET, QUEUE): the time one unit takes to come back, as
 * the exact fraction [numerator, denominator] in ms; null for windows and logs. */
export declare function emissionInterval(rule: Rule): [bigint, bigint] | null;
/** Milliseconds until additional quota is available (see the top of this file), before the
 * clamp to the policy window; 0 when nothing is spent. */
export declare function nextQuotaMs(d: Decision, rule?: Rule): number;
/** The `t` parameter in seconds: nextQuotaMs rounded up, at most the policy window `w`
 * (when the rule is known). */
export declare function resetParameter(d: Decision, rule?: Rule): number;
/** A structured-field string (RFC 8941 §3.3.3): printable ASCII, `"` and `\` escaped. */
export declare function sfString(s: string): string;
/** The tightest of several decisions: a refusing one with the longest wait, else the one
 * with the fewest remaining (then the longest reset). */
export declare function tightest<T extends {
    decision: Decision;
}>(items: T[]): T | undefined;
/** The response headers for the decisions of one request. */
export declare function rateLimitHeaders(items: HeaderItem[], o?: HeaderOptions): Record<string, string>;
