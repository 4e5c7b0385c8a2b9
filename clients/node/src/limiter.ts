// A small typed API over every command of the module.
//
//   const limiter = createLimiter(redis);            // an ioredis or node-redis client
//   const d = await limiter.gcra('user:42', { burst: 10, count: 5, periodMs: 1000 });
//   if (!d.allowed) wait(d.retryAfterMs);

import { createAdapter, type Adapter, type ClientKind, type WaitConnection } from './adapter.js';
import { WaitPool } from './wait.js';
import { TimeoutError, int, withTimeout } from './base.js';
import { ClusterPolicies, Policies, PolicyRuleCache } from './policy.js';
import type {
  AllDecision, AllEntry, AllowOptions, Decision, FixedRule, GcraRule, Info, Int, LogRule, QueueRule,
  RateOptions, Rule, SlidingRule, ThrottleReply, TokenBucketRule,
} from './types.js';

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
export function isUnsupportedOption(err: unknown): boolean {
  const m = err instanceof Error ? err.message : String(err);
  return /^ERR (syntax error|cost must be a positive integer)/i.test(m);
}

const ALGORITHMS = new Set(['gcra', 'tokenbucket', 'sliding', 'fixed', 'log', 'queue']);


/** The rule's numbers after the key, e.g. GCRA 10 5 1000 -> ['10', '5', '1000']. */
export function ruleArgs(rule: Rule): string[] {
  switch (rule.algorithm) {
    case 'gcra':
      return [int('burst', rule.burst), int('count', rule.count), int('periodMs', rule.periodMs)];
    case 'tokenbucket':
      return [int('capacity', rule.capacity), int('refillTokens', rule.refillTokens),
        int('refillPeriodMs', rule.refillPeriodMs)];
    case 'sliding':
    case 'fixed':
    case 'log':
      return [int('limit', rule.limit), int('windowMs', rule.windowMs)];
    case 'queue':
      return [int('capacity', rule.capacity), int('intervalMs', rule.intervalMs)];
    default:
      throw new TypeError(`redis-ratelimit: unknown algorithm ${(rule as { algorithm: string }).algorithm}`);
  }
}

function checkRule(rule: Rule): void {
  if (!rule || !ALGORITHMS.has(rule.algorithm)) {
    throw new TypeError(`redis-ratelimit: unknown algorithm ${String(rule && rule.algorithm)}`);
  }
}

/** The options of a rate command, in the contract's syntax. */
export function optionArgs(rule: Rule, o: RateOptions = {}): string[] {
  const out: string[] = [];
  if (o.refund !== undefined) {
    if (o.cost !== undefined) throw new TypeError('redis-ratelimit: refund replaces cost; give one of them');
    out.push('REFUND', int('refund', o.refund));
  }
  if (o.cost !== undefined) out.push('COST', int('cost', o.cost));
  if (o.partial) out.push('PARTIAL');
  if (o.reserve !== undefined) out.push('RESERVE', int('reserve', o.reserve));
  if (o.blockMs !== undefined) out.push('BLOCK', int('blockMs', o.blockMs));
  if ((rule.algorithm === 'fixed' || rule.algorithm === 'sliding') && rule.stagger) out.push('STAGGER');
  if (o.dryrun) out.push('DRYRUN');
  out.push(...waitProbeArgs(o));
  return out;
}

/** `WAIT ms` and `PROBE`, for the rate commands, RL.ACQUIRE and RL.ALLOW. */
function waitProbeArgs(o: { waitMs?: Int; probe?: boolean }): string[] {
  const out: string[] = [];
  if (o.waitMs !== undefined) out.push('WAIT', int('waitMs', o.waitMs));
  if (o.probe) out.push('PROBE');
  return out;
}

/** The ms a call may block in the server: `waitMs` (0 when not given). */
const waitOf = (o: { waitMs?: Int }): number => (o.waitMs === undefined ? 0 : Number(o.waitMs));

const num = (v: unknown): number => {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'string') return Number(v);
  if (Buffer.isBuffer(v)) return Number(v.toString());
  return Number.NaN;
};

const str = (v: unknown): string | null => {
  if (v === null || v === undefined) return null;
  if (Buffer.isBuffer(v)) return v.toString();
  return String(v);
};

function expectArray(reply: unknown, what: string, min: number): unknown[] {
  if (!Array.isArray(reply) || reply.length < min) {
    throw new Error(`redis-ratelimit: unexpected reply to ${what}: ${JSON.stringify(reply)}`);
  }
  return reply;
}

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
export function parseDecision(reply: unknown, what: string, extra: ReplyFields = {}): Decision {
  const r = expectArray(reply, what, 5 + [extra.queue, extra.token, extra.partial, extra.probe, extra.wait].filter(Boolean).length);
  const d: Decision = {
    allowed: num(r[0]) === 1,
    limit: num(r[1]),
    remaining: num(r[2]),
    retryAfterMs: num(r[3]),
    resetAfterMs: num(r[4]),
  };
  let i = 5;
  if (extra.queue) d.delayMs = num(r[i++]);
  if (extra.token) d.token = str(r[i++]);
  if (extra.partial) d.granted = num(r[i++] ?? 0);
  if (extra.probe) d.probe = num(r[i++]) === 1;
  if (extra.wait) d.waitedMs = num(r[i++]);
  return d;
}

const isInteger = (v: unknown): boolean => typeof v === 'number' || typeof v === 'bigint'
  || ((typeof v === 'string' || Buffer.isBuffer(v)) && /^-?\d+$/.test(v.toString()));

/** A reply whose algorithm the caller does not know (a policy's: `RL.ALLOW`, `POLICY` in
 * `RL.ALL`): the five fields, then from the end `waited_ms` (with `wait`), `probe` (with
 * `probe`), `granted` (with `partial`), and before them an integer (QUEUE's `delay_ms`) or a
 * string / nil (CONCURRENCY's lease token). */
export function parsePolicyDecision(reply: unknown, what: string, partial = false,
  more: { probe?: boolean; wait?: boolean } = {}): Decision {
  const r = expectArray(reply, what, 5 + [partial, more.probe, more.wait].filter(Boolean).length);
  const d = parseDecision(r, what);
  let extra = r.slice(5);
  if (more.wait) { d.waitedMs = num(extra[extra.length - 1]); extra = extra.slice(0, -1); }
  if (more.probe) { d.probe = num(extra[extra.length - 1]) === 1; extra = extra.slice(0, -1); }
  if (partial && extra.length) { d.granted = num(extra[extra.length - 1]); extra = extra.slice(0, -1); }
  if (extra.length) {
    if (isInteger(extra[0])) d.delayMs = num(extra[0]);
    else d.token = str(extra[0]);
  }
  return d;
}

const BIG_FIELD = /_(ns|us)$/;

/** RL.INFO's pairs (an array, a Map or an object: RESP2 or RESP3) into an Info. */
export function parseInfo(reply: unknown): Info | null {
  if (reply === null || reply === undefined) return null;
  let pairs: [string, unknown][];
  if (reply instanceof Map) pairs = [...reply.entries()].map(([k, v]) => [String(str(k)), v]);
  else if (Array.isArray(reply)) {
    pairs = [];
    for (let i = 0; i + 1 < reply.length; i += 2) pairs.push([String(str(reply[i])), reply[i + 1]]);
  } else if (typeof reply === 'object') pairs = Object.entries(reply as Record<string, unknown>);
  else throw new Error(`redis-ratelimit: unexpected reply to RL.INFO: ${String(reply)}`);
  const out: Record<string, string | number | bigint> = {};
  for (const [k, raw] of pairs) {
    const v = typeof raw === 'bigint' ? raw : typeof raw === 'number' ? raw : str(raw);
    if (v === null) continue;
    const integer = typeof v === 'bigint' || (typeof v === 'number' && Number.isInteger(v))
      || (typeof v === 'string' && /^-?\d+$/.test(v));
    if (!integer) out[k] = v;
    else if (BIG_FIELD.test(k)) out[k] = typeof v === 'bigint' ? v : BigInt(typeof v === 'number' ? Math.round(v) : v);
    else {
      const n = Number(v);
      out[k] = Number.isSafeInteger(n) ? n : BigInt(typeof v === 'number' ? Math.round(v) : v);
    }
  }
  return out as Info;
}


type Named<R extends Rule> = Omit<R, 'algorithm'>;

export class Limiter {
  readonly adapter: Adapter;
  readonly prefix: string;
  readonly timeoutMs: number | undefined;

  constructor(client: unknown, options: LimiterOptions = {}) {
    this.adapter = createAdapter(client);
    this.prefix = options.prefix ?? '';
    this.timeoutMs = options.timeoutMs;
    this.waitConnections = options.waitConnections ?? 50;
  }

  /** Which client this limiter talks through. */
  get kind(): ClientKind { return this.adapter.kind; }
  /** Whether the client is a cluster client (RL.ALL's keys must then share a hash tag). */
  get isCluster(): boolean { return this.adapter.cluster; }

  /** Sends any command (args[0] = name), routed by `key` in a cluster. Numbers become strings.
   * `waitMs` > 0: the command may block in the server that long (it carries `WAIT`): it goes
   * on a connection of its own, with a timeout of `waitMs` + `timeoutMs`. */
  async command(args: (string | number | bigint)[], key?: string,
    opts: { exact?: boolean; readonly?: boolean; timeoutMs?: number; waitMs?: number } = {}): Promise<unknown> {
    const sent = args.map((a) => (typeof a === 'string' ? a : int('argument', a)));
    let timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    if (opts.waitMs && opts.waitMs > 0) {
      timeoutMs = timeoutMs && timeoutMs > 0 && Number.isFinite(timeoutMs) ? timeoutMs + opts.waitMs : undefined;
      if (this.adapter.openWait) return this.waiting(sent, key, timeoutMs);
    }
    const p = this.adapter.send(sent, key, opts);
    return withTimeout(Promise.resolve(p), timeoutMs);
  }

  private waitPool?: WaitPool;
  private readonly waitConnections: number;

  /** The pool of connections for waiting calls (opened on the first one). */
  get waitConnectionPool(): { size: number; idleCount: number; max: number } | undefined {
    return this.waitPool;
  }

  // One waiting call on a pooled connection of its own. On the client's timeout the
  // connection is closed (the server drops the blocked call) instead of going back.
  private waiting(args: string[], key: string | undefined, limitMs: number | undefined): Promise<unknown> {
    const pool = (this.waitPool ??= new WaitPool(() => this.adapter.openWait!(), this.waitConnections));
    const call: { state: 'acquiring' | 'sending' | 'done' | 'timedout' } = { state: 'acquiring' };
    let conn: WaitConnection | undefined;
    const run = (async () => {
      const c = await pool.acquire();
      if (call.state === 'timedout') { pool.release(c, true); return undefined; }
      conn = c;
      call.state = 'sending';
      try {
        const r = await c.send(args, key);
        if (call.state === 'sending') pool.release(c, true);
        return r;
      } catch (err) {
        if (call.state === 'sending') pool.release(c, c.healthy());
        throw err;
      } finally {
        if (call.state === 'sending') call.state = 'done';
      }
    })();
    if (limitMs === undefined) return run;
    return withTimeout(run, limitMs).catch((err) => {
      if (err instanceof TimeoutError) {
        if (call.state === 'sending' && conn) pool.release(conn, false);
        call.state = 'timedout';
        run.catch(() => {});
      }
      throw err;
    });
  }

  /** Any rate rule: `RL.<ALGORITHM> key <numbers> [options]`. */
  async check(key: string, rule: Rule, options: RateOptions = {}): Promise<Decision> {
    checkRule(rule);
    const k = this.prefix + key;
    const name = `RL.${rule.algorithm.toUpperCase()}`;
    const reply = await this.command([name, k, ...ruleArgs(rule), ...optionArgs(rule, options)], k,
      { timeoutMs: options.timeoutMs, waitMs: waitOf(options) });
    return parseDecision(reply, name, { queue: rule.algorithm === 'queue', partial: !!options.partial,
      probe: !!options.probe, wait: options.waitMs !== undefined });
  }

  gcra(key: string, p: Named<GcraRule> & RateOptions): Promise<Decision> {
    return this.check(key, { algorithm: 'gcra', burst: p.burst, count: p.count, periodMs: p.periodMs }, p);
  }

  tokenbucket(key: string, p: Named<TokenBucketRule> & RateOptions): Promise<Decision> {
    return this.check(key, { algorithm: 'tokenbucket', capacity: p.capacity, refillTokens: p.refillTokens,
      refillPeriodMs: p.refillPeriodMs }, p);
  }

  sliding(key: string, p: Named<SlidingRule> & RateOptions): Promise<Decision> {
    return this.check(key, { algorithm: 'sliding', limit: p.limit, windowMs: p.windowMs, stagger: p.stagger }, p);
  }

  fixed(key: string, p: Named<FixedRule> & RateOptions): Promise<Decision> {
    return this.check(key, { algorithm: 'fixed', limit: p.limit, windowMs: p.windowMs, stagger: p.stagger }, p);
  }

  log(key: string, p: Named<LogRule> & RateOptions): Promise<Decision> {
    return this.check(key, { algorithm: 'log', limit: p.limit, windowMs: p.windowMs }, p);
  }

  /** RL.QUEUE: the decision carries `delayMs`, how long to wait before proceeding. */
  queue(key: string, p: Named<QueueRule> & RateOptions): Promise<Decision> {
    return this.check(key, { algorithm: 'queue', capacity: p.capacity, intervalMs: p.intervalMs }, p);
  }

  /** RL.ACQUIRE: a lease; the decision carries `token` (null when refused). With `waitMs`,
   * the call waits in the server for a lease to be released or to expire. */
  async acquire(key: string, p: { limit: Int; leaseMs: Int; dryrun?: boolean; waitMs?: Int; probe?: boolean;
    timeoutMs?: number }): Promise<Decision> {
    const k = this.prefix + key;
    const args = ['RL.ACQUIRE', k, int('limit', p.limit), int('leaseMs', p.leaseMs)];
    if (p.dryrun) args.push('DRYRUN');
    args.push(...waitProbeArgs(p));
    const r = await this.command(args, k, { timeoutMs: p.timeoutMs, waitMs: waitOf(p) });
    return parseDecision(r, 'RL.ACQUIRE', { token: true, probe: !!p.probe, wait: p.waitMs !== undefined });
  }

  /** `RL.PAUSE key ms [PROBE probeMs]`: every request on the key is refused for `ms` from now
   * (extends, never shortens, a pause or a BLOCK). With `probeMs`: after the pause, the first
   * admitted request that carries `probe: true` is let through as the probe (its decision's
   * `probe` is true) and the key is paused `probeMs` more for the others, until the prober
   * calls `resume(key)` (it worked) or `pause` again (it failed). Returns the ms until the
   * pause ends. */
  async pause(key: string, ms: Int, o: { probeMs?: Int; timeoutMs?: number } = {}): Promise<number> {
    const k = this.prefix + key;
    const args = ['RL.PAUSE', k, int('ms', ms)];
    if (o.probeMs !== undefined) args.push('PROBE', int('probeMs', o.probeMs));
    return num(await this.command(args, k, { timeoutMs: o.timeoutMs }));
  }

  /** `RL.RESUME key`: lifts a pause or a BLOCK penalty at once (waiters wake); true if one
   * was lifted. */
  async resume(key: string, o: { timeoutMs?: number } = {}): Promise<boolean> {
    const k = this.prefix + key;
    return num(await this.command(['RL.RESUME', k], k, o)) === 1;
  }

  /** RL.RELEASE: true if the lease existed unexpired and was released. */
  async release(key: string, token: string, o: { timeoutMs?: number } = {}): Promise<boolean> {
    const k = this.prefix + key;
    return num(await this.command(['RL.RELEASE', k, token], k, o)) === 1;
  }

  /** RL.RENEW: true if the lease existed unexpired and now expires `leaseMs` from now. */
  async renew(key: string, token: string, leaseMs: Int, o: { timeoutMs?: number } = {}): Promise<boolean> {
    const k = this.prefix + key;
    return num(await this.command(['RL.RENEW', k, token, int('leaseMs', leaseMs)], k, o)) === 1;
  }

  /** CL.THROTTLE, redis-cell's command and reply (seconds). */
  async throttle(key: string, p: { maxBurst: Int; countPerPeriod: Int; periodS: Int; quantity?: Int; timeoutMs?: number }): Promise<ThrottleReply> {
    const k = this.prefix + key;
    const args = ['CL.THROTTLE', k, int('maxBurst', p.maxBurst), int('countPerPeriod', p.countPerPeriod),
      int('periodS', p.periodS)];
    if (p.quantity !== undefined) args.push(int('quantity', p.quantity));
    const r = expectArray(await this.command(args, k, { timeoutMs: p.timeoutMs }), 'CL.THROTTLE', 5);
    return { allowed: num(r[0]) === 0, limit: num(r[1]), remaining: num(r[2]), retryAfterS: num(r[3]), resetAfterS: num(r[4]) };
  }

  /** RL.ALL: several limits checked and spent atomically, all or nothing. In a cluster all
   * keys must hash to one slot: give them one hash tag, e.g. `rl:{org:7}:user:42` and
   * `rl:{org:7}` (the part in braces alone decides the slot). */
  async all(entries: AllEntry[], o: { dryrun?: boolean; timeoutMs?: number } = {}): Promise<AllDecision> {
    if (!entries.length) throw new TypeError('redis-ratelimit: all() needs at least one entry');
    const keys = entries.map((e) => this.prefix + e.key);
    const rules = entries.flatMap((e) => {
      if ('policy' in e && e.policy !== undefined) {
        if ('rule' in e && (e as { rule?: unknown }).rule !== undefined) {
          throw new TypeError('redis-ratelimit: an all() entry has a rule or a policy, not both');
        }
        const a = ['POLICY', String(e.policy)];
        if (e.cost !== undefined) a.push('COST', int('cost', e.cost));
        if (e.reserve !== undefined) a.push('RESERVE', int('reserve', e.reserve));
        return a;
      }
      if (!('rule' in e)) throw new TypeError('redis-ratelimit: an all() entry needs a rule or a policy');
      checkRule(e.rule);
      const a = [e.rule.algorithm.toUpperCase(), ...ruleArgs(e.rule)];
      if (e.cost !== undefined) a.push('COST', int('cost', e.cost));
      if (e.reserve !== undefined) a.push('RESERVE', int('reserve', e.reserve));
      if ((e.rule.algorithm === 'fixed' || e.rule.algorithm === 'sliding') && e.rule.stagger) a.push('STAGGER');
      return a;
    });
    const args = ['RL.ALL', String(entries.length), ...keys, ...rules];
    if (o.dryrun) args.push('DRYRUN');
    const r = expectArray(await this.command(args, keys[0], { timeoutMs: o.timeoutMs }), 'RL.ALL', 2 + entries.length);
    return {
      allowed: num(r[0]) === 1,
      refusedBy: num(r[1]),
      decisions: entries.map((e, i) => ('rule' in e && e.rule
        ? parseDecision(r[2 + i], 'RL.ALL', { queue: e.rule.algorithm === 'queue' })
        : parsePolicyDecision(r[2 + i], 'RL.ALL'))),
    };
  }

  /** `RL.ALLOW key policy [options]`: the version of the stored policy that applies to `key`
   * decides. The decision is that algorithm's (`delayMs` for QUEUE, `token` for CONCURRENCY,
   * `granted` with `partial`). An unknown policy: `ERR no such policy 'name'`. */
  async allow(key: string, policy: string, o: AllowOptions = {}): Promise<Decision> {
    const k = this.prefix + key;
    const args = ['RL.ALLOW', k, policy];
    if (o.refund !== undefined) {
      if (o.cost !== undefined) throw new TypeError('redis-ratelimit: refund replaces cost; give one of them');
      args.push('REFUND', int('refund', o.refund));
    }
    if (o.cost !== undefined) args.push('COST', int('cost', o.cost));
    if (o.dryrun) args.push('DRYRUN');
    if (o.partial) args.push('PARTIAL');
    if (o.reserve !== undefined) args.push('RESERVE', int('reserve', o.reserve));
    args.push(...waitProbeArgs(o));
    const reply = await this.command(args, k, { timeoutMs: o.timeoutMs, waitMs: waitOf(o) });
    return parsePolicyDecision(reply, 'RL.ALLOW', !!o.partial, { probe: !!o.probe, wait: o.waitMs !== undefined });
  }

  private policiesCache?: Policies;
  private clusterPoliciesCache?: ClusterPolicies;
  private ruleCache?: PolicyRuleCache;

  /** `RL.POLICY` on a single server (plain replies). On a cluster client, use
   * `clusterPolicies` (policies are per node: every primary needs them). */
  get policies(): Policies {
    if (this.adapter.cluster) {
      throw new TypeError('redis-ratelimit: policies are per node: on a cluster use limiter.clusterPolicies (every primary)');
    }
    return (this.policiesCache ??= new Policies(this));
  }

  /** `RL.POLICY` on every primary: writes return each node's answer, `get` / `list` report
   * drift between the primaries. (On a single server: one primary.) */
  get clusterPolicies(): ClusterPolicies {
    return (this.clusterPoliciesCache ??= new ClusterPolicies(this));
  }

  /** The policies' rules as the middleware caches them (per limiter). */
  get policyRules(): PolicyRuleCache {
    return (this.ruleCache ??= new PolicyRuleCache(this));
  }

  /** RL.INFO: null if the key does not exist. Read so that integers beyond 2^53 stay exact
   * (see the adapter; node-redis v4 cannot). */
  async info(key: string, o: { timeoutMs?: number } = {}): Promise<Info | null> {
    const k = this.prefix + key;
    return parseInfo(await this.command(['RL.INFO', k], k, { exact: true, readonly: true, timeoutMs: o.timeoutMs }));
  }

  /** DEL of a limit's key: forget its state. */
  async reset(key: string, o: { timeoutMs?: number } = {}): Promise<boolean> {
    const k = this.prefix + key;
    return num(await this.command(['DEL', k], k, o)) === 1;
  }

  /** RL.CLOCK (tests only; the server must be loaded with `test-clock yes`). Per node. */
  async clock(sub: 'GET' | 'SET' | 'ADVANCE' | 'REAL', ms?: Int): Promise<number | string> {
    const args: string[] = ['RL.CLOCK', sub];
    if (ms !== undefined) args.push(int('ms', ms));
    const r = await this.command(args);
    return typeof r === 'number' ? r : String(str(r));
  }

  /** Closes the connections the limiter opened: for exact RL.INFO replies (ioredis), and for
   * waiting calls (idle ones now, the others when answered; a later waiting call opens new
   * ones). The application's client is left open. */
  close(): Promise<void> {
    this.waitPool?.close();
    this.waitPool = undefined;
    return this.adapter.close();
  }
}

/** A limiter over an ioredis client (Redis or Cluster), a node-redis client (createClient or
 * createCluster), or any `{ send(args, key) }`. */
export function createLimiter(client: unknown, options?: LimiterOptions): Limiter {
  return new Limiter(client, options);
}
