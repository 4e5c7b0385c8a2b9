import { type Limiter } from './limiter.js';
import { type LeaseOptions, type LeaseState } from './lease.js';
import { type StringAlgorithm } from './limits.js';
import { MemoryLimiter } from './memory.js';
import type { Decision, PolicyMode, Rule } from './types.js';
/** Request headers as Node gives them (lower-case names). */
export type Headers = Record<string, string | string[] | undefined>;
/** What a key function sees of a request. */
export interface RequestContext {
    /** The framework's request object (Express `req`, Fastify `request`). */
    req: any;
    method: string;
    /** The path without the query string. */
    path: string;
    headers: Headers;
    /** The TCP peer. */
    remoteAddress: string | undefined;
    /** The client's address (trusted proxies applied), IPv6 reduced to its /64 (ipv6Prefix). */
    ip: string;
}
type Awaitable<T> = T | Promise<T>;
/** Returns the identity this limit counts the request under (e.g. a user id), or null /
 * undefined when the limit does not apply to this request. */
export type KeyFunction = (ctx: RequestContext) => Awaitable<string | number | null | undefined>;
/** A rule, a limit string (`'10/second; 1000/day'`), or a function of the request giving
 * one (a limit computed per request, e.g. from the caller's plan). */
export type RuleSpec = Rule | string | ((ctx: RequestContext) => Awaitable<Rule | string>);
export interface LimitSpec {
    /** The policy name: in the headers and in the Redis key. A limit string of several items
     * makes limits named `<name>-1`, `<name>-2`, ... */
    name: string;
    /** The rule's numbers, a limit string (`'10/second'`, `'10 per minute'`,
     * `'100/5 minutes'`, `'10/second; 1000/day'`: see `algorithm`), or a function of the
     * request returning either; or give `policy` instead. */
    rule?: RuleSpec;
    /** The algorithm of a limit string's rules: `'sliding'` (default), `'fixed'`, or `'gcra'`
     * (burst = count). */
    algorithm?: StringAlgorithm;
    /** The name of a policy stored in the server (`RL.POLICY SET`) instead of `rule`: sent as
     * `POLICY name [COST n]` in the request's RL.ALL (alone: `RL.ALLOW key name`), so the
     * numbers change without a deploy. The headers take the rule from `RL.POLICY GET`,
     * cached per limiter (`policyRefreshMs`). Not a CONCURRENCY policy; the policy sets its
     * own BLOCK (no `blockMs` here). An unknown policy takes the failure path. */
    policy?: string;
    /** Who is counted (see `keys`; default `keys.ip()`). */
    key?: KeyFunction;
    /** Identities (exact) this limit never applies to: no command, no header item. */
    allow?: Iterable<string | number>;
    /** Identities (exact) refused at once with 403 (no Redis call for any limit of the
     * request, no rate-limit headers, a problem body naming this limit). */
    deny?: Iterable<string | number>;
    /** Leased allowance (GCRA, TOKENBUCKET and FIXED rules; not with `policy`, `blockMs`,
     * `waitMs` or `shadow`): this process claims `chunk` units at once (`COST chunk PARTIAL`),
     * admits from them without a Redis call, and gives back the unused ones (`REFUND`) when
     * the lease lapses (`ttlMs`, default 1000), on `close()`, or when the rule changes. All
     * processes together never admit more than the rule; a caller can be refused early, by at
     * most (processes - 1) * chunk units, for at most `ttlMs`. `adaptive`: the chunk follows
     * the rate this process sees (never above `chunk`). */
    lease?: LeaseOptions;
    /** Units this request spends (default 1). */
    cost?: number | ((ctx: RequestContext) => Awaitable<number>);
    /** Redis unreachable or too slow: true (default) lets the request through as far as this
     * limit goes, false answers 503. */
    failOpen?: boolean;
    /** Redis unreachable: decide this limit in process memory instead (true: with the same
     * rule; a rule: with that one, e.g. scaled down by the number of processes). Takes
     * precedence over failOpen. */
    fallback?: boolean | Rule;
    /** Spend and report, never refuse (overrides the guard's `shadow`). */
    shadow?: boolean;
    /** A penalty (`BLOCK ms`): when this limit refuses a request, its key refuses everything
     * for `blockMs` from then on (e.g. 15 minutes after 10 failed logins). RL.ALL takes no
     * BLOCK, so a limit with a block is checked in its own command, after the other limits of
     * the request admitted it (a request they refuse does not reach it). */
    blockMs?: number;
    /** Hold the request up to this many ms for room instead of answering 429 (`WAIT ms`: the
     * server admits the waiters of a key in arrival order). RL.ALL takes no WAIT, so a limit
     * with a wait is checked in its own command after the RL.ALL of the other limits admitted
     * (as a `blockMs` limit; with them, in the limits' order); its headers come from the final
     * reply. Not with `blockMs`. A shadow limit never holds a request: its `waitMs` is not
     * sent. The command's timeout is `waitMs` + `timeoutMs`. */
    waitMs?: number;
}
/** Limits for some routes. */
export interface RouteLimits {
    /** A path (exact, or a prefix when it ends with "/*"), a RegExp, or a predicate. */
    path: string | RegExp | ((ctx: RequestContext) => boolean);
    /** Methods it applies to (default all). */
    methods?: string[];
    /** The limits of these routes; `false` exempts them. */
    limits: LimitSpec[] | false;
    /** false (default): these limits are added to the global ones (after them; a route limit
     * with the name of a global one replaces that one); true: they replace the global ones. */
    replace?: boolean;
}
export type Matcher = string | RegExp | ((ctx: RequestContext) => boolean);
/** One limit's outcome, as the metrics hook sees it. */
export interface LimitOutcome {
    name: string;
    key: string;
    cost: number;
    shadow: boolean;
    /** redis: decided by the module; fallback: by the in-memory limiter (Redis failed);
     * fail-open / fail-closed: Redis failed and the limit let the request through / not
     * (the Python package's names; formerly failed-open / failed-closed, see the README's
     * "Changes");
     * cost: the request's cost is above the limit's limit, refused without asking Redis (no
     * `decision`); lease: admitted from this process's lease without a Redis call (`decision`:
     * the last claim's reply with the units left); local: refused from the local-refusal cache
     * without a Redis call (`localRefusals`); deny: the identity is in the limit's `deny` list
     * (403, no `decision`). */
    source: 'redis' | 'fallback' | 'fail-open' | 'fail-closed' | 'cost' | 'lease' | 'local' | 'deny';
    decision?: Decision;
    /** A `policy` limit: the policy, and the version that decided (from the rules cached for
     * the headers; undefined when unknown). */
    policy?: {
        name: string;
        version?: number;
        mode?: PolicyMode;
    };
    /** The module's reply, when `decision` is this limit's real state rather than the reply: a
     * rule that would have admitted, in an RL.ALL refused by another, answers as if the request
     * were spent (as DRYRUN); nothing was spent, so `decision` has the cost added back to
     * `remaining` (and, for GCRA / TOKENBUCKET / QUEUE, taken off `resetAfterMs`). */
    reply?: Decision;
    /** Why Redis was not asked or did not answer (a `CircuitOpenError` while the breaker is
     * open). */
    error?: unknown;
}
export interface DecisionEvent {
    ctx: RequestContext;
    /** What the client got: allowed (passed), refused (429), denied (403: a `deny` list),
     * unavailable (503), exempt. */
    outcome: 'allowed' | 'refused' | 'denied' | 'unavailable' | 'exempt';
    /** A shadow limit would have refused this request. */
    shadowRefused: boolean;
    limits: LimitOutcome[];
    /** The module's `refused_by` of the request's RL.ALL: the 1-based index (among the limits
     * of that call, in `limits` order) of the first limit that refused, 0 when it admitted;
     * undefined when no RL.ALL was sent (one limit, or one command per limit). */
    refusedBy?: number;
    durationMs: number;
}
/** Redis failed less than `breakerMs` ago: the limit took its failure path without asking. */
export declare class CircuitOpenError extends Error {
    readonly name = "CircuitOpenError";
    constructor();
}
/** Server error replies that mean the server cannot serve now (the same list as the Python
 * package's `UNAVAILABLE_REPLIES`). */
export declare const UNAVAILABLE_REPLIES: readonly string[];
/** Whether an error means "Redis cannot answer": no reply (connection lost or refused, a
 * server that refuses the connection with `ERR max number of clients reached`, a timeout,
 * the breaker open) or an error reply whose code is one of `UNAVAILABLE_REPLIES` (out of
 * memory, loading, persistence failing, read-only, a cluster reconfiguring, busy): the limit
 * takes its failure path. Every other error reply (`ERR ...`, `WRONGTYPE`, `NOAUTH`,
 * `WRONGPASS`, `NOPERM`, ...: a bug, not an outage) and an invalid argument propagate (the
 * framework answers 500). */
export declare function isUnavailable(err: unknown): boolean;
/** `ERR no such policy 'name'`: a limit names a policy the server does not have. */
export declare function isUnknownPolicy(err: unknown): boolean;
export interface GuardOptions {
    limiter: Limiter;
    /** Limits of every request. */
    limits?: LimitSpec[];
    /** Per-route limits and exemptions, the first match wins. */
    routes?: RouteLimits[];
    /** Requests never limited, e.g. ['/health', '/webhooks/*']. */
    exempt?: Matcher[];
    /** Proxies in front of the app (a count, or their addresses/networks). Default: none, the
     * TCP peer is the client. */
    trustedProxies?: number | string[];
    /** IPv6 clients are keyed on this prefix (default 64). */
    ipv6Prefix?: number;
    /** Prefix of every Redis key (default "rl:"). Keep it free of braces. */
    keyPrefix?: string;
    /** A Redis Cluster hash tag per request (e.g. the organisation), so that all of its keys
     * share a slot and are checked by one atomic RL.ALL. Keys become
     * `<keyPrefix>{<tag>}:<name>:<id>`. */
    hashTag?: (ctx: RequestContext) => string | null | undefined;
    /** Check the enforced limits of a request with one atomic RL.ALL (all or nothing: a
     * request refused by one limit spends nothing on the others). Default: true on a single
     * server, and on a cluster for a request whose `hashTag` gives a tag; otherwise (a
     * cluster, no tag) one command per limit, whatever slots the keys happen to hash to (in
     * parallel; a refused request may then have spent on the limits that admitted it). */
    atomic?: boolean;
    /** Redis timeout per request, ms (default 50). */
    timeoutMs?: number;
    /** Every limit in shadow mode: spend and report, never refuse, no headers. */
    shadow?: boolean;
    /** draft-10 `RateLimit-Policy` / `RateLimit` (default true), legacy `X-RateLimit-*`
     * (default false). */
    headers?: {
        draft?: boolean;
        legacy?: boolean;
    };
    /** Called after every checked request (metrics, logs). Must not throw. */
    onDecision?: (event: DecisionEvent) => void;
    /** After Redis failed (connection error, timeout, OOM, LOADING, ...), requests take their
     * failure path at once (fallback, else failOpen, else 503) for this many ms instead of
     * each waiting for a timeout; then the next request tries Redis again. 0: every request
     * tries Redis. Default 1000. */
    breakerMs?: number;
    /** The clock of the breaker, in ms (default performance.now). For tests. */
    now?: () => number;
    /** `policy` limits: the rules read with `RL.POLICY GET` for the headers are read again
     * after this many ms (default 5000), and whenever a reply's limit matches neither the
     * cached current version nor the candidate. 0: read on every request. */
    policyRefreshMs?: number;
    /** The in-memory limiter used by `fallback` limits (default: a new one). */
    memory?: MemoryLimiter;
    /** After the server refused a (limit, identity) with `retry_after_ms` R > 0, refuse its
     * requests of at least that cost here, without a Redis call, until R has passed (on
     * `clockMs`). `true`: at most 10000 entries; `{ maxKeys }`: at most that many (when full,
     * the entry that ends soonest goes). Not for shadow limits nor `waitMs` limits. Default off. */
    localRefusals?: boolean | {
        maxKeys?: number;
    };
    /** The clock of leases and local refusals, integer ms (default Date.now). Tests pass one
     * that reads the module's test clock. */
    clockMs?: () => number;
    /** Give back a lapsed lease from a timer (unref'd) as well as on its key's next request
     * (default true). */
    leaseTimers?: boolean;
    logger?: {
        warn(msg: string): void;
        error(msg: string): void;
    };
}
export interface GuardResult {
    status: 200 | 403 | 429 | 503;
    headers: Record<string, string>;
    /** Admitted by a QUEUE limit that scheduled it later: wait this many ms, then proceed
     * (the Express middleware and the Fastify hook do). 0 otherwise. */
    delayMs: number;
    /** The response body for 429 / 503 (an RFC 9457 problem). */
    body?: Record<string, unknown>;
    event: DecisionEvent;
}
export interface RouteOverride {
    limits?: LimitSpec[];
    replace?: boolean;
}
/** Key functions for the usual identities. Each returns null when the request has no such
 * identity, so the limit does not apply (e.g. a user limit on an anonymous request). */
export declare const keys: {
    /** The client address (trusted proxies applied, IPv6 on its /64). */
    ip: () => KeyFunction;
    /** A user id taken from the request (e.g. `(req) => req.user?.id`). */
    user: (get: (req: any) => string | number | null | undefined) => KeyFunction;
    /** An organisation / tenant id taken from the request. */
    org: (get: (req: any) => string | number | null | undefined) => KeyFunction;
    /** An API key from a header (default `x-api-key`; `authorization` takes a Bearer token),
     * stored as a SHA-256 prefix so that Redis never holds the secret. */
    apiKey: (o?: {
        header?: string;
    }) => KeyFunction;
};
export interface Guard {
    /** Decides one request. `route` adds or replaces limits (a framework's per-route config). */
    check(ctx: Omit<RequestContext, 'ip'>, route?: RouteOverride | false): Promise<GuardResult>;
    readonly options: GuardOptions;
    /** Gives back every lease this guard holds (`REFUND`); resolves when done. Later requests
     * of leased limits are checked one command each (no new lease). */
    close(): Promise<void>;
    /** The leases held now (for tests and metrics). */
    leases(): LeaseState[];
    /** Entries in the local-refusal cache now. */
    readonly localRefusals: number;
}
export declare function createGuard(options: GuardOptions): Guard;
export {};
