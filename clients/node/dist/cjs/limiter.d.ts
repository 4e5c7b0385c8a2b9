import { type Adapter, type ClientKind } from './adapter.js';
import { ClusterPolicies, Policies, PolicyRuleCache } from './policy.js';
import type { AllDecision, AllEntry, AllowOptions, Decision, FixedRule, GcraRule, Info, Int, LogRule, QueueRule, RateOptions, Rule, SlidingRule, ThrottleReply, TokenBucketRule } from './types.js';
export interface LimiterOptions {
    /** Prepended to every key (default ''). ioredis's own `keyPrefix` does not apply to module
     * commands, so set it here if you need one. */
    prefix?: string;
    /** Reject a call with a TimeoutError after this many ms (default: none; the client's own
     * timeouts apply). The command may still run on the server. */
    timeoutMs?: number;
    /** At most this many connections of its own for calls with `waitMs` > 0 (default 50): each
     * waiting call holds one until answered (a blocked command would hold every call queued
     * behind it on the application's multiplexed connection). Beyond it a waiting call waits
     * in the client for one, within its timeout. On a cluster each is a cluster client (one
     * connection per node it uses). Closed by `close()`. */
    waitConnections?: number;
}
export { TimeoutError, withTimeout } from './base.js';
/** The module (or this server) does not know an option: it answered `ERR syntax error` (or
 * refused `COST 0`). The options of "beyond yes or no" need a module that has them. */
export declare function isUnsupportedOption(err: unknown): boolean;
/** The rule's numbers after the key, e.g. GCRA 10 5 1000 -> ['10', '5', '1000']. */
export declare function ruleArgs(rule: Rule): string[];
/** The options of a rate command, in the contract's syntax. */
export declare function optionArgs(rule: Rule, o?: RateOptions): string[];
/** Which extra fields a reply has, by the options sent (the module's order: `delay_ms`
 * (QUEUE), `token` (RL.ACQUIRE), `granted` (PARTIAL), `probe` (PROBE), `waited_ms` (WAIT)). */
export interface ReplyFields {
    queue?: boolean;
    token?: boolean;
    partial?: boolean;
    probe?: boolean;
    wait?: boolean;
}
/** The five standard fields of a reply, then the extra fields present (see `ReplyFields`). */
export declare function parseDecision(reply: unknown, what: string, extra?: ReplyFields): Decision;
/** A reply whose algorithm the caller does not know (a policy's: `RL.ALLOW`, `POLICY` in
 * `RL.ALL`): the five fields, then from the end `waited_ms` (with `wait`), `probe` (with
 * `probe`), `granted` (with `partial`), and before them an integer (QUEUE's `delay_ms`) or a
 * string / nil (CONCURRENCY's lease token). */
export declare function parsePolicyDecision(reply: unknown, what: string, partial?: boolean, more?: {
    probe?: boolean;
    wait?: boolean;
}): Decision;
/** RL.INFO's pairs (an array, a Map or an object: RESP2 or RESP3) into an Info. */
export declare function parseInfo(reply: unknown): Info | null;
type Named<R extends Rule> = Omit<R, 'algorithm'>;
export declare class Limiter {
    readonly adapter: Adapter;
    readonly prefix: string;
    readonly timeoutMs: number | undefined;
    constructor(client: unknown, options?: LimiterOptions);
    /** Which client this limiter talks through. */
    get kind(): ClientKind;
    /** Whether the client is a cluster client (RL.ALL's keys must then share a hash tag). */
    get isCluster(): boolean;
    /** Sends any command (args[0] = name), routed by `key` in a cluster. Numbers become strings.
     * `waitMs` > 0: the command may block in the server that long (it carries `WAIT`): it goes
     * on a connection of its own, with a timeout of `waitMs` + `timeoutMs`. */
    command(args: (string | number | bigint)[], key?: string, opts?: {
        exact?: boolean;
        readonly?: boolean;
        timeoutMs?: number;
        waitMs?: number;
    }): Promise<unknown>;
    private waitPool?;
    private readonly waitConnections;
    /** The pool of connections for waiting calls (opened on the first one). */
    get waitConnectionPool(): {
        size: number;
        idleCount: number;
        max: number;
    } | undefined;
    private waiting;
    /** Any rate rule: `RL.<ALGORITHM> key <numbers> [options]`. */
    check(key: string, rule: Rule, options?: RateOptions): Promise<Decision>;
    gcra(key: string, p: Named<GcraRule> & RateOptions): Promise<Decision>;
    tokenbucket(key: string, p: Named<TokenBucketRule> & RateOptions): Promise<Decision>;
    sliding(key: string, p: Named<SlidingRule> & RateOptions): Promise<Decision>;
    fixed(key: string, p: Named<FixedRule> & RateOptions): Promise<Decision>;
    log(key: string, p: Named<LogRule> & RateOptions): Promise<Decision>;
    /** RL.QUEUE: the decision carries `delayMs`, how long to wait before proceeding. */
    queue(key: string, p: Named<QueueRule> & RateOptions): Promise<Decision>;
    /** RL.ACQUIRE: a lease; the decision carries `token` (null when refused). With `waitMs`,
     * the call waits in the server for a lease to be released or to expire. */
    acquire(key: string, p: {
        limit: Int;
        leaseMs: Int;
        dryrun?: boolean;
        waitMs?: Int;
        probe?: boolean;
        timeoutMs?: number;
    }): Promise<Decision>;
    /** `RL.PAUSE key ms [PROBE probeMs]`: every request on the key is refused for `ms` from now
     * (extends, never shortens, a pause or a BLOCK). With `probeMs`: after the pause, the first
     * admitted request that carries `probe: true` is let through as the probe (its decision's
     * `probe` is true) and the key is paused `probeMs` more for the others, until the prober
     * calls `resume(key)` (it worked) or `pause` again (it failed). Returns the ms until the
     * pause ends. */
    pause(key: string, ms: Int, o?: {
        probeMs?: Int;
        timeoutMs?: number;
    }): Promise<number>;
    /** `RL.RESUME key`: lifts a pause or a BLOCK penalty at once (waiters wake); true if one
     * was lifted. */
    resume(key: string, o?: {
        timeoutMs?: number;
    }): Promise<boolean>;
    /** RL.RELEASE: true if the lease existed unexpired and was released. */
    release(key: string, token: string, o?: {
        timeoutMs?: number;
    }): Promise<boolean>;
    /** RL.RENEW: true if the lease existed unexpired and now expires `leaseMs` from now. */
    renew(key: string, token: string, leaseMs: Int, o?: {
        timeoutMs?: number;
    }): Promise<boolean>;
    /** CL.THROTTLE, redis-cell's command and reply (seconds). */
    throttle(key: string, p: {
        maxBurst: Int;
        countPerPeriod: Int;
        periodS: Int;
        quantity?: Int;
        timeoutMs?: number;
    }): Promise<ThrottleReply>;
    /** RL.ALL: several limits checked and spent atomically, all or nothing. In a cluster all
     * keys must hash to one slot: give them one hash tag, e.g. `rl:{org:7}:user:42` and
     * `rl:{org:7}` (the part in braces alone decides the slot). */
    all(entries: AllEntry[], o?: {
        dryrun?: boolean;
        timeoutMs?: number;
    }): Promise<AllDecision>;
    /** `RL.ALLOW key policy [options]`: the version of the stored policy that applies to `key`
     * decides. The decision is that algorithm's (`delayMs` for QUEUE, `token` for CONCURRENCY,
     * `granted` with `partial`). An unknown policy: `ERR no such policy 'name'`. */
    allow(key: string, policy: string, o?: AllowOptions): Promise<Decision>;
    private policiesCache?;
    private clusterPoliciesCache?;
    private ruleCache?;
    /** `RL.POLICY` on a single server (plain replies). On a cluster client, use
     * `clusterPolicies` (policies are per node: every primary needs them). */
    get policies(): Policies;
    /** `RL.POLICY` on every primary: writes return each node's answer, `get` / `list` report
     * drift between the primaries. (On a single server: one primary.) */
    get clusterPolicies(): ClusterPolicies;
    /** The policies' rules as the middleware caches them (per limiter). */
    get policyRules(): PolicyRuleCache;
    /** RL.INFO: null if the key does not exist. Read so that integers beyond 2^53 stay exact
     * (see the adapter; node-redis v4 cannot). */
    info(key: string, o?: {
        timeoutMs?: number;
    }): Promise<Info | null>;
    /** DEL of a limit's key: forget its state. */
    reset(key: string, o?: {
        timeoutMs?: number;
    }): Promise<boolean>;
    /** RL.CLOCK (tests only; the server must be loaded with `test-clock yes`). Per node. */
    clock(sub: 'GET' | 'SET' | 'ADVANCE' | 'REAL', ms?: Int): Promise<number | string>;
    /** Closes the connections the limiter opened: for exact RL.INFO replies (ioredis), and for
     * waiting calls (idle ones now, the others when answered; a later waiting call opens new
     * ones). The application's client is left open. */
    close(): Promise<void>;
}
/** A limiter over an ioredis client (Redis or Cluster), a node-redis client (createClient or
 * createCluster), or any `{ send(args, key) }`. */
export declare function createLimiter(client: unknown, options?: LimiterOptions): Limiter;
