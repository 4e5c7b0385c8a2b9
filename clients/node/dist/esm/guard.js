// The framework-independent part of the HTTP middlewares: which limits apply to a request,
// one round trip to Redis for them, what to do when Redis cannot answer, the headers, and
// the answer (pass, 429, 503). The Express middleware and the Fastify plugin are thin
// shells around `createGuard`.
import { createHash } from 'node:crypto';
import { emissionInterval, quota, rateLimitHeaders } from './headers.js';
import { addressKey, clientAddress, Networks } from './ip.js';
import { Leases, LEASABLE } from './lease.js';
import { parseLimitString } from './limits.js';
import { LocalRefusals } from './local.js';
import { MemoryLimiter } from './memory.js';
import { rateRule } from './policy.js';
/** Redis failed less than `breakerMs` ago: the limit took its failure path without asking. */
export class CircuitOpenError extends Error {
    name = 'CircuitOpenError';
    constructor() { super('redis-ratelimit: Redis failed recently, not asked (breakerMs)'); }
}
/** Server error replies that mean the server cannot serve now (the same list as the Python
 * package's `UNAVAILABLE_REPLIES`). */
export const UNAVAILABLE_REPLIES = ['OOM', 'LOADING', 'MISCONF', 'READONLY',
    'CLUSTERDOWN', 'MASTERDOWN', 'BUSY', 'NOREPLICAS', 'TRYAGAIN'];
const UNAVAILABLE = new Set(UNAVAILABLE_REPLIES);
/** Whether an error means "Redis cannot answer": no reply (connection lost or refused, a
 * server that refuses the connection with `ERR max number of clients reached`, a timeout,
 * the breaker open) or an error reply whose code is one of `UNAVAILABLE_REPLIES` (out of
 * memory, loading, persistence failing, read-only, a cluster reconfiguring, busy): the limit
 * takes its failure path. Every other error reply (`ERR ...`, `WRONGTYPE`, `NOAUTH`,
 * `WRONGPASS`, `NOPERM`, ...: a bug, not an outage) and an invalid argument propagate (the
 * framework answers 500). */
export function isUnavailable(err) {
    if (err instanceof TypeError || err instanceof RangeError)
        return false;
    const m = err instanceof Error ? err.message : String(err);
    if (m.startsWith('ERR max number of clients reached'))
        return true;
    const code = /^([A-Z][A-Z_]+)(?: |$)/.exec(m);
    return !code || UNAVAILABLE.has(code[1]);
}
/** `ERR no such policy 'name'`: a limit names a policy the server does not have. */
export function isUnknownPolicy(err) {
    const m = err instanceof Error ? err.message : String(err);
    return /^ERR no such policy/.test(m);
}
const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
const QUOTA_TITLE = 'Request cannot be satisfied as assigned quota has been exceeded';
const REDUCED_CAPACITY = 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';
function matches(m, ctx) {
    if (typeof m === 'function')
        return m(ctx);
    if (m instanceof RegExp)
        return m.test(ctx.path);
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
    ip: () => (ctx) => ctx.ip || null,
    /** A user id taken from the request (e.g. `(req) => req.user?.id`). */
    user: (get) => (ctx) => get(ctx.req), // eslint-disable-line @typescript-eslint/no-explicit-any
    /** An organisation / tenant id taken from the request. */
    org: (get) => (ctx) => get(ctx.req), // eslint-disable-line @typescript-eslint/no-explicit-any
    /** An API key from a header (default `x-api-key`; `authorization` takes a Bearer token),
     * stored as a SHA-256 prefix so that Redis never holds the secret. */
    apiKey: (o = {}) => (ctx) => {
        const name = (o.header ?? 'x-api-key').toLowerCase();
        let v = ctx.headers[name];
        if (Array.isArray(v))
            v = v[0];
        if (!v)
            return null;
        if (name === 'authorization') {
            const m = /^bearer\s+(\S+)\s*$/i.exec(v);
            if (!m)
                return null;
            v = m[1];
        }
        return createHash('sha256').update(v).digest('base64url').slice(0, 22);
    },
};
/** A limit string's rules, parsed once. */
const parsedStrings = new Map();
function stringRules(text, algorithm) {
    const k = `${algorithm ?? 'sliding'}|${text}`;
    let r = parsedStrings.get(k);
    if (!r) {
        r = parseLimitString(text, algorithm ?? 'sliding');
        if (parsedStrings.size > 1000)
            parsedStrings.clear();
        parsedStrings.set(k, r);
    }
    return r;
}
/** A rule a lease can be taken on (TypeError otherwise). */
function checkLeaseRule(spec, rule) {
    if (!LEASABLE.has(rule.algorithm)) {
        throw new TypeError(`redis-ratelimit: limit "${spec.name}": a lease needs a gcra, tokenbucket or fixed rule (not ${rule.algorithm}: its refunds cannot give back exactly what a claim took, or it delays)`);
    }
}
/** A limit's configuration is valid (TypeError otherwise). `shadow`: the guard's. */
function checkSpec(spec, shadow = false) {
    if (!spec || typeof spec.name !== 'string' || spec.name === '')
        throw new TypeError('redis-ratelimit: a limit needs a name');
    if (typeof spec.rule === 'string')
        stringRules(spec.rule, spec.algorithm);
    if (spec.lease !== undefined) {
        const { chunk, ttlMs } = spec.lease;
        const bad = (why) => { throw new TypeError(`redis-ratelimit: limit "${spec.name}": ${why}`); };
        if (!Number.isSafeInteger(chunk) || chunk < 1)
            bad('lease.chunk must be an integer >= 1');
        if (ttlMs !== undefined && (!Number.isSafeInteger(ttlMs) || ttlMs < 1))
            bad('lease.ttlMs must be an integer >= 1');
        if (spec.policy !== undefined)
            bad('a lease needs the rule\'s numbers, not a policy (its rule can change under the lease)');
        if (spec.blockMs !== undefined)
            bad('a lease cannot be combined with blockMs');
        if (spec.waitMs !== undefined)
            bad('a lease cannot be combined with waitMs');
        if (spec.shadow ?? shadow)
            bad('a shadow limit cannot be leased');
        if (spec.rule && typeof spec.rule === 'object')
            checkLeaseRule(spec, spec.rule);
        if (typeof spec.rule === 'string')
            for (const r of stringRules(spec.rule, spec.algorithm))
                checkLeaseRule(spec, r);
    }
    const hasRule = spec.rule !== undefined && spec.rule !== null;
    const hasPolicy = typeof spec.policy === 'string' && spec.policy !== '';
    if (hasRule === hasPolicy) {
        throw new TypeError(`redis-ratelimit: limit "${spec.name}" needs a rule or a policy (one of them)`);
    }
    if (hasPolicy && spec.blockMs !== undefined) {
        throw new TypeError(`redis-ratelimit: limit "${spec.name}": a policy sets its own BLOCK (RL.POLICY SET ... BLOCK ms), no blockMs`);
    }
    if (spec.waitMs !== undefined) {
        if (!Number.isSafeInteger(spec.waitMs) || spec.waitMs < 0) {
            throw new TypeError(`redis-ratelimit: limit "${spec.name}": waitMs must be an integer >= 0`);
        }
        if (spec.blockMs !== undefined) {
            throw new TypeError(`redis-ratelimit: limit "${spec.name}": waitMs and blockMs cannot be combined (the module refuses WAIT with BLOCK)`);
        }
    }
}
/** A limit checked in its own command after the request's RL.ALL (BLOCK, WAIT or a lease). */
const alone = (p) => p.spec.blockMs !== undefined || p.spec.lease !== undefined || (!p.shadow && p.spec.waitMs !== undefined);
/** The version of a cached policy whose limit is `limit` (the current first). */
function versionFor(entry, limit) {
    for (const v of [entry?.current, entry?.candidate]) {
        const r = rateRule(v?.rule);
        if (v && r && quota(r) === limit)
            return v;
    }
    return undefined;
}
/** `list` with `extra` added (decision 2): a global limit with the name of one in `extra`
 * is dropped (the route's takes its place), then `extra` follows the remaining ones. */
function addLimits(list, extra) {
    const names = new Set(extra.map((l) => l.name));
    return [...list.filter((l) => !names.has(l.name)), ...extra];
}
/** An RL.ALL rule that would have admitted a refused request answered as if it had spent its
 * cost (as DRYRUN); nothing was spent: its real state has `cost` more remaining and, for
 * the GCRA family, `cost` emission intervals less to its reset. */
function unspent(d, rule, cost) {
    if (!d.allowed)
        return d;
    let reset = d.resetAfterMs;
    const ei = emissionInterval(rule);
    if (ei) {
        const [num, den] = ei;
        const v = BigInt(reset) * den - BigInt(cost) * num;
        reset = v <= 0n ? 0 : Number((v + den - 1n) / den);
    }
    return { ...d, remaining: Math.min(d.limit, d.remaining + cost), resetAfterMs: reset };
}
export function createGuard(options) {
    const { limiter } = options;
    if (!limiter || typeof limiter.check !== 'function') {
        throw new TypeError('redis-ratelimit: the guard needs `limiter` (createLimiter(client))');
    }
    const keyPrefix = options.keyPrefix ?? 'rl:';
    const timeoutMs = options.timeoutMs ?? 50;
    const v6Prefix = options.ipv6Prefix ?? 64;
    const trusted = Array.isArray(options.trustedProxies)
        ? new Networks(options.trustedProxies) : options.trustedProxies;
    const memory = options.memory ?? new MemoryLimiter();
    const logger = options.logger ?? console;
    const headerOpts = options.headers ?? {};
    const refreshMs = options.policyRefreshMs ?? 5000;
    const clock = options.clockMs ?? Date.now;
    for (const l of options.limits ?? [])
        checkSpec(l, !!options.shadow);
    for (const r of options.routes ?? [])
        if (r.limits)
            for (const l of r.limits)
                checkSpec(l, !!options.shadow);
    const lr = options.localRefusals;
    const local = lr ? new LocalRefusals(typeof lr === 'object' ? lr.maxKeys ?? 10000 : 10000) : undefined;
    const leases = new Leases({
        limiter, clockMs: clock, timeoutMs, timers: options.leaseTimers,
        onError: (err, key) => logger.warn(`redis-ratelimit: the lease of ${key} could not be given back: ${err instanceof Error ? err.message : String(err)}`),
    });
    const lists = new WeakMap();
    const listsOf = (spec) => {
        let l = lists.get(spec);
        if (!l) {
            l = { allow: new Set([...(spec.allow ?? [])].map(String)), deny: new Set([...(spec.deny ?? [])].map(String)) };
            lists.set(spec, l);
        }
        return l;
    };
    const defaultKey = keys.ip();
    const report = (event) => {
        if (!options.onDecision)
            return;
        try {
            options.onDecision(event);
        }
        catch (err) {
            logger.error(`redis-ratelimit: onDecision threw: ${String(err)}`);
        }
    };
    function limitsFor(ctx, route) {
        let list = options.limits ?? [];
        for (const r of options.routes ?? []) {
            if (!matches(r.path, ctx))
                continue;
            if (r.methods && !r.methods.some((m) => m.toUpperCase() === ctx.method.toUpperCase()))
                continue;
            if (r.limits === false)
                return false;
            list = r.replace ? r.limits : addLimits(list, r.limits);
            break;
        }
        if (route === false)
            return false;
        if (route?.limits)
            list = route.replace ? route.limits : addLimits(list, route.limits);
        return list;
    }
    async function plan(ctx, specs) {
        const tag = options.hashTag?.(ctx);
        const tagPart = tag ? `{${tag}}:` : '';
        const out = [];
        for (const spec of specs) {
            checkSpec(spec, !!options.shadow);
            const id = await (spec.key ?? defaultKey)(ctx);
            if (id === null || id === undefined || id === '')
                continue;
            const { allow, deny } = listsOf(spec);
            if (allow.has(String(id)))
                continue;
            const cost = typeof spec.cost === 'function' ? await spec.cost(ctx) : (spec.cost ?? 1);
            const shadow = spec.shadow ?? !!options.shadow;
            const denied = deny.has(String(id));
            if (spec.policy !== undefined && spec.rule === undefined) {
                out.push({ spec, name: spec.name, key: `${keyPrefix}${tagPart}${spec.name}:${id}`, cost, shadow, denied });
                continue;
            }
            const given = typeof spec.rule === 'function' ? await spec.rule(ctx) : spec.rule;
            const rules = typeof given === 'string' ? stringRules(given, spec.algorithm) : [given];
            rules.forEach((rule, i) => {
                if (spec.lease)
                    checkLeaseRule(spec, rule);
                const name = rules.length > 1 ? `${spec.name}-${i + 1}` : spec.name;
                out.push({ spec, name, rule, key: `${keyPrefix}${tagPart}${name}:${id}`, cost, shadow, denied });
            });
        }
        return { planned: out, tagged: !!tag };
    }
    const breakerMs = options.breakerMs ?? 1000;
    const now = options.now ?? (() => performance.now());
    let openUntil = -Infinity;
    const circuitOpen = () => breakerMs > 0 && now() < openUntil;
    // Policies: the rules for the headers, read with RL.POLICY GET (from the node of the key
    // that decided) and cached per limiter; read again when older than policyRefreshMs, or
    // when the reply's limit is neither the cached current version's nor the candidate's.
    const rules = limiter.policyRules;
    async function resolve(p, d) {
        const name = p.spec.policy;
        let entry = rules.peek(name);
        let v;
        try {
            const t = now();
            let fresh = false;
            if (!entry || t - entry.at >= refreshMs || t < entry.at) {
                entry = await rules.refresh(name, p.key, t, timeoutMs);
                fresh = true;
            }
            v = versionFor(entry, d.limit);
            if (!v && !fresh)
                v = versionFor(entry = await rules.refresh(name, p.key, t, timeoutMs), d.limit);
        }
        catch (err) {
            // not read: the decision stands; a cached version may still name the rule
            v = versionFor(entry, d.limit);
            logger.warn(`redis-ratelimit: policy "${name}" could not be read for the headers: ${err instanceof Error ? err.message : String(err)}`);
        }
        if (!v)
            return { rule: null, show: false };
        return { rule: rateRule(v.rule), show: v.mode !== 'shadow', version: v.version, mode: v.mode };
    }
    const resolveAll = (group, ds) => Promise.all(group.map((p, i) => (p.spec.policy ? resolve(p, ds[i]) : undefined)));
    // One command for a group: its decisions in the group's order, or the failure (Redis
    // unavailable, or not asked while the breaker is open). Other errors propagate.
    async function send(group) {
        if (circuitOpen())
            return { ok: false, error: new CircuitOpenError() };
        const cost = (p) => (p.cost === 1 ? undefined : p.cost);
        try {
            if (group.length === 1 && group[0].spec.lease) {
                const [p] = group;
                const r = await leases.take(p.key, p.rule, p.cost, p.spec.lease);
                return { ok: true, decisions: [{ decision: r.decision, timing: r.timing, local: r.local, ...(r.reply ? { reply: r.reply } : {}) }] };
            }
            if (group.length === 1) {
                const [p] = group;
                const waitMs = p.shadow ? undefined : p.spec.waitMs;
                if (p.spec.policy) {
                    const d = await limiter.allow(p.key, p.spec.policy, { cost: cost(p), waitMs, timeoutMs });
                    return { ok: true, decisions: [{ decision: d, resolved: await resolve(p, d) }] };
                }
                const d = await limiter.check(p.key, p.rule, { cost: cost(p), blockMs: p.spec.blockMs, waitMs, timeoutMs });
                return { ok: true, decisions: [{ decision: d }] };
            }
            const r = await limiter.all(group.map((p) => (p.spec.policy
                ? { key: p.key, policy: p.spec.policy, cost: cost(p) }
                : { key: p.key, rule: p.rule, cost: cost(p) })), { timeoutMs });
            const resolved = await resolveAll(group, r.decisions);
            return {
                ok: true,
                refusedBy: r.refusedBy,
                // Refused as a whole: nothing was spent anywhere; a rule that would have admitted
                // answered as if it had spent: report its real state.
                decisions: r.decisions.map((d, i) => {
                    const rl = group[i].spec.policy ? resolved[i].rule : group[i].rule;
                    return r.allowed || !d.allowed ? { decision: d, resolved: resolved[i] }
                        : { decision: rl ? unspent(d, rl, group[i].cost) : { ...d, remaining: Math.min(d.limit, d.remaining + group[i].cost) },
                            reply: d, resolved: resolved[i] };
                }),
            };
        }
        catch (err) {
            // An unknown policy: the limits of this command take their failure path, as when
            // Redis fails (but Redis is up: the breaker stays closed).
            if (group.some((p) => p.spec.policy) && isUnknownPolicy(err))
                return { ok: false, error: err };
            if (!isUnavailable(err))
                throw err;
            openUntil = now() + breakerMs;
            return { ok: false, error: err };
        }
    }
    async function check(base, route) {
        const started = performance.now();
        const ctx = {
            ...base,
            ip: (() => {
                const addr = clientAddress(base.remoteAddress, base.headers['x-forwarded-for'], trusted);
                return addressKey(addr, v6Prefix) ?? addr;
            })(),
        };
        let refusedBy;
        const done = (status, outcome, limits, headers, body, shadowRefused = false) => {
            const event = { ctx, outcome, shadowRefused, limits, refusedBy, durationMs: performance.now() - started };
            report(event);
            const delayMs = status !== 200 ? 0 : Math.max(0, ...limits
                .filter((o) => !o.shadow && o.source === 'redis' && o.decision?.delayMs)
                .map((o) => o.decision.delayMs));
            return { status, headers, body, event, delayMs };
        };
        const exempt = (options.exempt ?? []).some((m) => matches(m, ctx));
        const specs = exempt ? false : limitsFor(ctx, route);
        if (specs === false || specs.length === 0)
            return done(200, 'exempt', [], {});
        const { planned: all, tagged } = await plan(ctx, specs);
        if (!all.length)
            return done(200, 'exempt', [], {});
        // A denied identity: 403 at once, no Redis call for any limit, no rate-limit headers.
        // (A shadow limit's deny list only reports.)
        const denied = all.filter((p) => p.denied);
        if (denied.length) {
            const outs = denied.map((p) => ({ name: p.name, key: p.key, cost: p.cost, shadow: p.shadow, source: 'deny' }));
            const enforcedDeny = denied.filter((p) => !p.shadow);
            if (enforcedDeny.length) {
                return done(403, 'denied', outs, {}, {
                    type: 'about:blank', title: 'Forbidden', status: 403,
                    'violated-policies': enforcedDeny.map((p) => p.name),
                }, outs.some((o) => o.shadow));
            }
        }
        // A cost above a limit's limit (burst, capacity or window limit) can never be admitted
        // (the module would answer ERR COST must not exceed ...): refused here, before Redis is
        // asked (nothing spent on any limit), by that limit, without Retry-After (waiting does
        // not help) nor RateLimit headers. A shadow limit only reports it and is not sent.
        // (A policy limit's numbers are not known before the reply: it is sent, and the module
        // answers `ERR COST must not exceed ...`, an error that is not a Redis failure.)
        const oversized = all.filter((p) => p.rule && p.cost > quota(p.rule));
        const planned = all.filter((p) => !oversized.includes(p));
        const costOutcomes = oversized.map((p) => ({
            name: p.name, key: p.key, cost: p.cost, shadow: p.shadow, source: 'cost'
        }));
        const tooCostly = oversized.filter((p) => !p.shadow);
        if (tooCostly.length) {
            return done(429, 'refused', costOutcomes, {}, {
                type: QUOTA_EXCEEDED, title: QUOTA_TITLE, status: 429,
                'violated-policies': tooCostly.map((p) => p.name),
                detail: tooCostly.map((p) => `request cost ${p.cost} exceeds limit '${p.name}' (${quota(p.rule)}): it can never be admitted`).join('; '),
            }, costOutcomes.some((o) => o.shadow));
        }
        // Local refusals: a (limit, identity) the server refused less than its retry_after_ms
        // ago, at a cost at least this one's, is refused here without a Redis call.
        if (local) {
            const t = clock();
            const hits = planned.flatMap((p) => {
                if (p.shadow || p.spec.waitMs !== undefined)
                    return [];
                const e = local.find(p.key, p.cost, t);
                return e ? [{ p, left: e.until - t }] : [];
            });
            if (hits.length) {
                const outs = hits.map(({ p, left }) => ({
                    name: p.name, key: p.key, cost: p.cost, shadow: false, source: 'local',
                    decision: { allowed: false, limit: p.rule ? quota(p.rule) : 0, remaining: 0, retryAfterMs: left, resetAfterMs: left },
                }));
                const items = hits.flatMap(({ p }, i) => {
                    const rule = p.rule ?? (p.spec.policy ? rateRule(rules.peek(p.spec.policy)?.current?.rule) : null);
                    return rule ? [{ name: p.name, rule, decision: { ...outs[i].decision, limit: quota(rule) } }] : [];
                });
                const headers = rateLimitHeaders(items, headerOpts);
                if (!headers['Retry-After'])
                    headers['Retry-After'] = String(Math.max(...hits.map((h) => Math.ceil(h.left / 1000))));
                return done(429, 'refused', outs, headers, {
                    type: QUOTA_EXCEEDED, title: QUOTA_TITLE, status: 429, 'violated-policies': outs.map((o) => o.name),
                });
            }
        }
        const atomic = options.atomic ?? (!limiter.isCluster || tagged);
        // Enforced limits in one RL.ALL (atomic) or one command each; shadow limits in another
        // (as they would be decided if enforced), so that a shadow refusal never stops an
        // enforced limit from spending, and vice versa. Limits with a block or a wait (RL.ALL
        // takes no BLOCK, no WAIT) each in their own command; an enforced one only after the
        // others admitted.
        const enforced = planned.filter((p) => !p.shadow && !alone(p));
        const shadows = planned.filter((p) => p.shadow && !alone(p));
        const blocking = planned.filter((p) => !p.shadow && alone(p));
        const groups = [];
        for (const g of [enforced, shadows]) {
            if (atomic && g.length > 1)
                groups.push(g);
            else
                for (const p of g)
                    groups.push([p]);
        }
        for (const p of planned)
            if (p.shadow && alone(p))
                groups.push([p]);
        const outcomes = [...costOutcomes];
        // The rule of each outcome's header item (none: no item).
        const headerRule = new Map();
        // A leased limit's `t` comes from its claim's reply as it is (not the units held).
        const headerTiming = new Map();
        const collect = (gs, settled) => {
            gs.forEach((group, gi) => {
                const s = settled[gi];
                if (s.ok && s.refusedBy !== undefined && !group[0].shadow)
                    refusedBy = s.refusedBy;
                group.forEach((p, i) => {
                    const base = { name: p.name, key: p.key, cost: p.cost, shadow: p.shadow };
                    if (p.spec.policy)
                        base.policy = { name: p.spec.policy };
                    if (s.ok) {
                        const { decision, reply, resolved, local: fromLease, timing } = s.decisions[i];
                        const o = { ...base, source: fromLease ? 'lease' : 'redis', decision, ...(reply ? { reply } : {}) };
                        if (timing)
                            headerTiming.set(o, timing);
                        if (resolved) {
                            o.policy = { name: p.spec.policy, version: resolved.version, mode: resolved.mode };
                            if (resolved.show && resolved.rule)
                                headerRule.set(o, resolved.rule);
                        }
                        else if (p.rule)
                            headerRule.set(o, p.rule);
                        outcomes.push(o);
                        return;
                    }
                    const err = s.error;
                    const fallback = p.spec.fallback === true
                        ? (p.rule ?? rateRule(rules.peek(p.spec.policy)?.current?.rule)) : p.spec.fallback;
                    if (fallback) {
                        const o = { ...base, source: 'fallback', decision: memory.check(p.key, fallback, p.cost), error: err };
                        headerRule.set(o, fallback);
                        outcomes.push(o);
                    }
                    else {
                        outcomes.push({ ...base, source: p.spec.failOpen === false && !p.shadow ? 'fail-closed' : 'fail-open', error: err });
                    }
                });
            });
        };
        collect(groups, await Promise.all(groups.map(send)));
        // A limit that could not be checked does not stop the block limits (the module did not
        // refuse the request); a refusal by the module does.
        const stopped = () => outcomes.some((o) => !o.shadow && o.source === 'redis' && !o.decision.allowed);
        // One after the other, in the limits' order: a block (or wait) limit that refuses keeps
        // the next ones from being asked (and from blocking too).
        for (const p of blocking) {
            if (stopped())
                break;
            collect([[p]], [await send([p])]);
        }
        for (const o of outcomes) {
            if (o.error !== undefined && !(o.error instanceof CircuitOpenError)) {
                const msg = o.error instanceof Error ? o.error.message : String(o.error);
                const how = o.source === 'fallback' ? 'in-memory fallback' : o.source === 'fail-open' ? 'failing open' : 'failing closed';
                logger.warn(`redis-ratelimit: limit "${o.name}" could not reach Redis (${how}): ${msg}`);
            }
        }
        const shadowRefused = outcomes.some((o) => o.shadow && (o.source === 'cost' || (o.decision && !o.decision.allowed)));
        // Headers in the order of the limits' configuration.
        const ordered = all.flatMap((p) => outcomes.filter((o) => o.key === p.key && o.name === p.name));
        if (local) {
            // what the server said feeds the local-refusal cache
            const t = clock();
            for (const p of all) {
                if (p.shadow || p.spec.waitMs !== undefined)
                    continue;
                const o = outcomes.find((x) => x.key === p.key && x.name === p.name);
                if (!o || o.source !== 'redis' || !o.decision)
                    continue;
                if (o.decision.allowed)
                    local.admitted(p.key);
                else
                    local.refused(p.key, p.cost, o.decision.retryAfterMs, t);
            }
        }
        const items = ordered
            .filter((o) => !o.shadow && o.decision && headerRule.has(o))
            .map((o) => ({ name: o.name, rule: headerRule.get(o), decision: o.decision, timing: headerTiming.get(o) }));
        const headers = rateLimitHeaders(items, headerOpts);
        // A refusal wins over an unavailable limit (429 with its Retry-After, not 503).
        const refused = ordered.filter((o) => !o.shadow && o.decision && !o.decision.allowed);
        if (refused.length) {
            return done(429, 'refused', ordered, headers, {
                type: QUOTA_EXCEEDED,
                title: QUOTA_TITLE,
                status: 429,
                'violated-policies': refused.map((o) => o.name),
            }, shadowRefused);
        }
        const closed = ordered.filter((o) => o.source === 'fail-closed');
        if (closed.length) {
            return done(503, 'unavailable', ordered, { 'Retry-After': '1' }, {
                type: REDUCED_CAPACITY, title: 'Rate limiter unavailable', status: 503,
                'violated-policies': closed.map((o) => o.name),
            }, shadowRefused);
        }
        return done(200, 'allowed', ordered, headers, undefined, shadowRefused);
    }
    return {
        check,
        options,
        close: () => leases.close(),
        leases: () => leases.snapshot(),
        get localRefusals() { return local?.size ?? 0; },
    };
}
