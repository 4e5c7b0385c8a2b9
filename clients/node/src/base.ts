// What the limiter and the policies both need, below both of them (so that neither imports
// the other for it): the timeout of a call, its error, integer arguments, and the shape of
// the limiter that `Policies` and the policy rule cache send through.

import type { Adapter } from './adapter.js';
import type { Int } from './types.js';

/** A command did not answer within its timeout. */
export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
  constructor(readonly timeoutMs: number) {
    super(`redis-ratelimit: no reply within ${timeoutMs} ms`);
  }
}

/** @internal */
export function withTimeout<T>(p: Promise<T>, ms: number | undefined): Promise<T> {
  if (!ms || ms <= 0 || !Number.isFinite(ms)) return p;
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeoutError(ms)), ms);
    p.then((v) => { clearTimeout(timer); resolve(v); },
      (e) => { clearTimeout(timer); reject(e); });
  });
}

/** An integer argument as the decimal string the module reads (TypeError otherwise). */
export function int(name: string, v: Int): string {
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  throw new TypeError(`redis-ratelimit: ${name} must be an integer, got ${String(v)}`);
}

/** What `Policies`, `ClusterPolicies` and `PolicyRuleCache` need of a limiter. */
export interface CommandSender {
  readonly adapter: Adapter;
  readonly timeoutMs: number | undefined;
  command(args: (string | number | bigint)[], key?: string,
    opts?: { exact?: boolean; readonly?: boolean; timeoutMs?: number; waitMs?: number }): Promise<unknown>;
}
