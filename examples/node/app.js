'use strict';
// A small Express app rate-limited with the redis-ratelimit-module package (clients/node).
//
//   npm ci
//   REDIS_URL=redis://127.0.0.1:6379/0 node app.js        # listens on 127.0.0.1:3000
//
//   curl -i http://127.0.0.1:3000/                                        # anonymous: per IP
//   curl -i -H 'Authorization: Bearer alice-token' http://127.0.0.1:3000/  # user + org
//   curl -i http://127.0.0.1:3000/health                                  # never limited
//
// Environment: REDIS_URL, TRUSTED_PROXIES (default 0), FAIL_OPEN (1 or 0, default 1), PORT.

const express = require('express');
const Redis = require('ioredis');
const { createLimiter, expressRateLimit, keys } = require('redis-ratelimit-module');

// Stands in for the application's real authentication (a session, a JWT's `sub` and `org`
// claims, an API key table): `Authorization: Bearer <token>` looked up in `tokens`.
function bearerTokens(tokens) {
  return (req) => {
    const m = /^bearer\s+(\S+)\s*$/i.exec(req.headers.authorization || '');
    return (m && Object.hasOwn(tokens, m[1]) && tokens[m[1]]) || null;
  };
}

const TOKENS = {
  'alice-token': { user: 'alice', org: 'acme' },
  'bob-token': { user: 'bob', org: 'acme' },
  'carol-token': { user: 'carol' }, // no organisation: only her user limit
};

// An ioredis client that gives up quickly: 50 ms to connect and per command, no retries of a
// failed command, no offline queue (while Redis is down a command fails at once).
function connect(url, timeoutMs = 50) {
  const redis = new Redis(url, {
    connectTimeout: timeoutMs, commandTimeout: timeoutMs, maxRetriesPerRequest: 0,
    enableOfflineQueue: false, retryStrategy: (times) => Math.min(times * 50, 1000),
  });
  redis.on('error', () => {}); // the middleware logs what affects a request
  return redis;
}

// Authenticated requests: the user's limit and the organisation's, checked and spent by one
// atomic RL.ALL (keys rl:{org:acme}:user:alice and rl:{org:acme}:org:acme share the hash tag,
// so one Redis Cluster slot). Anonymous requests: the client address (IPv6 on its /64).
function createApp({
  redis,
  tokens = TOKENS,
  user = { algorithm: 'gcra', burst: 10, count: 10, periodMs: 60_000 },
  org = { algorithm: 'sliding', limit: 15, windowMs: 60_000 },
  ip = { algorithm: 'gcra', burst: 5, count: 5, periodMs: 60_000 },
  trustedProxies = 0,
  failOpen = true,
  logger,
  onDecision,
} = {}) {
  const who = bearerTokens(tokens);
  const app = express();
  app.use(expressRateLimit({
    limiter: createLimiter(redis),
    limits: [
      { name: 'user', rule: user, key: keys.user((req) => who(req)?.user), failOpen },
      { name: 'org', rule: org, key: keys.org((req) => who(req)?.org), failOpen },
      { name: 'ip', rule: ip, key: (ctx) => (who(ctx.req) ? null : ctx.ip), failOpen },
    ],
    hashTag: (ctx) => { const w = who(ctx.req); return w?.org ? `org:${w.org}` : null; },
    exempt: ['/health'],
    trustedProxies,
    logger,
    onDecision,
  }));
  app.get('/', (req, res) => res.json({ hello: who(req)?.user ?? 'world' }));
  app.get('/health', (req, res) => res.send('ok'));
  return app;
}

if (require.main === module) {
  const app = createApp({
    redis: connect(process.env.REDIS_URL || 'redis://127.0.0.1:6379/0'),
    trustedProxies: Number(process.env.TRUSTED_PROXIES || 0),
    failOpen: process.env.FAIL_OPEN !== '0',
  });
  const port = Number(process.env.PORT || 3000);
  app.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}/`));
}

module.exports = { createApp, connect, bearerTokens };
