import { type CommandSender as Limiter } from './base.js';
import type { ClusterPolicy, NodeAnswers, PolicyInfo, PolicyMode, PolicyRule, PolicyStats, PolicySummary, PolicyVersion, Rule } from './types.js';
/** A policy's rule as `RL.POLICY SET`'s arguments: a rule object (with `stagger`,
 * `blockMs`), or the module's text as is (`"GCRA 10 1 1000"`, `"FIXED 10 60000 BLOCK 900000"`). */
export declare function policyRuleArgs(rule: PolicyRule | string): string[];
/** The module's text of a policy rule (`"SLIDING 10 60000 STAGGER BLOCK 5000"`) as a rule
 * object; null if it is not one (e.g. empty: no candidate). */
export declare function parsePolicyRule(text: string | null | undefined): PolicyRule | null;
/** The rate rule of a policy rule (without its BLOCK), or null for CONCURRENCY. */
export declare function rateRule(rule: PolicyRule | null | undefined): Rule | null;
export declare function parsePolicyInfo(reply: unknown): PolicyInfo | null;
export declare function parsePolicyList(reply: unknown): PolicySummary[];
export declare function parsePolicyHistory(reply: unknown): PolicyVersion[];
export declare function parsePolicyStats(reply: unknown): PolicyStats;
export interface PolicySetOptions {
    /** `SHADOW`: this version decides and spends, never refuses. */
    shadow?: boolean;
    /** `ROLLOUT percent` (1 to 99): the new version is a candidate for that share of keys. */
    rollout?: number;
    timeoutMs?: number;
}
type Timeout = {
    timeoutMs?: number;
};
/** `RL.POLICY` on one server: the plain replies, typed. (On a cluster use
 * `limiter.clusterPolicies`: policies are per node.) */
export declare class Policies {
    private readonly limiter;
    constructor(limiter: Limiter);
    private run;
    /** `RL.POLICY SET`: a new version (current at once, or a candidate with `rollout`).
     * Returns its version. */
    set(name: string, rule: PolicyRule | string, o?: PolicySetOptions): Promise<number>;
    /** `RL.POLICY ROLLOUT`: the candidate's share (100: it becomes current). Returns the
     * candidate's version. */
    rollout(name: string, percent: number, o?: Timeout): Promise<number>;
    /** `RL.POLICY ROLLBACK`: drops the candidate, or makes the previous version current again
     * (as a new version). Returns the current version. */
    rollback(name: string, o?: Timeout): Promise<number>;
    /** `RL.POLICY GET`: null if there is no such policy. */
    get(name: string, o?: Timeout): Promise<PolicyInfo | null>;
    /** `RL.POLICY DEL`: true if it existed. Keys written under it keep their state. */
    delete(name: string, o?: Timeout): Promise<boolean>;
    /** `RL.POLICY LIST [pattern]` (a KEYS pattern), by name. */
    list(pattern?: string, o?: Timeout): Promise<PolicySummary[]>;
    /** `RL.POLICY HISTORY`: the candidate, then the last 10 versions that were current. */
    history(name: string, o?: Timeout): Promise<PolicyVersion[]>;
    /** `RL.POLICY STATS [RESET]` (with `reset`: the statistics so far, then zeroed). */
    stats(name: string, o?: {
        reset?: boolean;
        timeoutMs?: number;
    }): Promise<PolicyStats>;
}
/** `RL.POLICY` on every primary (a cluster; a single server is one primary). Writes return
 * each primary's answer; `get` and `list` report drift: a policy whose (version, digest)
 * differs between primaries, or that some do not have. */
export declare class ClusterPolicies {
    private readonly limiter;
    constructor(limiter: Limiter);
    /** The primaries' names (`"host:port"`). */
    nodes(): Promise<string[]>;
    private each;
    /** Every node answered (else the first error is thrown). */
    private read;
    set(name: string, rule: PolicyRule | string, o?: PolicySetOptions): Promise<NodeAnswers<number>>;
    rollout(name: string, percent: number, o?: Timeout): Promise<NodeAnswers<number>>;
    rollback(name: string, o?: Timeout): Promise<NodeAnswers<number>>;
    delete(name: string, o?: Timeout): Promise<NodeAnswers<boolean>>;
    /** Each primary's version of the policy; null when no primary has it. */
    get(name: string, o?: Timeout): Promise<ClusterPolicy<PolicyInfo> | null>;
    /** Every policy of any primary, by name, each with its per-node entries and `drift`. */
    list(pattern?: string, o?: Timeout): Promise<ClusterPolicy<PolicySummary>[]>;
    history(name: string, o?: Timeout): Promise<NodeAnswers<PolicyVersion[]>>;
    /** Each primary's statistics (they are per node). */
    stats(name: string, o?: {
        reset?: boolean;
        timeoutMs?: number;
    }): Promise<NodeAnswers<PolicyStats>>;
}
/** One version of a policy as the middleware needs it. */
export interface CachedVersion {
    version: number;
    rule: PolicyRule | null;
    mode: PolicyMode;
}
export interface CachedPolicy {
    /** When it was read (the reader's clock, ms). */
    at: number;
    /** null: the server has no such policy. */
    current: CachedVersion | null;
    candidate: CachedVersion | null;
}
/** The rules of policies, per limiter (so per process and server), as the middleware reads
 * them with `RL.POLICY GET` for its headers. */
export declare class PolicyRuleCache {
    private readonly limiter;
    private readonly entries;
    private readonly inflight;
    constructor(limiter: Limiter);
    peek(name: string): CachedPolicy | undefined;
    /** Reads the policy now (one read per name at a time), routed to `key`'s node. */
    refresh(name: string, key: string | undefined, now: number, timeoutMs?: number): Promise<CachedPolicy>;
    clear(): void;
}
export {};
