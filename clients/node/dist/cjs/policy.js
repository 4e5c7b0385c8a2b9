"use strict";
// Policies: named rules stored in the server (`RL.POLICY`), referenced by `RL.ALLOW key
// policy` and by `POLICY name` in `RL.ALL`. Policies are per node (like FUNCTION LOAD): on
// a cluster every write goes to every primary, and reads compare the primaries.
//
//   await limiter.policies.set('api', { algorithm: 'gcra', burst: 100, count: 100, periodMs: 60_000 });
//   await limiter.policies.set('api', 'GCRA 20 20 60000', { rollout: 10 });   // a candidate for 10% of keys
//   const d = await limiter.allow('rl:{t42}:api', 'api');
//   const list = await limiter.clusterPolicies.list();        // on a cluster: drift per policy
Object.defineProperty(exports, "__esModule", { value: true });
exports.PolicyRuleCache = exports.ClusterPolicies = exports.Policies = void 0;
exports.policyRuleArgs = policyRuleArgs;
exports.parsePolicyRule = parsePolicyRule;
exports.rateRule = rateRule;
exports.parsePolicyInfo = parsePolicyInfo;
exports.parsePolicyList = parsePolicyList;
exports.parsePolicyHistory = parsePolicyHistory;
exports.parsePolicyStats = parsePolicyStats;
const base_js_1 = require("./base.js");
/** A policy's rule as `RL.POLICY SET`'s arguments: a rule object (with `stagger`,
 * `blockMs`), or the module's text as is (`"GCRA 10 1 1000"`, `"FIXED 10 60000 BLOCK 900000"`). */
function policyRuleArgs(rule) {
    if (typeof rule === 'string') {
        const parts = rule.trim().split(/\s+/).filter(Boolean);
        if (!parts.length)
            throw new TypeError('redis-ratelimit: an empty policy rule');
        return parts;
    }
    if (!rule || typeof rule !== 'object')
        throw new TypeError('redis-ratelimit: a policy rule is an object or a string');
    const out = [];
    switch (rule.algorithm) {
        case 'gcra':
            out.push('GCRA', (0, base_js_1.int)('burst', rule.burst), (0, base_js_1.int)('count', rule.count), (0, base_js_1.int)('periodMs', rule.periodMs));
            break;
        case 'tokenbucket':
            out.push('TOKENBUCKET', (0, base_js_1.int)('capacity', rule.capacity), (0, base_js_1.int)('refillTokens', rule.refillTokens), (0, base_js_1.int)('refillPeriodMs', rule.refillPeriodMs));
            break;
        case 'sliding':
        case 'fixed':
        case 'log':
            out.push(rule.algorithm.toUpperCase(), (0, base_js_1.int)('limit', rule.limit), (0, base_js_1.int)('windowMs', rule.windowMs));
            break;
        case 'queue':
            out.push('QUEUE', (0, base_js_1.int)('capacity', rule.capacity), (0, base_js_1.int)('intervalMs', rule.intervalMs));
            break;
        case 'concurrency':
            out.push('CONCURRENCY', (0, base_js_1.int)('limit', rule.limit), (0, base_js_1.int)('leaseMs', rule.leaseMs));
            break;
        default:
            throw new TypeError(`redis-ratelimit: unknown algorithm ${String(rule.algorithm)}`);
    }
    if ((rule.algorithm === 'sliding' || rule.algorithm === 'fixed') && rule.stagger)
        out.push('STAGGER');
    if (rule.blockMs !== undefined)
        out.push('BLOCK', (0, base_js_1.int)('blockMs', rule.blockMs));
    return out;
}
/** The module's text of a policy rule (`"SLIDING 10 60000 STAGGER BLOCK 5000"`) as a rule
 * object; null if it is not one (e.g. empty: no candidate). */
function parsePolicyRule(text) {
    if (!text)
        return null;
    const t = text.trim().split(/\s+/);
    const n = (i) => {
        const v = Number(t[i]);
        if (!Number.isSafeInteger(v))
            throw new Error(`redis-ratelimit: unexpected policy rule ${JSON.stringify(text)}`);
        return v;
    };
    let rule;
    let i;
    switch (t[0].toUpperCase()) {
        case 'GCRA':
            rule = { algorithm: 'gcra', burst: n(1), count: n(2), periodMs: n(3) };
            i = 4;
            break;
        case 'TOKENBUCKET':
            rule = { algorithm: 'tokenbucket', capacity: n(1), refillTokens: n(2), refillPeriodMs: n(3) };
            i = 4;
            break;
        case 'SLIDING':
            rule = { algorithm: 'sliding', limit: n(1), windowMs: n(2) };
            i = 3;
            break;
        case 'FIXED':
            rule = { algorithm: 'fixed', limit: n(1), windowMs: n(2) };
            i = 3;
            break;
        case 'LOG':
            rule = { algorithm: 'log', limit: n(1), windowMs: n(2) };
            i = 3;
            break;
        case 'QUEUE':
            rule = { algorithm: 'queue', capacity: n(1), intervalMs: n(2) };
            i = 3;
            break;
        case 'CONCURRENCY':
            rule = { algorithm: 'concurrency', limit: n(1), leaseMs: n(2) };
            i = 3;
            break;
        default: return null;
    }
    while (i < t.length) {
        const w = t[i].toUpperCase();
        if (w === 'STAGGER' && (rule.algorithm === 'sliding' || rule.algorithm === 'fixed')) {
            rule.stagger = true;
            i++;
        }
        else if (w === 'BLOCK') {
            rule.blockMs = n(i + 1);
            i += 2;
        }
        else
            throw new Error(`redis-ratelimit: unexpected policy rule ${JSON.stringify(text)}`);
    }
    return rule;
}
/** The rate rule of a policy rule (without its BLOCK), or null for CONCURRENCY. */
function rateRule(rule) {
    if (!rule || rule.algorithm === 'concurrency')
        return null;
    const { blockMs: _block, ...r } = rule; // eslint-disable-line @typescript-eslint/no-unused-vars
    return r;
}
// ------------------------------------------------------------------------------ replies
const str = (v) => (Buffer.isBuffer(v) ? v.toString() : v === null || v === undefined ? '' : String(v));
const num = (v) => Number(Buffer.isBuffer(v) ? v.toString() : v);
/** Field/value pairs of a reply: a flat array (RESP2), a Map or an object (RESP3). */
function fields(reply, what) {
    const out = {};
    if (reply instanceof Map)
        for (const [k, v] of reply)
            out[str(k)] = v;
    else if (Array.isArray(reply))
        for (let i = 0; i + 1 < reply.length; i += 2)
            out[str(reply[i])] = reply[i + 1];
    else if (reply && typeof reply === 'object')
        Object.assign(out, reply);
    else
        throw new Error(`redis-ratelimit: unexpected reply to ${what}: ${JSON.stringify(reply)}`);
    return out;
}
const list = (reply, what) => {
    if (!Array.isArray(reply))
        throw new Error(`redis-ratelimit: unexpected reply to ${what}: ${JSON.stringify(reply)}`);
    return reply;
};
function parsePolicyInfo(reply) {
    if (reply === null || reply === undefined)
        return null;
    const f = fields(reply, 'RL.POLICY GET');
    const candidateVersion = num(f.candidate_version ?? 0);
    return {
        name: str(f.name),
        version: num(f.version),
        rule: str(f.rule),
        mode: str(f.mode),
        digest: str(f.digest),
        candidateVersion,
        candidateRule: candidateVersion ? str(f.candidate_rule) : null,
        candidateMode: candidateVersion ? str(f.candidate_mode) : null,
        rollout: num(f.rollout ?? 0),
    };
}
function parsePolicyList(reply) {
    return list(reply, 'RL.POLICY LIST').map((e) => {
        const f = fields(e, 'RL.POLICY LIST');
        return {
            name: str(f.name), version: num(f.version), digest: str(f.digest), mode: str(f.mode),
            candidateVersion: num(f.candidate_version ?? 0), rollout: num(f.rollout ?? 0),
        };
    });
}
function parsePolicyHistory(reply) {
    return list(reply, 'RL.POLICY HISTORY').map((e) => {
        const f = fields(e, 'RL.POLICY HISTORY');
        return {
            version: num(f.version), rule: str(f.rule), mode: str(f.mode), setMs: num(f.set_ms),
            status: str(f.status),
        };
    });
}
function parsePolicyStats(reply) {
    const f = fields(reply, 'RL.POLICY STATS');
    const top = Array.isArray(f.top_refused) ? f.top_refused : [];
    return {
        requests: num(f.requests),
        admitted: num(f.admitted),
        refused: num(f.refused),
        shadowRefusals: num(f.shadow_refusals),
        unitsSpent: num(f.units_spent),
        topRefused: top.map((p) => {
            const pair = list(p, 'RL.POLICY STATS');
            return [str(pair[0]), num(pair[1])];
        }),
        topErrorBound: num(f.top_error_bound ?? 0),
    };
}
function setArgs(name, rule, o) {
    const args = ['SET', name, ...policyRuleArgs(rule)];
    if (o.shadow)
        args.push('SHADOW');
    if (o.rollout !== undefined && o.rollout !== null)
        args.push('ROLLOUT', (0, base_js_1.int)('rollout', o.rollout));
    return args;
}
/** `RL.POLICY` on one server: the plain replies, typed. (On a cluster use
 * `limiter.clusterPolicies`: policies are per node.) */
class Policies {
    limiter;
    constructor(limiter) {
        this.limiter = limiter;
    }
    run(args, o = {}) {
        return this.limiter.command(['RL.POLICY', ...args], undefined, { timeoutMs: o.timeoutMs });
    }
    /** `RL.POLICY SET`: a new version (current at once, or a candidate with `rollout`).
     * Returns its version. */
    async set(name, rule, o = {}) {
        return num(await this.run(setArgs(name, rule, o), o));
    }
    /** `RL.POLICY ROLLOUT`: the candidate's share (100: it becomes current). Returns the
     * candidate's version. */
    async rollout(name, percent, o = {}) {
        return num(await this.run(['ROLLOUT', name, (0, base_js_1.int)('percent', percent)], o));
    }
    /** `RL.POLICY ROLLBACK`: drops the candidate, or makes the previous version current again
     * (as a new version). Returns the current version. */
    async rollback(name, o = {}) {
        return num(await this.run(['ROLLBACK', name], o));
    }
    /** `RL.POLICY GET`: null if there is no such policy. */
    async get(name, o = {}) {
        return parsePolicyInfo(await this.run(['GET', name], o));
    }
    /** `RL.POLICY DEL`: true if it existed. Keys written under it keep their state. */
    async delete(name, o = {}) {
        return num(await this.run(['DEL', name], o)) === 1;
    }
    /** `RL.POLICY LIST [pattern]` (a KEYS pattern), by name. */
    async list(pattern, o = {}) {
        return parsePolicyList(await this.run(pattern === undefined ? ['LIST'] : ['LIST', pattern], o));
    }
    /** `RL.POLICY HISTORY`: the candidate, then the last 10 versions that were current. */
    async history(name, o = {}) {
        return parsePolicyHistory(await this.run(['HISTORY', name], o));
    }
    /** `RL.POLICY STATS [RESET]` (with `reset`: the statistics so far, then zeroed). */
    async stats(name, o = {}) {
        return parsePolicyStats(await this.run(o.reset ? ['STATS', name, 'RESET'] : ['STATS', name], o));
    }
}
exports.Policies = Policies;
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
/** `RL.POLICY` on every primary (a cluster; a single server is one primary). Writes return
 * each primary's answer; `get` and `list` report drift: a policy whose (version, digest)
 * differs between primaries, or that some do not have. */
class ClusterPolicies {
    limiter;
    constructor(limiter) {
        this.limiter = limiter;
    }
    /** The primaries' names (`"host:port"`). */
    async nodes() {
        return (await this.limiter.adapter.primaries()).map((n) => n.name);
    }
    async each(args, parse, o = {}) {
        const nodes = await this.limiter.adapter.primaries();
        if (!nodes.length)
            throw new Error('redis-ratelimit: the cluster client knows no primary (not connected yet?)');
        const ms = o.timeoutMs ?? this.limiter.timeoutMs;
        const settled = await Promise.allSettled(nodes.map(async (n) => parse(await (0, base_js_1.withTimeout)(n.send(['RL.POLICY', ...args]), ms))));
        const out = {};
        let ok = true;
        settled.forEach((s, i) => {
            if (s.status === 'fulfilled')
                out[nodes[i].name] = s.value;
            else {
                ok = false;
                out[nodes[i].name] = s.reason instanceof Error ? s.reason : new Error(String(s.reason));
            }
        });
        const values = Object.values(out);
        const reply = ok && values.every((v) => same(v, values[0])) ? values[0] : undefined;
        return { nodes: out, ok, reply };
    }
    /** Every node answered (else the first error is thrown). */
    async read(args, parse, o = {}) {
        const r = await this.each(args, parse, o);
        for (const v of Object.values(r.nodes))
            if (v instanceof Error)
                throw v;
        return r.nodes;
    }
    set(name, rule, o = {}) {
        return this.each(setArgs(name, rule, o), num, o);
    }
    rollout(name, percent, o = {}) {
        return this.each(['ROLLOUT', name, (0, base_js_1.int)('percent', percent)], num, o);
    }
    rollback(name, o = {}) {
        return this.each(['ROLLBACK', name], num, o);
    }
    delete(name, o = {}) {
        return this.each(['DEL', name], (r) => num(r) === 1, o);
    }
    /** Each primary's version of the policy; null when no primary has it. */
    async get(name, o = {}) {
        const nodes = await this.read(['GET', name], parsePolicyInfo, o);
        const values = Object.values(nodes);
        if (values.every((v) => v === null))
            return null;
        return { name, drift: drifted(values), nodes };
    }
    /** Every policy of any primary, by name, each with its per-node entries and `drift`. */
    async list(pattern, o = {}) {
        const nodes = await this.read(pattern === undefined ? ['LIST'] : ['LIST', pattern], parsePolicyList, o);
        const names = [...new Set(Object.values(nodes).flatMap((l) => l.map((e) => e.name)))].sort();
        return names.map((name) => {
            const per = {};
            for (const [node, l] of Object.entries(nodes))
                per[node] = l.find((e) => e.name === name) ?? null;
            return { name, drift: drifted(Object.values(per)), nodes: per };
        });
    }
    history(name, o = {}) {
        return this.each(['HISTORY', name], parsePolicyHistory, o);
    }
    /** Each primary's statistics (they are per node). */
    stats(name, o = {}) {
        return this.each(o.reset ? ['STATS', name, 'RESET'] : ['STATS', name], parsePolicyStats, o);
    }
}
exports.ClusterPolicies = ClusterPolicies;
function drifted(values) {
    const first = values[0];
    return values.some((v) => v === null || first === null || v.version !== first.version || v.digest !== first.digest);
}
/** The rules of policies, per limiter (so per process and server), as the middleware reads
 * them with `RL.POLICY GET` for its headers. */
class PolicyRuleCache {
    limiter;
    entries = new Map();
    inflight = new Map();
    constructor(limiter) {
        this.limiter = limiter;
    }
    peek(name) {
        return this.entries.get(name);
    }
    /** Reads the policy now (one read per name at a time), routed to `key`'s node. */
    refresh(name, key, now, timeoutMs) {
        const running = this.inflight.get(name);
        if (running)
            return running;
        const p = (async () => {
            try {
                const info = parsePolicyInfo(await this.limiter.command(['RL.POLICY', 'GET', name], key, { timeoutMs }));
                const entry = {
                    at: now,
                    current: info ? { version: info.version, rule: parsePolicyRule(info.rule), mode: info.mode } : null,
                    candidate: info && info.candidateVersion
                        ? { version: info.candidateVersion, rule: parsePolicyRule(info.candidateRule), mode: info.candidateMode ?? 'enforce' }
                        : null,
                };
                this.entries.set(name, entry);
                return entry;
            }
            finally {
                this.inflight.delete(name);
            }
        })();
        this.inflight.set(name, p);
        return p;
    }
    clear() {
        this.entries.clear();
    }
}
exports.PolicyRuleCache = PolicyRuleCache;
