// The Fastify plugin over real HTTP (node-redis client), against a real server with the module.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import Fastify from 'fastify';
import { createClient } from 'redis';
import { createLimiter, fastifyRateLimit, keys } from 'redis-ratelimit-module';
import { NOW_MS, admin, startServer } from './helpers.mjs';

let server;
let adm;
let client;
let limiter;
before(async () => {
  server = await startServer();
  adm = await admin(server.port);
  client = await createClient({ url: `redis://127.0.0.1:${server.port}`, disableOfflineQueue: true }).connect();
  limiter = createLimiter(client);
});
after(async () => { await client?.quit(); adm?.disconnect(); await server?.stop(); });
beforeEach(async () => { await adm.flushall(); await adm.call('RL.CLOCK', 'SET', String(NOW_MS)); });

const silent = { warn() {}, error() {} };

async function app(options) {
  const f = Fastify({ forceCloseConnections: true });
  await f.register(fastifyRateLimit, { limiter, logger: silent, ...options });
  f.get('/', async () => ({ ok: true }));
  f.get('/health', { config: { rateLimit: false } }, async () => 'ok');
  f.post('/login', { config: { rateLimit: { limits: [{ name: 'login', rule: { algorithm: 'fixed', limit: 1, windowMs: 60000 }, key: keys.ip() }] } } },
    async () => 'in');
  f.register(async (child) => { child.get('/child', async () => 'child'); }); // encapsulated: still limited
  await f.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${f.server.address().port}`;
  const call = async (path = '/', method = 'GET', headers = {}) => {
    const res = await fetch(base + path, { method, headers });
    res.body_ = await res.text();
    return res;
  };
  return { f, call };
}

test('429 at the 4th request with draft-10 headers', async (t) => {
  const { f, call } = await app({ limits: [{ name: 'ip', rule: { algorithm: 'gcra', burst: 3, count: 1, periodMs: 1500 }, key: keys.ip() }] });
  t.after(() => f.close());
  const statuses = [];
  let last;
  for (let i = 0; i < 4; i++) { last = await call(); statuses.push(last.status); }
  assert.deepEqual(statuses, [200, 200, 200, 429]);
  assert.equal(last.headers.get('RateLimit-Policy'), '"ip";q=3;w=5');
  assert.equal(last.headers.get('RateLimit'), '"ip";r=0;t=2');
  assert.equal(last.headers.get('Retry-After'), '2');
  assert.match(last.headers.get('Content-Type'), /^application\/problem\+json/);
  assert.deepEqual(JSON.parse(last.body_)['violated-policies'], ['ip']);
  assert.equal((await call('/child')).status, 429, 'the hook reaches encapsulated routes');
});

test('route config: exempt (rateLimit: false) and per-route limits', async (t) => {
  const { f, call } = await app({ limits: [{ name: 'ip', rule: { algorithm: 'fixed', limit: 5, windowMs: 60000 }, key: keys.ip() }],
    exempt: ['/metrics'] });
  t.after(() => f.close());
  for (let i = 0; i < 7; i++) assert.equal((await call('/health')).status, 200);
  assert.equal((await call('/health')).headers.get('RateLimit'), null);
  assert.equal((await call('/metrics')).status, 404); // exempt, then Fastify's 404
  const first = await call('/login', 'POST');
  assert.equal(first.status, 200);
  assert.equal(first.headers.get('RateLimit'), '"ip";r=4;t=60, "login";r=0;t=60');
  const second = await call('/login', 'POST');
  assert.equal(second.status, 429);
  assert.deepEqual(JSON.parse(second.body_)['violated-policies'], ['login']);
  assert.deepEqual((await adm.keys('rl:*')).sort(), ['rl:ip:127.0.0.1', 'rl:login:127.0.0.1']);
});

test('trusted proxy and IPv6 /64', async (t) => {
  const { f, call } = await app({ limits: [{ name: 'ip', rule: { algorithm: 'fixed', limit: 1, windowMs: 60000 }, key: keys.ip() }],
    trustedProxies: ['127.0.0.1'] });
  t.after(() => f.close());
  assert.equal((await call('/', 'GET', { 'X-Forwarded-For': '2001:db8:a:b::1' })).status, 200);
  assert.equal((await call('/', 'GET', { 'X-Forwarded-For': '2001:db8:a:b::2' })).status, 429);
  assert.deepEqual(await adm.keys('rl:*'), ['rl:ip:2001:db8:a:b::/64']);
});
