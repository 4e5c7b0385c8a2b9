import type { AllDecision, AllRuleEntry, Decision, Int, Rule } from './types.js';
export interface MemoryLimiterOptions {
    /** Most keys held (default 10000). */
    maxKeys?: number;
    /** The clock in ms (default Date.now). */
    now?: () => number;
}
/** Options of one request, as the module's. */
export interface MemoryRequestOptions {
    cost?: Int;
    refund?: Int;
    dryrun?: boolean;
    reserve?: Int;
    partial?: boolean;
}
export declare class MemoryLimiter {
    private readonly state;
    private readonly maxKeys;
    private readonly now;
    constructor(o?: MemoryLimiterOptions);
    get size(): number;
    /** Forgets every key. */
    clear(): void;
    private put;
    /** Decides and (if admitted) spends `cost` units of `rule` on `key` (0 peeks): the
     * middleware's fallback. A cost above the rule's limit (a fallback rule smaller than the
     * limit's own) is refused, never admissible: nothing spent, `retryAfterMs` the time to a
     * fresh key (at least 1). */
    check(key: string, rule: Rule, cost?: Int): Decision;
    /** One rate command with the module's options (`RL.<ALG> key ... [COST n | REFUND n]
     * [PARTIAL] [RESERVE r] [DRYRUN]`). A cost above the limit without `partial`, or `reserve`
     * at or above it, throws as the module answers an error. */
    rate(key: string, rule: Rule, o?: MemoryRequestOptions): Decision;
    /** RL.ALL: every rule admits, or nothing is spent (each rule's reply says what it alone
     * would have decided). */
    all(entries: AllRuleEntry[], o?: {
        dryrun?: boolean;
    }): AllDecision;
    private request;
    /** The reply's fields (numbers; they fit) with the options' extra fields. */
    private decision;
    /** rule.rs `unblocked`: a peek, a refund, a plain spend or one with PARTIAL / RESERVE. */
    private decide;
    private peek;
    private copyRefunded;
    private refund;
    private windowOf;
    /** The algorithm itself (cost 0: a peek, never stored); stores when admitted and `commit`. */
    private spend;
    /** Answers the module's rate commands and RL.ALL (args as strings), as a server would:
     * `createLimiter(memoryLimiter)` is a limiter on this process's memory. */
    send(args: string[]): unknown;
}
