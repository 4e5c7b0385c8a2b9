// Real servers for the tests: redis-server (RL_SERVER, default redis-server) with the module
// (RL_MODULE, default <repo>/target/release/libredis_ratelimit.so) loaded with
// `test-clock yes`, on free 127.0.0.1 ports; a 3-node Redis Cluster of the same binary.
import { before, after, beforeEach } from 'node:test';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

export const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
export const PKG = path.resolve(here, '..');
export const ROOT = path.resolve(PKG, '../..');
export const MODULE = path.resolve(process.env.RL_MODULE || path.join(ROOT, 'target/release/libredis_ratelimit.so'));
export const SERVER = process.env.RL_SERVER || 'redis-server';
/** A multiple of 60 s, so windows start here and GCRA answers in whole intervals. */
export const NOW_MS = 1_700_000_040_000;

/**
 * One real redis-server with the module for a test file (the package's own test helper):
 * started before its tests, flushed and set to NOW_MS before each (`each` runs then too),
 * stopped after. `set` receives `{server, redis, limiter}` once they are up.
 */
export function moduleServer(set, each = async () => {}) {
  let s;
  before(async () => {
    const { startServer } = await import('redis-ratelimit-module/testing');
    const { createLimiter } = await import('redis-ratelimit-module');
    const { default: Redis } = await import('ioredis');
    const server = await startServer({ module: MODULE, redisServer: SERVER });
    const redis = new Redis({ port: server.port, host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    await new Promise((r) => redis.once('ready', r));
    s = { server, redis, limiter: createLimiter(redis) };
    set(s);
  });
  after(async () => { await s?.limiter?.close(); s?.redis?.disconnect(); await s?.server?.stop(); });
  beforeEach(async () => { await s.server.flush(); await s.server.clock.set(NOW_MS); await each(s); });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function portFree(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** Starts a server with the package's own test helper (redis-ratelimit-module/testing);
 * returns { port, dir, stop() }. */
export async function startServer(extra = [], fixedPort) {
  const { startServer: start } = await import('redis-ratelimit-module/testing');
  return start({ module: MODULE, redisServer: SERVER, args: extra, port: fixedPort });
}

/** A 3-node cluster (no replicas); returns { ports, stop() }. Ports p and p+10000 free. */
export async function startCluster() {
  const ports = [];
  while (ports.length < 3) {
    const p = 20000 + Math.floor(Math.random() * 20000);
    if (!ports.includes(p) && await portFree(p) && await portFree(p + 10000)) ports.push(p);
  }
  const servers = [];
  try {
    for (const p of ports) {
      servers.push(await startServer(['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${p}.conf`,
        '--cluster-node-timeout', '5000'], p));
    }
    const cli = process.env.RL_CLI || 'redis-cli';
    execFileSync(cli, ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0',
      '--cluster-yes'], { stdio: 'ignore' });
    for (let i = 0; ; i++) {
      const ok = ports.every((p) => /cluster_state:ok/.test(
        execFileSync(cli, ['-p', String(p), 'CLUSTER', 'INFO']).toString()));
      const slots = ports.every((p) => /cluster_slots_ok:16384/.test(
        execFileSync(cli, ['-p', String(p), 'CLUSTER', 'INFO']).toString()));
      if (ok && slots) break;
      if (i > 200) throw new Error('cluster did not become ok');
      await sleep(50);
    }
  } catch (err) {
    for (const s of servers) await s.stop();
    throw err;
  }
  return { ports, async stop() { for (const s of servers) await s.stop(); } };
}

/** The clients under test: name -> { create(port), close(client) }. */
export const CLIENTS = {
  'ioredis 6': {
    create: async (port) => { const R = require('ioredis'); const c = new R({ port, host: '127.0.0.1' }); await c.ping(); return c; },
    close: (c) => c.disconnect(),
  },
  'ioredis 5': {
    create: async (port) => { const R = require('ioredis5'); const c = new R({ port, host: '127.0.0.1' }); await c.ping(); return c; },
    close: (c) => c.disconnect(),
  },
  'node-redis 6': {
    create: async (port) => require('redis6').createClient({ url: `redis://127.0.0.1:${port}` }).connect(),
    close: (c) => c.quit(),
  },
  'node-redis 5': {
    create: async (port) => require('redis').createClient({ url: `redis://127.0.0.1:${port}` }).connect(),
    close: (c) => c.quit(),
  },
  'node-redis 5 RESP3': {
    create: async (port) => require('redis').createClient({ url: `redis://127.0.0.1:${port}`, RESP: 3 }).connect(),
    close: (c) => c.quit(),
  },
  'node-redis 4': {
    create: async (port) => { const c = require('redis4').createClient({ url: `redis://127.0.0.1:${port}` }); await c.connect(); return c; },
    close: (c) => c.quit(),
  },
};

/** An admin connection (ioredis) for setting up and inspecting state. */
export async function admin(port) {
  const R = require('ioredis');
  const c = new R({ port, host: '127.0.0.1' });
  await c.ping();
  return c;
}

/** Runs fn; when the server does not know an option of "beyond yes or no" (it answers
 * `ERR syntax error`, or refuses COST 0), skips the test with the reason. Returns true if it
 * ran. */
export async function ifSupported(t, what, fn) {
  const { isUnsupportedOption } = require('redis-ratelimit-module');
  try {
    await fn();
    return true;
  } catch (err) {
    if (isUnsupportedOption(err)) {
      t.skip(`the module has no ${what} yet (server answered: ${err.message}) — issue "beyond yes or no"`);
      return false;
    }
    throw err;
  }
}

/** Redis Cluster's hash slot of a key (CRC16/XMODEM of the key or its hash tag, mod 16384). */
export function keySlot(key) {
  let k = key;
  const open = k.indexOf('{');
  if (open >= 0) {
    const close = k.indexOf('}', open + 1);
    if (close > open + 1) k = k.slice(open + 1, close);
  }
  let crc = 0;
  for (const b of Buffer.from(k)) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}
