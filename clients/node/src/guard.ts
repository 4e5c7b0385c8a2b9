// The framework-independent part of the HTTP middlewares: which limits apply to a request,
// one round trip to Redis for them, what to do when Redis cannot answer, the headers, and
// the answer (pass, 429, 503). The Express middleware and the Fastify plugin are thin
// shells around `createGuard`.

import { createHash } from 'node:crypto';
import { rateLimitHeaders, type HeaderItem } from './headers.js';
import { addressKey, clientAddress, Networks, type TrustedProxies } from './ip.js';
import { type Limiter } from './limiter.js';
import { MemoryLimiter } from './memory.js';
import type { Decision, Rule } from './types.js';

/** Request headers as Node gives them (lower-case names). */
export type Headers = Record<string, string | string[] | undefined>;

/** What a key function sees of a request. */
export interface RequestContext {
  /** The framework's request object (Express `req`, Fastify `request`). */
  req: any; // eslint-disable-line @typescript-eslint/no-explicit-any
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

export interface LimitSpec {
  /** The policy name: in the headers and in the Redis key. */
  name: string;
  rule: Rule;
  /** Who is counted (see `keys`). */
  key: KeyFunction;
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
}

/** Limits for some routes. */
export interface RouteLimits {
  /** A path (exact, or a prefix when it ends with "/*"), a RegExp, or a predicate. */
  path: string | RegExp | ((ctx: RequestContext) => boolean);
  /** Methods it applies to (default all). */
  methods?: string[];
  /** The limits of these routes; `false` exempts them. */
  limits: LimitSpec[] | false;
  /** true: these limits replace the global ones; false (default): they are added. */
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
   * failed-open / failed-closed: Redis failed and the limit let the request through / not. */
  source: 'redis' | 'fallback' | 'failed-open' | 'failed-closed';
  decision?: Decision;
  /** The module's reply when `decision.remaining` had the request's cost added back (a
   * rule that would have admitted, in an RL.ALL refused by another). */
  reply?: Decision;
  error?: unknown;
}

export interface DecisionEvent {
  ctx: RequestContext;
  /** What the client got: allowed (passed), refused (429), unavailable (503), exempt. */
  outcome: 'allowed' | 'refused' | 'unavailable' | 'exempt';
  /** A shadow limit would have refused this request. */
  shadowRefused: boolean;
  limits: LimitOutcome[];
  durationMs: number;
}

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
   * server, and on a cluster when `hashTag` is given; otherwise one command per limit (in
   * parallel; a refused request may then have spent on the limits that admitted it). */
  atomic?: boolean;
  /** Redis timeout per request, ms (default 50). */
  timeoutMs?: number;
  /** Every limit in shadow mode: spend and report, never refuse, no headers. */
  shadow?: boolean;
  /** draft-10 `RateLimit-Policy` / `RateLimit` (default true), legacy `X-RateLimit-*`
   * (default false). */
  headers?: { draft?: boolean; legacy?: boolean };
  /** Called after every checked request (metrics, logs). Must not throw. */
  onDecision?: (event: DecisionEvent) => void;
  /** The in-memory limiter used by `fallback` limits (default: a new one). */
  memory?: MemoryLimiter;
  logger?: { warn(msg: string): void; error(msg: string): void };
}

export interface GuardResult {
  status: 200 | 429 | 503;
  headers: Record<string, string>;
  /** The response body for 429 / 503 (an RFC 9457 problem). */
  body?: Record<string, unknown>;
  event: DecisionEvent;
}

export interface RouteOverride {
  limits?: LimitSpec[];
  replace?: boolean;
}

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

function matches(m: Matcher, ctx: RequestContext): boolean {
  if (typeof m === 'function') return m(ctx);
  if (m instanceof RegExp) return m.test(ctx.path);
  if (m.endsWith('/*')) {
    const base = m.slice(0, -2);
    return ctx.path === base || ctx.path.startsWith(`${base}/`);
  }
  return ctx.path === m;
}

/** Key functions for the usual identities. Each returns null when the request has no such
 * identity, so the limit does not apply (e.g. a user limit on an anonymous request). */
export const keys = {
  /** The client address (trusted proxies applied, IPv6 on its /64). */
  ip: (): KeyFunction => (ctx) => ctx.ip || null,
  /** A user id taken from the request (e.g. `(req) => req.user?.id`). */
  user: (get: (req: any) => string | number | null | undefined): KeyFunction => (ctx) => get(ctx.req), // eslint-disable-line @typescript-eslint/no-explicit-any
  /** An organisation / tenant id taken from the request. */
  org: (get: (req: any) => string | number | null | undefined): KeyFunction => (ctx) => get(ctx.req), // eslint-disable-line @typescript-eslint/no-explicit-any
  /** An API key from a header (default `x-api-key`; `authorization` takes a Bearer token),
   * stored as a SHA-256 prefix so that Redis never holds the secret. */
  apiKey: (o: { header?: string } = {}): KeyFunction => (ctx) => {
    const name = (o.header ?? 'x-api-key').toLowerCase();
    let v = ctx.headers[name];
    if (Array.isArray(v)) v = v[0];
    if (!v) return null;
    if (name === 'authorization') {
      const m = /^bearer\s+(\S+)\s*$/i.exec(v);
      if (!m) return null;
      v = m[1];
    }
    return createHash('sha256').update(v).digest('base64url').slice(0, 22);
  },
};

interface Planned {
  spec: LimitSpec;
  key: string;
  cost: number;
  shadow: boolean;
}

export interface Guard {
  /** Decides one request. `route` adds or replaces limits (a framework's per-route config). */
  check(ctx: Omit<RequestContext, 'ip'>, route?: RouteOverride | false): Promise<GuardResult>;
  readonly options: GuardOptions;
}

export function createGuard(options: GuardOptions): Guard {
  const { limiter } = options;
  if (!limiter || typeof limiter.check !== 'function') {
    throw new TypeError('redis-ratelimit: the guard needs `limiter` (createLimiter(client))');
  }
  const keyPrefix = options.keyPrefix ?? 'rl:';
  const timeoutMs = options.timeoutMs ?? 50;
  const v6Prefix = options.ipv6Prefix ?? 64;
  const trusted: TrustedProxies | undefined = Array.isArray(options.trustedProxies)
    ? new Networks(options.trustedProxies) : options.trustedProxies;
  const atomic = options.atomic ?? (!limiter.isCluster || !!options.hashTag);
  const memory = options.memory ?? new MemoryLimiter();
  const logger = options.logger ?? console;
  const headerOpts = options.headers ?? {};

  const report = (event: DecisionEvent): void => {
    if (!options.onDecision) return;
    try { options.onDecision(event); } catch (err) { logger.error(`redis-ratelimit: onDecision threw: ${String(err)}`); }
  };

  function limitsFor(ctx: RequestContext, route?: RouteOverride | false): LimitSpec[] | false {
    let list = options.limits ?? [];
    for (const r of options.routes ?? []) {
      if (!matches(r.path, ctx)) continue;
      if (r.methods && !r.methods.some((m) => m.toUpperCase() === ctx.method.toUpperCase())) continue;
      if (r.limits === false) return false;
      list = r.replace ? r.limits : [...list, ...r.limits];
      break;
    }
    if (route === false) return false;
    if (route?.limits) list = route.replace ? route.limits : [...list, ...route.limits];
    return list;
  }

  async function plan(ctx: RequestContext, specs: LimitSpec[]): Promise<Planned[]> {
    const tag = options.hashTag?.(ctx);
    const tagPart = tag ? `{${tag}}:` : '';
    const out: Planned[] = [];
    for (const spec of specs) {
      const id = await spec.key(ctx);
      if (id === null || id === undefined || id === '') continue;
      const cost = typeof spec.cost === 'function' ? await spec.cost(ctx) : (spec.cost ?? 1);
      out.push({ spec, key: `${keyPrefix}${tagPart}${spec.name}:${id}`, cost,
        shadow: spec.shadow ?? !!options.shadow });
    }
    return out;
  }

  // One promise per group; each resolves to decisions in the group's order.
  function send(group: Planned[]): Promise<{ decision: Decision; reply?: Decision }[]> {
    if (group.length === 1) {
      const [p] = group;
      return limiter.check(p.key, p.spec.rule, { cost: p.cost === 1 ? undefined : p.cost, timeoutMs })
        .then((d) => [{ decision: d }]);
    }
    return limiter.all(group.map((p) => ({ key: p.key, rule: p.spec.rule, cost: p.cost === 1 ? undefined : p.cost })),
      { timeoutMs }).then((r) => r.decisions.map((d, i) => {
      // Refused as a whole: nothing was spent anywhere. A rule that would have admitted
      // counted this request in its remaining (as DRYRUN does): add its cost back.
      if (r.allowed || !d.allowed) return { decision: d };
      return { decision: { ...d, remaining: Math.min(d.limit, d.remaining + group[i].cost) }, reply: d };
    }));
  }

  async function check(base: Omit<RequestContext, 'ip'>, route?: RouteOverride | false): Promise<GuardResult> {
    const started = performance.now();
    const ctx: RequestContext = {
      ...base,
      ip: (() => {
        const addr = clientAddress(base.remoteAddress, base.headers['x-forwarded-for'], trusted);
        return addressKey(addr, v6Prefix) ?? addr;
      })(),
    };
    const done = (status: 200 | 429 | 503, outcome: DecisionEvent['outcome'], limits: LimitOutcome[],
      headers: Record<string, string>, body?: Record<string, unknown>, shadowRefused = false): GuardResult => {
      const event: DecisionEvent = { ctx, outcome, shadowRefused, limits, durationMs: performance.now() - started };
      report(event);
      return { status, headers, body, event };
    };

    const exempt = (options.exempt ?? []).some((m) => matches(m, ctx));
    const specs = exempt ? false : limitsFor(ctx, route);
    if (specs === false || specs.length === 0) return done(200, 'exempt', [], {});
    const planned = await plan(ctx, specs);
    if (!planned.length) return done(200, 'exempt', [], {});

    // Enforced limits in one RL.ALL (atomic) or one command each; shadow limits on their own
    // so that a shadow refusal never stops an enforced limit from spending, and vice versa.
    const enforced = planned.filter((p) => !p.shadow);
    const groups: Planned[][] = [];
    if (atomic && enforced.length > 1) groups.push(enforced); else for (const p of enforced) groups.push([p]);
    for (const p of planned) if (p.shadow) groups.push([p]);

    const settled = await Promise.allSettled(groups.map(send));
    const outcomes: LimitOutcome[] = [];
    groups.forEach((group, gi) => {
      const s = settled[gi];
      group.forEach((p, i) => {
        const base = { name: p.spec.name, key: p.key, cost: p.cost, shadow: p.shadow };
        if (s.status === 'fulfilled') {
          outcomes.push({ ...base, source: 'redis', ...s.value[i] });
          return;
        }
        const err = s.reason;
        if (p.spec.fallback) {
          const rule = p.spec.fallback === true ? p.spec.rule : p.spec.fallback;
          outcomes.push({ ...base, source: 'fallback', decision: memory.check(p.key, rule, p.cost), error: err });
        } else {
          outcomes.push({ ...base, source: p.spec.failOpen === false && !p.shadow ? 'failed-closed' : 'failed-open', error: err });
        }
      });
    });
    for (const o of outcomes) {
      if (o.error !== undefined) {
        const msg = o.error instanceof Error ? o.error.message : String(o.error);
        const how = o.source === 'fallback' ? 'in-memory fallback' : o.source === 'failed-open' ? 'failing open' : 'failing closed';
        logger.warn(`redis-ratelimit: limit "${o.name}" could not reach Redis (${how}): ${msg}`);
      }
    }

    const shadowRefused = outcomes.some((o) => o.shadow && o.decision && !o.decision.allowed);
    const items: HeaderItem[] = outcomes
      .filter((o) => !o.shadow && o.decision)
      .map((o) => ({ name: o.name, rule: rule(o, planned), decision: o.decision!, basis: o.reply }));
    const headers = rateLimitHeaders(items, headerOpts);

    if (outcomes.some((o) => o.source === 'failed-closed')) {
      const h: Record<string, string> = { 'Retry-After': '1' };
      return done(503, 'unavailable', outcomes, h, {
        type: 'about:blank', title: 'Rate limiter unavailable', status: 503,
      }, shadowRefused);
    }
    const refused = outcomes.filter((o) => !o.shadow && o.decision && !o.decision.allowed);
    if (refused.length) {
      return done(429, 'refused', outcomes, headers, {
        type: QUOTA_EXCEEDED,
        title: 'Request cannot be satisfied as assigned quota has been exceeded',
        status: 429,
        'violated-policies': refused.map((o) => o.name),
      }, shadowRefused);
    }
    return done(200, 'allowed', outcomes, headers, undefined, shadowRefused);
  }

  function rule(o: LimitOutcome, planned: Planned[]): Rule {
    const p = planned.find((x) => x.key === o.key && x.spec.name === o.name)!;
    return o.source === 'fallback' && p.spec.fallback && p.spec.fallback !== true ? p.spec.fallback : p.spec.rule;
  }

  return { check, options };
}
