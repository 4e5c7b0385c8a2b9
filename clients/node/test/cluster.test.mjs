// A 3-node Redis Cluster of the same binary: ioredis Cluster and node-redis createCluster
// route every command to the key's node (no MOVED), RL.ALL under one hash tag, CROSSSLOT
// without one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { Cluster } from 'ioredis';
import { createCluster } from 'redis';
import { createLimiter } from 'redis-ratelimit-module';
import { NOW_MS, startCluster } from './helpers.mjs';

let cluster;
before(async () => {
  cluster = await startCluster();
  for (const p of cluster.ports) execFileSync('redis-cli', ['-p', String(p), 'RL.CLOCK', 'SET', String(NOW_MS)]);
});
after(async () => { await cluster?.stop(); });

const cli = (p, ...args) => execFileSync('redis-cli', ['-p', String(p), ...args]).toString();
// Commands a node refused (MOVED/ASK are counted as rejected_calls), over every node.
function rejected() {
  let n = 0;
  for (const p of cluster.ports) {
    for (const m of cli(p, 'INFO', 'commandstats').matchAll(/^cmdstat_(?:rl|cl)\.[^:]+:.*rejected_calls=(\d+)/gm)) n += Number(m[1]);
  }
  return n;
}

const keysAll = Array.from({ length: 12 }, (_, i) => `user:${i}`);

const clients = {
  'ioredis Cluster': async () => {
    const c = new Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
    await new Promise((r) => c.once('ready', r));
    return { c, close: () => c.disconnect() };
  },
  'node-redis createCluster': async () => {
    const c = await createCluster({ rootNodes: cluster.ports.map((p) => ({ url: `redis://127.0.0.1:${p}` })) }).connect();
    return { c, close: () => c.quit() };
  },
};

for (const [name, make] of Object.entries(clients)) {
  test(`${name}: every command routed to its node, RL.ALL with a hash tag`, async () => {
    const { c, close } = await make();
    const limiter = createLimiter(c);
    try {
      assert.equal(limiter.isCluster, true);
      for (const p of cluster.ports) cli(p, 'CONFIG', 'RESETSTAT');
      for (const k of keysAll) {
        assert.equal((await limiter.gcra(`${name}:${k}`, { burst: 2, count: 1, periodMs: 1000 })).allowed, true);
        assert.equal((await limiter.fixed(`${name}:f:${k}`, { limit: 2, windowMs: 1000 })).remaining, 1);
      }
      const info = await limiter.info(`${name}:user:3`);
      assert.equal(info.algorithm, 'gcra');
      assert.equal(typeof info.tat_ns, 'bigint');
      const a = await limiter.acquire(`${name}:lease`, { limit: 1, leaseMs: 1000 });
      assert.equal(await limiter.release(`${name}:lease`, a.token), true);
      const all = await limiter.all([
        { key: `rl:{org:7}:${name}:user:42`, rule: { algorithm: 'gcra', burst: 10, count: 1, periodMs: 1000 } },
        { key: 'rl:{org:7}', rule: { algorithm: 'sliding', limit: 1000, windowMs: 60000 } },
      ]);
      assert.equal(all.allowed, true);
      assert.equal(rejected(), 0, 'no MOVED: the client knew the key of every module command');
      await assert.rejects(limiter.all([
        { key: `a:${name}`, rule: { algorithm: 'fixed', limit: 1, windowMs: 1000 } },
        { key: `b:${name}`, rule: { algorithm: 'fixed', limit: 1, windowMs: 1000 } },
      ]), /CROSSSLOT|slot/i);
    } finally {
      await limiter.close();
      await close();
    }
  });
}
