// express-rate-limit with RedisRateLimitStore (RL.FIXED), over real HTTP.
import { test, before, after, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import { rateLimit } from 'express-rate-limit';
import Redis from 'ioredis';
import { createLimiter, RedisRateLimitStore } from 'redis-ratelimit-module';
import { NOW_MS, admin, ifSupported, startServer } from './helpers.mjs';

let server;
let adm;
let redis;
let limiter;
before(async () => {
  server = await startServer();
  adm = await admin(server.port);
  redis = new Redis({ port: server.port, host: '127.0.0.1' });
  limiter = createLimiter(redis);
});
after(async () => { await limiter.close(); redis?.disconnect(); adm?.disconnect(); await server?.stop(); });
beforeEach(async () => { await adm.flushall(); await adm.call('RL.CLOCK', 'SET', String(NOW_MS)); });

let running = [];
afterEach(async () => { for (const s of running) { s.closeAllConnections(); await new Promise((r) => s.close(r)); } running = []; });

async function serve(erlOptions, storeOptions = {}) {
  const store = new RedisRateLimitStore({ limiter, logger: { warn() {} }, ...storeOptions });
  const app = express();
  const mw = rateLimit({ windowMs: 60_000, limit: 3, standardHeaders: 'draft-8', legacyHeaders: false, identifier: 'api',
    store, ...erlOptions });
  app.use(mw);
  app.get('/', (req, res) => res.send('ok'));
  app.get('/fail', (req, res) => res.status(500).send('boom'));
  app.use((err, req, res, next) => res.status(500).send(err.message)); // eslint-disable-line no-unused-vars
  const s = await new Promise((resolve) => { const x = app.listen(0, '127.0.0.1', () => resolve(x)); });
  running.push(s);
  const base = `http://127.0.0.1:${s.address().port}`;
  return { store, mw, get: async (p = '/') => { const r = await fetch(base + p); r.body_ = await r.text(); return r; } };
}

test('429 at the 4th request, draft headers from express-rate-limit', async () => {
  const { get, mw } = await serve({});
  const seen = [];
  for (let i = 0; i < 4; i++) seen.push(await get());
  assert.deepEqual(seen.map((r) => r.status), [200, 200, 200, 429]);
  assert.match(seen[0].headers.get('RateLimit-Policy'), /^"api"; q=3; w=60; pk=:/);
  assert.match(seen[2].headers.get('RateLimit'), /^"api"; r=0; t=60$/);
  const last = seen[3];
  assert.match(last.headers.get('RateLimit'), /^"api"; r=0; t=60$/);
  assert.equal(last.headers.get('Retry-After'), '60');
  // one RL.FIXED key, aligned to the minute, holding the admitted hits only
  const ks = await adm.keys('rl:erl:*');
  assert.equal(ks.length, 1);
  const info = await limiter.info(ks[0]);
  assert.deepEqual([info.algorithm, info.count, info.window_start_ms], ['fixed', 3, NOW_MS]);
  // get / resetKey through the middleware
  const key = ks[0].slice('rl:erl:'.length);
  assert.equal((await mw.getKey(key)).totalHits, 3);
  await mw.resetKey(key);
  assert.equal((await get()).status, 200);
  // next window: fresh
  await adm.call('RL.CLOCK', 'ADVANCE', '60000');
  assert.equal((await get()).status, 200);
});

test('skipFailedRequests: decrement is REFUND 1 (skipped while the module lacks it)', async (t) => {
  const { get, store } = await serve({ skipFailedRequests: true });
  const key = '127.0.0.1'; // express-rate-limit's default key for IPv4
  const supported = await ifSupported(t, 'REFUND', async () => {
    await limiter.fixed('rl:erl:probe', { limit: 3, windowMs: 60000, refund: 1 });
  });
  if (!supported) return;
  for (let i = 0; i < 5; i++) assert.equal((await get('/fail')).status, 500);
  // decrements run on 'finish'; wait until they are done
  for (let i = 0; i < 100 && (await store.get(key))?.totalHits; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal((await store.get(key))?.totalHits ?? 0, 0);
});

test('its own 429 is not refunded: the refused hit was never counted', async () => {
  const { get, store } = await serve({ skipFailedRequests: true });
  const decrements = [];
  const orig = store.decrement.bind(store);
  store.decrement = async (k) => { decrements.push(k); return orig(k); };
  await limiter.fixed('rl:erl:127.0.0.1', { limit: 3, windowMs: 60000, cost: 3 }); // the window is full
  const r = await get();
  assert.equal(r.status, 429);
  for (let i = 0; i < 100 && !decrements.length; i++) await new Promise((res) => setTimeout(res, 10));
  assert.equal(decrements.length, 1);
  assert.equal((await store.get('127.0.0.1')).totalHits, 3); // nothing given back
});

test('the store needs a numeric limit', async () => {
  const { get } = await serve({ limit: () => 3 });
  const r = await get();
  assert.equal(r.status, 500);
  const ok = await serve({ limit: () => 3 }, { limit: 3 });
  assert.equal((await ok.get()).status, 200);
});
