// The Koa middleware over real HTTP (a real Koa app, koa-mount), ioredis, against a real
// server with the module (started by the package's own test helper).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Koa from 'koa';
import mount from 'koa-mount';
import { keys, koaRateLimit } from 'redis-ratelimit-module';
import { moduleServer } from './helpers.mjs';

let server;
let redis;
let limiter;
moduleServer((s) => ({ server, redis, limiter } = s));

const silent = { warn() {}, error() {} };
const user = (ctx) => ctx.headers['x-user'] ?? null;

async function listen(app) {
  const s = await new Promise((resolve) => { const x = app.listen(0, '127.0.0.1', () => resolve(x)); });
  const base = `http://127.0.0.1:${s.address().port}`;
  const call = async (path = '/', headers = {}, method = 'GET') => {
    const res = await fetch(base + path, { method, headers });
    res.text_ = await res.text();
    return res;
  };
  return { call, close: async () => { s.closeAllConnections(); await new Promise((r) => s.close(r)); } };
}

test('Koa: limits as strings, headers, 429 problem body, the app not reached when refused', async (t) => {
  const app = new Koa();
  let reached = 0;
  const mw = koaRateLimit({ limiter, logger: silent, limits: [{ name: 'user', rule: '2/minute; 5/hour', key: user }] });
  app.use(mw);
  app.use((ctx) => { reached++; ctx.body = 'ok'; });
  const { call, close } = await listen(app);
  t.after(close);
  const a = await call('/', { 'x-user': 'alice' });
  assert.equal(a.status, 200);
  assert.equal(a.text_, 'ok');
  assert.equal(a.headers.get('RateLimit-Policy'), '"user-1";q=2;w=60, "user-2";q=5;w=3600');
  assert.equal((await call('/', { 'x-user': 'alice' })).status, 200);
  const refused = await call('/', { 'x-user': 'alice' });
  assert.equal(refused.status, 429);
  assert.match(refused.headers.get('Content-Type'), /^application\/problem\+json/);
  assert.deepEqual(JSON.parse(refused.text_)['violated-policies'], ['user-1']);
  assert.ok(Number(refused.headers.get('Retry-After')) >= 1);
  assert.equal(reached, 2);
  assert.equal(await redis.exists('rl:user-1:alice', 'rl:user-2:alice'), 2);
});

test('Koa under koa-mount: routes and exemptions match ctx.path below the mount; deny lists', async (t) => {
  const api = new Koa();
  api.use(koaRateLimit({
    limiter, logger: silent,
    limits: [{ name: 'user', rule: { algorithm: 'fixed', limit: 5, windowMs: 60000 }, key: user, deny: ['mallory'] }],
    routes: [{ path: '/login', methods: ['POST'], limits: [{ name: 'login', rule: '1/minute', key: keys.ip() }] }],
    exempt: ['/health'],
  }));
  api.use((ctx) => { ctx.body = 'api'; });
  const app = new Koa();
  app.use(mount('/api', api));
  app.use((ctx) => { ctx.body = 'outside'; });
  const { call, close } = await listen(app);
  t.after(close);
  assert.equal((await call('/api/health', { 'x-user': 'alice' })).headers.get('RateLimit'), null);
  const login = await call('/api/login', { 'x-user': 'alice' }, 'POST');
  assert.equal(login.headers.get('RateLimit-Policy'), '"user";q=5;w=60, "login";q=1;w=60');
  assert.equal((await call('/api/login', { 'x-user': 'alice' }, 'POST')).status, 429);
  const outside = await call('/other', { 'x-user': 'alice' });
  assert.equal(outside.text_, 'outside');
  assert.equal(outside.headers.get('RateLimit'), null);
  const denied = await call('/api/x', { 'x-user': 'mallory' });
  assert.equal(denied.status, 403);
  assert.deepEqual(JSON.parse(denied.text_), { type: 'about:blank', title: 'Forbidden', status: 403, 'violated-policies': ['user'] });
  assert.equal(await redis.exists('rl:user:mallory'), 0);
});

test('Koa: a leased limit, given back by close()', async (t) => {
  const rule = { algorithm: 'gcra', burst: 10, count: 10, periodMs: 100000 };
  const app = new Koa();
  const mw = koaRateLimit({ limiter, logger: silent, limits: [{ name: 'user', rule, key: user, lease: { chunk: 5, ttlMs: 60000 } }] });
  app.use(mw);
  app.use((ctx) => { ctx.body = 'ok'; });
  const { call, close } = await listen(app);
  t.after(close);
  await redis.config('RESETSTAT');
  for (let i = 0; i < 3; i++) assert.equal((await call('/', { 'x-user': 'alice' })).status, 200);
  const calls = (await redis.info('commandstats')).match(/cmdstat_rl\.gcra:calls=(\d+)/)[1];
  assert.equal(calls, '1', 'one claim for three requests');
  assert.equal((await limiter.check('rl:user:alice', rule, { cost: 0 })).remaining, 5);
  assert.deepEqual(mw.guard.leases().map((l) => l.units), [2]);
  await mw.close();
  assert.deepEqual(mw.guard.leases(), []);
  assert.equal((await limiter.check('rl:user:alice', rule, { cost: 0 })).remaining, 7, 'the 2 unused units are back');
});
