// Leased allowance, local refusals, limit strings, key lists and limits computed per request,
// over real HTTP (Express) against a real server with the module (started by the package's
// own test helper). The conformance cases (node-lease.json, node-local.json, ...) check the
// exact replies; this file checks what they cannot: timers, several processes at once,
// rule changes, the adaptive chunk, the metrics hook and configuration errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import Redis from 'ioredis';
import { expressRateLimit, parseLimitString } from 'redis-ratelimit-module';
import { moduleServer, NOW_MS } from './helpers.mjs';

let server;
let redis;
let limiter;
moduleServer((s) => ({ server, redis, limiter } = s), async (s) => { await s.redis.config('RESETSTAT'); });

const silent = { warn() {}, error() {} };
const user = (ctx) => ctx.headers['x-user'] ?? null;
const calls = async () => [...(await redis.info('commandstats')).matchAll(/^cmdstat_(rl\.[a-z]+):calls=(\d+)/gm)]
  .filter((m) => m[1] !== 'rl.clock' && m[1] !== 'rl.policy').reduce((n, m) => n + Number(m[2]), 0);
const peek = async (key, rule) => (await limiter.check(key, rule, { cost: 0 })).remaining;

/** An Express app ("process") with the middleware; returns { mw, call, close }. */
async function proc(options, t) {
  const app = express();
  const mw = expressRateLimit({ limiter, logger: silent, timeoutMs: 5000, ...options });
  app.use(mw);
  app.use((req, res) => res.send('ok'));
  const s = await new Promise((resolve) => { const x = app.listen(0, '127.0.0.1', () => resolve(x)); });
  const base = `http://127.0.0.1:${s.address().port}`;
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await mw.close();
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  };
  t?.after(close);
  const call = async (headers = { 'x-user': 'alice' }) => {
    const res = await fetch(base, { headers });
    res.text_ = await res.text();
    return res;
  };
  return { mw, call, close };
}

/** Polls fn() until it returns true (no sleeps for time to pass: fail after 10 s). */
async function until(fn, what) {
  for (const end = Date.now() + 10_000; ;) {
    if (await fn()) return;
    assert.ok(Date.now() < end, `timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

const GCRA = { algorithm: 'gcra', burst: 100, count: 100, periodMs: 1_000_000_000 }; // no refill to speak of

test('four processes, one hot key: never more admitted than the rule, few Redis calls, early refusal within the bound', async (t) => {
  const chunk = 10;
  const limits = [{ name: 'user', rule: GCRA, key: user, lease: { chunk, ttlMs: 600_000 } }];
  const ps = await Promise.all([0, 1, 2, 3].map(() => proc({ limits }, t)));
  let admitted = 0;
  // 130 requests, round robin, some concurrently within a process
  for (let i = 0; i < 130; i += 4) {
    const rs = await Promise.all(ps.map((p, j) => (i + j < 130 ? p.call() : null)));
    admitted += rs.filter((r) => r && r.status === 200).length;
  }
  const held = ps.reduce((n, p) => n + p.mw.guard.leases().reduce((m, l) => m + l.units, 0), 0);
  assert.ok(admitted <= 100, `admitted ${admitted} <= 100`);
  assert.equal(admitted + held, 100, 'every unit the server gave is admitted or held');
  assert.ok(held <= (4 - 1) * chunk + chunk, `held ${held}`);
  assert.ok(admitted >= 100 - 3 * chunk, `refused early by at most (processes - 1) * chunk: admitted ${admitted}`);
  const n = await calls();
  assert.ok(n <= 130 / 2, `${n} Redis calls for 130 requests`);
  // closing every process gives the held units back: the server has exactly `held` again
  for (const p of ps) await p.close();
  assert.equal(await peek('rl:user:alice', GCRA), held);
});

test('a lapsed lease is given back by its timer, without traffic', async (t) => {
  const { mw, call } = await proc({ limits: [{ name: 'user', rule: GCRA, key: user, lease: { chunk: 10, ttlMs: 20 } }] }, t);
  assert.equal((await call()).status, 200);
  assert.equal(await peek('rl:user:alice', GCRA), 90);
  // the package clock is the real one here: the timer fires 20 ms later and refunds 9
  await until(async () => (await peek('rl:user:alice', GCRA)) === 99, 'the refund of 9 units');
  assert.deepEqual(mw.guard.leases(), []);
});

test('a limit whose rule changes gives back under the old rule before claiming under the new', async (t) => {
  const small = { algorithm: 'gcra', burst: 10, count: 10, periodMs: 1_000_000 };
  const big = { algorithm: 'gcra', burst: 20, count: 20, periodMs: 2_000_000 }; // the same interval
  const { call } = await proc({ limits: [{ name: 'user', key: user, lease: { chunk: 5, ttlMs: 600_000 },
    rule: (ctx) => (ctx.headers['x-plan'] === 'pro' ? big : small) }] }, t);
  assert.equal((await call({ 'x-user': 'alice' })).status, 200); // claims 5 under small, holds 4
  assert.equal(await peek('rl:user:alice', small), 5);
  const pro = await call({ 'x-user': 'alice', 'x-plan': 'pro' }); // refunds 4, claims 5 under big
  assert.equal(pro.status, 200);
  assert.equal(pro.headers.get('RateLimit-Policy'), '"user";q=20;w=2000');
  assert.equal(await peek('rl:user:alice', big), 20 - 1 - 5);
  assert.equal(await calls(), 1 + 2 + 2, 'claim, refund + claim (and two peeks)');
});

test('adaptive: the chunk never exceeds the configured one, and shrinks to what a lease used', async (t) => {
  let now = NOW_MS;
  const { mw, call } = await proc({ clockMs: () => now, leaseTimers: false,
    limits: [{ name: 'user', rule: GCRA, key: user, lease: { chunk: 8, ttlMs: 1000, adaptive: true } }] }, t);
  assert.equal((await call()).status, 200);
  assert.equal(await peek('rl:user:alice', GCRA), 92, 'first claim: the configured chunk');
  now += 1000; // lapses with 7 unused: the next chunk is what it used, 1
  assert.equal((await call()).status, 200);
  assert.equal(await peek('rl:user:alice', GCRA), 98);
  assert.equal(mw.guard.leases()[0].nextChunk, 1);
  for (let i = 0; i < 6; i++) assert.equal((await call()).status, 200); // claims while the lease runs: 2, 4, 8
  assert.ok(mw.guard.leases()[0].nextChunk <= 8);
  const before = await peek('rl:user:alice', GCRA);
  for (let i = 0; i < 20; i++) await call();
  const taken = before - await peek('rl:user:alice', GCRA);
  assert.ok(taken <= 20 + 8, `never a claim above the configured chunk (${taken})`);
});

test('the metrics hook: sources lease, local and deny', async (t) => {
  const events = [];
  const { call } = await proc({
    localRefusals: true, onDecision: (e) => events.push(e),
    limits: [
      { name: 'user', rule: GCRA, key: user, lease: { chunk: 3 } },
      { name: 'org', rule: { algorithm: 'fixed', limit: 1, windowMs: 60000 }, key: (ctx) => ctx.headers['x-org'] ?? null, deny: ['evil'] },
    ],
  }, t);
  await call({ 'x-user': 'alice' });
  await call({ 'x-user': 'alice' });
  await call({ 'x-org': 'acme' });
  await call({ 'x-org': 'acme' });
  await call({ 'x-org': 'acme' });
  await call({ 'x-org': 'evil', 'x-user': 'alice' });
  const sources = events.map((e) => `${e.outcome}:${e.limits.map((l) => l.source).join(',')}`);
  assert.deepEqual(sources, ['allowed:redis', 'allowed:lease', 'allowed:redis', 'refused:redis', 'refused:local', 'denied:deny']);
});

test('configuration errors', () => {
  const bad = (limit, re) => assert.throws(() => expressRateLimit({ limiter, limits: [{ name: 'x', key: user, ...limit }] }), re);
  bad({ rule: { algorithm: 'sliding', limit: 5, windowMs: 60000 }, lease: { chunk: 2 } }, /gcra, tokenbucket or fixed/);
  bad({ rule: '5/minute', lease: { chunk: 2 } }, /gcra, tokenbucket or fixed/);
  bad({ rule: GCRA, lease: { chunk: 0 } }, /chunk/);
  bad({ rule: GCRA, lease: { chunk: 2 }, shadow: true }, /shadow/);
  bad({ rule: GCRA, lease: { chunk: 2 }, waitMs: 10 }, /waitMs/);
  bad({ policy: 'api', lease: { chunk: 2 } }, /policy/);
  bad({ rule: '5/fortnight' }, /cannot read/);
  bad({ rule: '5 per' }, /cannot read/);
  assert.throws(() => expressRateLimit({ limiter, localRefusals: { maxKeys: 0 }, limits: [] }), /maxKeys/);
});

test('limit strings', () => {
  assert.deepEqual(parseLimitString('10/second; 1000/day'), [
    { algorithm: 'sliding', limit: 10, windowMs: 1000 }, { algorithm: 'sliding', limit: 1000, windowMs: 86_400_000 }]);
  assert.deepEqual(parseLimitString('10 per minute, 100/5 minutes', 'fixed'), [
    { algorithm: 'fixed', limit: 10, windowMs: 60000 }, { algorithm: 'fixed', limit: 100, windowMs: 300_000 }]);
  assert.deepEqual(parseLimitString('3 per 2 hours', 'gcra'), [{ algorithm: 'gcra', burst: 3, count: 3, periodMs: 7_200_000 }]);
  assert.throws(() => parseLimitString('10/sec'), /cannot read/);
  assert.throws(() => parseLimitString(''), /empty/);
  assert.throws(() => parseLimitString('0/second'), /at least 1/);
});

test('per-request costs and rules from functions, allow lists', async (t) => {
  const { call } = await proc({ limits: [{
    name: 'tokens', key: user, allow: ['ops'],
    rule: async (ctx) => ({ algorithm: 'fixed', limit: ctx.headers['x-plan'] === 'pro' ? 1000 : 10, windowMs: 60000 }),
    cost: (ctx) => Number(ctx.headers['x-tokens'] ?? 1),
  }] }, t);
  const a = await call({ 'x-user': 'alice', 'x-tokens': '7' });
  assert.equal(a.headers.get('RateLimit'), '"tokens";r=3;t=60');
  assert.equal((await call({ 'x-user': 'alice', 'x-tokens': '4' })).status, 429);
  assert.equal((await call({ 'x-user': 'bob', 'x-plan': 'pro', 'x-tokens': '400' })).headers.get('RateLimit'), '"tokens";r=600;t=60');
  const ops = await call({ 'x-user': 'ops', 'x-tokens': '50' });
  assert.equal(ops.status, 200);
  assert.equal(ops.headers.get('RateLimit'), null);
  assert.equal(await redis.exists('rl:tokens:ops'), 0);
});

test('without timers, lapsed leases that hold nothing are forgotten (the map stays bounded)', async (t) => {
  let now = NOW_MS;
  const { mw, call } = await proc({ clockMs: () => now, leaseTimers: false,
    limits: [{ name: 'user', rule: GCRA, key: user, lease: { chunk: 1, ttlMs: 1000 } }] }, t);
  for (let i = 0; i < 300; i++) assert.equal((await call({ 'x-user': `u${i}` })).status, 200);
  assert.equal(mw.guard.leases().length, 300);
  now += 1000;
  for (let i = 300; i < 512; i++) await call({ 'x-user': 'zed' });
  assert.ok(mw.guard.leases().length <= 2, `${mw.guard.leases().length} leases left`);
});

test('a claim that grants fewer units than the cost refuses, and the units stay for a smaller request', async (t) => {
  const rule = { algorithm: 'gcra', burst: 5, count: 5, periodMs: 1_000_000 };
  const limits = [{ name: 'user', rule, key: user, cost: (ctx) => Number(ctx.headers['x-cost'] ?? 1), lease: { chunk: 2, ttlMs: 600_000 } }];
  const p1 = await proc({ limits, leaseTimers: false }, t);
  const p2 = await proc({ limits, leaseTimers: false }, t);
  assert.equal((await p1.call({ 'x-user': 'alice' })).status, 200); // claims 2, holds 1
  const short = await p2.call({ 'x-user': 'alice', 'x-cost': '4' }); // claims 4, granted 3
  assert.equal(short.status, 429);
  assert.equal(short.headers.get('Retry-After'), '0', 'not the module\'s refusal: retry at once');
  assert.equal(short.headers.get('RateLimit'), '"user";r=3;t=0');
  assert.deepEqual(p2.mw.guard.leases().map((l) => l.units), [3]);
  const before = await calls();
  assert.equal((await p2.call({ 'x-user': 'alice', 'x-cost': '3' })).status, 200);
  assert.equal(await calls(), before, 'admitted from the units held, no call');
});

test('a peek (cost 0) on a leased limit claims nothing: COST 0 without a lease, the lease when there is one', async (t) => {
  const { mw, call } = await proc({ leaseTimers: false, limits: [{ name: 'user', rule: GCRA, key: user,
    cost: (ctx) => Number(ctx.headers['x-cost'] ?? 1), lease: { chunk: 10, ttlMs: 600_000 } }] }, t);
  const peek0 = await call({ 'x-user': 'alice', 'x-cost': '0' });
  assert.equal(peek0.status, 200);
  assert.equal(peek0.headers.get('RateLimit'), '"user";r=100;t=0');
  assert.deepEqual(mw.guard.leases(), []);
  assert.equal(await peek('rl:user:alice', GCRA), 100);
  await call({ 'x-user': 'alice' }); // claims 10, holds 9
  const before = await calls();
  assert.equal((await call({ 'x-user': 'alice', 'x-cost': '0' })).headers.get('RateLimit'), '"user";r=99;t=10000'); // t: the claim's reply (remaining 90, reset 10 T): 10*T - 9*T = T = 10000 s
  assert.equal(await calls(), before, 'answered from the lease');
});
