// The Express middleware over real HTTP against a real server with the module.
import { test, before, after, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import Redis from 'ioredis';
import { createLimiter, expressRateLimit, keys, MemoryLimiter } from 'redis-ratelimit-module';
import { NOW_MS, admin, freePort, startServer } from './helpers.mjs';

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
after(async () => { await limiter.close(); redis?.disconnect(); adm?.disconnect(); await server?.stop(); });
beforeEach(async () => { await adm.flushall(); await adm.call('RL.CLOCK', 'SET', String(NOW_MS)); });

let running = [];
afterEach(async () => {
  for (const s of running) { s.closeAllConnections(); await new Promise((r) => s.close(r)); }
  running = [];
});

const silent = { warn() {}, error() {} };

// Starts an app: the middleware with `options`, routes /, /health, /webhooks/stripe, /login.
async function serve(options, { perRoute } = {}) {
  const app = express();
  app.use(expressRateLimit({ limiter, logger: silent, ...options }));
  app.get('/', (req, res) => res.json({ ok: true }));
  app.get('/health', (req, res) => res.send('ok'));
  app.post('/webhooks/stripe', (req, res) => res.send('ok'));
  if (perRoute) app.post('/login', expressRateLimit({ limiter, logger: silent, ...perRoute }), (req, res) => res.send('in'));
  else app.post('/login', (req, res) => res.send('in'));
  const s = await new Promise((resolve) => { const x = app.listen(0, '127.0.0.1', () => resolve(x)); });
  running.push(s);
  const base = `http://127.0.0.1:${s.address().port}`;
  return async (path = '/', { method = 'GET', headers = {} } = {}) => {
    const res = await fetch(base + path, { method, headers });
    res.body_ = await res.text();
    return res;
  };
}

const ipLimit = { name: 'ip', rule: { algorithm: 'gcra', burst: 3, count: 1, periodMs: 1500 }, key: keys.ip() };
const h = (res, ...names) => Object.fromEntries(names.map((n) => [n, res.headers.get(n)]));

test('429 at the 4th request, draft-10 headers, Retry-After, problem+json', async () => {
  const get = await serve({ limits: [ipLimit] });
  const seen = [];
  for (let i = 0; i < 3; i++) seen.push(await get('/'));
  assert.deepEqual(seen.map((r) => r.status), [200, 200, 200]);
  assert.deepEqual(seen.map((r) => r.headers.get('RateLimit')),
    ['"ip";r=2;t=2', '"ip";r=1;t=2', '"ip";r=0;t=2']); // next unit back within 1.5 s each time
  assert.equal(seen[0].headers.get('RateLimit-Policy'), '"ip";q=3;w=5');
  const res = await get('/');
  assert.equal(res.status, 429);
  assert.deepEqual(h(res, 'RateLimit-Policy', 'RateLimit', 'Retry-After', 'X-RateLimit-Limit'),
    { 'RateLimit-Policy': '"ip";q=3;w=5', RateLimit: '"ip";r=0;t=2', 'Retry-After': '2', 'X-RateLimit-Limit': null });
  assert.match(res.headers.get('Content-Type'), /^application\/problem\+json/);
  const body = JSON.parse(res.body_);
  assert.deepEqual(body['violated-policies'], ['ip']);
  assert.match(body.type, /#quota-exceeded$/);
  assert.deepEqual(await adm.keys('rl:*'), ['rl:ip:127.0.0.1']);
  // after one emission interval exactly one more passes
  await adm.call('RL.CLOCK', 'ADVANCE', '1500');
  assert.equal((await get('/')).status, 200);
  assert.equal((await get('/')).status, 429);
});

test('exemptions: /health and /webhooks/* are never limited', async () => {
  const get = await serve({ limits: [{ ...ipLimit, rule: { algorithm: 'fixed', limit: 1, windowMs: 60000 } }],
    exempt: ['/health', '/webhooks/*'] });
  for (let i = 0; i < 3; i++) {
    const r = await get('/health');
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('RateLimit'), null);
    assert.equal((await get('/webhooks/stripe', { method: 'POST' })).status, 200);
  }
  assert.deepEqual(await adm.keys('rl:*'), []);
  assert.equal((await get('/')).status, 200);
  assert.equal((await get('/')).status, 429);
});

test('per-route limits: a routes table and a middleware mounted on one route', async () => {
  const login = { name: 'login', rule: { algorithm: 'fixed', limit: 2, windowMs: 60000 }, key: keys.ip() };
  let get = await serve({ limits: [ipLimit], routes: [{ path: '/login', methods: ['POST'], limits: [login] }] });
  const post = () => get('/login', { method: 'POST' });
  assert.equal((await post()).headers.get('RateLimit-Policy'), '"ip";q=3;w=5, "login";q=2;w=60');
  assert.equal((await post()).status, 200);
  const r = await post();
  assert.equal(r.status, 429);
  assert.deepEqual(JSON.parse(r.body_)['violated-policies'], ['login']);
  // RL.ALL: the refused login spent nothing of the ip limit (3 - 2 = 1 left)
  assert.equal((await get('/')).headers.get('RateLimit'), '"ip";r=0;t=2');
  await adm.flushall();
  get = await serve({}, { perRoute: { limits: [login] } });
  assert.equal((await get('/')).headers.get('RateLimit'), null);
  assert.equal((await get('/login', { method: 'POST' })).headers.get('RateLimit'), '"login";r=1;t=60');
});

test('user and org checked together with one RL.ALL, keys under one hash tag', async () => {
  const who = (req) => {
    const m = /^Bearer (\w+)@(\w+)$/.exec(req.headers.authorization || '');
    return m ? { user: m[1], org: m[2] } : null;
  };
  const user = { name: 'user', rule: { algorithm: 'gcra', burst: 3, count: 1, periodMs: 1500 }, key: keys.user((req) => who(req)?.user) };
  const org = { name: 'org', rule: { algorithm: 'sliding', limit: 4, windowMs: 60000 }, key: keys.org((req) => who(req)?.org) };
  const get = await serve({ limits: [user, org], hashTag: (ctx) => (who(ctx.req) ? `org:${who(ctx.req).org}` : null) });
  const as = (u) => get('/', { headers: { Authorization: `Bearer ${u}@acme` } });
  await adm.config('RESETSTAT');
  const first = await as('alice');
  assert.equal(first.headers.get('RateLimit'), '"user";r=2;t=2, "org";r=3;t=60');
  const stats = await adm.info('commandstats');
  assert.match(stats, /cmdstat_rl\.all:calls=1,/);
  assert.doesNotMatch(stats, /cmdstat_rl\.gcra/);
  for (const u of ['alice', 'bob', 'bob']) assert.equal((await as(u)).status, 200);
  const r = await as('alice');
  assert.equal(r.status, 429);
  assert.deepEqual(JSON.parse(r.body_)['violated-policies'], ['org']);
  assert.equal(r.headers.get('RateLimit'), '"user";r=1;t=2, "org";r=0;t=60');
  assert.equal(r.headers.get('Retry-After'), '75');
  assert.deepEqual((await adm.keys('rl:*')).sort(),
    ['rl:{org:acme}:org:acme', 'rl:{org:acme}:user:alice', 'rl:{org:acme}:user:bob']);
  // anonymous: neither limit applies
  assert.equal((await get('/')).headers.get('RateLimit'), null);
});

test('API key: hashed into the key, never stored in clear', async () => {
  const get = await serve({ limits: [{ name: 'key', rule: { algorithm: 'fixed', limit: 1, windowMs: 60000 }, key: keys.apiKey() }] });
  assert.equal((await get('/', { headers: { 'X-API-Key': 'sk_live_secret' } })).status, 200);
  assert.equal((await get('/', { headers: { 'X-API-Key': 'sk_live_secret' } })).status, 429);
  assert.equal((await get('/', { headers: { 'X-API-Key': 'other' } })).status, 200);
  const ks = await adm.keys('rl:*');
  assert.equal(ks.length, 2);
  assert.ok(ks.every((k) => /^rl:key:[\w-]{22}$/.test(k) && !k.includes('secret')), ks.join());
});

test('IPv6 clients keyed on their /64, behind a trusted proxy', async () => {
  const get = await serve({ limits: [{ ...ipLimit, rule: { algorithm: 'fixed', limit: 2, windowMs: 60000 } }], trustedProxies: 1 });
  const from = (a) => get('/', { headers: { 'X-Forwarded-For': `6.6.6.6, ${a}` } });
  assert.equal((await from('2001:db8:1:2::1')).status, 200);
  assert.equal((await from('2001:db8:1:2:ffff::9')).status, 200); // same /64
  assert.equal((await from('2001:db8:1:2::abcd')).status, 429);
  assert.equal((await from('2001:db8:1:3::1')).status, 200); // another /64
  assert.deepEqual((await adm.keys('rl:*')).sort(), ['rl:ip:2001:db8:1:2::/64', 'rl:ip:2001:db8:1:3::/64']);
});

test('trusted proxies: a forged X-Forwarded-For is ignored', async () => {
  let get = await serve({ limits: [ipLimit], trustedProxies: ['127.0.0.1', '10.0.0.0/8'] });
  for (let i = 0; i < 3; i++) await get('/', { headers: { 'X-Forwarded-For': `6.6.6.${i}, 203.0.113.7, 10.1.2.3` } });
  assert.deepEqual(await adm.keys('rl:*'), ['rl:ip:203.0.113.7']);
  await adm.flushall();
  get = await serve({ limits: [ipLimit] }); // no trusted proxy: the header is ignored
  await get('/', { headers: { 'X-Forwarded-For': '203.0.113.7' } });
  assert.deepEqual(await adm.keys('rl:*'), ['rl:ip:127.0.0.1']);
});

test('legacy X-RateLimit-* headers on request', async () => {
  const get = await serve({ limits: [ipLimit], headers: { legacy: true } });
  const r = await get('/');
  assert.equal(r.headers.get('X-RateLimit-Limit'), '3');
  assert.equal(r.headers.get('X-RateLimit-Remaining'), '2');
  assert.ok(Math.abs(Number(r.headers.get('X-RateLimit-Reset')) - Math.ceil(Date.now() / 1000 + 1.5)) <= 2);
});

// ---------------------------------------------------------------------------- Redis down

async function deadLimiter() {
  const c = new Redis({ port: await freePort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0,
    lazyConnect: true, retryStrategy: () => null });
  c.on('error', () => {});
  const l = createLimiter(c);
  return { l, close: () => c.disconnect() };
}

test('Redis down: fail-open, fail-closed, per limit', async (t) => {
  const dead = await deadLimiter();
  t.after(dead.close);
  const events = [];
  const open = { ...ipLimit, failOpen: true };
  const closed = { name: 'strict', rule: { algorithm: 'fixed', limit: 1, windowMs: 1000 }, key: keys.ip(), failOpen: false };
  let get = await serve({ limiter: dead.l, limits: [open], onDecision: (e) => events.push(e) });
  const r = await get('/');
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('RateLimit'), null);
  assert.equal(events[0].limits[0].source, 'fail-open');
  assert.ok(events[0].durationMs < 200);
  get = await serve({ limiter: dead.l, limits: [open, closed] });
  const c = await get('/');
  assert.equal(c.status, 503);
  assert.equal(c.headers.get('Retry-After'), '1');
});

test('a hung Redis (accepts, never answers) costs at most the timeout', async (t) => {
  const net = await import('node:net');
  const sockets = new Set();
  const hung = net.createServer((s) => sockets.add(s));
  await new Promise((r) => hung.listen(0, '127.0.0.1', r));
  const c = new Redis({ port: hung.address().port, host: '127.0.0.1', maxRetriesPerRequest: 0, enableReadyCheck: false });
  c.on('error', () => {});
  t.after(() => { c.disconnect(); for (const s of sockets) s.destroy(); hung.close(); });
  const get = await serve({ limiter: createLimiter(c), limits: [{ ...ipLimit, failOpen: false }], timeoutMs: 50 });
  const t0 = performance.now();
  const r = await get('/');
  assert.equal(r.status, 503);
  assert.ok(performance.now() - t0 < 500, `${performance.now() - t0} ms`);
});

test('Redis down: the in-memory fallback limits at the right request', async (t) => {
  const dead = await deadLimiter();
  t.after(dead.close);
  const events = [];
  const get = await serve({ limiter: dead.l, limits: [{ ...ipLimit, fallback: true }], memory: new MemoryLimiter({ now: () => NOW_MS }),
    onDecision: (e) => events.push(e) });
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push((await get('/')).status);
  assert.deepEqual(statuses, [200, 200, 200, 429]);
  assert.deepEqual(events.map((e) => e.limits[0].source), ['fallback', 'fallback', 'fallback', 'fallback']);
  const r = await get('/');
  assert.equal(r.headers.get('RateLimit'), '"ip";r=0;t=2');
});

test('shadow mode: spends and reports, never refuses', async () => {
  const events = [];
  const get = await serve({ limits: [ipLimit], shadow: true, onDecision: (e) => events.push(e) });
  const statuses = [];
  for (let i = 0; i < 5; i++) statuses.push((await get('/')).status);
  assert.deepEqual(statuses, [200, 200, 200, 200, 200]);
  assert.deepEqual(events.map((e) => e.shadowRefused), [false, false, false, true, true]);
  assert.deepEqual(events.map((e) => e.outcome), Array(5).fill('allowed'));
  assert.equal(events[3].limits[0].decision.retryAfterMs, 1500);
  // it spent: the key holds three units
  const d = await limiter.gcra('rl:ip:127.0.0.1', { burst: 3, count: 1, periodMs: 1500, dryrun: true });
  assert.equal(d.allowed, false);
  // a shadow limit beside an enforced one: the enforced one still refuses on its own
  events.length = 0;
  await adm.flushall();
  const get2 = await serve({ limits: [{ ...ipLimit, name: 'new', shadow: true, rule: { algorithm: 'fixed', limit: 1, windowMs: 60000 } },
    { ...ipLimit, rule: { algorithm: 'fixed', limit: 2, windowMs: 60000 } }], onDecision: (e) => events.push(e) });
  assert.deepEqual([(await get2('/')).status, (await get2('/')).status, (await get2('/')).status], [200, 200, 429]);
  assert.deepEqual(events.map((e) => e.shadowRefused), [false, true, true]);
  assert.equal((await get2('/')).headers.get('RateLimit'), '"ip";r=0;t=60'); // only the enforced limit
});
