// Policies (issue 26): allow() and POLICY entries of all() through every client, the admin
// API (RL.POLICY) typed, and policy-named limits in the Express middleware and the Fastify
// plugin over real HTTP, against a real server with the module and its test clock.
import { test, describe, before, after, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import Fastify from 'fastify';
import Redis from 'ioredis';
import {
  createLimiter, expressRateLimit, fastifyRateLimit, isUnknownPolicy, keys, parsePolicyRule, policyRuleArgs,
} from 'redis-ratelimit-module';
import { CLIENTS, NOW_MS, admin, startServer } from './helpers.mjs';

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
after(async () => { await limiter?.close(); redis?.disconnect(); adm?.disconnect(); await server?.stop(); });

// FLUSHALL keeps policies: delete them too.
async function clean() {
  await adm.flushall();
  for (const e of await adm.call('RL.POLICY', 'LIST')) await adm.call('RL.POLICY', 'DEL', e[1]);
  await adm.call('RL.CLOCK', 'SET', String(NOW_MS));
}
beforeEach(clean);

test('policy rules: objects and strings to RL.POLICY SET arguments, and back', () => {
  assert.deepEqual(policyRuleArgs({ algorithm: 'gcra', burst: 10, count: 1, periodMs: 1000 }), ['GCRA', '10', '1', '1000']);
  assert.deepEqual(policyRuleArgs({ algorithm: 'sliding', limit: 5, windowMs: 60000, stagger: true, blockMs: 9000 }),
    ['SLIDING', '5', '60000', 'STAGGER', 'BLOCK', '9000']);
  assert.deepEqual(policyRuleArgs({ algorithm: 'concurrency', limit: 2, leaseMs: 500 }), ['CONCURRENCY', '2', '500']);
  assert.deepEqual(policyRuleArgs(' GCRA 10  1 1000 '), ['GCRA', '10', '1', '1000']);
  assert.deepEqual(parsePolicyRule('SLIDING 10 60000 STAGGER BLOCK 5000'),
    { algorithm: 'sliding', limit: 10, windowMs: 60000, stagger: true, blockMs: 5000 });
  assert.deepEqual(parsePolicyRule('TOKENBUCKET 10 2 20000'), { algorithm: 'tokenbucket', capacity: 10, refillTokens: 2, refillPeriodMs: 20000 });
  assert.equal(parsePolicyRule(''), null);
  assert.throws(() => policyRuleArgs({ algorithm: 'gcra', burst: 1.5, count: 1, periodMs: 1 }), TypeError);
});

for (const [name, factory] of Object.entries(CLIENTS)) {
  describe(`${name}: policies`, () => {
    let client;
    let limiter; // eslint-disable-line no-shadow
    before(async () => { client = await factory.create(server.port); limiter = createLimiter(client); });
    after(async () => { await limiter.close(); await factory.close(client); });

    test('admin API: set, get, list, rollout, rollback, history, stats, delete', async () => {
      const p = limiter.policies;
      assert.equal(await p.set('api', { algorithm: 'gcra', burst: 100, count: 100, periodMs: 60000 }), 1);
      assert.equal(await p.set('api-tight', 'GCRA 20 20 60000', { shadow: true }), 1);
      const tight = await p.get('api-tight');
      assert.deepEqual({ ...tight, digest: typeof tight.digest }, {
        name: 'api-tight', version: 1, rule: 'GCRA 20 20 60000', mode: 'shadow', digest: 'string',
        candidateVersion: 0, candidateRule: null, candidateMode: null, rollout: 0,
      });
      assert.match(tight.digest, /^[0-9a-f]{16}$/);
      assert.equal(await p.get('nope'), null);

      assert.equal(await p.set('api', { algorithm: 'gcra', burst: 20, count: 20, periodMs: 60000 }, { rollout: 10 }), 2);
      const api = await p.get('api');
      assert.deepEqual([api.version, api.rule, api.candidateVersion, api.candidateRule, api.candidateMode, api.rollout],
        [1, 'GCRA 100 100 60000', 2, 'GCRA 20 20 60000', 'enforce', 10]);
      const listed = await p.list();
      assert.deepEqual(listed.map((e) => [e.name, e.version, e.mode, e.candidateVersion, e.rollout]),
        [['api', 1, 'enforce', 2, 10], ['api-tight', 1, 'shadow', 0, 0]]);
      assert.equal(listed[0].digest, api.digest);
      assert.deepEqual((await p.list('api-*')).map((e) => e.name), ['api-tight']);

      assert.equal(await p.rollout('api', 100), 2);
      assert.equal(await p.rollback('api'), 3);
      const hist = await p.history('api');
      assert.deepEqual(hist.map((v) => [v.version, v.rule, v.mode, v.status, v.setMs]), [
        [3, 'GCRA 100 100 60000', 'enforce', 'current', NOW_MS],
        [2, 'GCRA 20 20 60000', 'enforce', 'previous', NOW_MS],
        [1, 'GCRA 100 100 60000', 'enforce', 'previous', NOW_MS],
      ]);

      // tight (shadow): 20 units, then 2 shadow refusals for t42
      await limiter.allow('rl:{t42}:api-tight', 'api-tight', { cost: 20 });
      const refusedInShadow = await limiter.allow('rl:{t42}:api-tight', 'api-tight');
      assert.deepEqual([refusedInShadow.allowed, refusedInShadow.retryAfterMs, refusedInShadow.remaining], [true, 0, 0]);
      await limiter.allow('rl:{t42}:api-tight', 'api-tight');
      assert.deepEqual(await p.stats('api-tight', { reset: true }), {
        requests: 3, admitted: 1, refused: 0, shadowRefusals: 2, unitsSpent: 20,
        topRefused: [['rl:{t42}:api-tight', 2]], topErrorBound: 0,
      });
      assert.equal((await p.stats('api-tight')).requests, 0);

      assert.equal(await p.delete('api-tight'), true);
      assert.equal(await p.delete('api-tight'), false);
      await assert.rejects(p.history('api-tight'), /no such policy/);
      await assert.rejects(p.set('bad name', 'GCRA 1 1 1'), /policy name/);
      // a single server is one primary for clusterPolicies
      const c = await limiter.clusterPolicies.list();
      assert.deepEqual(c.map((e) => [e.name, e.drift, Object.keys(e.nodes).length]), [['api', false, 1]]);
    });

    test('allow(): the five fields, QUEUE delayMs, CONCURRENCY token, PARTIAL granted, refund, reserve', async () => {
      const p = limiter.policies;
      await p.set('g', 'GCRA 3 1 20000');
      await p.set('q', { algorithm: 'queue', capacity: 3, intervalMs: 20000 });
      await p.set('c', { algorithm: 'concurrency', limit: 1, leaseMs: 20000 });
      await p.set('tb', 'TOKENBUCKET 10 2 20000');
      assert.deepEqual(await limiter.allow('kg', 'g', { cost: 2 }),
        { allowed: true, limit: 3, remaining: 1, retryAfterMs: 0, resetAfterMs: 40000 });
      assert.deepEqual(await limiter.allow('kg', 'g', { dryrun: true, cost: 2 }),
        { allowed: false, limit: 3, remaining: 1, retryAfterMs: 20000, resetAfterMs: 40000 });
      assert.deepEqual(await limiter.allow('kq', 'q'),
        { allowed: true, limit: 3, remaining: 2, retryAfterMs: 0, resetAfterMs: 20000, delayMs: 0 });
      assert.deepEqual(await limiter.allow('kq', 'q', { cost: 5, partial: true }),
        { allowed: true, limit: 3, remaining: 0, retryAfterMs: 0, resetAfterMs: 60000, delayMs: 20000, granted: 2 });
      const lease = await limiter.allow('kc', 'c');
      assert.equal(lease.allowed, true);
      assert.match(lease.token, /^\d+-\d+$/);
      assert.equal(await limiter.release('kc', lease.token), true);
      const again = await limiter.allow('kc', 'c');
      assert.equal((await limiter.allow('kc', 'c')).token, null); // refused: nil token
      assert.equal(await limiter.release('kc', again.token), true);
      assert.deepEqual(await limiter.allow('kt', 'tb', { cost: 12, partial: true }),
        { allowed: true, limit: 10, remaining: 0, retryAfterMs: 0, resetAfterMs: 100000, granted: 10 });
      assert.deepEqual(await limiter.allow('kt', 'tb', { refund: 4 }),
        { allowed: true, limit: 10, remaining: 4, retryAfterMs: 0, resetAfterMs: 60000 });
      const reserved = await limiter.allow('kt', 'tb', { reserve: 4 });
      assert.deepEqual([reserved.allowed, reserved.remaining], [false, 4]);
      await assert.rejects(limiter.allow('kx', 'nope'), (e) => isUnknownPolicy(e) && /no such policy 'nope'/.test(e.message));
    });

    test('all(): POLICY entries beside rules, cost and reserve', async () => {
      await limiter.policies.set('pu', 'GCRA 2 1 20000');
      await limiter.policies.set('pq', 'QUEUE 3 20000');
      const r = await limiter.all([
        { key: '{o}:u', policy: 'pu', cost: 2 },
        { key: '{o}:o', rule: { algorithm: 'fixed', limit: 5, windowMs: 60000 } },
        { key: '{o}:q', policy: 'pq' },
      ]);
      assert.deepEqual(r, {
        allowed: true, refusedBy: 0, decisions: [
          { allowed: true, limit: 2, remaining: 0, retryAfterMs: 0, resetAfterMs: 40000 },
          { allowed: true, limit: 5, remaining: 4, retryAfterMs: 0, resetAfterMs: 60000 },
          { allowed: true, limit: 3, remaining: 2, retryAfterMs: 0, resetAfterMs: 20000, delayMs: 0 },
        ],
      });
      const refused = await limiter.all([{ key: '{o}:o', rule: { algorithm: 'fixed', limit: 5, windowMs: 60000 } },
        { key: '{o}:u', policy: 'pu', reserve: 1 }]);
      assert.deepEqual([refused.allowed, refused.refusedBy], [false, 2]);
      await assert.rejects(limiter.all([{ key: 'x', policy: 'nope' }]), /no such policy/);
    });
  });
}

// ------------------------------------------------------------------ the middlewares over HTTP

const silent = { warn() {}, error() {} };
beforeEach(() => limiter.policyRules.clear());

let running = [];
afterEach(async () => { for (const stop of running) await stop(); running = []; });

async function expressApp(options) {
  const app = express();
  app.use(expressRateLimit({ limiter, logger: silent, ...options }));
  app.use((req, res) => res.send('ok'));
  const s = await new Promise((resolve) => { const x = app.listen(0, '127.0.0.1', () => resolve(x)); });
  running.push(async () => { s.closeAllConnections(); await new Promise((r) => s.close(r)); });
  return `http://127.0.0.1:${s.address().port}`;
}

async function fastifyApp(options) {
  const f = Fastify({ forceCloseConnections: true });
  await f.register(fastifyRateLimit, { limiter, logger: silent, ...options });
  f.all('/*', async () => 'ok');
  await f.listen({ port: 0, host: '127.0.0.1' });
  running.push(() => f.close());
  return `http://127.0.0.1:${f.server.address().port}`;
}

const user = (req) => req.headers['x-user'] ?? null;
const h = (res, ...names) => Object.fromEntries(names.map((n) => [n, res.headers.get(n)]));

for (const [framework, serve] of Object.entries({ express: expressApp, fastify: fastifyApp })) {
  describe(`${framework}: policy limits`, () => {
    test('RL.ALL with POLICY rules, headers from the policies, refusal, onDecision', async () => {
      await adm.call('RL.POLICY', 'SET', 'p-user', 'GCRA', '2', '1', '20000');
      await adm.call('RL.POLICY', 'SET', 'p-org', 'SLIDING', '10', '60000');
      const events = [];
      const sent = [];
      const monitor = await adm.monitor();
      monitor.on('monitor', (_t, args) => { if (/^rl\.(all|allow)$/i.test(args[0])) sent.push(args.join(' ')); });
      try {
        const base = await serve({
          limits: [{ name: 'user', policy: 'p-user', key: keys.user(user) },
            { name: 'org', policy: 'p-org', key: () => 'acme', cost: 2 }],
          onDecision: (e) => events.push(e),
        });
        const r1 = await fetch(`${base}/x`, { headers: { 'x-user': 'alice' } });
        assert.equal(r1.status, 200);
        assert.deepEqual(h(r1, 'RateLimit-Policy', 'RateLimit'), {
          'RateLimit-Policy': '"user";q=2;w=40, "org";q=10;w=60',
          RateLimit: '"user";r=1;t=20, "org";r=8;t=60',
        });
        await fetch(`${base}/x`, { headers: { 'x-user': 'alice' } });
        const r3 = await fetch(`${base}/x`, { headers: { 'x-user': 'alice' } });
        assert.equal(r3.status, 429);
        assert.equal(r3.headers.get('Retry-After'), '20');
        assert.equal(r3.headers.get('RateLimit'), '"user";r=0;t=20, "org";r=6;t=60');
        assert.deepEqual((await r3.json())['violated-policies'], ['user']);
        const last = events.at(-1);
        assert.equal(last.outcome, 'refused');
        assert.equal(last.refusedBy, 1);
        assert.deepEqual(last.limits.map((o) => [o.name, o.source, o.policy]), [
          ['user', 'redis', { name: 'p-user', version: 1, mode: 'enforce' }],
          ['org', 'redis', { name: 'p-org', version: 1, mode: 'enforce' }]]);
        // one limit alone: RL.ALLOW
        const one = await fetch(`${base}/x`);
        assert.equal(one.headers.get('RateLimit'), '"org";r=4;t=60');
        await adm.ping(); await new Promise((r) => setTimeout(r, 50)); // the monitor's feed
      } finally {
        monitor.disconnect();
      }
      assert.deepEqual(sent.slice(0, 1), ['RL.ALL 2 rl:user:alice rl:org:acme POLICY p-user POLICY p-org COST 2']);
      assert.equal(sent.at(-1), 'RL.ALLOW rl:org:acme p-org COST 2');
    });

    test('the cached rule: re-read when the limit changes, or when older than policyRefreshMs', async () => {
      await adm.call('RL.POLICY', 'SET', 'p', 'FIXED', '5', '60000');
      let clock = 0;
      const base = await serve({ limits: [{ name: 'p', policy: 'p', key: keys.user(user) }], now: () => clock, policyRefreshMs: 1000 });
      const get = (u) => fetch(`${base}/x`, { headers: { 'x-user': u } });
      assert.equal((await get('a')).headers.get('RateLimit-Policy'), '"p";q=5;w=60');
      // same limit, another window: the cache (not stale) still says 60 s
      await adm.call('RL.POLICY', 'SET', 'p', 'FIXED', '5', '120000');
      assert.equal((await get('b')).headers.get('RateLimit-Policy'), '"p";q=5;w=60');
      clock = 1000; // stale: read again
      assert.equal((await get('c')).headers.get('RateLimit-Policy'), '"p";q=5;w=120');
      // another limit: read again at once
      await adm.call('RL.POLICY', 'SET', 'p', 'FIXED', '7', '120000');
      const r = await get('d');
      assert.equal(r.headers.get('RateLimit-Policy'), '"p";q=7;w=120');
      assert.equal(r.headers.get('RateLimit'), '"p";r=6;t=120');
    });

    test('a shadow version gets no header item; a candidate gets its own rule', async () => {
      await adm.call('RL.POLICY', 'SET', 'p', 'GCRA', '5', '1', '20000');
      await adm.call('RL.POLICY', 'SET', 'p', 'FIXED', '2', '60000', 'SHADOW', 'ROLLOUT', '50');
      const base = await serve({ limits: [{ name: 'p', policy: 'p', key: keys.user(user) }] });
      // rl:p:<id> buckets (fnv1a64, final mix, mod 100): found by the server's own choice below
      const rb = await fetch(`${base}/x`, { headers: { 'x-user': 'alice' } });
      const rc = [];
      for (const u of ['bob', 'carol', 'dave', 'erin', 'frank', 'grace', 'heidi', 'ivan']) {
        rc.push([u, (await fetch(`${base}/x`, { headers: { 'x-user': u } })).headers.get('RateLimit-Policy')]);
      }
      const all = [['alice', rb.headers.get('RateLimit-Policy')], ...rc];
      // current version (GCRA 5): an item; the shadow candidate (FIXED 2): none
      assert.ok(all.some(([, v]) => v === '"p";q=5;w=100'));
      assert.ok(all.some(([, v]) => v === null), JSON.stringify(all));
      for (const [u, v] of all) {
        const info = await adm.call('RL.INFO', `rl:p:${u}`);
        const algo = info[info.indexOf('algorithm') + 1];
        assert.equal(v, algo === 'gcra' ? '"p";q=5;w=100' : null, `${u}: ${algo}`);
      }
    });

    test('an unknown policy: the failure path (fail open, fail closed), reported, breaker closed', async () => {
      const events = [];
      const base = await serve({
        limits: [{ name: 'open', policy: 'nope', key: (ctx) => ctx.headers['x-open'] ?? null },
          { name: 'closed', policy: 'nope', key: (ctx) => ctx.headers['x-closed'] ?? null, failOpen: false },
          { name: 'real', rule: { algorithm: 'fixed', limit: 5, windowMs: 60000 }, key: (ctx) => ctx.headers['x-real'] ?? null }],
        onDecision: (e) => events.push(e),
      });
      const open = await fetch(`${base}/x`, { headers: { 'x-open': 'a' } });
      assert.equal(open.status, 200);
      assert.equal(open.headers.get('RateLimit'), null);
      assert.equal(events.at(-1).limits[0].source, 'fail-open');
      assert.match(events.at(-1).limits[0].error.message, /no such policy 'nope'/);
      const closed = await fetch(`${base}/x`, { headers: { 'x-closed': 'a' } });
      assert.equal(closed.status, 503);
      assert.equal(closed.headers.get('Retry-After'), '1');
      assert.equal(events.at(-1).limits[0].source, 'fail-closed');
      // Redis is up: the next request is asked (no CircuitOpenError)
      const real = await fetch(`${base}/x`, { headers: { 'x-real': 'a' } });
      assert.equal(real.headers.get('RateLimit'), '"real";r=4;t=60');
      assert.equal(events.at(-1).limits[0].source, 'redis');
    });

    test('a cost above the policy\'s limit: the module\'s error (500, as any error that is not a Redis failure)', async () => {
      await adm.call('RL.POLICY', 'SET', 'p', 'GCRA', '3', '1', '20000');
      const base = await serve({ limits: [{ name: 'p', policy: 'p', key: keys.user(user), cost: 4 }] });
      const r = await fetch(`${base}/x`, { headers: { 'x-user': 'a' } });
      assert.equal(r.status, 500);
      assert.equal(r.headers.get('RateLimit'), null);
      assert.equal(await adm.exists('rl:p:a'), 0);
    });
  });
}

test('a limit needs a rule or a policy, and a policy limit takes no blockMs', () => {
  const key = keys.ip();
  assert.throws(() => expressRateLimit({ limiter, limits: [{ name: 'x', key }] }), /rule or a policy/);
  assert.throws(() => expressRateLimit({ limiter, limits: [{ name: 'x', key, policy: 'p', rule: { algorithm: 'fixed', limit: 1, windowMs: 1000 } }] }), /rule or a policy/);
  assert.throws(() => expressRateLimit({ limiter, limits: [{ name: 'x', key, policy: 'p', blockMs: 1000 }] }), /own BLOCK/);
});
