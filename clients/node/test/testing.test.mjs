// redis-ratelimit-module/testing: the helper users start a real server with in their tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { findModule, findServer, startServer } from 'redis-ratelimit-module/testing';
import { MODULE, SERVER } from './helpers.mjs';

function withEnv(vars, fn) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(vars)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
  try { return fn(); } finally {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
  }
}

test('startServer: a real server with the module and its test clock, removed by stop()', async () => {
  const s = await startServer({ module: MODULE, redisServer: SERVER });
  try {
    assert.equal(s.url, `redis://127.0.0.1:${s.port}`);
    assert.equal(await s.clock.set(1_900_000_000_000), 'OK');
    await s.clock.advance(1500);
    assert.equal(await s.clock.get(), 1_900_000_001_500);
    const d = await s.command('RL.GCRA', 'k', '2', '1', '60000');
    assert.deepEqual(d, [1, 2, 1, 0, 60000]);
    await assert.rejects(s.command('RL.GCRA', 'k'), /wrong number of arguments/);
    await s.flush();
    assert.equal(await s.command('EXISTS', 'k'), 0);
  } finally {
    await s.stop();
  }
  assert.equal(fs.existsSync(s.dir), false);
});

test('the module and the server are found from REDIS_RATELIMIT_MODULE / REDIS_SERVER, with clear errors', async () => {
  withEnv({ REDIS_RATELIMIT_MODULE: MODULE, RL_MODULE: undefined }, () => assert.equal(findModule(), MODULE));
  withEnv({ REDIS_RATELIMIT_MODULE: '/nonexistent/libredis_ratelimit.so' }, () =>
    assert.throws(() => findModule(), /\/nonexistent\/libredis_ratelimit\.so does not exist \(from REDIS_RATELIMIT_MODULE\)/));
  assert.throws(() => findModule('/nope.so'), /does not exist \(from the module option\)/);
  withEnv({ REDIS_SERVER: 'no-such-redis-server', RL_SERVER: undefined }, () =>
    assert.throws(() => findServer(), /no-such-redis-server was not found/));
  withEnv({ REDIS_SERVER: undefined, RL_SERVER: undefined }, () => assert.match(findServer(), /(redis|valkey)-server$/));
  await assert.rejects(startServer({ module: '/nope.so' }), /does not exist/);
});
