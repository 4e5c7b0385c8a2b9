// Leased allowance: a process claims a chunk of a limit's allowance with one command
// (`COST chunk PARTIAL`), admits its requests from it locally, and gives back what it did not
// use (`REFUND units`) when the lease lapses (its ttl), when the process closes, or when the
// limit's rule changes. The server counts a chunk as spent when it is claimed, so all
// processes together never admit more than the rule allows; a caller can be refused early
// while other processes hold unspent units: at most (processes - 1) * chunk units, for at
// most ttl_ms.
//
// The rules are the conformance spec's ("Leased allowance"): for a request of cost c,
//  1. a lease whose expiry has come lapses first (its units refunded when >= 1), then is gone;
//     a FIXED lease whose window has ended is dropped without a refund;
//  2. units >= c: admitted locally, no Redis call;
//  3. else the process claims max(chunk, c - units) with PARTIAL, adds what was granted (a
//     grant >= 1 starts a new ttl: now + ttl, FIXED now + min(ttl, reset_after_ms)), then
//     admits from the units if they suffice, else refuses with that reply.

import { ruleArgs, type Limiter } from './limiter.js';
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
export const LEASABLE = new Set(['gcra', 'tokenbucket', 'fixed']);

/** One lease's state (a snapshot, for tests and metrics). */
export interface LeaseState {
  key: string;
  units: number;
  expiresAtMs: number;
  /** The chunk the next claim asks for (the configured one unless `adaptive`). */
  nextChunk: number;
}

interface Lease {
  key: string;
  rule: Rule;
  sig: string;
  units: number;
  expiresAt: number;
  /** FIXED: the end of the window of the claim (a refund after it would give room in the next). */
  windowEnd?: number;
  /** The last claim's reply and its instant. */
  reply?: Decision;
  claimedAt: number;
  /** Units granted since the last claim started this lease's ttl (for `adaptive`). */
  granted: number;
  opts: LeaseOptions;
  timer?: ReturnType<typeof setTimeout>;
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

const sigOf = (rule: Rule): string => `${rule.algorithm} ${ruleArgs(rule).join(' ')}`;

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
export class Leases {
  private readonly leases = new Map<string, Lease>();
  private readonly chunks = new Map<string, number>();
  private readonly locks = new Map<string, Promise<unknown>>();
  private closed = false;
  private takes = 0;

  constructor(private readonly o: LeasesOptions) {}

  /** The leases held now. */
  snapshot(): LeaseState[] {
    return [...this.leases.values()].map((l) => ({ key: l.key, units: l.units, expiresAtMs: l.expiresAt,
      nextChunk: this.chunks.get(l.key) ?? 0 }));
  }

  /** Runs fn after every earlier call on `key` (one claim at a time per key). */
  private locked<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const before = this.locks.get(key) ?? Promise.resolve();
    const run = before.then(fn, fn);
    const tail = run.catch(() => {});
    this.locks.set(key, tail);
    tail.then(() => { if (this.locks.get(key) === tail) this.locks.delete(key); });
    return run;
  }

  /** Decides a request of `cost` on `key` under `rule` with `lease`. Redis errors propagate
   * (the caller takes the limit's failure path). */
  take(key: string, rule: Rule, cost: number, lease: LeaseOptions): Promise<LeaseResult> {
    return this.locked(key, () => this.takeNow(key, rule, cost, lease));
  }

  private async takeNow(key: string, rule: Rule, cost: number, opts: LeaseOptions): Promise<LeaseResult> {
    if (this.closed) {
      // closed: no new lease (nothing would give it back); each request is its own command
      const d = await this.o.limiter.check(key, rule, { cost, timeoutMs: this.o.timeoutMs });
      return { admitted: d.allowed, local: false, decision: d, timing: d, reply: d };
    }
    const now = this.o.clockMs();
    // Every 256 requests: forget the lapsed leases that hold nothing (no call: nothing to
    // give back), so that without timers the map does not keep every key ever seen.
    if (++this.takes % 256 === 0) {
      for (const x of this.leases.values()) if (x.units === 0 && x.expiresAt <= now && !this.locks.has(x.key)) this.drop(x);
    }
    const sig = sigOf(rule);
    let l = this.leases.get(key);
    // the rule changed (a limit computed per request): give back under the old rule
    if (l && l.sig !== sig) { await this.giveBack(l, now); l = undefined; }
    // 1. lapse
    if (l && l.expiresAt <= now) { await this.giveBack(l, now); l = undefined; }
    // a peek (cost 0) without a lease claims nothing: sent as COST 0
    if (!l && cost === 0) {
      const d = await this.o.limiter.check(key, rule, { cost: 0, timeoutMs: this.o.timeoutMs });
      return { admitted: d.allowed, local: false, decision: d, timing: d, reply: d };
    }
    // 2. local
    if (l && l.units >= cost) {
      l.units -= cost;
      return { admitted: true, local: true, ...this.view(l, now, true) };
    }
    // 3. claim
    const ttl = opts.ttlMs ?? 1000;
    const chunk = opts.adaptive ? (this.chunks.get(key) ?? opts.chunk) : opts.chunk;
    const held = l?.units ?? 0;
    const want = Math.max(chunk, cost - held);
    const reply = await this.o.limiter.check(key, rule, { cost: want, partial: true, timeoutMs: this.o.timeoutMs });
    const granted = reply.granted ?? 0;
    if (!l) {
      l = { key, rule, sig, units: 0, expiresAt: now, claimedAt: now, granted: 0, opts };
      this.leases.set(key, l);
    }
    // adaptive: a claim while the lease still runs means its units went faster than the
    // ttl: the next chunk doubles (up to the configured one)
    if (opts.adaptive && l.expiresAt > now && l.granted > 0) this.setChunk(key, Math.min(opts.chunk, chunk * 2), opts.chunk);
    l.units += granted;
    l.reply = reply;
    l.claimedAt = now;
    if (granted >= 1) {
      const fixed = rule.algorithm === 'fixed';
      l.expiresAt = now + (fixed ? Math.min(ttl, reply.resetAfterMs) : ttl);
      l.windowEnd = fixed ? now + reply.resetAfterMs : undefined;
      l.granted = granted;
      this.arm(l);
    }
    if (l.units >= cost) {
      l.units -= cost;
      return { admitted: true, local: false, ...this.view(l, now, true), reply };
    }
    if (l.units === 0 && granted === 0) this.drop(l);
    return { admitted: false, local: false, ...this.view(l, now, false), reply };
  }

  // The adaptive chunks that differ from the configured one (at most 10000 keys: the
  // oldest go first, and start again from the configured chunk).
  private setChunk(key: string, next: number, max: number): void {
    this.chunks.delete(key);
    if (next >= max) return;
    this.chunks.set(key, next);
    if (this.chunks.size > 10000) this.chunks.delete(this.chunks.keys().next().value as string);
  }

  /** The headers' decisions: the last claim's reply with the units left (`r`), and as it
   * is (`t`), aged by the time since the claim. */
  private view(l: Lease, now: number, admitted: boolean): { decision: Decision; timing: Decision } {
    const r = l.reply!;
    const since = Math.max(0, now - l.claimedAt);
    const decision: Decision = {
      allowed: admitted,
      limit: r.limit,
      remaining: Math.min(r.limit, r.remaining + l.units),
      // a refused claim's retry_after_ms, less the time since (not below 0: a claim that
      // granted fewer units than the cost says 0, retry at once with the units held plus
      // the next claim's)
      retryAfterMs: admitted ? 0 : Math.max(0, r.retryAfterMs - since),
      resetAfterMs: Math.max(0, r.resetAfterMs - since),
    };
    return { decision, timing: { ...decision, remaining: r.remaining } };
  }

  private drop(l: Lease): void {
    if (l.timer) clearTimeout(l.timer);
    if (this.leases.get(l.key) === l) this.leases.delete(l.key);
  }

  /** Gives back a lease's units (when >= 1 and still in its window), then forgets it. */
  private async giveBack(l: Lease, now: number): Promise<void> {
    this.drop(l);
    const units = l.units;
    l.units = 0;
    // adaptive: units left unused at the lapse: the next chunk is about what was used
    if (l.opts.adaptive && units > 0) {
      const cur = this.chunks.get(l.key) ?? l.opts.chunk;
      this.setChunk(l.key, Math.max(1, Math.min(cur, l.granted - units)), l.opts.chunk);
    }
    if (units < 1) return;
    if (l.windowEnd !== undefined && now >= l.windowEnd) return; // FIXED: that window is over
    try {
      await this.o.limiter.check(l.key, l.rule, { refund: units, timeoutMs: this.o.timeoutMs });
    } catch (err) {
      this.o.onError?.(err, l.key);
    }
  }

  // A timer gives back a lapsed lease without waiting for the next request on its key (on
  // the package clock: when it fires early for that clock it is armed again).
  private arm(l: Lease): void {
    if (this.o.timers === false) return;
    if (l.timer) clearTimeout(l.timer);
    const delay = Math.max(1, l.expiresAt - this.o.clockMs());
    const t = setTimeout(() => {
      l.timer = undefined;
      void this.locked(l.key, async () => {
        if (this.leases.get(l.key) !== l) return;
        const now = this.o.clockMs();
        if (l.expiresAt <= now) await this.giveBack(l, now);
        else this.arm(l);
      });
    }, Math.min(delay, 2 ** 31 - 1));
    t.unref?.();
    l.timer = t;
  }

  /** Gives back every lease (in parallel) and refuses later requests. */
  async close(): Promise<void> {
    this.closed = true;
    // a claim already under way when close() began may still add a lease: loop
    while (this.leases.size) {
      const all = [...this.leases.values()];
      await Promise.all(all.map((l) => this.locked(l.key, () => (this.leases.get(l.key) === l
        ? this.giveBack(l, this.o.clockMs()) : Promise.resolve()))));
    }
  }
}
