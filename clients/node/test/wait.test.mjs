// Issue 27: waiting for room (`waitMs` -> WAIT), pausing and probing (RL.PAUSE, RL.RESUME,
// `probe` -> PROBE), through every client, against a real server with the module and its
// test clock; and `waitMs` limits in the Express middleware and the Fastify plugin over real
// HTTP. Nothing sleeps for time to pass: a test waits until the server reports its waiters
// (INFO ratelimit), then moves the module's clock.
import { test, describe, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import Fastify from 'fastify';
import Redis from 'ioredis';
import {
  TimeoutError, createLimiter, expressRateLimit, fastifyRateLimit, keys, parseDecision, parsePolicyDecision,
} from 'redis-ratelimit-module';
import { CLIENTS, NOW_MS, admin, require, sleep, startServer } from './helpers.mjs';

let server;
let adm;
let hasPause = false;
before(async () => {
  server = await startServer();
  adm = await admin(server.port);
  // RL.PAUSE / RL.RESUME / PROBE land in the module after WAIT: skip their tests until then.
  const info = await adm.call('COMMAND', 'INFO', 'rl.pause');
  hasPause = Array.isArray(info) && info.length > 0 && info[0] !== null;
});
after(async () => { adm?.disconnect(); await server?.stop(); });
beforeEach(async () => { await adm.flushall(); await adm.call('RL.CLOCK', 'SET', String(NOW_MS)); });

/** INFO ratelimit's waiting clients. */
export async function waiting(c) {
  const m = /ratelimit_waiting_clients:(\d+)/.exec(await c.info('ratelimit'));
  return m ? Number(m[1]) : Number.NaN;
}

/** Until the server holds n waiting clients (polls; 20 s at most). */
export async function untilWaiting(c, n) {
  for (const end = Date.now() + 20_000; ;) {
    const got = await waiting(c);
    if (got === n) return;
    if (Date.now() > end) throw new Error(`expected ${n} waiting clients, the server has ${got}`);
    await sleep(5);
  }
}

/** Whether p is still pending after the other work of this tick and a few ms. */
async function pending(p) {
  const mark = Symbol('pending');
  return (await Promise.race([p.then(() => 'settled', () => 'settled'), sleep(20).then(() => mark)])) === mark;
}

const advance = (ms) => adm.call('RL.CLOCK', 'ADVANCE', String(ms));
const one = { burst: 1, count: 1, periodMs: 1000 };

test('replies parsed by the options sent: delay, token, granted, probe, waited', () => {
  assert.deepEqual(parseDecision([1, 3, 2, 0, 1000, 500, 1, 1, 250], 'RL.QUEUE', { queue: true, partial: true, probe: true, wait: true }),
    { allowed: true, limit: 3, remaining: 2, retryAfterMs: 0, resetAfterMs: 1000, delayMs: 500, granted: 1, probe: true, waitedMs: 250 });
  assert.deepEqual(parseDecision([0, 1, 0, 1000, 1000, 0], 'RL.GCRA', { wait: true }),
    { allowed: false, limit: 1, remaining: 0, retryAfterMs: 1000, resetAfterMs: 1000, waitedMs: 0 });
  assert.deepEqual(parseDecision([1, 2, 1, 0, 60000, '1-0', 0, 30], 'RL.ACQUIRE', { token: true, probe: true, wait: true }),
    { allowed: true, limit: 2, remaining: 1, retryAfterMs: 0, resetAfterMs: 60000, token: '1-0', probe: false, waitedMs: 30 });
  // a policy's reply: the algorithm is not known, the fields are taken from the end
  assert.deepEqual(parsePolicyDecision([1, 2, 1, 0, 60000, null, 1, 40], 'RL.ALLOW', false, { probe: true, wait: true }),
    { allowed: true, limit: 2, remaining: 1, retryAfterMs: 0, resetAfterMs: 60000, token: null, probe: true, waitedMs: 40 });
  assert.deepEqual(parsePolicyDecision([1, 5, 3, 0, 2000, 2, 7], 'RL.ALLOW', true, { wait: true }),
    { allowed: true, limit: 5, remaining: 3, retryAfterMs: 0, resetAfterMs: 2000, granted: 2, waitedMs: 7 });
  assert.deepEqual(parsePolicyDecision([1, 5, 3, 0, 2000, 400, 0], 'RL.ALLOW', false, { wait: true }),
    { allowed: true, limit: 5, remaining: 3, retryAfterMs: 0, resetAfterMs: 2000, delayMs: 400, waitedMs: 0 });
  assert.throws(() => parseDecision([1, 1, 0, 0, 1000], 'RL.GCRA', { wait: true }), /unexpected reply/);
});

for (const [name, factory] of Object.entries(CLIENTS)) {
  describe(`${name}: waiting, pausing, probing`, () => {
    let client;
    let limiter;
    before(async () => { client = await factory.create(server.port); limiter = createLimiter(client, { timeoutMs: 2000 }); });
    after(async () => { await limiter.close(); await factory.close(client); });

    test('a waiting call holds a connection of its own: a normal call answers meanwhile', async () => {
      assert.equal((await limiter.gcra('w', one)).allowed, true);
      const held = limiter.gcra('w', { ...one, waitMs: 60_000 });
      await untilWaiting(adm, 1);
      // the application's connection is free: other calls answer while the first waits
      const t0 = performance.now();
      assert.deepEqual(await limiter.gcra('other', one),
        { allowed: true, limit: 1, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000 });
      assert.equal(await limiter.reset('other'), true);
      assert.ok(performance.now() - t0 < 1000);
      assert.equal(await pending(held), true, 'still waiting');
      assert.equal(await waiting(adm), 1);
      await advance(1000);
      assert.deepEqual(await held,
        { allowed: true, limit: 1, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000, waitedMs: 1000 });
      assert.deepEqual(limiter.waitConnectionPool && { size: limiter.waitConnectionPool.size, idle: limiter.waitConnectionPool.idleCount },
        { size: 1, idle: 1 }, 'the connection is back in the pool');
      // admitted at once: answered at once, waited 0, on the pooled connection
      assert.deepEqual(await limiter.sliding('s', { limit: 2, windowMs: 60_000, waitMs: 5000 }),
        { allowed: true, limit: 2, remaining: 1, retryAfterMs: 0, resetAfterMs: 119_000, waitedMs: 0 });
      // WAIT 0: answered at once on the application's connection, with waited_ms
      assert.deepEqual(await limiter.gcra('w', { ...one, waitMs: 0 }),
        { allowed: false, limit: 1, remaining: 0, retryAfterMs: 1000, resetAfterMs: 1000, waitedMs: 0 });
    });

    test('a wait that times out answers the refusal of that instant; several waiters in arrival order', async () => {
      await limiter.gcra('t', { burst: 1, count: 1, periodMs: 10_000 });
      const held = limiter.gcra('t', { burst: 1, count: 1, periodMs: 10_000, waitMs: 2000 });
      await untilWaiting(adm, 1);
      await advance(2000);
      assert.deepEqual(await held,
        { allowed: false, limit: 1, remaining: 0, retryAfterMs: 8000, resetAfterMs: 8000, waitedMs: 2000 });
      // two waiters, each on its own connection
      await limiter.tokenbucket('b', { capacity: 2, refillTokens: 1, refillPeriodMs: 1000, cost: 2 });
      const order = [];
      const a = limiter.tokenbucket('b', { capacity: 2, refillTokens: 1, refillPeriodMs: 1000, waitMs: 60_000 }).then((d) => { order.push('a'); return d; });
      await untilWaiting(adm, 1);
      const b = limiter.tokenbucket('b', { capacity: 2, refillTokens: 1, refillPeriodMs: 1000, waitMs: 60_000 }).then((d) => { order.push('b'); return d; });
      await untilWaiting(adm, 2);
      await advance(1000);
      assert.equal((await a).waitedMs, 1000);
      await untilWaiting(adm, 1);
      assert.deepEqual(order, ['a']);
      await advance(1000);
      assert.equal((await b).waitedMs, 2000);
      assert.deepEqual(order, ['a', 'b']);
      assert.ok(limiter.waitConnectionPool.size >= 2);
    });

    test('acquire and allow wait: a release wakes the waiter at once', async () => {
      const first = await limiter.acquire('jobs', { limit: 1, leaseMs: 60_000 });
      const held = limiter.acquire('jobs', { limit: 1, leaseMs: 60_000, waitMs: 60_000 });
      await untilWaiting(adm, 1);
      assert.equal(await limiter.release('jobs', first.token), true);
      const d = await held;
      assert.equal(d.allowed, true);
      assert.match(d.token, /^\d+-\d+$/);
      assert.equal(d.waitedMs, 0);
      await adm.call('RL.POLICY', 'SET', 'wait-api', 'GCRA', '1', '1', '1000');
      try {
        assert.equal((await limiter.allow('u', 'wait-api')).allowed, true);
        const p = limiter.allow('u', 'wait-api', { waitMs: 5000 });
        await untilWaiting(adm, 1);
        await advance(1000);
        assert.deepEqual(await p, { allowed: true, limit: 1, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000, waitedMs: 1000 });
      } finally {
        await adm.call('RL.POLICY', 'DEL', 'wait-api');
      }
    });

    test('the client timeout of a waiting call is waitMs + timeoutMs; on it the connection is closed', async () => {
      const quick = createLimiter(client, { timeoutMs: 100 });
      try {
        await quick.gcra('q', one);
        const t0 = performance.now();
        // the test clock stands still: the server would hold it; the client gives up after
        // 300 + 100 ms (not 100) and closes that connection, so the server drops the waiter
        await assert.rejects(quick.gcra('q', { ...one, waitMs: 300 }), TimeoutError);
        assert.ok(performance.now() - t0 >= 390, `gave up after ${performance.now() - t0} ms`);
        await untilWaiting(adm, 0);
        assert.equal(quick.waitConnectionPool.size, 0);
        // nothing was spent: the next unit is still 1 s away, not 2
        assert.equal((await quick.gcra('q', one)).retryAfterMs, 1000);
      } finally {
        await quick.close();
      }
    });

    test('waitConnections bounds the connections: a waiting call beyond it waits in the client', async () => {
      const small = createLimiter(client, { waitConnections: 1 });
      try {
        await small.gcra('x', one);
        await small.gcra('y', one);
        const x = small.gcra('x', { ...one, waitMs: 60_000 });
        await untilWaiting(adm, 1);
        const y = small.gcra('y', { ...one, waitMs: 60_000 });
        await sleep(50);
        assert.equal(await waiting(adm), 1, 'the second waits for the connection, not in the server');
        await advance(1000);
        assert.equal((await x).allowed, true);
        // y is sent now, and admitted at once (the clock already moved)
        assert.deepEqual(await y, { allowed: true, limit: 1, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000, waitedMs: 0 });
        assert.equal(small.waitConnectionPool.size, 1);
      } finally {
        await small.close();
      }
      assert.equal(small.waitConnectionPool, undefined, 'closed');
    });

    test('pause, resume, probe', async (t) => {
      if (!hasPause) { t.skip('the server has no RL.PAUSE yet (COMMAND INFO rl.pause is empty)'); return; }
      assert.equal(await limiter.pause('p', 5000), 5000);
      const r = await limiter.gcra('p', one);
      assert.equal(r.allowed, false);
      assert.equal(r.retryAfterMs, 5000);
      // a pause extends, never shortens
      assert.equal(await limiter.pause('p', 1000), 5000);
      assert.equal(await limiter.resume('p'), true);
      assert.equal(await limiter.resume('p'), false);
      assert.equal((await limiter.gcra('p', one)).allowed, true);
      // a waiter waits through a pause and wakes on resume
      await limiter.pause('pw', 60_000);
      const held = limiter.gcra('pw', { ...one, waitMs: 120_000 });
      await untilWaiting(adm, 1);
      assert.equal(await limiter.resume('pw'), true);
      const woken = await held;
      assert.equal(woken.allowed, true);
      assert.equal(woken.waitedMs, 0);
      // probe: after the pause, the first PROBE request is the probe; the others stay refused
      assert.equal(await limiter.pause('model', 1000, { probeMs: 10_000 }), 1000);
      await advance(1000);
      const plain = await limiter.gcra('model', { burst: 5, count: 5, periodMs: 1000 });
      assert.equal(plain.allowed, false);
      assert.equal(plain.probe, undefined);
      const probe = await limiter.gcra('model', { burst: 5, count: 5, periodMs: 1000, probe: true });
      assert.equal(probe.allowed, true);
      assert.equal(probe.probe, true);
      const second = await limiter.gcra('model', { burst: 5, count: 5, periodMs: 1000, probe: true });
      assert.equal(second.allowed, false);
      assert.equal(second.probe, false);
      assert.equal(await limiter.resume('model'), true);
      const after = await limiter.gcra('model', { burst: 5, count: 5, periodMs: 1000, probe: true });
      assert.equal(after.allowed, true);
      assert.equal(after.probe, false);
      // probe and wait together: the extra fields in the module's order
      const both = await limiter.gcra('model', { burst: 5, count: 5, periodMs: 1000, probe: true, waitMs: 1000 });
      assert.deepEqual([both.allowed, both.probe, both.waitedMs], [true, false, 0]);
    });
  });
}

test('ioredis with commandTimeout and socketTimeout: the waiting connection has neither', async () => {
  const c = new Redis({ port: server.port, host: '127.0.0.1', commandTimeout: 50, socketTimeout: 100, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  await new Promise((r) => c.once('ready', r));
  const limiter = createLimiter(c);
  try {
    await limiter.gcra('ct', one);
    const held = limiter.gcra('ct', { ...one, waitMs: 60_000 });
    await untilWaiting(adm, 1);
    await sleep(300); // beyond both timeouts of the application's connection
    assert.equal(await waiting(adm), 1);
    await advance(1000);
    assert.equal((await held).waitedMs, 1000);
  } finally {
    await limiter.close();
    c.disconnect();
  }
});

test('node-redis 5 with a socket timeout: the waiting connection has none', async () => {
  const c = await require('redis').createClient({ url: `redis://127.0.0.1:${server.port}`, socket: { socketTimeout: 100 } })
    .on('error', () => {}).connect();
  const limiter = createLimiter(c);
  try {
    await limiter.gcra('st', one);
    const held = limiter.gcra('st', { ...one, waitMs: 60_000 });
    await untilWaiting(adm, 1);
    await sleep(300);
    assert.equal(await waiting(adm), 1);
    await advance(1000);
    assert.equal((await held).waitedMs, 1000);
  } finally {
    await limiter.close();
    try { c.destroy(); } catch { /* its own socket timeout closed it */ }
  }
});

test('a custom client: duplicate() gives waiting calls their own connection; without it, send()', async () => {
  const opened = [];
  const mk = () => {
    const r = new Redis({ port: server.port, host: '127.0.0.1' });
    opened.push(r);
    return { send: (args) => r.call(...args), close: () => r.disconnect() };
  };
  const base = mk();
  const limiter = createLimiter({ ...base, duplicate: () => mk() });
  try {
    await limiter.gcra('cu', one);
    const held = limiter.gcra('cu', { ...one, waitMs: 60_000 });
    await untilWaiting(adm, 1);
    assert.equal((await limiter.gcra('other', one)).allowed, true);
    await advance(1000);
    assert.equal((await held).waitedMs, 1000);
    assert.equal(opened.length, 2);
    const plain = createLimiter(base);
    assert.deepEqual(await plain.gcra('cu2', { ...one, waitMs: 10 }), { allowed: true, limit: 1, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000, waitedMs: 0 });
  } finally {
    await limiter.close();
    for (const r of opened) r.disconnect();
  }
});

// ----------------------------------------------------------------------------- middleware

describe('middleware: waitMs limits over real HTTP', () => {
  let redis;
  let limiter;
  before(async () => {
    redis = new Redis({ port: server.port, host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    await new Promise((r) => redis.once('ready', r));
    limiter = createLimiter(redis);
  });
  after(async () => { await limiter?.close(); redis?.disconnect(); });

  const silent = { warn() {}, error() {} };
  const options = (events) => ({
    limiter,
    logger: silent,
    timeoutMs: 5000,
    onDecision: (e) => events.push(e),
    limits: [{ name: 'org', rule: { algorithm: 'fixed', limit: 100, windowMs: 60_000 }, key: keys.org((req) => req.headers['x-org']) }],
    routes: [{ path: '/llm', limits: [{ name: 'model', rule: { algorithm: 'gcra', burst: 1, count: 1, periodMs: 20_000 },
      key: () => 'gpt', waitMs: 30_000 }] }],
  });

  async function expressServer(o) {
    const app = express();
    app.use(expressRateLimit(o));
    app.use((req, res) => res.type('text/plain').send('ok'));
    const s = await new Promise((resolve) => { const x = app.listen(0, '127.0.0.1', () => resolve(x)); });
    return { base: `http://127.0.0.1:${s.address().port}`, close: async () => { s.closeAllConnections(); await new Promise((r) => s.close(r)); } };
  }
  async function fastifyServer(o) {
    const app = Fastify();
    await app.register(fastifyRateLimit, o);
    app.all('/*', async (req, reply) => reply.type('text/plain').send('ok'));
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { base: `http://127.0.0.1:${app.server.address().port}`, close: () => app.close() };
  }

  for (const [fw, start] of Object.entries({ express: expressServer, fastify: fastifyServer })) {
    test(`${fw}: a request held for room is admitted after the clock moves; other requests answer meanwhile`, async () => {
      const events = [];
      const app = await start(options(events));
      try {
        const h = { 'x-org': 'acme' };
        const first = await fetch(`${app.base}/llm`, { headers: h });
        assert.equal(first.status, 200);
        assert.equal(first.headers.get('ratelimit'), '"org";r=99;t=60, "model";r=0;t=20');
        const held = fetch(`${app.base}/llm`, { headers: h });
        await untilWaiting(adm, 1);
        // a request that does not wait answers while the other is held
        const other = await fetch(`${app.base}/other`, { headers: h });
        assert.equal(other.status, 200);
        assert.equal(other.headers.get('ratelimit'), '"org";r=97;t=60');
        assert.equal(await pending(held), true);
        await advance(20_000);
        const res = await held;
        assert.equal(res.status, 200);
        // the headers of the final reply
        assert.equal(res.headers.get('ratelimit'), '"org";r=98;t=60, "model";r=0;t=20');
        assert.equal(res.headers.get('retry-after'), null);
        const ev = events.find((e) => e.limits.some((l) => l.name === 'model' && l.decision?.waitedMs === 20_000));
        assert.ok(ev, 'the event has the waited decision');
        assert.equal(ev.outcome, 'allowed');
        // a wait that times out: 429 with the refusal of that instant
        const late = fetch(`${app.base}/llm`, { headers: h });
        await untilWaiting(adm, 1);
        const also = fetch(`${app.base}/llm`, { headers: h });
        await untilWaiting(adm, 2);
        // both from +20 s with 30 s: the first is admitted at +40 s, the second (next unit at
        // +60 s) times out at +50 s
        await advance(20_000);
        assert.equal((await late).status, 200);
        await untilWaiting(adm, 1);
        await advance(10_000);
        const refused = await also;
        assert.equal(refused.status, 429);
        assert.equal(refused.headers.get('retry-after'), '10');
        assert.deepEqual((await refused.json())['violated-policies'], ['model']);
      } finally {
        await app.close();
      }
    });
  }

  test('waitMs with blockMs, or not an integer: a configuration error', () => {
    const rule = { algorithm: 'fixed', limit: 1, windowMs: 60_000 };
    assert.throws(() => expressRateLimit({ limiter, limits: [{ name: 'a', rule, key: keys.ip(), waitMs: 10, blockMs: 10 }] }), /waitMs and blockMs/);
    assert.throws(() => expressRateLimit({ limiter, limits: [{ name: 'a', rule, key: keys.ip(), waitMs: 1.5 }] }), /waitMs must be an integer/);
  });

  test('a shadow limit with waitMs never holds a request', async () => {
    const app = await expressServer({ limiter, logger: silent, timeoutMs: 5000,
      limits: [{ name: 's', rule: { algorithm: 'fixed', limit: 1, windowMs: 60_000 }, key: () => 'k', waitMs: 60_000, shadow: true }] });
    try {
      assert.equal((await fetch(`${app.base}/`)).status, 200);
      assert.equal((await fetch(`${app.base}/`)).status, 200);
      assert.equal(await waiting(adm), 0);
    } finally {
      await app.close();
    }
  });
});
