// An in-process limiter for when Redis cannot answer: the same rules and the same Decision
// shape, state in a Map bounded by `maxKeys` (the least recently written keys go first).
// It is per process: N processes behind a load balancer admit up to N times the limit while
// they run on it, so give the fallback a rule scaled down accordingly if that matters.
// GCRA, TOKENBUCKET and QUEUE are decided as GCRA (QUEUE without the delay: a request either
// fits or is refused), FIXED as a fixed window, SLIDING and LOG as a sliding window counter.
// Time is integer ms; the GCRA state is kept in units of 1/count ms so no fraction is lost.

import type { Decision, Rule } from './types.js';

interface GcraState { kind: 'gcra'; tat: number; expires: number }
interface WindowState { kind: 'window'; start: number; prev: number; cur: number; expires: number }
type State = GcraState | WindowState;

export interface MemoryLimiterOptions {
  /** Most keys held (default 10000). */
  maxKeys?: number;
  /** The clock in ms (default Date.now). */
  now?: () => number;
}

const n = (v: number | bigint): number => Number(v);

export class MemoryLimiter {
  private readonly state = new Map<string, State>();
  private readonly maxKeys: number;
  private readonly now: () => number;

  constructor(o: MemoryLimiterOptions = {}) {
    this.maxKeys = o.maxKeys ?? 10000;
    this.now = o.now ?? Date.now;
  }

  get size(): number { return this.state.size; }

  private put(key: string, s: State): void {
    this.state.delete(key);
    this.state.set(key, s);
    while (this.state.size > this.maxKeys) {
      const oldest = this.state.keys().next().value;
      if (oldest === undefined) break;
      this.state.delete(oldest);
    }
  }

  /** Decides and (if admitted) spends `cost` units of `rule` on `key`. */
  check(key: string, rule: Rule, cost = 1): Decision {
    const now = this.now();
    const prior = this.state.get(key);
    const live = prior && prior.expires > now ? prior : undefined;
    switch (rule.algorithm) {
      case 'gcra': return this.gcra(key, live, now, n(rule.burst), n(rule.count), n(rule.periodMs), cost);
      case 'tokenbucket': return this.gcra(key, live, now, n(rule.capacity), n(rule.refillTokens), n(rule.refillPeriodMs), cost);
      case 'queue': return this.gcra(key, live, now, n(rule.capacity), 1, n(rule.intervalMs), cost);
      case 'fixed': return this.window(key, live, now, n(rule.limit), n(rule.windowMs), cost, false);
      default: return this.window(key, live, now, n(rule.limit), n(rule.windowMs), cost, true);
    }
  }

  private gcra(key: string, s: State | undefined, nowMs: number, burst: number, count: number, period: number, cost: number): Decision {
    // Units of 1/count ms: the emission interval is `period`, a burst is burst * period.
    const now = nowMs * count;
    const tat = Math.max(s && s.kind === 'gcra' ? s.tat : now, now);
    const cap = burst * period;
    const next = tat + cost * period;
    const ms = (u: number): number => Math.ceil(u / count);
    if (next - now <= cap) {
      this.put(key, { kind: 'gcra', tat: next, expires: nowMs + ms(next - now) });
      return { allowed: true, limit: burst, remaining: Math.floor((cap - (next - now)) / period), retryAfterMs: 0,
        resetAfterMs: ms(next - now) };
    }
    return { allowed: false, limit: burst, remaining: Math.max(0, Math.floor((cap - (tat - now)) / period)),
      retryAfterMs: ms(next - now - cap), resetAfterMs: ms(tat - now) };
  }

  private window(key: string, s: State | undefined, now: number, limit: number, w: number, cost: number, sliding: boolean): Decision {
    const start = now - (now % w);
    let prev = 0; let cur = 0;
    if (s && s.kind === 'window') {
      if (s.start === start) { prev = s.prev; cur = s.cur; } else if (s.start === start - w) prev = s.cur;
    }
    if (!sliding) prev = 0;
    const elapsed = now - start;
    // estimate * w = prev * (w - elapsed) + cur * w, compared in integers
    const est = (c: number): number => prev * (w - elapsed) + c * w;
    const remainingOf = (c: number): number => Math.max(0, Math.floor((limit * w - est(c)) / w));
    const resetOf = (c: number): number => (c > 0 ? start + 2 * w - now : prev > 0 ? start + w - now : 0);
    const fixedReset = (c: number): number => (c > 0 ? start + w - now : 0);
    if (est(cur + cost) <= limit * w) {
      const c = cur + cost;
      const reset = sliding ? resetOf(c) : fixedReset(c);
      this.put(key, { kind: 'window', start, prev: sliding ? prev : 0, cur: c, expires: now + reset });
      return { allowed: true, limit, remaining: remainingOf(c), retryAfterMs: 0, resetAfterMs: reset };
    }
    // In the next window the current count weighs cur * (w - e') / w: room at
    // e' = ceil(w * (cur + cost - limit) / cur).
    const nextWindow = start + w - now + (cur > 0 ? Math.max(0, Math.ceil((w * (cur + cost - limit)) / cur)) : 0);
    let retry: number;
    if (!sliding) retry = start + w - now;
    else if (prev === 0) retry = nextWindow;
    else {
      // room once prev * (w - e') + (cur + cost) * w <= limit * w within this window
      const inWindow = Math.ceil((est(cur + cost) - limit * w) / prev);
      retry = inWindow <= w - elapsed ? inWindow : nextWindow;
    }
    return { allowed: false, limit, remaining: remainingOf(cur), retryAfterMs: Math.max(1, retry),
      resetAfterMs: sliding ? resetOf(cur) : fixedReset(cur) };
  }
}
