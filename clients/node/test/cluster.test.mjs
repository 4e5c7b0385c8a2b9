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

// Policies are per node: the package sets them on every primary and reports drift.
for (const [name, make] of Object.entries(clients)) {
  test(`${name}: policies on every primary, drift when one node differs`, async () => {
    const { c, close } = await make();
    const limiter = createLimiter(c);
    const pol = `pol-${name.replace(/\W+/g, '-')}`;
    try {
      assert.throws(() => limiter.policies, /clusterPolicies/);
      const admin = limiter.clusterPolicies;
      const nodes = (await admin.nodes()).sort();
      assert.deepEqual(nodes, cluster.ports.map((p) => `127.0.0.1:${p}`).sort());
      const set = await admin.set(pol, { algorithm: 'gcra', burst: 5, count: 1, periodMs: 20000 });
      assert.deepEqual(set, { ok: true, reply: 1, nodes: Object.fromEntries(nodes.map((n) => [n, 1])) });
      let [entry] = (await admin.list()).filter((e) => e.name === pol);
      assert.equal(entry.drift, false);
      assert.deepEqual(Object.keys(entry.nodes).sort(), nodes);
      const digests = new Set(Object.values(entry.nodes).map((e) => e.digest));
      assert.equal(digests.size, 1);
      assert.match([...digests][0], /^[0-9a-f]{16}$/);
      // every node has it: RL.ALLOW and RL.ALL route by key, wherever the slot is
      for (const k of keysAll) assert.equal((await limiter.allow(`${name}:pol:${k}`, pol)).remaining, 4);
      const all = await limiter.all([{ key: `{t}:${name}:a`, policy: pol }, { key: `{t}:${name}:b`, policy: pol, cost: 2 }]);
      assert.deepEqual(all.decisions.map((d) => d.remaining), [4, 3]);

      // one node changed directly: drift, with each node's values
      const odd = cluster.ports[1];
      assert.equal(cli(odd, 'RL.POLICY', 'SET', pol, 'GCRA', '9', '1', '20000').trim(), '2');
      [entry] = (await admin.list()).filter((e) => e.name === pol);
      assert.equal(entry.drift, true);
      assert.equal(entry.nodes[`127.0.0.1:${odd}`].version, 2);
      assert.equal(new Set(Object.values(entry.nodes).map((e) => e.digest)).size, 2);
      for (const p of cluster.ports.filter((x) => x !== odd)) assert.equal(entry.nodes[`127.0.0.1:${p}`].version, 1);
      const got = await admin.get(pol);
      assert.equal(got.drift, true);
      assert.equal(got.nodes[`127.0.0.1:${odd}`].rule, 'GCRA 9 1 20000');
      // missing on one node: drift too
      cli(odd, 'RL.POLICY', 'DEL', pol);
      const again = await admin.set(pol, 'GCRA 5 1 20000');
      assert.equal(again.reply, undefined); // versions differ: 1 on the odd node, 2 elsewhere
      assert.equal(again.nodes[`127.0.0.1:${odd}`], 1);
      cli(odd, 'RL.POLICY', 'DEL', pol);
      [entry] = (await admin.list(`${pol}*`));
      assert.equal(entry.drift, true);
      assert.equal(entry.nodes[`127.0.0.1:${odd}`], null);
      const stats = await admin.stats(pol);
      assert.equal(stats.ok, false);
      assert.match(stats.nodes[`127.0.0.1:${odd}`].message, /no such policy/);
      const del = await admin.delete(pol);
      assert.deepEqual(Object.values(del.nodes).sort(), [false, true, true]);
      assert.equal(await admin.get(pol), null);
    } finally {
      await limiter.close();
      await close();
    }
  });
}

// Issue 27: a waiting call (WAIT) on a cluster goes to its key's node on a connection of its
// own (a duplicate cluster client), and is admitted when that node's clock moves; a normal
// call answers meanwhile.
const waitingOn = (p) => Number(/ratelimit_waiting_clients:(\d+)/.exec(cli(p, 'INFO', 'ratelimit'))?.[1]);
async function untilWaitingSomewhere(n) {
  for (const end = Date.now() + 20_000; ;) {
    const per = cluster.ports.map(waitingOn);
    if (per.reduce((a, b) => a + b, 0) === n) return per;
    if (Date.now() > end) throw new Error(`expected ${n} waiting clients, the nodes have ${per}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

for (const [name, make] of Object.entries(clients)) {
  test(`${name}: a waiting call waits on its key's node and wakes with that node's clock`, async () => {
    const { c, close } = await make();
    const limiter = createLimiter(c, { timeoutMs: 5000 });
    const key = `wait:${name}`;
    try {
      const one = { burst: 1, count: 1, periodMs: 1000 };
      assert.equal((await limiter.gcra(key, one)).allowed, true);
      for (const p of cluster.ports) cli(p, 'CONFIG', 'RESETSTAT');
      const held = limiter.gcra(key, { ...one, waitMs: 60_000 });
      const per = await untilWaitingSomewhere(1);
      const node = cluster.ports[per.indexOf(1)];
      // the node holding the key (EXISTS there answers 1, not MOVED)
      assert.equal(cli(node, 'EXISTS', key).trim(), '1');
      // other calls, on every node, answer while it waits
      for (const k of keysAll) assert.equal((await limiter.gcra(`${name}:w:${k}`, one)).allowed, true);
      // another node's clock does not wake it
      const other = cluster.ports.find((p) => p !== node);
      cli(other, 'RL.CLOCK', 'ADVANCE', '1000');
      await new Promise((r) => setTimeout(r, 30));
      assert.equal(waitingOn(node), 1);
      cli(node, 'RL.CLOCK', 'ADVANCE', '1000');
      assert.deepEqual(await held, { allowed: true, limit: 1, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000, waitedMs: 1000 });
      assert.equal(rejected(), 0, 'no MOVED');
    } finally {
      await limiter.close();
      await close();
    }
  });
}
