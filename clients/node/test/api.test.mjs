// The API over every command, through each client (ioredis 5/6, node-redis 4/5/6, RESP2 and
// RESP3), against a real server with the module and its test clock.
import { test, describe, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { createLimiter, TimeoutError } from 'redis-ratelimit-module';
import { keySlot, CLIENTS, NOW_MS, admin, ifSupported, startServer, freePort } from './helpers.mjs';

let server;
let adm;
before(async () => { server = await startServer(); adm = await admin(server.port); });
after(async () => { adm?.disconnect(); await server?.stop(); });
beforeEach(async () => { await adm.flushall(); await adm.call('RL.CLOCK', 'SET', String(NOW_MS)); });

const gcra = { burst: 3, count: 1, periodMs: 1000 };

for (const [name, factory] of Object.entries(CLIENTS)) {
  describe(name, () => {
    let client;
    let limiter;
    before(async () => { client = await factory.create(server.port); limiter = createLimiter(client); });
    after(async () => { await limiter.close(); await factory.close(client); });

    test('gcra: the five fields, refusal, dryrun', async () => {
      assert.deepEqual(await limiter.gcra('g', gcra),
        { allowed: true, limit: 3, remaining: 2, retryAfterMs: 0, resetAfterMs: 1000 });
      assert.deepEqual(await limiter.gcra('g', { ...gcra, cost: 2 }),
        { allowed: true, limit: 3, remaining: 0, retryAfterMs: 0, resetAfterMs: 3000 });
      assert.deepEqual(await limiter.gcra('g', gcra),
        { allowed: false, limit: 3, remaining: 0, retryAfterMs: 1000, resetAfterMs: 3000 });
      assert.deepEqual(await limiter.gcra('fresh', { ...gcra, dryrun: true }),
        { allowed: true, limit: 3, remaining: 2, retryAfterMs: 0, resetAfterMs: 1000 });
      assert.equal(await adm.exists('fresh'), 0);
    });

    test('tokenbucket, sliding, fixed, log', async () => {
      assert.deepEqual(await limiter.tokenbucket('tb', { capacity: 5, refillTokens: 1, refillPeriodMs: 1000, cost: 5 }),
        { allowed: true, limit: 5, remaining: 0, retryAfterMs: 0, resetAfterMs: 5000 });
      assert.deepEqual(await limiter.sliding('s', { limit: 10, windowMs: 60000 }),
        { allowed: true, limit: 10, remaining: 9, retryAfterMs: 0, resetAfterMs: 120000 });
      assert.deepEqual(await limiter.fixed('f', { limit: 2, windowMs: 60000, cost: 2 }),
        { allowed: true, limit: 2, remaining: 0, retryAfterMs: 0, resetAfterMs: 60000 });
      assert.deepEqual(await limiter.fixed('f', { limit: 2, windowMs: 60000 }),
        { allowed: false, limit: 2, remaining: 0, retryAfterMs: 60000, resetAfterMs: 60000 });
      assert.deepEqual(await limiter.log('l', { limit: 2, windowMs: 1000 }),
        { allowed: true, limit: 2, remaining: 1, retryAfterMs: 0, resetAfterMs: 1000 });
    });

    test('queue: delayMs', async () => {
      const delays = [];
      for (let i = 0; i < 4; i++) delays.push(await limiter.queue('q', { capacity: 3, intervalMs: 1000 }));
      assert.deepEqual(delays.map((d) => [d.allowed, d.delayMs]), [[true, 0], [true, 1000], [true, 2000], [false, 0]]);
    });

    test('acquire / renew / release: token', async () => {
      const a = await limiter.acquire('c', { limit: 1, leaseMs: 5000 });
      assert.equal(a.allowed, true);
      assert.match(a.token, /^\d+-\d+$/);
      assert.equal(a.token.split('-')[0], String(NOW_MS));
      const b = await limiter.acquire('c', { limit: 1, leaseMs: 5000 });
      assert.deepEqual([b.allowed, b.token, b.retryAfterMs], [false, null, 5000]);
      assert.equal(await limiter.renew('c', a.token, 10000), true);
      assert.equal(await limiter.release('c', a.token), true);
      assert.equal(await limiter.release('c', a.token), false);
      await assert.rejects(limiter.release('c', 'nope'), /token must be of the form/);
    });

    test('throttle (CL.THROTTLE)', async () => {
      assert.deepEqual(await limiter.throttle('t', { maxBurst: 1, countPerPeriod: 1, periodS: 10 }),
        { allowed: true, limit: 2, remaining: 1, retryAfterS: -1, resetAfterS: 10 });
      await limiter.throttle('t', { maxBurst: 1, countPerPeriod: 1, periodS: 10 });
      assert.deepEqual(await limiter.throttle('t', { maxBurst: 1, countPerPeriod: 1, periodS: 10 }),
        { allowed: false, limit: 2, remaining: 0, retryAfterS: 10, resetAfterS: 20 });
    });

    test('all (RL.ALL): all or nothing', async () => {
      const entries = [
        { key: 'rl:{org:7}:user:42', rule: { algorithm: 'gcra', burst: 10, count: 1, periodMs: 1000 } },
        { key: 'rl:{org:7}', rule: { algorithm: 'fixed', limit: 1, windowMs: 60000 } },
        { key: 'rl:{org:7}:q', rule: { algorithm: 'queue', capacity: 2, intervalMs: 100 } },
      ];
      const ok = await limiter.all(entries);
      assert.equal(ok.allowed, true);
      assert.equal(ok.refusedBy, 0);
      assert.deepEqual(ok.decisions[0], { allowed: true, limit: 10, remaining: 9, retryAfterMs: 0, resetAfterMs: 1000 });
      assert.equal(ok.decisions[2].delayMs, 0);
      const no = await limiter.all(entries);
      assert.deepEqual([no.allowed, no.refusedBy], [false, 2]);
      assert.equal(no.decisions[1].allowed, false);
      // nothing spent on the user
      assert.equal((await limiter.gcra('rl:{org:7}:user:42', { burst: 10, count: 1, periodMs: 1000, dryrun: true })).remaining, 8);
    });

    test('info: fields, BigInt tat_ns exact beyond 2^53', async () => {
      assert.equal(await limiter.info('none'), null);
      // 3 per 1000 ms: an emission interval of 333333333.3 ns, so the TAT is not a round number
      await adm.call('RL.CLOCK', 'SET', String(NOW_MS + 7));
      await limiter.gcra('i', { burst: 5, count: 3, periodMs: 1000, cost: 2 });
      const dup = adm.duplicate({ stringNumbers: true });
      const raw = await dup.call('RL.INFO', 'i');
      dup.disconnect();
      const exact = BigInt(raw[raw.indexOf('tat_ns') + 1]);
      assert.ok(exact > BigInt(Number.MAX_SAFE_INTEGER));
      const info = await limiter.info('i');
      assert.equal(info.algorithm, 'gcra');
      assert.equal(info.burst, 5);
      assert.equal(info.count, 3);
      assert.equal(info.period_ms, 1000);
      assert.equal(typeof info.tat_ns, 'bigint');
      assert.equal(typeof info.ttl_ms, 'number');
      if (limiter.adapter.exactIntegers) {
        assert.equal(info.tat_ns, exact);
        assert.notEqual(BigInt(Number(exact)), exact, 'the test value must not be a double');
      } else {
        // node-redis v4 decodes integers in doubles: close, not exact (documented)
        const diff = info.tat_ns > exact ? info.tat_ns - exact : exact - info.tat_ns;
        assert.ok(diff < 1024n, `diff ${diff}`);
      }
      await limiter.fixed('fx', { limit: 5, windowMs: 60000 });
      const fx = await limiter.info('fx');
      assert.deepEqual({ ...fx, ttl_ms: 0 }, { algorithm: 'fixed', limit: 5, window_ms: 60000,
        window_start_ms: NOW_MS, count: 1, ttl_ms: 0 });
    });

    test('numbers are sent as strings; bigint arguments; bad numbers refused early', async () => {
      assert.equal((await limiter.gcra('b', { burst: 3n, count: 1n, periodMs: 1000n })).allowed, true);
      await assert.rejects(limiter.gcra('b', { burst: 1.5, count: 1, periodMs: 1000 }), TypeError);
      await assert.rejects(limiter.gcra('b', { burst: 0, count: 1, periodMs: 1000 }), /burst must be a positive integer/);
    });

    test('prefix option', async () => {
      const l = createLimiter(client, { prefix: 'app:' });
      await l.fixed('x', { limit: 3, windowMs: 1000 });
      assert.equal(await adm.exists('app:x'), 1);
      assert.equal((await l.info('x')).count, 1);
      await l.close();
    });

    test('options of "beyond yes or no": cost 0 peek', async (t) => {
      await limiter.gcra('p', gcra);
      await ifSupported(t, 'COST 0 (peek)', async () => {
        const d = await limiter.gcra('p', { ...gcra, cost: 0 });
        assert.deepEqual([d.allowed, d.remaining, d.retryAfterMs], [true, 2, 0]);
        const none = await limiter.gcra('nokey', { ...gcra, cost: 0 });
        assert.equal(none.resetAfterMs, 0);
        assert.equal(await adm.exists('nokey'), 0);
      });
    });

    test('options of "beyond yes or no": refund', async (t) => {
      await limiter.gcra('r', { ...gcra, cost: 3 });
      await ifSupported(t, 'REFUND', async () => {
        const d = await limiter.gcra('r', { ...gcra, refund: 2 });
        assert.deepEqual([d.allowed, d.remaining], [true, 2]);
      });
    });

    test('options of "beyond yes or no": partial -> granted', async (t) => {
      await limiter.gcra('pa', { ...gcra, cost: 2 });
      await ifSupported(t, 'PARTIAL', async () => {
        const d = await limiter.gcra('pa', { ...gcra, cost: 3, partial: true });
        assert.deepEqual([d.allowed, d.granted, d.remaining], [true, 1, 0]);
        const q = await limiter.queue('paq', { capacity: 3, intervalMs: 1000, cost: 5, partial: true });
        assert.deepEqual([q.allowed, q.granted], [true, 3]);
        assert.equal(typeof q.delayMs, 'number');
      });
    });

    test('options of "beyond yes or no": reserve', async (t) => {
      await ifSupported(t, 'RESERVE', async () => {
        const first = await limiter.fixed('rs', { limit: 10, windowMs: 60000, cost: 6, reserve: 4 });
        assert.equal(first.allowed, true);
        const d = await limiter.fixed('rs', { limit: 10, windowMs: 60000, reserve: 4 });
        assert.equal(d.allowed, false);
        const all = await limiter.all([{ key: 'rs', rule: { algorithm: 'fixed', limit: 10, windowMs: 60000 }, reserve: 4 }]);
        assert.equal(all.allowed, false);
      });
    });

    test('options of "beyond yes or no": block', async (t) => {
      await limiter.fixed('bl', { limit: 1, windowMs: 1000 });
      await ifSupported(t, 'BLOCK', async () => {
        const d = await limiter.fixed('bl', { limit: 1, windowMs: 1000, blockMs: 900000 });
        assert.equal(d.allowed, false);
        assert.equal(d.retryAfterMs, 900000);
        assert.equal((await limiter.info('bl')).blocked_until_ms, NOW_MS + 900000);
      });
    });

    test('options of "beyond yes or no": stagger', async (t) => {
      await ifSupported(t, 'STAGGER', async () => {
        const d = await limiter.fixed('st', { limit: 1, windowMs: 16384, stagger: true });
        assert.equal(d.allowed, true);
        // windows start at multiples of window_ms plus slot * window_ms / 16384 (= slot here)
        const offset = keySlot('st');
        const start = offset + Math.floor((NOW_MS - offset) / 16384) * 16384;
        assert.equal(d.resetAfterMs, start + 16384 - NOW_MS);
      });
    });
  });
}

test('a timeout rejects with TimeoutError', async () => {
  const R = (await import('ioredis')).default;
  const c = new R({ port: server.port, host: '127.0.0.1' });
  const l = createLimiter(c, { timeoutMs: 50 });
  await adm.call('CLIENT', 'PAUSE', '300', 'ALL');
  const t0 = performance.now();
  await assert.rejects(l.gcra('to', gcra), TimeoutError);
  assert.ok(performance.now() - t0 < 250);
  await adm.call('CLIENT', 'UNPAUSE');
  c.disconnect();
});

test('a closed port: the command fails, it does not hang', async () => {
  const R = (await import('ioredis')).default;
  const c = new R({ port: await freePort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0,
    retryStrategy: () => null, lazyConnect: true });
  c.on('error', () => {});
  const l = createLimiter(c, { timeoutMs: 200 });
  await assert.rejects(l.gcra('x', gcra));
  c.disconnect();
});

test('a custom client { send(args, key) }', async () => {
  const seen = [];
  const l = createLimiter({ send: async (args, key) => { seen.push([args, key]); return adm.call(...args); } });
  assert.equal((await l.gcra('cu', gcra)).allowed, true);
  assert.deepEqual(seen, [[['RL.GCRA', 'cu', '3', '1', '1000'], 'cu']]);
});
