// createRateLimiter (rate-limiter-flexible's consume / reward / block style) against a real
// server with the module, on its test clock.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { RateLimitedError, createLimiter, createRateLimiter } from 'redis-ratelimit-module';
import { startServer } from 'redis-ratelimit-module/testing';
import { MODULE, NOW_MS, SERVER } from './helpers.mjs';

let server;
let redis;
let limiter;
before(async () => {
  server = await startServer({ module: MODULE, redisServer: SERVER });
  redis = new Redis({ port: server.port, host: '127.0.0.1' });
  limiter = createLimiter(redis);
});
after(async () => { redis?.disconnect(); await server?.stop(); });
beforeEach(async () => { await server.flush(); await server.clock.set(NOW_MS); });

test('consume resolves until refused, then rejects with msBeforeNext; nothing spent when refused', async () => {
  const api = createRateLimiter({ limiter, name: 'api', rule: '3/minute; 5/hour', algorithm: 'fixed' });
  assert.deepEqual(api.rules.map((r) => [r.algorithm, r.limit, r.windowMs]), [['fixed', 3, 60000], ['fixed', 5, 3_600_000]]);
  assert.equal((await api.consume('alice')).remaining, 2);
  assert.equal((await api.consume('alice', 2)).remaining, 0);
  const err = await api.consume('alice').catch((e) => e);
  assert.ok(err instanceof RateLimitedError);
  assert.equal(err.msBeforeNext, 60000 - (NOW_MS % 60000)); // the minute window's end
  assert.deepEqual(err.decisions.map((d) => d.allowed), [false, true]);
  assert.equal((await api.get('alice')).decisions[1].remaining, 2, 'the hour rule spent nothing on the refusal');
  assert.equal(await redis.exists('rl:api-1:alice', 'rl:api-2:alice'), 2);
  await server.clock.advance(60000);
  assert.equal((await api.consume('alice')).remaining, 1, 'a new minute; the hour has 1 left');
  const never = await api.consume('bob', 4).catch((e) => e);
  assert.equal(never.msBeforeNext, Infinity);
  assert.equal(await redis.exists('rl:api-1:bob'), 0);
});

test('reward gives back, block refuses everything, delete forgets', async () => {
  const api = createRateLimiter({ limiter, name: 'jobs', rule: { algorithm: 'gcra', burst: 4, count: 1, periodMs: 60000 } });
  await api.consume('w1', 3);
  assert.equal((await api.get('w1')).remaining, 1);
  await api.reward('w1', 2);
  assert.equal((await api.get('w1')).remaining, 3);
  await api.block('w1', 30000);
  const blocked = await api.consume('w1').catch((e) => e);
  assert.ok(blocked instanceof RateLimitedError);
  assert.equal(blocked.msBeforeNext, 30000);
  await api.delete('w1');
  assert.equal((await api.consume('w1')).remaining, 3);
  await assert.rejects(api.consume('w1', 0), /cost >= 1/);
});
