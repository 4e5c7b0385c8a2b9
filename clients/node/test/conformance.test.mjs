// The shared conformance spec (clients/conformance/cases/*.json, format in
// clients/conformance/README.md), run over real HTTP through Express, Fastify AND Koa (real
// listening servers on free 127.0.0.1 ports, real fetch) against a real redis-server with
// the module and its test clock, then (the cases the spec's "The in-memory limiter"
// selects) through Express on the in-memory limiter. The Python package runs the same files (Flask and
// FastAPI): a disagreement between the packages is a failing test in one of them.
//
// Before each case (and for each framework): FLUSHDB, then RL.CLOCK SET clock_ms. Only the
// test clock moves; nothing here sleeps for time to pass (`until_waiting` polls INFO until
// the server holds the waiters; `async` requests are awaited by name in a later step).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import express from 'express';
import Fastify from 'fastify';
import Koa from 'koa';
import mount from 'koa-mount';
import Redis from 'ioredis';
import { MemoryLimiter, createLimiter, expressRateLimit, fastifyRateLimit, koaRateLimit } from 'redis-ratelimit-module';
import { ROOT, admin, startServer } from './helpers.mjs';

const CASES = path.join(ROOT, 'clients/conformance/cases');
const files = fs.existsSync(CASES) ? fs.readdirSync(CASES).filter((f) => f.endsWith('.json')).sort() : [];

let server;
let adm;
let redis;
let limiter;
before(async () => {
  server = await startServer();
  adm = await admin(server.port);
  redis = new Redis({ port: server.port, host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  await new Promise((r) => redis.once('ready', r));
  limiter = createLimiter(redis);
});
after(async () => { await limiter?.close(); redis?.disconnect(); adm?.disconnect(); await server?.stop(); });

const silent = { warn() {}, error() {} };

// ------------------------------------------------------------------- spec -> package options

/** A spec RULE ({"algorithm": "gcra", "period_ms": ...}) as the package's Rule. */
export function toRule(r) {
  const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
  return Object.fromEntries(Object.entries(r).map(([k, v]) => [camel(k), v]));
}

const header = (ctx, name) => {
  const v = ctx.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
};

function toKey(k) {
  if (k && typeof k.header === 'string') return (ctx) => header(ctx, k.header) ?? null;
  throw new Error(`conformance: unknown key ${JSON.stringify(k)}`);
}

function toCost(c) {
  if (c === undefined || typeof c === 'number') return c;
  if (c && typeof c.header === 'string') {
    return (ctx) => {
      const v = header(ctx, c.header);
      return v === undefined || v === '' ? 1 : Number.parseInt(v, 10);
    };
  }
  throw new Error(`conformance: unknown cost ${JSON.stringify(c)}`);
}

export function toLimit(l) {
  const out = { name: l.name, key: toKey(l.key) };
  if (l.policy !== undefined) out.policy = l.policy; else out.rule = typeof l.rule === 'string' ? l.rule : toRule(l.rule);
  if (l.algorithm !== undefined) out.algorithm = l.algorithm;
  if (l.lease !== undefined) {
    out.lease = { chunk: l.lease.chunk };
    if (l.lease.ttl_ms !== undefined) out.lease.ttlMs = l.lease.ttl_ms;
    if (l.lease.adaptive !== undefined) out.lease.adaptive = l.lease.adaptive;
  }
  if (l.allow !== undefined) out.allow = l.allow;
  if (l.deny !== undefined) out.deny = l.deny;
  if (l.cost !== undefined) out.cost = toCost(l.cost);
  if (l.shadow !== undefined) out.shadow = l.shadow;
  if (l.block_ms !== undefined && l.policy === undefined) out.blockMs = l.block_ms; // a policy has its own BLOCK
  if (l.wait_ms !== undefined) out.waitMs = l.wait_ms;
  if (l.fail_open !== undefined) out.failOpen = l.fail_open;
  return out;
}

/** The package clock of the case: clock_ms plus every advance_ms so far (RL.CLOCK's instant). */
let caseClock = 0;

export function toOptions(config, lim = limiter) {
  const o = {
    limiter: lim,
    clockMs: () => caseClock,
    leaseTimers: false, // lapsed leases are given back on the next request or close only
    logger: silent,
    timeoutMs: 5000, // a loaded test machine must not make a limit fail open
    limits: (config.limits ?? []).map(toLimit),
    routes: (config.routes ?? []).map((r) => ({
      path: r.path,
      ...(r.methods ? { methods: r.methods } : {}),
      limits: r.limits === false ? false : r.limits.map(toLimit),
      ...(r.replace !== undefined ? { replace: r.replace } : {}),
    })),
    exempt: config.exempt ?? [],
  };
  if (config.breaker_ms !== undefined) o.breakerMs = config.breaker_ms;
  if (config.legacy_headers !== undefined) o.headers = { legacy: config.legacy_headers };
  if (config.shadow !== undefined) o.shadow = config.shadow;
  if (config.local_refusals !== undefined && config.local_refusals !== false) {
    o.localRefusals = config.local_refusals === true ? true : { maxKeys: config.local_refusals.max_keys };
  }
  return o;
}

// ------------------------------------------------------------------------------ the apps

const running = [];

/** Express: the middleware at `mount` (app.use('/api', mw)); every other request 200 "ok".
 * Returns { base, close } (close: the middleware's close(), giving back its leases). */
async function expressApp(options, mount) {
  const app = express();
  const mw = expressRateLimit(options);
  if (mount) app.use(mount, mw); else app.use(mw);
  app.use((req, res) => res.type('text/plain').send('ok'));
  const s = await new Promise((resolve) => { const x = app.listen(0, '127.0.0.1', () => resolve(x)); });
  running.push(async () => { s.closeAllConnections(); await new Promise((r) => s.close(r)); });
  return { base: `http://127.0.0.1:${s.address().port}`, close: () => mw.close() };
}

/** Fastify: the plugin registered in a context with prefix `mount`; 200 "ok" everywhere. */
async function fastifyApp(options, mount) {
  const app = Fastify();
  const ok = async (req, reply) => reply.type('text/plain').send('ok');
  if (mount) {
    await app.register(async (child) => {
      await child.register(fastifyRateLimit, options);
      child.all('/', ok);
      child.all('/*', ok);
    }, { prefix: mount });
  } else {
    await app.register(fastifyRateLimit, options);
  }
  app.all('/', ok);
  app.all('/*', ok);
  await app.listen({ port: 0, host: '127.0.0.1' });
  let closing;
  const close = () => (closing ??= app.close()); // the plugin's onClose gives back its leases
  running.push(close);
  return { base: `http://127.0.0.1:${app.server.address().port}`, close };
}

/** Koa: the middleware in an app mounted at `mount` with koa-mount; 200 "ok" everywhere. */
async function koaApp(options, mount_) {
  const mw = koaRateLimit(options);
  const ok = (ctx) => { ctx.type = 'text/plain'; ctx.body = 'ok'; };
  const app = new Koa();
  if (mount_) {
    const sub = new Koa();
    sub.use(mw);
    sub.use(ok);
    app.use(mount(mount_, sub));
  } else app.use(mw);
  app.use(ok);
  const s = await new Promise((resolve) => { const x = app.listen(0, '127.0.0.1', () => resolve(x)); });
  running.push(async () => { s.closeAllConnections(); await new Promise((r) => s.close(r)); });
  return { base: `http://127.0.0.1:${s.address().port}`, close: () => mw.close() };
}

const FRAMEWORKS = { express: expressApp, fastify: fastifyApp, koa: koaApp };

// ------------------------------------------------------------------------------ the steps

const asArray = (d) => {
  const a = [d.allowed ? 1 : 0, d.limit, d.remaining, d.retryAfterMs, d.resetAfterMs];
  if (d.delayMs !== undefined) a.push(d.delayMs);
  if (d.token !== undefined) a.push(d.token);
  if (d.granted !== undefined) a.push(d.granted);
  if (d.probe !== undefined) a.push(d.probe ? 1 : 0);
  if (d.waitedMs !== undefined) a.push(d.waitedMs);
  return a;
};

function rateOptions(opts = {}) {
  const o = {};
  for (const [k, v] of Object.entries(opts)) {
    o[k.replace(/_([a-z])/g, (_, c) => c.toUpperCase())] = v;
  }
  return o;
}

/** Runs fn; with `expect.error`, it must fail with an error whose message contains that text
 * (else its error fails the step). Returns fn's value, or undefined after an expected error. */
async function expecting(e, what, fn) {
  let value;
  try {
    value = await fn();
  } catch (err) {
    if (e?.error === undefined) throw err;
    assert.ok(err.message.includes(e.error), `${what}: error ${JSON.stringify(err.message)} does not contain ${JSON.stringify(e.error)}`);
    return { failed: true };
  }
  assert.equal(e?.error, undefined, `${what}: expected an error containing ${JSON.stringify(e?.error)}, got ${JSON.stringify(value)}`);
  return { value };
}

/** The second pass ("The in-memory limiter"): the limiter of the case, and whether keys
 * and calls are checked (not in memory). */
let api = null;
let memoryPass = false;

async function checkKeys(e, what) {
  if (memoryPass) return;
  for (const [key, exists] of Object.entries(e?.keys ?? {})) {
    assert.equal(await adm.exists(key), exists ? 1 : 0, `${what}: key ${key} ${exists ? 'exists' : 'absent'}`);
  }
}

/** Sends an HTTP request step; resolves to its response, read whole, and the real clock just
 * before the request and just after the response. */
async function send(request, base) {
  const { method = 'GET', path: p = '/', headers = {} } = request;
  const t0 = Date.now();
  const res = await fetch(base + p, { method, headers });
  const text = await res.text();
  const t1 = Date.now();
  return { res, text, t0, t1, seen: `${method} ${p} ${JSON.stringify(headers)}` };
}

/** Checks a response against a request step's `expect`. */
async function checkResponse({ res, text, t0, t1, seen: sent }, expect, where) {
  const e = expect ?? {};
  const seen = `${where}: ${sent}`;
  if (e.status !== undefined) assert.equal(res.status, e.status, `${seen}: status`);
  for (const [name, want] of Object.entries(e.headers ?? {})) {
    const got = res.headers.get(name);
    if (want !== null && typeof want === 'object') {
      // {"unix_after_ms": N}: a Unix time in s, rounded up, of now + N on the middleware's
      // own (real) clock, now between the request and its response, 1 s of tolerance
      assert.match(got ?? '', /^\d+$/, `${seen}: header ${name} is a Unix time`);
      const lo = Math.ceil((t0 + want.unix_after_ms) / 1000) - 1;
      const hi = Math.ceil((t1 + 1 + want.unix_after_ms) / 1000) + 1;
      assert.ok(Number(got) >= lo && Number(got) <= hi, `${seen}: header ${name}: ${got} not in [${lo}, ${hi}]`);
    } else {
      assert.equal(got, want, `${seen}: header ${name}`);
    }
  }
  if (e.body !== undefined || e.body_members !== undefined) {
    const body = JSON.parse(text);
    for (const [k, v] of Object.entries(e.body ?? {})) assert.deepEqual(body[k], v, `${seen}: body ${k}`);
    if (e.body_members) assert.deepEqual(Object.keys(body).sort(), [...e.body_members].sort(), `${seen}: body members`);
  }
  await checkKeys(e, seen);
}

/** The responses of `async` request steps not awaited yet (name -> promise), per case. */
const pendingRequests = new Map();

/** The calls of the module's commands the server counted since CONFIG RESETSTAT (INFO
 * commandstats: cmdstat_rl.* and cmdstat_cl.throttle, without rl.clock and rl.policy). */
export function moduleCalls(info) {
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = m[1].toLowerCase();
    if (!(name.startsWith('rl.') || name === 'cl.throttle')) continue;
    if (name.startsWith('rl.clock') || name.startsWith('rl.policy')) continue;
    n += Number(m[2]);
  }
  return n;
}

async function runStep(step, proc, where) {
  if (step.advance_ms !== undefined) {
    if (!memoryPass) await adm.call('RL.CLOCK', 'ADVANCE', String(step.advance_ms));
    caseClock += step.advance_ms;
    return;
  }
  if (step.close !== undefined) {
    await (await proc(step.close, true)).close();
    return;
  }
  if (step.rl_calls !== undefined) {
    if (memoryPass) return;
    assert.equal(moduleCalls(await adm.info('commandstats')), step.rl_calls, `${where}: calls of the module's commands`);
    return;
  }
  if (step.request) {
    const { base } = await proc(step.process ?? 'p1');
    if (step.async !== undefined) {
      // sent now, awaited by name in a later step
      assert.ok(!pendingRequests.has(step.async), `${where}: async name ${step.async} used twice`);
      const p = send(step.request, base);
      p.catch(() => {});
      pendingRequests.set(step.async, p);
      return;
    }
    await checkResponse(await send(step.request, base), step.expect, where);
    return;
  }
  if (step.await !== undefined) {
    const p = pendingRequests.get(step.await);
    assert.ok(p, `${where}: no async request named ${step.await} (or awaited twice)`);
    pendingRequests.delete(step.await);
    await checkResponse(await p, step.expect, where);
    return;
  }
  if (step.until_waiting !== undefined) {
    // INFO ratelimit on the runner's own connection until ratelimit_waiting_clients is N
    let got;
    for (const end = Date.now() + 10_000; ;) {
      got = Number(/ratelimit_waiting_clients:(\d+)/.exec(await adm.info('ratelimit'))?.[1]);
      if (got === step.until_waiting) break;
      assert.ok(Date.now() < end, `${where}: ${step.until_waiting} waiting clients expected, the server has ${got}`);
      await new Promise((r) => setTimeout(r, 2));
    }
    return;
  }
  if (step.api === undefined && Array.isArray(step.policy)) {
    // an operator's RL.POLICY <args> through the runner's own connection; an integer reply
    // (SET, ROLLOUT, ROLLBACK, DEL) is compared, other replies are not
    const e = step.expect ?? {};
    const what = `${where}: RL.POLICY ${step.policy.join(' ')}`;
    const r = await expecting(e, what, () => adm.call('RL.POLICY', ...step.policy.map(String)));
    if (!r.failed && typeof e.reply === 'number') assert.equal(r.value, e.reply, what);
    await checkKeys(e, what);
    return;
  }
  if (step.api === 'allow') {
    // the first five fields of the reply
    const e = step.expect ?? {};
    const what = `${where}: api allow ${step.key} ${step.policy}`;
    const r = await expecting(e, what, () => api.allow(step.key, step.policy, rateOptions(step.opts)));
    if (!r.failed && e.reply !== undefined) assert.deepEqual(asArray(r.value).slice(0, e.reply.length), e.reply, what);
    await checkKeys(e, what);
    return;
  }
  if (step.api === 'all') {
    const e = step.expect ?? {};
    const what = `${where}: api all`;
    const r = await expecting(e, what, () => api.all(step.rules.map((x) => ({
      key: x.key, ...(x.policy !== undefined ? { policy: x.policy } : { rule: toRule(x.rule) }),
      ...(x.cost !== undefined ? { cost: x.cost } : {}),
      ...(x.reserve !== undefined ? { reserve: x.reserve } : {}),
    })), { dryrun: !!step.dryrun }));
    if (!r.failed) {
      const got = { allowed: r.value.allowed, refused_by: r.value.refusedBy, decisions: r.value.decisions.map(asArray) };
      const want = Object.fromEntries(Object.entries(e).filter(([k]) => k in got));
      assert.deepEqual(Object.fromEntries(Object.keys(want).map((k) => [k, got[k]])), want, what);
    }
    await checkKeys(e, what);
    return;
  }
  if (step.api === 'rate') {
    const e = step.expect ?? {};
    const what = `${where}: api rate ${step.key}`;
    const r = await expecting(e, what, () => api.check(step.key, toRule(step.rule), rateOptions(step.opts)));
    if (!r.failed && e.reply !== undefined) assert.deepEqual(asArray(r.value).slice(0, e.reply.length), e.reply, what);
    await checkKeys(e, what);
    return;
  }
  throw new Error(`conformance: unknown step ${JSON.stringify(step)}`);
}

/** Whether a case runs in the in-memory pass too (the conformance README's "The in-memory
 * limiter"): only non-async requests, advance_ms, rl_calls and api rate/all steps; no
 * policy, wait_ms, block_ms, lease or local_refusals; opts only cost, dryrun, reserve,
 * partial; not opted out with "memory": false. */
export function inMemoryPass(c) {
  if (c.memory === false || c.policies?.length) return false;
  const config = c.config ?? {};
  if (config.local_refusals !== undefined && config.local_refusals !== false) return false;
  const limits = [...(config.limits ?? []), ...(config.routes ?? []).flatMap((r) => r.limits || [])];
  if (limits.some((l) => l.policy !== undefined || l.wait_ms !== undefined || l.block_ms !== undefined || l.lease !== undefined)) return false;
  const OPTS = new Set(['cost', 'dryrun', 'reserve', 'partial']);
  return (c.steps ?? []).every((s) => {
    if (s.request) return s.async === undefined;
    if (s.advance_ms !== undefined || s.rl_calls !== undefined) return true;
    if (s.api === 'rate') return Object.keys(s.opts ?? {}).every((k) => OPTS.has(k));
    if (s.api === 'all') return s.rules.every((r) => r.policy === undefined);
    return false;
  });
}

async function runMemoryCase(c, framework) {
  caseClock = c.clock_ms;
  memoryPass = true;
  const memory = new MemoryLimiter({ now: () => caseClock });
  api = createLimiter(memory);
  try {
    await runSteps(c, framework, api);
  } finally {
    memoryPass = false;
  }
}

async function runCase(c, framework) {
  api = limiter;
  await adm.flushdb();
  await adm.call('RL.CLOCK', 'SET', String(c.clock_ms));
  caseClock = c.clock_ms;
  // FLUSHDB keeps policies: delete every one, then set the case's (RL.POLICY SET args)
  for (const entry of await adm.call('RL.POLICY', 'LIST')) {
    const f = Object.fromEntries(Array.from({ length: entry.length / 2 }, (_, i) => [String(entry[2 * i]), entry[2 * i + 1]]));
    await adm.call('RL.POLICY', 'DEL', String(f.name));
  }
  for (const args of c.policies ?? []) await adm.call('RL.POLICY', 'SET', ...args.map(String));
  await adm.config('RESETSTAT');
  // a new process per case: no policy rule cached from another case
  limiter.policyRules.clear();
  await runSteps(c, framework, limiter);
}

async function runSteps(c, framework, lim) {  // processes ("process": "p2"): each its own app and middleware, built on first use
  const procs = new Map();
  const closedProcs = new Set();
  const proc = async (name, closing = false) => {
    assert.ok(!closedProcs.has(name), `${c.name}: process ${name} used after its close`);
    if (closing) closedProcs.add(name);
    if (!procs.has(name)) procs.set(name, await FRAMEWORKS[framework](toOptions(c.config ?? {}, lim), c.mount ?? ''));
    return procs.get(name);
  };
  pendingRequests.clear();
  try {
    for (const [i, step] of (c.steps ?? []).entries()) await runStep(step, proc, `${c.name} [${framework}] step ${i + 1}`);
    assert.deepEqual([...pendingRequests.keys()], [], `${c.name} [${framework}]: async requests never awaited`);
  } finally {
    pendingRequests.clear();
    // every process's middleware is closed (its leases given back, its timers gone) before
    // the next case flushes the server
    for (const [name, p] of procs) if (!closedProcs.has(name)) await p.close();
    while (running.length) await running.pop()();
  }
}

test('the conformance spec has case files', () => {
  assert.ok(files.length > 0, `no case files in ${CASES}`);
});

const names = new Set();
for (const file of files) {
  const { cases } = JSON.parse(fs.readFileSync(path.join(CASES, file), 'utf8'));
  for (const c of cases) {
    test(`${file}: case names are unique (${c.name})`, () => {
      assert.ok(!names.has(c.name), `duplicate case name ${c.name}`);
      names.add(c.name);
    });
    for (const framework of Object.keys(FRAMEWORKS)) {
      test(`${file}: ${c.name} [${framework}]`, () => runCase(c, framework));
    }
    if (inMemoryPass(c)) {
      // the second pass: the in-memory limiter in place of Redis (one framework is enough:
      // the middleware is the same, the limiter differs)
      test(`${file}: ${c.name} [express, in memory]`, () => runMemoryCase(c, 'express'));
    }
  }
}
