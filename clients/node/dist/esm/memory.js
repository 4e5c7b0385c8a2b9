// An in-process limiter that decides exactly as the module does: the same algorithms with
// the module's integer arithmetic (src/algo/*.rs: GCRA's ticks of 1/count ns, the window
// counters' µs products, the exact log), the same options (COST, 0 peeks; DRYRUN; RESERVE;
// PARTIAL; REFUND) and RL.ALL's all-or-nothing, on the replies' five fields (plus delay_ms
// for QUEUE and granted with PARTIAL). Integers are BigInt where µs products exceed 2^53.
//
// Two uses:
//  - the middleware's per-limit `fallback` when Redis cannot answer (`check(key, rule, cost)`);
//  - a stand-in for a server in tests and in the conformance spec's second pass:
//    `createLimiter(memoryLimiter)` (it is a custom client: `send(args)` answers RL.GCRA,
//    RL.TOKENBUCKET, RL.SLIDING, RL.FIXED, RL.LOG, RL.QUEUE and RL.ALL).
// It is per process: N processes admit up to N times the limit while they run on it, so give
// a fallback a rule scaled down accordingly if that matters. State lives in a Map bounded by
// `maxKeys` (the least recently written keys go first: a dropped key starts fresh).
const NS_PER_MS = 1000000n;
const US_PER_MS = 1000n;
const MAX_SPAN_MS = 1000000000000n;
const MAX_TIME_MS = 10000000000000n;
const MAX_TAT_NS = (MAX_TIME_MS + MAX_SPAN_MS) * NS_PER_MS;
const big = (v) => BigInt(v);
const max = (a, b) => (a > b ? a : b);
const min = (a, b) => (a < b ? a : b);
const sub0 = (a, b) => (a > b ? a - b : 0n);
const ceilDiv = (a, b) => (a + b - 1n) / b;
const tOf = (p) => p.period * NS_PER_MS;
const tauOf = (p) => p.burst * tOf(p);
const tickMs = (p) => NS_PER_MS * p.count;
const ticksOf = (p, nowUs) => nowUs * 1000n * p.count;
const sameBucket = (a, b) => a.burst === b.burst && a.count === b.count && a.period === b.period;
const sameInterval = (a, b) => a.period * b.count === b.period * a.count;
function rescale(x, from, to) {
    if (from === to)
        return x;
    return (x / from) * to + ceilDiv((x % from) * to, from);
}
/** gcra.rs `view`: the stored state read under `p` at `nowUs`. */
function view(s, p, nowUs) {
    const now = ticksOf(p, nowUs);
    if (!s)
        return { now, at: now, tat: now, retimed: false };
    const o = s.p;
    let tat;
    let retimed = false;
    if (sameBucket(o, p))
        tat = s.ticks;
    else if (sameInterval(o, p))
        tat = rescale(s.ticks, o.count, p.count);
    else {
        const ownAt = max(ticksOf(o, nowUs), sub0(s.ticks, tauOf(o)));
        const units = ceilDiv(sub0(s.ticks, ownAt), tOf(o));
        const at = max(rescale(ownAt, o.count, p.count), now);
        const lead = min(units * tOf(p), MAX_SPAN_MS * tickMs(p));
        tat = min(at + lead, MAX_TAT_NS * p.count);
        retimed = true;
    }
    return { now, at: max(now, sub0(tat, tauOf(p))), tat: max(tat, now), retimed };
}
/** gcra.rs `decide_in`: the decision and the TAT to store (undefined: nothing). */
function bucketDecide(v, p, cost) {
    const t = tOf(p);
    const tau = tauOf(p);
    const next = v.tat + cost * t;
    const tm = tickMs(p);
    if (next - v.at <= tau) {
        return [{ allowed: true, limit: p.burst, remaining: (tau - (next - v.at)) / t, retry: 0n,
                reset: ceilDiv(next - v.now, tm) }, next];
    }
    return [{ allowed: false, limit: p.burst, remaining: sub0(tau, v.tat - v.at) / t,
            retry: ceilDiv(next - tau - v.now, tm), reset: ceilDiv(v.tat - v.now, tm) }, v.retimed ? v.tat : undefined];
}
function windowStart(atMs, w, offMs) {
    const off = offMs % w;
    return sub0(atMs, (atMs % w + w - off) % w);
}
const effectiveUs = (c, nowUs) => (c ? max(nowUs, c.start * US_PER_MS) : nowUs);
/** window.rs `roll`. */
function roll(c, p, atUs) {
    const w = p.w;
    const start = windowStart(atUs / US_PER_MS, w, p.off);
    const out = { start, prev: 0n, cur: 0n };
    if (!c)
        return out;
    const prevStart = sub0(c.start, 1n);
    for (const [at, n] of [[c.start, c.cur], [prevStart, c.prev]]) {
        if (n === 0n)
            continue;
        const ws = windowStart(at, w, p.off);
        if (ws >= start)
            out.cur += n;
        else if (ws + w === start)
            out.prev += n;
    }
    return out;
}
const msUntil = (atUs, nowUs) => ceilDiv(sub0(atUs, nowUs), US_PER_MS);
function slidingReset(c, wUs, nowUs) {
    const startUs = c.start * US_PER_MS;
    if (c.cur > 0n)
        return msUntil(startUs + 2n * wUs, nowUs);
    if (c.prev > 0n)
        return msUntil(startUs + wUs, nowUs);
    return 0n;
}
function windowDecide(s, p, fixedWindow, cost, nowUs) {
    const atUs = effectiveUs(s, nowUs);
    const c = roll(s, p, atUs);
    const wUs = p.w * US_PER_MS;
    if (fixedWindow) {
        c.prev = 0n;
        const toEnd = msUntil((c.start + p.w) * US_PER_MS, nowUs);
        const used = c.cur + cost;
        if (used <= p.limit) {
            return [{ allowed: true, limit: p.limit, remaining: p.limit - used, retry: 0n, reset: used > 0n ? toEnd : 0n },
                { ...c, cur: used }];
        }
        return [{ allowed: false, limit: p.limit, remaining: sub0(p.limit, c.cur), retry: toEnd, reset: c.cur > 0n ? toEnd : 0n }, undefined];
    }
    const startUs = c.start * US_PER_MS;
    const e = atUs - startUs;
    const cap = p.limit * wUs;
    const est = c.prev * (wUs - e) + c.cur * wUs;
    const wanted = cost * wUs;
    if (est + wanted <= cap) {
        const n = { ...c, cur: c.cur + cost };
        return [{ allowed: true, limit: p.limit, remaining: (cap - (est + wanted)) / wUs, retry: 0n, reset: slidingReset(n, wUs, nowUs) }, n];
    }
    let roomAt;
    const room = p.limit - (c.cur + cost);
    if (room >= 0n && c.prev > 0n) {
        const keep = min(room * wUs / c.prev, wUs);
        roomAt = startUs + wUs - keep;
    }
    else {
        const r = sub0(p.limit, cost);
        const keep = c.cur === 0n ? wUs : min(r * wUs / c.cur, wUs);
        roomAt = startUs + 2n * wUs - keep;
    }
    return [{ allowed: false, limit: p.limit, remaining: sub0(cap, est) / wUs, retry: max(msUntil(roomAt, nowUs), 1n),
            reset: slidingReset(c, wUs, nowUs) }, undefined];
}
function logHit(s, p, cost, nowUs, commit) {
    const w = p.w * US_PER_MS;
    const e = s.entries;
    const at = e.length ? max(e[e.length - 1], nowUs) : nowUs;
    let first = 0;
    while (first < e.length && e[first] + w <= at)
        first++;
    const live = BigInt(e.length - first);
    const resetMs = () => (live > 0n && e.length ? msUntil(e[e.length - 1] + w, nowUs) : 0n);
    if (live + cost <= p.limit) {
        const reset = cost > 0n ? msUntil(at + w, nowUs) : resetMs();
        if (commit && cost > 0n) {
            e.splice(0, first);
            for (let i = 0n; i < cost; i++)
                e.push(at);
            s.p = p;
        }
        return { allowed: true, limit: p.limit, remaining: p.limit - live - cost, retry: 0n, reset };
    }
    const k = Number(live + cost - p.limit);
    const leaves = first + k - 1 < e.length ? e[first + k - 1] + w : at;
    return { allowed: false, limit: p.limit, remaining: sub0(p.limit, live), retry: max(msUntil(leaves, nowUs), 1n), reset: resetMs() };
}
/** CRC16/XMODEM of the key or its hash tag, mod 16384 (STAGGER's offset). */
function keySlot(key) {
    let k = key;
    const open = k.indexOf('{');
    if (open >= 0) {
        const close = k.indexOf('}', open + 1);
        if (close > open + 1)
            k = k.slice(open + 1, close);
    }
    let crc = 0;
    for (const b of Buffer.from(k)) {
        crc ^= b << 8;
        for (let i = 0; i < 8; i++)
            crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc % 16384;
}
class ModuleError extends Error {
}
const ALGOS = new Set(['gcra', 'tokenbucket', 'sliding', 'fixed', 'log', 'queue']);
function limitOf(rule) {
    switch (rule.algorithm) {
        case 'gcra': return big(rule.burst);
        case 'tokenbucket':
        case 'queue': return big(rule.capacity);
        default: return big(rule.limit);
    }
}
export class MemoryLimiter {
    state = new Map();
    maxKeys;
    now;
    constructor(o = {}) {
        this.maxKeys = o.maxKeys ?? 10000;
        this.now = o.now ?? Date.now;
    }
    get size() { return this.state.size; }
    /** Forgets every key. */
    clear() { this.state.clear(); }
    put(key, s) {
        this.state.delete(key);
        this.state.set(key, s);
        while (this.state.size > this.maxKeys) {
            const oldest = this.state.keys().next().value;
            if (oldest === undefined)
                break;
            this.state.delete(oldest);
        }
    }
    /** Decides and (if admitted) spends `cost` units of `rule` on `key` (0 peeks): the
     * middleware's fallback. A cost above the rule's limit (a fallback rule smaller than the
     * limit's own) is refused, never admissible: nothing spent, `retryAfterMs` the time to a
     * fresh key (at least 1). */
    check(key, rule, cost = 1) {
        if (big(cost) > limitOf(rule)) {
            const p = this.rate(key, rule, { cost: 0 });
            return { ...p, allowed: false, retryAfterMs: Math.max(1, p.resetAfterMs) };
        }
        return this.rate(key, rule, { cost });
    }
    /** One rate command with the module's options (`RL.<ALG> key ... [COST n | REFUND n]
     * [PARTIAL] [RESERVE r] [DRYRUN]`). A cost above the limit without `partial`, or `reserve`
     * at or above it, throws as the module answers an error. */
    rate(key, rule, o = {}) {
        const req = this.request(rule, o);
        const nowUs = BigInt(this.now()) * US_PER_MS;
        const [d, extra] = this.decide(key, rule, req, nowUs);
        return this.decision(d, rule, extra, req);
    }
    /** RL.ALL: every rule admits, or nothing is spent (each rule's reply says what it alone
     * would have decided). */
    all(entries, o = {}) {
        if (!entries.length)
            throw new TypeError('redis-ratelimit: all() needs at least one entry');
        const keys = new Set(entries.map((e) => e.key));
        if (keys.size !== entries.length)
            throw new ModuleError('ERR RL.ALL: a key appears twice');
        const nowUs = BigInt(this.now()) * US_PER_MS;
        const reqs = entries.map((e) => this.request(e.rule, { cost: e.cost, reserve: e.reserve, dryrun: true }));
        const decided = entries.map((e, i) => this.decide(e.key, e.rule, reqs[i], nowUs));
        const refused = decided.findIndex(([d]) => !d.allowed);
        let out = decided;
        if (refused < 0 && !o.dryrun) {
            out = entries.map((e, i) => this.decide(e.key, e.rule, { ...reqs[i], commit: true }, nowUs));
        }
        return {
            allowed: refused < 0,
            refusedBy: refused + 1,
            decisions: out.map(([d, extra], i) => this.decision(d, entries[i].rule, extra, reqs[i])),
        };
    }
    request(rule, o) {
        if (!rule || !ALGOS.has(rule.algorithm))
            throw new TypeError(`redis-ratelimit: unknown algorithm ${String(rule && rule.algorithm)}`);
        const limit = limitOf(rule);
        const reserve = o.reserve === undefined ? 0n : big(o.reserve);
        const partial = !!o.partial;
        const commit = !o.dryrun;
        if (o.refund !== undefined) {
            const n = big(o.refund);
            if (n < 1n)
                throw new ModuleError('ERR refund must be a positive integer');
            if (partial || reserve > 0n)
                throw new ModuleError('ERR syntax error');
            return { cost: 0n, refund: n, partial: false, reserve: 0n, commit };
        }
        const cost = o.cost === undefined ? 1n : big(o.cost);
        if (cost < 0n)
            throw new ModuleError('ERR cost must not be negative');
        if (cost === 0n && (partial || reserve > 0n))
            throw new ModuleError('ERR syntax error');
        if (cost > limit && !partial)
            throw new ModuleError(`ERR COST must not exceed the limit (${limit})`);
        if (reserve > 0n && reserve >= limit)
            throw new ModuleError('ERR RESERVE must be below the limit');
        if (!partial && cost + reserve > limit)
            throw new ModuleError('ERR COST plus RESERVE must not exceed the limit');
        return { cost, partial, reserve, commit };
    }
    /** The reply's fields (numbers; they fit) with the options' extra fields. */
    decision(d, rule, extra, req) {
        const out = { allowed: d.allowed, limit: Number(d.limit), remaining: Number(d.remaining),
            retryAfterMs: Number(d.retry), resetAfterMs: Number(d.reset) };
        if (rule.algorithm === 'queue')
            out.delayMs = Number(extra.delay ?? 0n);
        if (req.partial)
            out.granted = Number(extra.granted ?? 0n);
        return out;
    }
    /** rule.rs `unblocked`: a peek, a refund, a plain spend or one with PARTIAL / RESERVE. */
    decide(key, rule, req, nowUs) {
        const prior = this.state.get(key);
        if (prior && prior.kind !== rule.algorithm) {
            throw new ModuleError(`WRONGTYPE key holds a ratelimit state of another algorithm (${prior.kind})`);
        }
        if (req.refund !== undefined) {
            if (prior && req.commit)
                this.refund(key, prior, rule, req.refund, nowUs);
            const after = req.commit || !prior ? this.state.get(key) : this.copyRefunded(key, prior, rule, req.refund, nowUs);
            return this.peek(key, after, rule, nowUs);
        }
        if (req.cost === 0n)
            return this.peek(key, prior, rule, nowUs);
        if (!req.partial && req.reserve === 0n)
            return this.spend(key, prior, rule, req.cost, nowUs, req.commit);
        // spend_with_options
        const avail = this.spend(key, prior, rule, 0n, nowUs, false)[0].remaining;
        const room = sub0(avail, req.reserve);
        const grant = req.partial ? min(req.cost, room) : req.cost <= room ? req.cost : 0n;
        let out;
        if (grant > 0n)
            out = this.spend(key, prior, rule, grant, nowUs, req.commit);
        else
            out = this.spend(key, prior, rule, (req.partial ? 1n : req.cost) + req.reserve, nowUs, req.commit);
        if (req.partial)
            out[1].granted = out[0].allowed ? grant : 0n;
        return out;
    }
    peek(key, s, rule, nowUs) {
        const [d, extra] = this.spend(key, s, rule, 0n, nowUs, false);
        return [{ ...d, allowed: true, retry: 0n }, extra];
    }
    copyRefunded(key, s, rule, n, nowUs) {
        const copy = s.kind === 'log' ? { ...s, entries: [...s.entries] } : { ...s };
        const m = new MemoryLimiter({ now: this.now });
        m.state.set(key, copy);
        m.refund(key, copy, rule, n, nowUs);
        return m.state.get(key);
    }
    refund(key, s, rule, n, nowUs) {
        switch (rule.algorithm) {
            case 'gcra':
            case 'tokenbucket':
            case 'queue': {
                const p = bucketOf(rule);
                const v = view(s, p, nowUs);
                const ticks = max(sub0(v.tat, n * tOf(p)), v.at);
                this.put(key, { kind: rule.algorithm, p, ticks });
                return;
            }
            case 'fixed':
            case 'sliding': {
                const p = this.windowOf(key, rule);
                const st = s;
                const c = roll(st.c, p, effectiveUs(st.c, nowUs));
                if (rule.algorithm === 'fixed')
                    c.prev = 0n;
                const fromCur = min(n, c.cur);
                c.cur -= fromCur;
                c.prev -= min(n - fromCur, c.prev);
                this.put(key, { kind: rule.algorithm, p, c });
                return;
            }
            default: {
                const st = s;
                const p = { limit: big(rule.limit), w: big(rule.windowMs) };
                const w = p.w * US_PER_MS;
                const at = st.entries.length ? max(st.entries[st.entries.length - 1], nowUs) : nowUs;
                let first = 0;
                while (first < st.entries.length && st.entries[first] + w <= at)
                    first++;
                const entries = st.entries.slice(first);
                entries.splice(Math.max(0, entries.length - Number(min(n, BigInt(entries.length)))));
                this.put(key, { kind: 'log', p, entries });
            }
        }
    }
    windowOf(key, rule) {
        const w = big(rule.windowMs);
        const off = rule.stagger ? BigInt(keySlot(key)) * w / 16384n : 0n;
        return { limit: big(rule.limit), w, off };
    }
    /** The algorithm itself (cost 0: a peek, never stored); stores when admitted and `commit`. */
    spend(key, s, rule, cost, nowUs, commit) {
        commit = commit && cost > 0n;
        switch (rule.algorithm) {
            case 'gcra':
            case 'tokenbucket':
            case 'queue': {
                const p = bucketOf(rule);
                const v = view(s, p, nowUs);
                const [d, next] = bucketDecide(v, p, cost);
                if (next !== undefined && commit)
                    this.put(key, { kind: rule.algorithm, p, ticks: next });
                const delay = rule.algorithm === 'queue' && d.allowed ? ceilDiv(v.tat - v.now, tickMs(p)) : 0n;
                return [d, { delay }];
            }
            case 'fixed':
            case 'sliding': {
                const p = this.windowOf(key, rule);
                const [d, c] = windowDecide(s?.c, p, rule.algorithm === 'fixed', cost, nowUs);
                if (c && commit)
                    this.put(key, { kind: rule.algorithm, p, c });
                return [d, {}];
            }
            default: {
                const p = { limit: big(rule.limit), w: big(rule.windowMs) };
                const st = s ?? { kind: 'log', p, entries: [] };
                const d = logHit(commit ? st : { ...st, entries: st.entries }, p, cost, nowUs, commit);
                if (commit && d.allowed)
                    this.put(key, st);
                return [d, {}];
            }
        }
    }
    // ------------------------------------------------------- a custom client for createLimiter
    /** Answers the module's rate commands and RL.ALL (args as strings), as a server would:
     * `createLimiter(memoryLimiter)` is a limiter on this process's memory. */
    send(args) {
        const name = String(args[0]).toUpperCase();
        const rest = args.slice(1);
        if (name === 'RL.ALL') {
            const n = Number(rest[0]);
            const keys = rest.slice(1, 1 + n);
            let i = 1 + n;
            const entries = [];
            for (const key of keys) {
                const [rule, used] = parseRule(String(rest[i]).toLowerCase(), rest.slice(i + 1));
                i += 1 + used;
                const e = { key, rule };
                for (;;) {
                    const w = String(rest[i] ?? '').toUpperCase();
                    if (w === 'COST') {
                        e.cost = BigInt(rest[i + 1]);
                        i += 2;
                    }
                    else if (w === 'RESERVE') {
                        e.reserve = BigInt(rest[i + 1]);
                        i += 2;
                    }
                    else if (w === 'STAGGER') {
                        e.rule.stagger = true;
                        i++;
                    }
                    else
                        break;
                }
                entries.push(e);
            }
            const dryrun = String(rest[i] ?? '').toUpperCase() === 'DRYRUN';
            if (i + (dryrun ? 1 : 0) !== rest.length)
                throw new ModuleError('ERR syntax error');
            const r = this.all(entries, { dryrun });
            return [r.allowed ? 1 : 0, r.refusedBy, ...r.decisions.map(replyOf)];
        }
        const alg = name.startsWith('RL.') ? name.slice(3).toLowerCase() : '';
        if (!ALGOS.has(alg))
            throw new ModuleError(`ERR unknown command '${args[0]}' (the in-memory limiter answers the rate commands and RL.ALL)`);
        const key = rest[0];
        const [rule, used] = parseRule(alg, rest.slice(1));
        const o = {};
        for (let i = 1 + used; i < rest.length; i++) {
            const w = String(rest[i]).toUpperCase();
            if (w === 'COST')
                o.cost = BigInt(rest[++i]);
            else if (w === 'REFUND')
                o.refund = BigInt(rest[++i]);
            else if (w === 'RESERVE')
                o.reserve = BigInt(rest[++i]);
            else if (w === 'PARTIAL')
                o.partial = true;
            else if (w === 'DRYRUN')
                o.dryrun = true;
            else if (w === 'STAGGER' && (rule.algorithm === 'fixed' || rule.algorithm === 'sliding'))
                rule.stagger = true;
            else
                throw new ModuleError(`ERR syntax error (the in-memory limiter has no ${w})`);
        }
        return replyOf(this.rate(key, rule, o));
    }
}
function replyOf(d) {
    const r = [d.allowed ? 1 : 0, d.limit, d.remaining, d.retryAfterMs, d.resetAfterMs];
    if (d.delayMs !== undefined)
        r.push(d.delayMs);
    if (d.granted !== undefined)
        r.push(d.granted);
    return r;
}
function parseRule(alg, nums) {
    const n = (i) => {
        const v = Number(nums[i]);
        if (!Number.isSafeInteger(v) || v < 1)
            throw new ModuleError('ERR value is not an integer or out of range');
        return v;
    };
    switch (alg) {
        case 'gcra': return [{ algorithm: 'gcra', burst: n(0), count: n(1), periodMs: n(2) }, 3];
        case 'tokenbucket': return [{ algorithm: 'tokenbucket', capacity: n(0), refillTokens: n(1), refillPeriodMs: n(2) }, 3];
        case 'queue': return [{ algorithm: 'queue', capacity: n(0), intervalMs: n(1) }, 2];
        case 'sliding':
        case 'fixed':
        case 'log': return [{ algorithm: alg, limit: n(0), windowMs: n(1) }, 2];
        default: throw new ModuleError(`ERR unknown rule ${alg}`);
    }
}
function bucketOf(rule) {
    switch (rule.algorithm) {
        case 'gcra': return { burst: big(rule.burst), count: big(rule.count), period: big(rule.periodMs) };
        case 'tokenbucket': return { burst: big(rule.capacity), count: big(rule.refillTokens), period: big(rule.refillPeriodMs) };
        case 'queue': return { burst: big(rule.capacity), count: 1n, period: big(rule.intervalMs) };
        default: throw new TypeError('not a GCRA-family rule');
    }
}
