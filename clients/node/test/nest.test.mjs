// The NestJS guard over real HTTP: a real Nest application (Express platform) with a
// controller written without TypeScript decorators (Nest's decorators applied by hand), a
// global guard and a guard given as APP_GUARD, against a real server with the module.
import 'reflect-metadata';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Controller, Get, Module, Post } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { RateLimit, RateLimitGuard, keys } from 'redis-ratelimit-module';
import { moduleServer } from './helpers.mjs';

let server;
let redis;
let limiter;
moduleServer((s) => ({ server, redis, limiter } = s));

const silent = { warn() {}, error() {} };
const user = (ctx) => ctx.headers['x-user'] ?? null;

/** A controller: GET / , POST /login (its own limit), GET /health (exempt). */
function controller() {
  class AppController {
    root() { return 'ok'; }
    login() { return 'in'; }
    health() { return 'up'; }
  }
  const method = (name, ...decorators) => {
    const d = Object.getOwnPropertyDescriptor(AppController.prototype, name);
    for (const dec of decorators) dec(AppController.prototype, name, d);
  };
  method('root', Get('/'));
  method('login', Post('login'), RateLimit({ limits: [{ name: 'login', rule: '1/minute', key: keys.ip() }] }));
  method('health', Get('health'), RateLimit(false));
  Controller()(AppController);
  return AppController;
}

async function nestApp(moduleOptions, setup = () => {}) {
  class AppModule {}
  Module(moduleOptions)(AppModule);
  const app = await NestFactory.create(AppModule, { logger: false });
  setup(app);
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  const call = async (path = '/', headers = {}, method = 'GET') => {
    const res = await fetch(base + path, { method, headers });
    res.text_ = await res.text();
    return res;
  };
  return { app, call };
}

test('Nest: a global guard: headers, 429 problem body through Nest, @RateLimit per handler and exempt', async (t) => {
  const guard = new RateLimitGuard({ limiter, logger: silent,
    limits: [{ name: 'user', rule: { algorithm: 'fixed', limit: 2, windowMs: 60000 }, key: user }] });
  const { app, call } = await nestApp({ controllers: [controller()] }, (a) => a.useGlobalGuards(guard));
  t.after(() => app.close());
  const a = await call('/', { 'x-user': 'alice' });
  assert.equal(a.status, 200);
  assert.equal(a.text_, 'ok');
  assert.equal(a.headers.get('RateLimit-Policy'), '"user";q=2;w=60');
  assert.equal(a.headers.get('RateLimit'), '"user";r=1;t=60');
  const login = await call('/login', { 'x-user': 'alice' }, 'POST');
  assert.equal(login.status, 201);
  assert.equal(login.headers.get('RateLimit-Policy'), '"user";q=2;w=60, "login";q=1;w=60');
  const refused = await call('/', { 'x-user': 'alice' });
  assert.equal(refused.status, 429);
  assert.match(refused.headers.get('Content-Type'), /^application\/problem\+json/);
  assert.equal(refused.headers.get('Retry-After'), '60');
  assert.deepEqual(JSON.parse(refused.text_), {
    type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
    title: 'Request cannot be satisfied as assigned quota has been exceeded',
    status: 429, 'violated-policies': ['user'],
  });
  const health = await call('/health', { 'x-user': 'alice' });
  assert.equal(health.status, 200);
  assert.equal(health.headers.get('RateLimit'), null);
});

test('Nest: a guard as APP_GUARD with a per-request rule, deny list, and a lease given back on app.close()', async () => {
  const rule = { algorithm: 'gcra', burst: 10, count: 10, periodMs: 100000 };
  const guard = new RateLimitGuard({ limiter, logger: silent, limits: [
    { name: 'plan', key: user, deny: ['mallory'],
      rule: (ctx) => (ctx.headers['x-plan'] === 'pro' ? '100/minute' : '1/minute') },
    { name: 'user', rule, key: user, lease: { chunk: 4, ttlMs: 60000 } },
  ] });
  const { app, call } = await nestApp({ controllers: [controller()], providers: [{ provide: APP_GUARD, useValue: guard }] });
  let closed = false;
  try {
    assert.equal((await call('/', { 'x-user': 'alice', 'x-plan': 'pro' })).headers.get('RateLimit-Policy'),
      '"plan";q=100;w=60, "user";q=10;w=100');
    assert.equal((await call('/', { 'x-user': 'bob' })).status, 200);
    const bob = await call('/', { 'x-user': 'bob' });
    assert.equal(bob.status, 429, 'the free plan: 1 a minute');
    assert.deepEqual(JSON.parse(bob.text_)['violated-policies'], ['plan']);
    const denied = await call('/', { 'x-user': 'mallory' });
    assert.equal(denied.status, 403);
    assert.equal(JSON.parse(denied.text_).title, 'Forbidden');
    // alice's and bob's leases: 3 units each unused
    assert.equal((await limiter.check('rl:user:alice', rule, { cost: 0 })).remaining, 6);
    await app.close();
    closed = true;
    assert.equal((await limiter.check('rl:user:alice', rule, { cost: 0 })).remaining, 9, 'given back on shutdown');
    assert.equal((await limiter.check('rl:user:bob', rule, { cost: 0 })).remaining, 9);
  } finally {
    if (!closed) await app.close();
  }
});
