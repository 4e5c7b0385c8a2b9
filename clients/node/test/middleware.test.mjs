// The middleware's fixes of issue 24 over real HTTP, through Express and Fastify, against a
// real server with the module: blockMs beside other limits (its own command, after the
// others' RL.ALL), the path the app sees under a mount, refusedBy in the event, the breaker
// after a Redis failure, and errors that are not a failure of Redis (500, not fail-open).
// The shared conformance spec checks the headers; this checks what it cannot express
// (commands sent, events, a failing Redis).
import { test, before, after, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import Fastify from 'fastify';
import Redis from 'ioredis';
import {
  CircuitOpenError, MemoryLimiter, createLimiter, expressRateLimit, fastifyRateLimit, isUnavailable,
} from 'redis-ratelimit-module';
import { NOW_MS, admin, startServer } from './helpers.mjs';

let server;
let adm;
let redis;
before(async () => {
  server = await startServer();
  adm = await admin(server.port);
  redis = new Redis({ port: server.port, host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  await new Promise((r) => redis.once('ready', r));
});
after(async () => { redis?.disconnect(); adm?.disconnect(); await server?.stop(); });
beforeEach(async () => { await adm.flushall(); await adm.call('RL.CLOCK', 'SET', String(NOW_MS)); });

const closers = [];
afterEach(async () => { while (closers.length) await closers.pop()(); });

const silent = { warn() {}, error() {} };

/** A client that sends through the real ioredis connection, records every command, and
 * fails like an unreachable Redis while `down` is set. */
function recordingClient() {
  const c = {
    sent: [],
    down: false,
    async send(args) {
      c.sent.push(args[0]);
      if (c.down) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
      return redis.call(...args);
    },
  };
  return c;
}

async function expressServer(options, mount) {
  const app = express();
  if (mount) app.use(mount, expressRateLimit(options)); else app.use(expressRateLimit(options));
  app.use((req, res) => res.type('text/plain').send('ok'));
  // eslint-disable-next-line no-unused-vars
  app.use((err, req, res, next) => res.status(500).send('error'));
  const s = await new Promise((resolve) => { const x = app.listen(0, '127.0.0.1', () => resolve(x)); });
  closers.push(async () => { s.closeAllConnections(); await new Promise((r) => s.close(r)); });
  return `http://127.0.0.1:${s.address().port}`;
}

async function fastifyServer(options, mount) {
  const app = Fastify({ forceCloseConnections: true });
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
  closers.push(() => app.close());
  return `http://127.0.0.1:${app.server.address().port}`;
}

const header = (name) => (ctx) => ctx.headers[name] ?? null;
const gcra = (burst, periodMs) => ({ algorithm: 'gcra', burst, count: 1, periodMs });
const fixed = (limit, windowMs) => ({ algorithm: 'fixed', limit, windowMs });

for (const [fw, serve] of [['express', expressServer], ['fastify', fastifyServer]]) {
  const get = (base, p, { method = 'GET', headers = {} } = {}) => fetch(base + p, { method, headers })
    .then(async (r) => { r.body_ = await r.text(); return r; });

  test(`${fw}: a blockMs limit is its own RL.<ALG> ... BLOCK, after the others' RL.ALL admitted`, async () => {
    const client = recordingClient();
    const events = [];
    const base = await serve({
      limiter: createLimiter(client), logger: silent, onDecision: (e) => events.push(e),
      limits: [{ name: 'user', rule: gcra(10, 6000), key: header('x-user') },
        { name: 'org', rule: fixed(2, 60000), key: header('x-org') }],
      routes: [{ path: '/login', methods: ['POST'],
        limits: [{ name: 'login', rule: fixed(1, 60000), key: header('x-ip'), blockMs: 900_000 }] }],
    });
    const login = (user, ip) => get(base, '/login', { method: 'POST', headers: { 'x-user': user, 'x-org': 'acme', 'x-ip': ip } });
    assert.equal((await login('alice', '192.0.2.1')).status, 200);
    assert.deepEqual(client.sent, ['RL.ALL', 'RL.FIXED']);
    assert.equal(events[0].refusedBy, 0);
    const r = await login('bob', '192.0.2.1'); // org admits (2nd of 2), login refuses and blocks
    assert.equal(r.status, 429);
    assert.equal(r.headers.get('Retry-After'), '900');
    assert.deepEqual(JSON.parse(r.body_)['violated-policies'], ['login']);
    const reader = createLimiter(adm);
    const info = await reader.info('rl:login:192.0.2.1');
    await reader.close(); // the second connection it opened for exact integers
    assert.equal(info.blocked_until_ms, NOW_MS + 900_000);
    // the org is spent: RL.ALL refuses (refusedBy 2, the org) and the login limit is not asked
    client.sent.length = 0;
    const x = await login('carol', '192.0.2.2');
    assert.equal(x.status, 429);
    assert.deepEqual(client.sent, ['RL.ALL']);
    assert.equal(events.at(-1).refusedBy, 2);
    assert.deepEqual(events.at(-1).limits.map((l) => l.name), ['user', 'org']);
    assert.equal(await adm.exists('rl:login:192.0.2.2'), 0);
  });

  test(`${fw}: two blockMs limits: one after the other, the second not asked when the first refuses`, async () => {
    const client = recordingClient();
    const base = await serve({
      limiter: createLimiter(client), logger: silent,
      limits: [{ name: 'ip', rule: fixed(1, 60000), key: header('x-ip'), blockMs: 600_000 },
        { name: 'account', rule: fixed(3, 60000), key: header('x-account'), blockMs: 900_000 }],
    });
    const login = (ip, account) => get(base, '/', { headers: { 'x-ip': ip, 'x-account': account } });
    assert.equal((await login('192.0.2.1', 'a')).status, 200);
    assert.deepEqual(client.sent, ['RL.FIXED', 'RL.FIXED']);
    client.sent.length = 0;
    const r = await login('192.0.2.1', 'b'); // the IP refuses (and blocks): the account is not asked
    assert.equal(r.status, 429);
    assert.equal(r.headers.get('Retry-After'), '600');
    assert.equal(r.headers.get('RateLimit'), '"ip";r=0;t=60');
    assert.deepEqual(client.sent, ['RL.FIXED']);
    assert.equal(await adm.exists('rl:account:b'), 0);
  });

  test(`${fw}: mounted under /api, routes and exemptions match the path below the mount`, async () => {
    const base = await serve({
      limiter: createLimiter(redis), logger: silent,
      limits: [{ name: 'all', rule: fixed(100, 60000), key: header('x-user') }],
      routes: [{ path: '/login', limits: [{ name: 'login', rule: fixed(1, 60000), key: header('x-user') }] },
        { path: /^\/admin(\/|$)/, limits: [{ name: 'admin', rule: fixed(1, 60000), key: header('x-user') }] }],
      exempt: ['/health', '/webhooks/*'],
    }, '/api');
    const as = (p) => get(base, p, { headers: { 'x-user': 'u' } });
    assert.equal((await as('/api/login?next=/x')).headers.get('RateLimit-Policy'), '"all";q=100;w=60, "login";q=1;w=60');
    assert.equal((await as('/api/login')).status, 429);
    for (let i = 0; i < 3; i++) {
      const h = await as('/api/health');
      assert.equal(h.status, 200);
      assert.equal(h.headers.get('RateLimit'), null);
      assert.equal((await as('/api/webhooks/stripe')).headers.get('RateLimit'), null);
    }
    assert.equal((await as('/api/admin/users')).headers.get('RateLimit-Policy'), '"all";q=100;w=60, "admin";q=1;w=60');
    assert.equal((await as('/api')).headers.get('RateLimit-Policy'), '"all";q=100;w=60');
    assert.equal((await as('/health')).headers.get('RateLimit'), null); // outside the mount
    assert.deepEqual((await adm.keys('rl:*')).sort(), ['rl:admin:u', 'rl:all:u', 'rl:login:u']);
  });

  test(`${fw}: breaker: after a failure Redis is not asked for breakerMs, then tried again`, async () => {
    const client = recordingClient();
    let now = 0;
    const events = [];
    const base = await serve({
      limiter: createLimiter(client), logger: silent, now: () => now, onDecision: (e) => events.push(e),
      memory: new MemoryLimiter({ now: () => NOW_MS }), // a minute boundary: t = 60
      limits: [{ name: 'open', rule: gcra(5, 1000), key: header('x-user') },
        { name: 'closed', rule: fixed(5, 60000), key: header('x-org'), failOpen: false },
        { name: 'mem', rule: fixed(1, 60000), key: header('x-user'), fallback: true }],
    });
    const as = (headers) => get(base, '/', { headers });
    client.down = true;
    // fail open + fallback: 200; the in-memory fallback's header is there
    let r = await as({ 'x-user': 'u' });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('RateLimit'), '"mem";r=0;t=60');
    assert.equal(client.sent.length, 1);
    assert.deepEqual(events[0].limits.map((l) => l.source), ['fail-open', 'fallback']);
    assert.ok(!(events[0].limits[0].error instanceof CircuitOpenError));
    // within breakerMs (default 1000): nothing sent, each limit on its failure path at once
    now = 999;
    r = await as({ 'x-user': 'w', 'x-org': 'o' });
    assert.equal(r.status, 503);
    assert.equal(r.headers.get('Retry-After'), '1');
    assert.deepEqual(JSON.parse(r.body_)['violated-policies'], ['closed']);
    r = await as({ 'x-user': 'u', 'x-org': 'o' });
    assert.equal(r.status, 429, 'a refusal (the fallback\'s own limit of 1) wins over 503');
    assert.deepEqual(JSON.parse(r.body_)['violated-policies'], ['mem']);
    assert.equal(client.sent.length, 1);
    assert.ok(events.slice(1).every((e) => e.limits.every((l) => l.error instanceof CircuitOpenError)));
    assert.deepEqual(events[1].limits.map((l) => l.source), ['fail-open', 'fail-closed', 'fallback']);
    // breakerMs later one request tries Redis again; it is back
    client.down = false;
    now = 1000;
    r = await as({ 'x-user': 'v', 'x-org': 'o' });
    assert.equal(r.status, 200);
    assert.equal(client.sent.length, 2);
    assert.equal(r.headers.get('RateLimit'), '"open";r=4;t=1, "closed";r=4;t=60, "mem";r=0;t=60');
  });

  test(`${fw}: breakerMs 0: every request tries Redis`, async () => {
    const client = recordingClient();
    const base = await serve({ limiter: createLimiter(client), logger: silent, breakerMs: 0, now: () => 0,
      limits: [{ name: 'open', rule: gcra(5, 1000), key: header('x-user') }] });
    client.down = true;
    for (let i = 0; i < 3; i++) assert.equal((await get(base, '/', { headers: { 'x-user': 'u' } })).status, 200);
    assert.equal(client.sent.length, 3);
  });

  test(`${fw}: a QUEUE limit shapes: an admitted request proceeds after its delay_ms`, async () => {
    // The test clock is frozen: the module schedules one request per 100 ms; the middleware
    // waits each admitted request's delay (real time, 100 ms here) before it proceeds.
    const base = await serve({ limiter: createLimiter(redis), logger: silent,
      limits: [{ name: 'q', rule: { algorithm: 'queue', capacity: 2, intervalMs: 100 }, key: header('x-user') }] });
    const timed = async () => {
      const t0 = performance.now();
      const r = await get(base, '/', { headers: { 'x-user': 'u' } });
      return { status: r.status, ms: performance.now() - t0, rl: r.headers.get('RateLimit') };
    };
    const a = await timed();
    const b = await timed();
    const c = await timed();
    assert.deepEqual([a.status, b.status, c.status], [200, 200, 429]);
    assert.ok(b.ms >= 95, `the 2nd request waited ${b.ms} ms for its turn`);
    assert.equal(c.rl, '"q";r=0;t=1');
  });

  test(`${fw}: a cost above the limit's limit: 429 by that limit before Redis, for every algorithm`, async () => {
    const rules = [gcra(3, 20000), { algorithm: 'tokenbucket', capacity: 3, refillTokens: 1, refillPeriodMs: 20000 },
      { algorithm: 'sliding', limit: 3, windowMs: 60000 }, fixed(3, 60000), { algorithm: 'log', limit: 3, windowMs: 60000 },
      { algorithm: 'queue', capacity: 3, intervalMs: 20000 }];
    for (const rule of rules) {
      const client = recordingClient();
      const events = [];
      const base = await serve({
        limiter: createLimiter(client), logger: silent, onDecision: (e) => events.push(e), headers: { legacy: true },
        limits: [{ name: 'org', rule: fixed(100, 60000), key: () => 'acme' },
          { name: 'user', rule, key: () => 'alice', cost: (ctx) => Number(ctx.headers['x-cost'] ?? 1) },
          { name: 'probe', rule: fixed(1, 60000), key: () => 'p', cost: 5, shadow: true }],
      });
      const r = await get(base, '/', { headers: { 'x-cost': '4' } });
      assert.equal(r.status, 429, rule.algorithm);
      assert.deepEqual(client.sent, [], 'Redis is not asked');
      for (const h of ['Retry-After', 'RateLimit', 'RateLimit-Policy', 'X-RateLimit-Reset']) assert.equal(r.headers.get(h), null, h);
      assert.deepEqual(JSON.parse(r.body_), {
        type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
        title: 'Request cannot be satisfied as assigned quota has been exceeded',
        status: 429, 'violated-policies': ['user'],
        detail: "request cost 4 exceeds limit 'user' (3): it can never be admitted",
      });
      assert.equal(events.length, 1);
      assert.equal(events[0].outcome, 'refused');
      assert.deepEqual(events[0].limits.map((l) => [l.name, l.source, l.shadow]).sort(),
        [['probe', 'cost', true], ['user', 'cost', false]]);
      // cost 3 is within the limit: asked and admitted; the shadow probe is still not sent
      const ok = await get(base, '/', { headers: { 'x-cost': '3' } });
      assert.equal(ok.status, 200, rule.algorithm);
      assert.deepEqual(client.sent, ['RL.ALL']);
      assert.equal(events.at(-1).shadowRefused, true);
      await adm.flushall();
      await adm.call('RL.CLOCK', 'SET', String(NOW_MS));
    }
  });

  test(`${fw}: an error that is not Redis failing (WRONGTYPE) answers 500, never fails open`, async () => {
    await adm.set('rl:user:u', 'a string');
    const events = [];
    const base = await serve({ limiter: createLimiter(redis), logger: silent, onDecision: (e) => events.push(e),
      limits: [{ name: 'user', rule: gcra(5, 1000), key: header('x-user') }] });
    const r = await get(base, '/', { headers: { 'x-user': 'u' } });
    assert.equal(r.status, 500);
    assert.equal(events.length, 0);
    assert.equal((await get(base, '/', { headers: { 'x-user': 'v' } })).status, 200, 'no breaker tripped');
  });
}

test('isUnavailable: connection errors, timeouts and the same error replies as Python', () => {
  // no reply at all: the failure path
  for (const m of ['connect ECONNREFUSED 127.0.0.1:6379', 'Connection is closed.',
    'redis-ratelimit: no reply within 50 ms', 'Stream isn\'t writeable and enableOfflineQueue options is false',
    'The client is closed', 'Reached the max retries per request limit (which is 0)',
    'ERR max number of clients reached']) {
    assert.equal(isUnavailable(new Error(m)), true, m);
  }
  assert.equal(isUnavailable(new CircuitOpenError()), true);
  // the list shared with the Python package (UNAVAILABLE_REPLIES): the failure path
  for (const m of ['OOM command not allowed when used memory > \'maxmemory\'.',
    'LOADING Redis is loading the dataset in memory',
    'MISCONF Redis is configured to save RDB snapshots, but it\'s currently unable to persist',
    'READONLY You can\'t write against a read only replica.', 'CLUSTERDOWN The cluster is down',
    'MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to \'no\'.',
    'BUSY Redis is busy running a script.', 'NOREPLICAS Not enough good replicas to write.',
    'TRYAGAIN Multiple keys request during rehashing of slot']) {
    assert.equal(isUnavailable(new Error(m)), true, m);
  }
  // every other error reply is a bug, not an outage: it propagates (500)
  for (const m of ['ERR COST must not exceed the limit', 'ERR syntax error',
    'WRONGTYPE Operation against a key holding the wrong kind of value', 'BUSYKEY Target key name already exists.',
    'NOAUTH Authentication required.', 'WRONGPASS invalid username-password pair or user is disabled.',
    'NOPERM this user has no permissions to run the \'rl.gcra\' command',
    'CROSSSLOT Keys in request don\'t hash to the same slot']) {
    assert.equal(isUnavailable(new Error(m)), false, m);
  }
  assert.equal(isUnavailable(new TypeError('redis-ratelimit: burst must be an integer')), false);
});

test('a cluster without a hash tag: one command per limit, whatever slots the keys hash to', async () => {
  const sent = [];
  const cc = { cluster: true, async send(args) { sent.push(args[0]); return redis.call(...args); } };
  const base = await expressServer({
    limiter: createLimiter(cc), logger: silent,
    limits: [{ name: 'user', rule: fixed(2, 60000), key: header('x-user') },
      { name: 'org', rule: fixed(3, 60000), key: header('x-org') }],
    hashTag: (ctx) => ctx.headers['x-tag'] ?? null,
  });
  // no tag for this request: two commands (the single test server takes any keys)
  assert.equal((await fetch(`${base}/`, { headers: { 'x-user': 'a', 'x-org': 'o' } })).status, 200);
  assert.deepEqual(sent, ['RL.FIXED', 'RL.FIXED']);
  sent.length = 0;
  // a tag: one atomic RL.ALL
  assert.equal((await fetch(`${base}/`, { headers: { 'x-user': 'a', 'x-org': 'o', 'x-tag': 'acme' } })).status, 200);
  assert.deepEqual(sent, ['RL.ALL']);
});
