import { type StringAlgorithm } from './limits.js';
import type { Limiter } from './limiter.js';
import type { Decision, Rule } from './types.js';
export interface RateLimiterOptions {
    limiter: Limiter;
    /** The limit's name, in its keys (default 'limit'). */
    name?: string;
    /** A rule, a limit string, or several rules. */
    rule: Rule | string | Rule[];
    /** The algorithm of a limit string's rules (default 'sliding'). */
    algorithm?: StringAlgorithm;
    /** Prefix of the keys (default 'rl:'). */
    keyPrefix?: string;
    timeoutMs?: number;
}
/** What `consume` resolves to (and a `RateLimitedError` carries). */
export interface ConsumeResult {
    /** The fewest units left among the rules after this call. */
    remaining: number;
    /** Refused: ms until this call would be admitted (the longest of the refusing rules);
     * admitted: 0. */
    msBeforeNext: number;
    /** Each rule's decision, in order (a refused RL.ALL: what each alone would have decided;
     * none for a cost above a rule's limit, refused before Redis). */
    decisions: Decision[];
}
/** `consume` was refused: `msBeforeNext` says when to retry. A cost above a rule's limit is
 * refused with `msBeforeNext` Infinity (never admissible). */
export declare class RateLimitedError extends Error implements ConsumeResult {
    readonly remaining: number;
    readonly msBeforeNext: number;
    readonly decisions: Decision[];
    readonly name = "RateLimitedError";
    constructor(remaining: number, msBeforeNext: number, decisions: Decision[]);
}
export interface RateLimiter {
    readonly rules: readonly Rule[];
    /** Spends `cost` (default 1) of `key`'s allowance: resolves when admitted, rejects with a
     * `RateLimitedError` when refused (nothing spent). */
    consume(key: string | number, cost?: number): Promise<ConsumeResult>;
    /** The state without spending (`COST 0`). */
    get(key: string | number): Promise<ConsumeResult>;
    /** Gives back `units` (`REFUND`) on every rule. */
    reward(key: string | number, units?: number): Promise<void>;
    /** Refuses every request of `key` for `ms` (`RL.PAUSE` on each rule's key). */
    block(key: string | number, ms: number): Promise<void>;
    /** Forgets `key`'s state (`DEL`). */
    delete(key: string | number): Promise<void>;
}
export declare function createRateLimiter(o: RateLimiterOptions): RateLimiter;
