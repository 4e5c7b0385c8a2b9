import { type Limiter } from './limiter.js';
import type { Decision, Rule } from './types.js';
export interface LeaseOptions {
    /** Units claimed at once (>= 1). */
    chunk: number;
    /** How long a claim is held before its unused units are given back (default 1000). */
    ttlMs?: number;
    /** Adapt the chunk to the rate this process sees (never above `chunk`; default false). */
    adaptive?: boolean;
}
/** The algorithms a lease can be taken on: their refunds give back exactly what a claim took. */
export declare const LEASABLE: Set<string>;
/** One lease's state (a snapshot, for tests and metrics). */
export interface LeaseState {
    key: string;
    units: number;
    expiresAtMs: number;
    /** The chunk the next claim asks for (the configured one unless `adaptive`). */
    nextChunk: number;
}
export interface LeaseResult {
    admitted: boolean;
    /** Decided from the lease without a Redis call. */
    local: boolean;
    /** The decision for the headers: the last claim's reply, `remaining` + the units left (at
     * most `limit`), `retryAfterMs` / `resetAfterMs` less the ms since the claim. */
    decision: Decision;
    /** The decision the header's `t` is computed from: the claim reply's own `remaining`,
     * aged, with this request's `allowed` (when the server gives a unit back). */
    timing: Decision;
    /** The reply of the claim made for this request, if one was made. */
    reply?: Decision;
}
export interface LeasesOptions {
    limiter: Limiter;
    /** The package clock (integer ms). */
    clockMs: () => number;
    timeoutMs?: number;
    /** Give back lapsed leases from a timer (unref'd) as well as on the next request (default true). */
    timers?: boolean;
    /** A give-back failed (the units stay spent until the key refills: never more admitted). */
    onError?: (err: unknown, key: string) => void;
}
/** The leases of one process (one middleware instance), per (limit, identity) key. */
export declare class Leases {
    private readonly o;
    private readonly leases;
    private readonly chunks;
    private readonly locks;
    private closed;
    private takes;
    constructor(o: LeasesOptions);
    /** The leases held now. */
    snapshot(): LeaseState[];
    /** Runs fn after every earlier call on `key` (one claim at a time per key). */
    private locked;
    /** Decides a request of `cost` on `key` under `rule` with `lease`. Redis errors propagate
     * (the caller takes the limit's failure path). */
    take(key: string, rule: Rule, cost: number, lease: LeaseOptions): Promise<LeaseResult>;
    private takeNow;
    private setChunk;
    /** The headers' decisions: the last claim's reply with the units left (`r`), and as it
     * is (`t`), aged by the time since the claim. */
    private view;
    private drop;
    /** Gives back a lease's units (when >= 1 and still in its window), then forgets it. */
    private giveBack;
    private arm;
    /** Gives back every lease (in parallel) and refuses later requests. */
    close(): Promise<void>;
}
