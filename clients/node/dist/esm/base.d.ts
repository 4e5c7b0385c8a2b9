import type { Adapter } from './adapter.js';
import type { Int } from './types.js';
/** A command did not answer within its timeout. */
export declare class TimeoutError extends Error {
    readonly timeoutMs: number;
    readonly name = "TimeoutError";
    constructor(timeoutMs: number);
}
/** @internal */
export declare function withTimeout<T>(p: Promise<T>, ms: number | undefined): Promise<T>;
/** An integer argument as the decimal string the module reads (TypeError otherwise). */
export declare function int(name: string, v: Int): string;
/** What `Policies`, `ClusterPolicies` and `PolicyRuleCache` need of a limiter. */
export interface CommandSender {
    readonly adapter: Adapter;
    readonly timeoutMs: number | undefined;
    command(args: (string | number | bigint)[], key?: string, opts?: {
        exact?: boolean;
        readonly?: boolean;
        timeoutMs?: number;
        waitMs?: number;
    }): Promise<unknown>;
}
