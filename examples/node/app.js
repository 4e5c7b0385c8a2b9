'use strict';
// A small Express app behind the rate limiter.
//
//   npm ci
//   REDIS_URL=redis://127.0.0.1:6379/0 node app.js        # listens on 127.0.0.1:3000
//
//   curl -i http://127.0.0.1:3000/                                        # anonymous: per IP
//   curl -i -H 'Authorization: Bearer alice-token' http://127.0.0.1:3000/  # user + org
//
// Environment: REDIS_URL, TRUSTED_PROXIES (default 0), FAIL_OPEN (1 or 0, default 1), PORT.

const express = require('express');
const { rateLimiter, bearerTokens, connect, gcra, sliding } = require('./ratelimit');

function createApp(options) {
  const app = express();
  app.use(rateLimiter(options));
  app.get('/', (req, res) => res.json({ hello: 'world' }));
  return app;
}

if (require.main === module) {
  const redis = connect(process.env.REDIS_URL || 'redis://127.0.0.1:6379/0');
  const app = createApp({
    redis,
    user: gcra('user', 10, 10, 60_000),
    org: sliding('org', 15, 60_000),
    ip: gcra('ip', 5, 5, 60_000),
    identify: bearerTokens({
      'alice-token': { user: 'alice', org: 'acme' },
      'bob-token': { user: 'bob', org: 'acme' },
      'carol-token': { user: 'carol' }, // no organisation: only her user limit
    }),
    trustedProxies: Number(process.env.TRUSTED_PROXIES || 0),
    failOpen: process.env.FAIL_OPEN !== '0',
  });
  const port = Number(process.env.PORT || 3000);
  app.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}/`));
}

module.exports = { createApp };
