// `npm install <abs path to clients/node>` in a clean scratch project works without a build
// step (dist/ is committed), and the package loads through `require` and `import`, with
// types for both (tsc, module nodenext). The packed tarball (what `npm publish` would ship)
// installs and loads the same way.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PKG, require } from './helpers.mjs';

const NPM = process.env.NPM || 'npm';
let tmp;
before(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-node-install-')); });
after(() => { fs.rmSync(tmp, { recursive: true, force: true }); });

const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const npmInstall = (dir, what) => run(NPM, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', what], dir);

function project(name) {
  const dir = path.join(tmp, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }));
  fs.writeFileSync(path.join(dir, 'use.cjs'), `const rl = require('redis-ratelimit-module');
const { createLimiter, expressRateLimit, fastifyRateLimit, RedisRateLimitStore, rateLimitHeaders } = rl;
if (typeof createLimiter !== 'function' || typeof expressRateLimit !== 'function' || typeof fastifyRateLimit !== 'function'
  || typeof RedisRateLimitStore !== 'function' || typeof rl.koaRateLimit !== 'function' || typeof rl.RateLimitGuard !== 'function'
  || typeof rl.createRateLimiter !== 'function' || typeof require('redis-ratelimit-module/testing').startServer !== 'function') throw new Error('missing export');
console.log('cjs', rateLimitHeaders([{ name: 'p', decision: { allowed: true, limit: 2, remaining: 1, retryAfterMs: 0, resetAfterMs: 1000 } }]).RateLimit);
`);
  fs.writeFileSync(path.join(dir, 'use.mjs'), `import { createLimiter, addressKey } from 'redis-ratelimit-module';
import * as all from 'redis-ratelimit-module';
import { startServer } from 'redis-ratelimit-module/testing';
if (typeof createLimiter !== 'function' || typeof all.MemoryLimiter !== 'function' || typeof startServer !== 'function') throw new Error('missing export');
console.log('esm', addressKey('2001:db8::1'));
`);
  return dir;
}

function load(dir) {
  assert.equal(run(process.execPath, ['use.cjs'], dir).trim(), 'cjs "p";r=1;t=1');
  assert.equal(run(process.execPath, ['use.mjs'], dir).trim(), 'esm 2001:db8::/64');
}

test('npm install <folder>: require and import', () => {
  const dir = project('from-folder');
  npmInstall(dir, PKG);
  load(dir);
});

test('the packed tarball installs and loads; types for import and require', () => {
  const packed = run(NPM, ['pack', '--silent', '--pack-destination', tmp], PKG).trim().split('\n').pop();
  const tarball = path.join(tmp, packed);
  const dir = project('from-tarball');
  npmInstall(dir, tarball);
  load(dir);
  const installed = path.join(dir, 'node_modules', 'redis-ratelimit-module');
  assert.ok(fs.existsSync(path.join(installed, 'dist/esm/index.d.ts')));
  assert.ok(!fs.existsSync(path.join(installed, 'src')), 'only dist/ and the README are shipped');
  // TypeScript sees the types through both conditions.
  fs.writeFileSync(path.join(dir, 'a.mts'), `import { createLimiter, type Decision } from 'redis-ratelimit-module';
const d: Decision = { allowed: true, limit: 1, remaining: 0, retryAfterMs: 0, resetAfterMs: 1 };
export const f = (c: unknown) => createLimiter(c).gcra('k', { burst: 1, count: 1, periodMs: 1 }).then((x) => x.allowed && d.allowed);
`);
  fs.writeFileSync(path.join(dir, 'b.cts'), `import rl = require('redis-ratelimit-module');
import testing = require('redis-ratelimit-module/testing');
export const g = (c: unknown): Promise<rl.Info | null> => rl.createLimiter(c).info('k');
export const h = (): Promise<number> => testing.startServer({ testClock: true }).then((s) => s.port);
`);
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', strict: true, noEmit: true, types: [],
      typeRoots: [path.join(PKG, 'node_modules/@types')], skipLibCheck: false },
    files: ['a.mts', 'b.cts'],
  }));
  run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', dir], dir);
});
