'use strict';
// The example app over real HTTP against a real redis-server with the module.
//
// RL_REDIS_PORT: use the server already listening there (scripts/examples-test.sh starts one;
// it must have the module loaded with `test-clock yes`). Otherwise a server is started here
// from RL_MODULE (default: target/release/libredis_ratelimit.so of this repository).
//
// The module's clock is frozen (RL.CLOCK SET) at a multiple of 60 s, so every number below
// is exact: GCRA answers in whole emission intervals, sliding windows start at NOW_MS.

const { test, before, after, beforeEach, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const Redis = require('ioredis');

const { createApp, connect } = require('../app');

const ROOT = path.resolve(__dirname, '../../..');
const NOW_MS = 1_700_000_040_000;
const ALICE = 'rl:{org:acme}:user:alice';
const ACME = 'rl:{org:acme}:org:acme';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

let redisPort;
let serverProc;
let tmpDir;
let admin;

before(async () => {
  if (process.env.RL_REDIS_PORT) {
    redisPort = Number(process.env.RL_REDIS_PORT);
  } else {
    const mod = process.env.RL_MODULE || path.join(ROOT, 'target/release/libredis_ratelimit.so');
    assert.ok(fs.existsSync(mod), `module not built: ${mod} (cargo build --release)`);
    redisPort = await freePort();
    tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-node-'));
    serverProc = spawn(process.env.RL_SERVER || 'redis-server', [
      '--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', tmpDir, '--loadmodule', path.resolve(mod), 'test-clock', 'yes',
    ], { stdio: 'ignore' });
  }
  for (let i = 0; ; i++) {
    const probe = new Redis({ port: redisPort, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
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

let running = [];
afterEach(async () => {
  for (const { server, redis } of running) {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    redis.disconnect();
  }
  running = [];
});

// Starts the app with these options on a free port; returns { get, logged }.
async function serve(options = {}, { redisUrl, waitReady = true } = {}) {
  const redis = connect(redisUrl || `redis://127.0.0.1:${redisPort}/0`);
  if (waitReady) await new Promise((resolve) => redis.once('ready', resolve));
  const logged = [];
  const app = createApp({
    redis,
    user: { algorithm: 'gcra', burst: 3, count: 1, periodMs: 1500 }, // q=3, w=5
    org: { algorithm: 'sliding', limit: 4, windowMs: 60_000 }, // q=4, w=60
    ip: { algorithm: 'gcra', burst: 2, count: 1, periodMs: 1000 }, // q=2, w=2
    logger: { warn: (m) => logged.push(m), error: (m) => logged.push(m) },
    ...options,
  });
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
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
const hdrs = (res) => Object.fromEntries(['RateLimit-Policy', 'RateLimit', 'Retry-After'].map((n) => [n, res.headers.get(n)]));

test('anonymous request: per IP, draft-10 headers', async () => {
  const { get } = await serve();
  const res = await get('/');
  assert.equal(res.status, 200);
  assert.deepEqual(hdrs(res), { 'RateLimit-Policy': '"ip";q=2;w=2', RateLimit: '"ip";r=1;t=1', 'Retry-After': null });
  assert.deepEqual(await admin.keys('rl:*'), ['rl:ip:127.0.0.1']);
});

test('authenticated request: user and org in one RL.ALL under one hash tag', async () => {
  const { get } = await serve();
  await admin.config('RESETSTAT');
  const res = await get('/', auth('alice-token'));
  assert.equal(res.status, 200);
  // user: GCRA 3 1 1500, next unit back in 1.5 s; org: SLIDING 4 60000, one unit in the
  // current window: t is that window's end (60 s), where its count starts to age out
  assert.deepEqual(hdrs(res), {
    'RateLimit-Policy': '"user";q=3;w=5, "org";q=4;w=60', RateLimit: '"user";r=2;t=2, "org";r=3;t=60', 'Retry-After': null,
  });
  assert.match(await admin.info('commandstats'), /cmdstat_rl\.all:calls=1,/);
  assert.deepEqual((await admin.keys('rl:*')).sort(), [ACME, ALICE]);
});

test('over the limit is 429 with Retry-After, and a refusal spends nothing', async () => {
  const { get } = await serve();
  const seen = [];
  for (let i = 0; i < 4; i++) seen.push(await get('/', auth('carol-token')));
  assert.deepEqual(seen.map((r) => r.status), [200, 200, 200, 429]);
  assert.deepEqual(hdrs(seen[3]), { 'RateLimit-Policy': '"user";q=3;w=5', RateLimit: '"user";r=0;t=2', 'Retry-After': '2' });
  assert.deepEqual(JSON.parse(seen[3].text)['violated-policies'], ['user']);
  await admin.call('RL.CLOCK', 'ADVANCE', 1499);
  assert.equal((await get('/', auth('carol-token'))).status, 429);
  await admin.call('RL.CLOCK', 'ADVANCE', 1);
  assert.equal((await get('/', auth('carol-token'))).status, 200);
  assert.equal((await get('/', auth('carol-token'))).status, 429);
});

test('org limit runs out: 429 for the org, the user quota untouched', async () => {
  const { get } = await serve();
  for (const t of ['alice-token', 'alice-token', 'bob-token', 'bob-token']) assert.equal((await get('/', auth(t))).status, 200);
  const res = await get('/', auth('alice-token'));
  assert.equal(res.status, 429);
  assert.deepEqual(JSON.parse(res.text)['violated-policies'], ['org']);
  // previous 0, current 4 at the window start: room once 4 * (1 - f) + 1 <= 4, at 75 s
  // (Retry-After, the module's retry_after_ms); the org's t is clamped to its w = 60
  assert.deepEqual(hdrs(res), {
    'RateLimit-Policy': '"user";q=3;w=5, "org";q=4;w=60', RateLimit: '"user";r=1;t=2, "org";r=0;t=60', 'Retry-After': '75',
  });
  const [allowed, , remaining] = await admin.call('RL.GCRA', ALICE, 3, 1, 1500, 'DRYRUN');
  assert.deepEqual([allowed, remaining], [1, 0]); // one unit left (the dry run counts itself)
  assert.equal((await get('/', auth('carol-token'))).status, 200); // no org: not affected
});

test('/health is never limited', async () => {
  const { get } = await serve();
  for (let i = 0; i < 5; i++) {
    const r = await get('/health');
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('RateLimit'), null);
  }
  assert.deepEqual(await admin.keys('rl:*'), []);
});

test('X-Forwarded-For is read from the right; IPv6 on the /64', async () => {
  const { get } = await serve({ trustedProxies: 1 });
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await get('/', { 'X-Forwarded-For': `6.6.6.${i}, 2001:db8:5:6::${i + 1}` })).status);
  assert.deepEqual(statuses, [200, 200, 429]);
  assert.deepEqual(await admin.keys('rl:*'), ['rl:ip:2001:db8:5:6::/64']);
});

const closedPortUrl = async () => `redis://127.0.0.1:${await freePort()}/0`;

test('Redis down: fail-open lets requests through, fail-closed answers 503', async () => {
  const open = await serve({ failOpen: true }, { redisUrl: await closedPortUrl(), waitReady: false });
  const res = await open.get('/', auth('alice-token'));
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('RateLimit'), null);
  assert.ok(open.logged.some((m) => m.includes('failing open')), JSON.stringify(open.logged));
  const closed = await serve({ failOpen: false }, { redisUrl: await closedPortUrl(), waitReady: false });
  const r = await closed.get('/');
  assert.equal(r.status, 503);
  assert.equal(r.headers.get('Retry-After'), '1');
});

test('stalled Redis (CLIENT PAUSE) times out quickly', async (t) => {
  const { get } = await serve({ failOpen: false });
  await admin.call('CLIENT', 'PAUSE', 500, 'ALL');
  t.after(() => admin.call('CLIENT', 'UNPAUSE'));
  const start = performance.now();
  const res = await get('/', auth('alice-token'));
  assert.equal(res.status, 503);
  assert.ok(performance.now() - start < 400, `took ${(performance.now() - start).toFixed(0)} ms`);
});
