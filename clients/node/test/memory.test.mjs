// The in-memory limiter decides exactly as the module: the same random sequences of rate
// commands (every algorithm; COST, 0 peeks, DRYRUN, RESERVE, PARTIAL, REFUND; rule changes on
// a key; the clock moving by irregular steps) and RL.ALL calls, sent to a real server with
// the module (its test clock) and to a MemoryLimiter on the same clock: every reply equal.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { MemoryLimiter, createLimiter } from 'redis-ratelimit-module';
import { startServer } from 'redis-ratelimit-module/testing';
import { MODULE, NOW_MS, SERVER } from './helpers.mjs';

let server;
let redis;
let real;
before(async () => {
  server = await startServer({ module: MODULE, redisServer: SERVER });
  redis = new Redis({ port: server.port, host: '127.0.0.1' });
  real = createLimiter(redis);
});
after(async () => { redis?.disconnect(); await server?.stop(); });

/** A small deterministic PRNG (mulberry32). */
function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), pick: (xs) => xs[Math.floor(next() * xs.length)] };
}

/** Two rules per algorithm (a key may switch between them: a rule change). */
const RULES = {
  gcra: [{ algorithm: 'gcra', burst: 5, count: 3, periodMs: 1000 }, { algorithm: 'gcra', burst: 7, count: 2, periodMs: 900 }],
  tokenbucket: [{ algorithm: 'tokenbucket', capacity: 6, refillTokens: 1, refillPeriodMs: 700 }, { algorithm: 'tokenbucket', capacity: 6, refillTokens: 2, refillPeriodMs: 1400 }],
  queue: [{ algorithm: 'queue', capacity: 4, intervalMs: 500 }, { algorithm: 'queue', capacity: 3, intervalMs: 800 }],
  sliding: [{ algorithm: 'sliding', limit: 6, windowMs: 2000 }, { algorithm: 'sliding', limit: 4, windowMs: 3000, stagger: true }],
  fixed: [{ algorithm: 'fixed', limit: 5, windowMs: 1500 }, { algorithm: 'fixed', limit: 8, windowMs: 1000, stagger: true }],
  log: [{ algorithm: 'log', limit: 5, windowMs: 1200 }, { algorithm: 'log', limit: 3, windowMs: 2000 }],
};
const limitOf = (r) => r.burst ?? r.capacity ?? r.limit;

for (const [algo, rules] of Object.entries(RULES)) {
  test(`in memory as in the module: ${algo}`, async () => {
    await redis.flushall();
    await redis.call('RL.CLOCK', 'SET', String(NOW_MS + 123));
    let now = NOW_MS + 123;
    const mem = createLimiter(new MemoryLimiter({ now: () => now }));
    const r = rng(algo.length * 7919 + 17);
    for (let i = 0; i < 400; i++) {
      const step = r.int(0, 9) < 3 ? r.int(0, 900) : 0;
      if (step) { now += step; await redis.call('RL.CLOCK', 'ADVANCE', String(step)); }
      const key = `k${r.int(0, 2)}`;
      const rule = r.next() < 0.9 ? rules[0] : rules[1];
      const limit = limitOf(rule);
      const o = {};
      const kind = r.int(0, 9);
      if (kind === 0) o.cost = 0;
      else if (kind === 1) o.refund = r.int(1, limit + 1);
      else if (kind === 2) { o.cost = r.int(1, limit * 2); o.partial = true; }
      else if (kind === 3) { o.reserve = r.int(1, limit - 1); o.cost = r.int(1, limit - o.reserve); }
      else o.cost = r.int(1, limit);
      if (kind !== 1 && r.next() < 0.15) o.dryrun = true;
      const what = `${algo} step ${i}: ${key} ${JSON.stringify(rule)} ${JSON.stringify(o)}`;
      const [a, b] = await Promise.all([real.check(key, rule, o), mem.check(key, rule, o)]);
      assert.deepEqual(b, a, what);
    }
  });
}

test('in memory as in the module: RL.ALL (all or nothing, DRYRUN, COST 0, RESERVE)', async () => {
  await redis.flushall();
  await redis.call('RL.CLOCK', 'SET', String(NOW_MS));
  let now = NOW_MS;
  const mem = createLimiter(new MemoryLimiter({ now: () => now }));
  const r = rng(4242);
  const pool = Object.values(RULES).map((x) => x[0]);
  for (let i = 0; i < 300; i++) {
    const step = r.int(0, 9) < 4 ? r.int(0, 700) : 0;
    if (step) { now += step; await redis.call('RL.CLOCK', 'ADVANCE', String(step)); }
    const n = r.int(1, 3);
    const used = new Set();
    const entries = [];
    while (entries.length < n) {
      const j = r.int(0, pool.length - 1);
      if (used.has(j)) continue;
      used.add(j);
      const rule = pool[j];
      const e = { key: `{t}:${rule.algorithm}:${r.int(0, 1)}`, rule };
      const kind = r.int(0, 5);
      if (kind === 0) e.cost = 0;
      else if (kind === 1) { e.reserve = r.int(1, limitOf(rule) - 1); e.cost = 1; } else e.cost = r.int(1, limitOf(rule));
      entries.push(e);
    }
    const o = { dryrun: r.next() < 0.1 };
    const [a, b] = await Promise.all([real.all(entries, o), mem.all(entries, o)]);
    assert.deepEqual(b, a, `RL.ALL step ${i}: ${JSON.stringify(entries)} ${JSON.stringify(o)}`);
  }
});
