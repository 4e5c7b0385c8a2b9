'use strict';
// The Express middleware over real HTTP against a real redis-server with the module.
//
// RL_REDIS_PORT: use the server already listening there (scripts/examples-test.sh starts one;
// it must have the module loaded with `test-clock yes`). Otherwise a server is started here
// from RL_MODULE (default: target/release/libredis_ratelimit.so of this repository).
//
// The module's clock is frozen (RL.CLOCK SET) at a multiple of 60 s, so every number below
// is exact: GCRA answers in whole emission intervals, sliding windows start at NOW_MS.
//
// A user in an organisation is checked with one atomic RL.ALL on the keys
// rl:{org:<org>}:user:<user> and rl:{org:<org>} (one Redis Cluster slot); the tests count the
// commands the middleware sends with INFO commandstats.

const { test, before, after, beforeEach, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const Redis = require('ioredis');

const { createApp } = require('../app');
const { bearerTokens, check, clientIp, connect, gcra, sliding } = require('../ratelimit');

const ROOT = path.resolve(__dirname, '../../..');
const NOW_MS = 1_700_000_040_000;

const TOKENS = {
  'alice-token': { user: 'alice', org: 'acme' },
  'bob-token': { user: 'bob', org: 'acme' },
  'carol-token': { user: 'carol' }, // no organisation
};

const ALICE = 'rl:{org:acme}:user:alice';
const BOB = 'rl:{org:acme}:user:bob';
const ACME = 'rl:{org:acme}';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

let redisPort;
let serverProc;
let tmpDir;
let admin; // a plain client for setting up and inspecting state

before(async () => {
  if (process.env.RL_REDIS_PORT) {
    redisPort = Number(process.env.RL_REDIS_PORT);
  } else {
    const mod = process.env.RL_MODULE || path.join(ROOT, 'target/release/libredis_ratelimit.so');
    assert.ok(fs.existsSync(mod), `module not built: ${mod} (cargo build --release)`);
    redisPort = await freePort();
    tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-node-'));
    serverProc = spawn('redis-server', [
      '--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', tmpDir, '--loadmodule', path.resolve(mod), 'test-clock', 'yes',
    ], { stdio: 'ignore' });
  }
  for (let i = 0; ; i++) {
    const probe = new Redis({ port: redisPort, lazyConnect: true, maxRetriesPerRequest: 0,
                              retryStrategy: () => null });
    probe.on('error', () => {});
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      break;
    } catch (err) {
      probe.disconnect();
      if (i >= 100) throw err;
      await sleep(50);
    }
  }
  admin = new Redis({ port: redisPort });
});

after(async () => {
  if (admin) admin.disconnect();
  if (serverProc) {
    const exited = new Promise((r) => serverProc.once('exit', r));
    serverProc.kill('SIGTERM');
    await exited;
    fs.rmSync(tmpDir, { recursive: true, force: true });
  }
});

beforeEach(async () => {
  await admin.flushall();
  await admin.call('RL.CLOCK', 'SET', NOW_MS);
});

// Apps started by a test, closed after it.
let running = [];
afterEach(async () => {
  for (const { server, redis } of running) {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    redis.disconnect();
  }
  running = [];
});

// Starts the example app with these options on a free port; returns `get(path, headers)`.
// `redisUrl`: where the middleware's client (built by `connect`, 50 ms) points.
async function serve(options = {}, { redisUrl, waitReady = true } = {}) {
  const redis = connect(redisUrl || `redis://127.0.0.1:${redisPort}/0`);
  if (waitReady) await new Promise((resolve) => redis.once('ready', resolve));
  const logged = [];
  const logger = { warn: (m) => logged.push(m), error: (m) => logged.push(m) };
  const app = createApp({
    redis,
    user: gcra('user', 3, 1, 1500), // q=3, w=ceil(4.5)=5
    org: sliding('org', 4, 60_000), // q=4, w=60
    ip: gcra('ip', 2, 1, 1000), // q=2, w=2
    identify: bearerTokens(TOKENS),
    logger,
    ...options,
  });
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  running.push({ server, redis });
  const base = `http://127.0.0.1:${server.address().port}`;
  const get = async (p = '/', headers = {}) => {
    const res = await fetch(base + p, { headers });
    res.text = await res.text();
    return res;
  };
  return { get, logged };
}

const auth = (token) => ({ Authorization: `Bearer ${token}` });

function rlHeaders(res) {
  const out = {};
  for (const name of ['RateLimit-Policy', 'RateLimit', 'RateLimit-Limit', 'RateLimit-Remaining',
    'RateLimit-Reset', 'Retry-After']) {
    out[name] = res.headers.get(name);
  }
  return out;
}

// The module's rate commands run since the last CONFIG RESETSTAT: {command: calls}.
async function rlCalls() {
  const out = {};
  const stats = await admin.info('commandstats');
  for (const m of stats.matchAll(/^cmdstat_(rl\.[^:]+):calls=(\d+)/gm)) {
    if (m[1] !== 'rl.clock') out[m[1]] = Number(m[2]);
  }
  return out;
}

// Units left on a GCRA key right now (a DRYRUN counts the request it imagines).
async function gcraLeft(key, burst = 3, count = 1, periodMs = 1500) {
  const [allowed, , remaining] = await admin.call('RL.GCRA', key, burst, count, periodMs, 'DRYRUN');
  return allowed ? remaining + 1 : remaining;
}

// ---------------------------------------------------------------------------- admitted

test('anonymous request is admitted with headers', async () => {
  const { get } = await serve();
  const res = await get('/');
  assert.equal(res.status, 200);
  assert.deepEqual(JSON.parse(res.text), { hello: 'world' });
  // RL.GCRA rl:ip:127.0.0.1 2 1 1000 -> 1 2 1 0 1000
  assert.deepEqual(rlHeaders(res), {
    'RateLimit-Policy': '"ip";q=2;w=2',
    RateLimit: '"ip";r=1;t=1',
    'RateLimit-Limit': '2',
    'RateLimit-Remaining': '1',
    'RateLimit-Reset': '1',
    'Retry-After': null,
  });
  const pttl = await admin.pttl('rl:ip:127.0.0.1');
  assert.ok(pttl > 0 && pttl <= 1000, `pttl ${pttl}`);
  assert.deepEqual(await admin.keys('rl:*'), ['rl:ip:127.0.0.1']);
});

test('authenticated request lists user and org', async () => {
  const { get } = await serve();
  const res = await get('/', auth('alice-token'));
  assert.equal(res.status, 200);
  // user: GCRA 3 1 1500 -> 1 3 2 0 1500; org: SLIDING 4 60000 at a window start
  // -> 1 4 3 0 120000 (the end of the next window, as the current one has a count)
  assert.deepEqual(rlHeaders(res), {
    'RateLimit-Policy': '"user";q=3;w=5, "org";q=4;w=60',
    RateLimit: '"user";r=2;t=2, "org";r=3;t=120',
    'RateLimit-Limit': '3', // the tightest: user, 2 left
    'RateLimit-Remaining': '2',
    'RateLimit-Reset': '2',
    'Retry-After': null,
  });
  // One hash tag: both keys in one Redis Cluster slot, as RL.ALL requires there.
  assert.deepEqual((await admin.keys('rl:*')).sort(), [ACME, ALICE]);
});

test('one command per request', async () => {
  const { get } = await serve();
  await admin.config('RESETSTAT');
  assert.equal((await get('/', auth('alice-token'))).status, 200); // user + org: one RL.ALL
  assert.deepEqual(await rlCalls(), { 'rl.all': 1 });
  await admin.config('RESETSTAT');
  assert.equal((await get('/', auth('carol-token'))).status, 200); // no org: one limit
  assert.equal((await get('/')).status, 200); // anonymous: the ip limit
  assert.deepEqual(await rlCalls(), { 'rl.gcra': 2 });
  assert.deepEqual((await admin.keys('rl:*')).sort(),
    [ACME, ALICE, 'rl:ip:127.0.0.1', 'rl:user:carol'].sort());
});

// ---------------------------------------------------------------------------- refused

test('over the limit is 429 with Retry-After', async () => {
  const { get } = await serve();
  const seen = [];
  for (let i = 0; i < 3; i++) seen.push(await get('/', auth('carol-token')));
  assert.deepEqual(seen.map((r) => r.status), [200, 200, 200]);
  assert.deepEqual(seen.map((r) => r.headers.get('RateLimit')),
    ['"user";r=2;t=2', '"user";r=1;t=3', '"user";r=0;t=5']); // reset 1500, 3000, 4500 ms

  const res = await get('/', auth('carol-token'));
  assert.equal(res.status, 429);
  // The module: RL.GCRA ... -> 0 3 0 1500 4500: retry in 1500 ms, Retry-After rounds up.
  assert.deepEqual(rlHeaders(res), {
    'RateLimit-Policy': '"user";q=3;w=5',
    RateLimit: '"user";r=0;t=2',
    'RateLimit-Limit': '3',
    'RateLimit-Remaining': '0',
    'RateLimit-Reset': '2',
    'Retry-After': '2',
  });
  assert.match(res.headers.get('Content-Type'), /^application\/problem\+json/);
  const body = JSON.parse(res.text);
  assert.deepEqual(body['violated-policies'], ['user']);
  assert.match(body.type, /#quota-exceeded$/);

  // The refusal spent nothing: after exactly one emission interval one request passes.
  await admin.call('RL.CLOCK', 'ADVANCE', 1499);
  assert.equal((await get('/', auth('carol-token'))).status, 429);
  await admin.call('RL.CLOCK', 'ADVANCE', 1);
  const again = await get('/', auth('carol-token'));
  assert.equal(again.status, 200);
  assert.equal(again.headers.get('RateLimit'), '"user";r=0;t=5');
  assert.equal((await get('/', auth('carol-token'))).status, 429);
});

test('org limit runs out before user limit', async () => {
  const { get } = await serve();
  for (const token of ['alice-token', 'alice-token', 'bob-token', 'bob-token']) {
    assert.equal((await get('/', auth(token))).status, 200); // org: 4 of 4 spent
  }
  await admin.config('RESETSTAT');
  const res = await get('/', auth('alice-token'));
  assert.equal(res.status, 429);
  assert.deepEqual(await rlCalls(), { 'rl.all': 1 }); // one atomic call, no DRYRUN pass first
  assert.deepEqual(JSON.parse(res.text)['violated-policies'], ['org']);
  // Sliding window: previous 0, current 4 at the window start. Room for one more once
  // 4 * (1 - f) + 1 <= 4 in the next window, i.e. at f = 1/4: 60 s + 15 s.
  assert.deepEqual(await admin.call('RL.SLIDING', ACME, 4, 60000, 'DRYRUN'),
    [0, 4, 0, 75000, 120000]);
  assert.deepEqual(rlHeaders(res), {
    'RateLimit-Policy': '"user";q=3;w=5, "org";q=4;w=60',
    // Alice spent 2 of 3 and the refused request spent nothing: 1 left.
    RateLimit: '"user";r=1;t=5, "org";r=0;t=75',
    'RateLimit-Limit': '4', // the refusing limit is the tightest
    'RateLimit-Remaining': '0',
    'RateLimit-Reset': '75',
    'Retry-After': '75',
  });
  // Alice's own quota is untouched by the org refusals: one unit is still there.
  assert.equal((await get('/', auth('alice-token'))).status, 429);
  assert.deepEqual(
    (await admin.call('RL.GCRA', ALICE, 3, 1, 1500, 'DRYRUN')).slice(0, 3), [1, 3, 0]);
  assert.equal(await gcraLeft(ALICE), 1);
  assert.equal(await gcraLeft(BOB), 1);
  // A user without an organisation is not affected.
  assert.equal((await get('/', auth('carol-token'))).status, 200);
});

test('several refusals report the longest retry', async () => {
  const { get } = await serve();
  for (const token of ['alice-token', 'alice-token', 'alice-token', 'bob-token']) {
    assert.equal((await get('/', auth(token))).status, 200);
  }
  const res = await get('/', auth('alice-token')); // user: 0 left (1.5 s), org: 0 left (75 s)
  assert.equal(res.status, 429);
  assert.deepEqual(JSON.parse(res.text)['violated-policies'], ['user', 'org']);
  assert.equal(res.headers.get('RateLimit'), '"user";r=0;t=2, "org";r=0;t=75');
  assert.equal(res.headers.get('Retry-After'), '75');
  assert.equal(res.headers.get('RateLimit-Reset'), '75');
  assert.equal(res.headers.get('RateLimit-Limit'), '4');
});

// 12 requests at once (6 Alice, 6 Bob; org 4, each user 3): exactly 4 pass, and every unit a
// user spent belongs to a request that passed. A check-then-spend in two round trips could
// let another request in between and spend a user's unit for a 429.
test('concurrent requests spend user and org together', async () => {
  const { get } = await serve();
  const tokens = Array.from({ length: 12 }, (_, i) => (i % 2 ? 'bob-token' : 'alice-token'));
  const statuses = (await Promise.all(tokens.map((t) => get('/', auth(t))))).map((r) => r.status);
  assert.deepEqual([...statuses].sort(), [...Array(4).fill(200), ...Array(8).fill(429)]);
  const passed = (token) => tokens.filter((t, i) => t === token && statuses[i] === 200).length;
  assert.equal(3 - (await gcraLeft(ALICE)), passed('alice-token'));
  assert.equal(3 - (await gcraLeft(BOB)), passed('bob-token'));
  assert.equal((await admin.call('RL.SLIDING', ACME, 4, 60000, 'DRYRUN'))[0], 0);
});

// RL.ALL refused by the org: the user's own reply counted the request (cost 2) as spent, as
// DRYRUN does; the decision reports what is really left, and nothing moved.
test('check adds back the cost of a rule that would have admitted', async () => {
  const user = gcra('user', 5, 1, 1000, 2);
  const org = sliding('org', 4, 60000);
  await admin.call('RL.SLIDING', ACME, 4, 60000, 'COST', 4); // the org is spent
  let [u, o] = await check(admin, [{ limit: user, key: ALICE }, { limit: org, key: ACME }]);
  assert.deepEqual([u.allowed, u.remaining], [true, 5]); // the module replied 3
  assert.deepEqual([o.allowed, o.remaining, o.retryAfterMs], [false, 0, 75000]);
  assert.equal(await admin.exists(ALICE), 0); // nothing spent on the user
  await admin.del(ACME);
  [u, o] = await check(admin, [{ limit: user, key: ALICE }, { limit: org, key: ACME }]);
  assert.deepEqual([u.allowed, u.remaining, o.allowed, o.remaining], [true, 3, true, 3]);
});

// ---------------------------------------------------------------------------- client IP

test('X-Forwarded-For is read from the right', async () => {
  const { get } = await serve({ trustedProxies: 1 });
  const statuses = [];
  for (let i = 0; i < 3; i++) { // the client forges a different leftmost entry each time
    statuses.push((await get('/', { 'X-Forwarded-For': `6.6.6.${i}, 203.0.113.7` })).status);
  }
  assert.deepEqual(statuses, [200, 200, 429]);
  assert.deepEqual(await admin.keys('rl:*'), ['rl:ip:203.0.113.7']);
});

test('two trusted proxies', async () => {
  const { get } = await serve({ trustedProxies: 2 });
  await get('/', { 'X-Forwarded-For': '6.6.6.6, 198.51.100.9, 10.0.0.1' });
  assert.deepEqual(await admin.keys('rl:*'), ['rl:ip:198.51.100.9']);
});

test('no trusted proxy ignores the header', async () => {
  const { get } = await serve({ trustedProxies: 0 });
  await get('/', { 'X-Forwarded-For': '6.6.6.6' });
  assert.deepEqual(await admin.keys('rl:*'), ['rl:ip:127.0.0.1']);
});

test('clientIp', () => {
  const cases = [
    ['10.0.0.1', [], 0, '10.0.0.1'],
    ['10.0.0.1', ['1.2.3.4'], 0, '10.0.0.1'],
    ['10.0.0.1', ['1.2.3.4'], 1, '1.2.3.4'],
    ['10.0.0.1', '9.9.9.9, 1.2.3.4', 1, '1.2.3.4'], // Node joins repeated lines with ", "
    ['10.0.0.1', ['9.9.9.9, 1.2.3.4', '10.0.0.2'], 2, '1.2.3.4'],
    ['10.0.0.1', ['1.2.3.4'], 2, '10.0.0.1'], // fewer entries than proxies: the peer
    ['10.0.0.1', ['not-an-ip'], 1, '10.0.0.1'],
    ['10.0.0.1', ['1.2.3.4:5678'], 1, '1.2.3.4'],
    ['10.0.0.1', ['[2001:db8::1]:443'], 1, '2001:db8::1'],
    ['::ffff:127.0.0.1', [], 0, '127.0.0.1'],
    ['10.0.0.1', [' 2001:DB8::0:1 '], 1, '2001:db8::1'],
  ];
  for (const [peer, xff, trusted, expected] of cases) {
    assert.equal(clientIp(peer, xff, trusted), expected, JSON.stringify([peer, xff, trusted]));
  }
});

// ---------------------------------------------------------------------------- Redis down

const closedPortUrl = async () => `redis://127.0.0.1:${await freePort()}/0`; // nothing listens

test('fail-open lets requests through', async () => {
  const { get, logged } = await serve({ failOpen: true },
    { redisUrl: await closedPortUrl(), waitReady: false });
  const res = await get('/', auth('alice-token'));
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('RateLimit'), null);
  assert.equal(res.headers.get('Retry-After'), null);
  assert.ok(logged.some((m) => m.includes('failing open')), JSON.stringify(logged));
});

test('fail-closed answers 503', async () => {
  const { get } = await serve({ failOpen: false },
    { redisUrl: await closedPortUrl(), waitReady: false });
  const res = await get('/');
  assert.equal(res.status, 503);
  assert.equal(res.headers.get('Retry-After'), '1');
});

for (const [failOpen, status] of [[true, 200], [false, 503]]) {
  test(`hung Redis (accepts, never answers) times out quickly, failOpen=${failOpen}`, async (t) => {
    const silent = net.createServer(() => {}); // accepts connections, never writes
    await new Promise((r) => silent.listen(0, '127.0.0.1', r));
    const sockets = new Set();
    silent.on('connection', (s) => sockets.add(s));
    t.after(() => { for (const s of sockets) s.destroy(); silent.close(); });
    const { get } = await serve({ failOpen },
      { redisUrl: `redis://127.0.0.1:${silent.address().port}/0`, waitReady: false });
    const start = performance.now();
    const res = await get('/', auth('alice-token'));
    const elapsed = performance.now() - start;
    assert.equal(res.status, status);
    assert.ok(elapsed < 500, `took ${elapsed.toFixed(0)} ms with a 50 ms Redis timeout`);
  });

  test(`stalled Redis (CLIENT PAUSE) times out quickly, failOpen=${failOpen}`, async (t) => {
    const { get, logged } = await serve({ failOpen });
    await admin.call('CLIENT', 'PAUSE', 500, 'ALL'); // the server stops answering for 500 ms
    t.after(() => admin.call('CLIENT', 'UNPAUSE'));
    const start = performance.now();
    const res = await get('/', auth('alice-token'));
    const elapsed = performance.now() - start;
    assert.equal(res.status, status);
    assert.ok(elapsed < 400, `took ${elapsed.toFixed(0)} ms with a 50 ms Redis timeout`);
    assert.ok(logged.some((m) => /timed out/i.test(m)), JSON.stringify(logged));
  });
}
