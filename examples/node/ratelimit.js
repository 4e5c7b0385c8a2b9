'use strict';
// Per-request rate limiting for Express with the redis-ratelimit module (ioredis).
//
//   const redis = connect('redis://127.0.0.1:6379/0');
//   app.use(rateLimiter({ redis, identify: bearerTokens({...}), trustedProxies: 1 }));
//
// Each request is checked against the limits that apply to it:
//  - authenticated (`Authorization: Bearer <token>`, mapped by `identify` to a user and,
//    optionally, the user's organisation): the `user` limit and the `org` limit, both checked
//    and spent by one atomic `RL.ALL` call (all or nothing: a request the organisation
//    refuses spends nothing of the user's own quota);
//  - anonymous: the `ip` limit, keyed by the client address. Behind proxies the address is
//    read from `X-Forwarded-For`, counting `trustedProxies` entries from the right (entries
//    further left were written by the client and are ignored).
// A refused request gets 429 with `Retry-After` (whole seconds, rounded up) and an RFC 9457
// problem body. Every checked response carries the headers of
// draft-ietf-httpapi-ratelimit-headers (`RateLimit-Policy` and `RateLimit`, one item per
// limit) and the older `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (for the
// tightest limit).
// When Redis cannot answer within the client's timeout (50 ms with `connect`), `failOpen`
// decides: true lets the request through without rate-limit headers and logs a warning;
// false answers 503.

const net = require('node:net');
const Redis = require('ioredis');

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

const ceilDiv = (a, b) => Math.ceil(a / b);

// ---------------------------------------------------------------------------- limits

// A limit: { name, command, args, quota, windowS, cost }. `name` is the policy name of the
// headers; `command` one of the rate commands RL.ALL also takes as a rule (RL.GCRA,
// RL.TOKENBUCKET, RL.SLIDING, RL.FIXED, RL.LOG, RL.QUEUE) with `args` after the key; `quota`
// and `windowS` are what RateLimit-Policy advertises (`q` and `w`); `cost` is how many units
// one request spends (COST n, 1 by default).

// `burst` at once, then `count` per `periodMs`. The advertised window (`w`) is the time an
// exhausted key takes to refill completely: burst * periodMs / count.
function gcra(name, burst, count, periodMs, cost = 1) {
  return { name, command: 'RL.GCRA', args: [burst, count, periodMs], quota: burst,
           windowS: ceilDiv(burst * periodMs, count * 1000), cost };
}

// `limit` per trailing `windowMs` (sliding window counter).
function sliding(name, limit, windowMs, cost = 1) {
  return { name, command: 'RL.SLIDING', args: [limit, windowMs], quota: limit,
           windowS: ceilDiv(windowMs, 1000), cost };
}

const costOf = (limit) => limit.cost ?? 1;
const costArgs = (limit) => (costOf(limit) !== 1 ? ['COST', costOf(limit)] : []);

const RULES = new Set(['GCRA', 'TOKENBUCKET', 'SLIDING', 'FIXED', 'LOG', 'QUEUE']);

// The limit as an RL.ALL rule: RL.GCRA 10 5 1000 -> GCRA 10 5 1000.
function rule(limit) {
  const [prefix, algo] = limit.command.toUpperCase().split('.');
  if (prefix !== 'RL' || !RULES.has(algo)) {
    throw new TypeError(`${limit.command} cannot be a rule of RL.ALL`);
  }
  return [algo, ...limit.args, ...costArgs(limit)];
}

// The module's standard reply for one limit: the first five fields.
function decision(limit, key, reply) {
  const [allowed, quota, remaining, retryAfterMs, resetAfterMs] = reply.slice(0, 5).map(Number);
  return { limit, key, allowed: allowed === 1, quota, remaining, retryAfterMs, resetAfterMs };
}

// The `t` of the `RateLimit` item: when refused, seconds until this request would be
// admitted (the same as Retry-After); when admitted, seconds until the key is fresh again.
const seconds = (d) => ceilDiv(d.allowed ? d.resetAfterMs : d.retryAfterMs, 1000);

// ---------------------------------------------------------------------------- Redis

// A client that gives up quickly: `timeoutMs` to connect and per command, no retries of a
// failed command, and no offline queue (while disconnected, commands fail at once instead
// of waiting for a reconnect). It keeps reconnecting in the background.
function connect(url, timeoutMs = 50) {
  const redis = new Redis(url, {
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: (times) => Math.min(times * 50, 1000),
  });
  // Without a listener ioredis prints every connection error; the middleware logs them
  // when a request is affected.
  redis.on('error', () => {});
  return redis;
}

// Checks and spends every limit in `calls` ({limit, key}), all or nothing, in one call: if
// any limit refuses, nothing is spent on the others either (a request refused by its
// organisation's limit must not eat into the user's own quota).
//
// This is the only function that talks to Redis. One limit is one rate command (atomic by
// itself). Several are one `RL.ALL numkeys key [key ...] rule [rule ...]`: the module decides
// every rule and, only if all admit, spends them all in one atomic step, so no concurrent
// request can slip in between a check and a spend. In Redis Cluster all the keys of one call
// must hash to one slot (the middleware gives them a common {hash tag}), or the server
// answers CROSSSLOT.
async function check(redis, calls) {
  if (calls.length === 1) {
    const [{ limit, key }] = calls;
    return [decision(limit, key, await redis.call(limit.command, key, ...limit.args,
      ...costArgs(limit)))];
  }
  const reply = await redis.call('RL.ALL', calls.length, ...calls.map((c) => c.key),
    ...calls.flatMap((c) => rule(c.limit)));
  // [allowed, refused_by (1-based, 0 when admitted), reply of rule 1, reply of rule 2, ...]
  const admitted = Number(reply[0]) === 1;
  const decisions = calls.map(({ limit, key }, i) => decision(limit, key, reply[2 + i]));
  if (admitted) return decisions;
  // Refused: nothing was spent anywhere. Each rule's reply is what it alone would have
  // decided; a rule that would have admitted counted this request in its `remaining` (as
  // DRYRUN does), so what is really left is its cost more.
  return decisions.map((d) => (d.allowed
    ? { ...d, remaining: Math.min(d.quota, d.remaining + costOf(d.limit)) } : d));
}

// ---------------------------------------------------------------------------- client address

// Canonical text of an address; strips a port ("1.2.3.4:80", "[::1]:80") and maps
// IPv4-mapped IPv6 (::ffff:1.2.3.4) to IPv4. null if it is not an address.
function normalize(addr) {
  let a = String(addr || '').trim();
  if (a.startsWith('[')) a = a.slice(1).split(']')[0];
  else if (a.split(':').length === 2) a = a.split(':')[0];
  const v = net.isIP(a);
  if (v === 4) return a;
  if (v !== 6) return null;
  // Canonical IPv6 text (lower case, zeros compressed), as the URL parser writes it. Each
  // IPv6 client usually owns a whole /64; key on that prefix instead if clients rotate
  // addresses inside it.
  let canon;
  try {
    canon = new URL(`http://[${a}]/`).hostname.slice(1, -1);
  } catch {
    return a.toLowerCase(); // a zone index (fe80::1%eth0) is no URL host: keep it as it is
  }
  const m = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(canon);
  if (m) {
    const hi = parseInt(m[1], 16);
    const lo = parseInt(m[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return canon;
}

// The client's address, given the TCP peer, the X-Forwarded-For header lines (in order)
// and how many proxies in front of the app are trusted to append to that header.
// Each trusted proxy appends the address it received the request from, so the client is
// the `trustedProxies`-th entry from the right; anything left of it was sent by the client
// and may be forged. With 0 trusted proxies the header is ignored. With fewer entries than
// trusted proxies, or an entry that is not an address, the peer is used.
// (Express's own `app.set('trust proxy', n)` + `req.ip` reads the header the same way, but
// takes the leftmost entry when there are fewer than n.)
function clientIp(peer, forwardedFor, trustedProxies) {
  const fallback = normalize(peer) || String(peer || '');
  if (!(trustedProxies > 0)) return fallback;
  const lines = Array.isArray(forwardedFor) ? forwardedFor : forwardedFor ? [forwardedFor] : [];
  const hops = lines.flatMap((l) => l.split(',')).map((h) => h.trim()).filter(Boolean);
  if (hops.length < trustedProxies) return fallback;
  return normalize(hops[hops.length - trustedProxies]) || fallback;
}

// ---------------------------------------------------------------------------- headers

// The response headers for a set of decisions. `RateLimit-Policy` and `RateLimit` list
// every limit. The older single-valued RateLimit-Limit and RateLimit-Reset describe the
// tightest limit: a refusing limit first (the one with the longest wait), else the one with
// the fewest remaining; RateLimit-Remaining is the fewest remaining of all limits (with cost
// 1 a refusing limit has 0 left, so that is the tightest limit's own). `Retry-After` (only
// when refused) is the longest wait of the refusing limits, rounded up to seconds.
function rateLimitHeaders(decisions) {
  const headers = {
    'RateLimit-Policy': decisions
      .map((d) => `"${d.limit.name}";q=${d.limit.quota};w=${d.limit.windowS}`).join(', '),
    RateLimit: decisions.map((d) => `"${d.limit.name}";r=${d.remaining};t=${seconds(d)}`).join(', '),
  };
  const rank = (d) => [d.allowed ? 1 : 0, d.remaining, -d.retryAfterMs, -d.resetAfterMs];
  const tightest = decisions.reduce((best, d) => {
    const a = rank(d);
    const b = rank(best);
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] < b[i] ? d : best;
    return best;
  });
  headers['RateLimit-Limit'] = String(tightest.quota);
  headers['RateLimit-Remaining'] = String(Math.min(...decisions.map((d) => d.remaining)));
  headers['RateLimit-Reset'] = String(seconds(tightest));
  const refused = decisions.filter((d) => !d.allowed);
  if (refused.length) {
    headers['Retry-After'] = String(ceilDiv(Math.max(...refused.map((d) => d.retryAfterMs)), 1000));
  }
  return headers;
}

// ---------------------------------------------------------------------------- middleware

// An `identify` function: `Authorization: Bearer <token>` looked up in `tokens`
// ({token: {user, org}}). Stands in for the application's real authentication (a session,
// a JWT's `sub` and `org` claims, an API key table). An unknown token counts as anonymous.
function bearerTokens(tokens) {
  return (req) => {
    const m = /^bearer\s+(\S+)\s*$/i.exec(req.get('Authorization') || '');
    return (m && Object.hasOwn(tokens, m[1]) && tokens[m[1]]) || null;
  };
}

function rateLimiter({
  redis,
  user = gcra('user', 100, 100, 60_000),
  org = sliding('org', 1000, 60_000),
  ip = gcra('ip', 20, 20, 60_000),
  identify = bearerTokens({}),
  trustedProxies = 0, // proxies in front of the app that append to X-Forwarded-For
  failOpen = true, // Redis unreachable: true = let requests through, false = 503
  keyPrefix = 'rl:',
  logger = console,
} = {}) {
  // The (limit, key) pairs that apply to a request. A user in an organisation is checked
  // together with it in one RL.ALL, so both keys carry the organisation as their Redis
  // Cluster hash tag and live in one slot: `rl:{org:acme}:user:alice` and `rl:{org:acme}`.
  // A user without an organisation (`rl:user:carol`) and an anonymous client
  // (`rl:ip:<address>`) have one key each. (Keep `keyPrefix` free of braces: the first
  // `{...}` of a key is its hash tag.)
  function calls(who, addr) {
    if (!who) return [{ limit: ip, key: `${keyPrefix}ip:${addr}` }];
    if (who.org == null) return [{ limit: user, key: `${keyPrefix}user:${who.user}` }];
    const tag = `{org:${who.org}}`;
    return [
      { limit: user, key: `${keyPrefix}${tag}:user:${who.user}` },
      { limit: org, key: `${keyPrefix}${tag}` },
    ];
  }

  return async function rateLimit(req, res, next) {
    const addr = clientIp(req.socket.remoteAddress, req.headers['x-forwarded-for'], trustedProxies);
    let decisions;
    try {
      decisions = await check(redis, calls(identify(req), addr));
    } catch (err) {
      if (failOpen) {
        logger.warn(`rate limiting skipped, Redis unavailable (failing open): ${err.message}`);
        return next();
      }
      logger.error(`request refused, Redis unavailable (failing closed): ${err.message}`);
      return res.status(503).set('Retry-After', '1').json({ title: 'Rate limiter unavailable' });
    }
    res.set(rateLimitHeaders(decisions));
    const refused = decisions.filter((d) => !d.allowed).map((d) => d.limit.name);
    if (refused.length) {
      return res.status(429).type('application/problem+json').send(JSON.stringify({
        type: QUOTA_EXCEEDED,
        title: 'Request cannot be satisfied as assigned quota has been exceeded',
        'violated-policies': refused,
      }));
    }
    return next();
  };
}

module.exports = {
  rateLimiter, bearerTokens, connect, check, clientIp, rateLimitHeaders, gcra, sliding,
};
