import type { Decision, Rule } from './types.js';
export interface MemoryLimiterOptions {
    /** Most keys held (default 10000). */
    maxKeys?: number;
    /** The clock in ms (default Date.now). */
    now?: () => number;
}
export declare class MemoryLimiter {
    private readonly state;
    private readonly maxKeys;
    private readonly now;
    constructor(o?: MemoryLimiterOptions);
    get size(): number;
    private put;
    /** Decides and (if admitted) spends `cost` units of `rule` on `key`. */
    check(key: string, rule: Rule, cost?: number): Decision;
    private gcra;
    private window;
}
