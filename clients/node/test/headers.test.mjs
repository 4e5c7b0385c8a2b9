// draft-10 headers: q, w, r and t from the five reply fields, checked against the module
// (after waiting t seconds the quota is there), plus the pure address functions.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import {
  addressKey, clientAddress, createLimiter, nextQuotaMs, rateLimitHeaders, resetParameter, sfString,
  windowSeconds, MemoryLimiter,
} from 'redis-ratelimit-module';
import { NOW_MS, admin, startServer } from './helpers.mjs';

let server;
let adm;
let limiter;
before(async () => { server = await startServer(); adm = await admin(server.port); limiter = createLimiter(adm); });
after(async () => { await limiter.close(); adm?.disconnect(); await server?.stop(); });
beforeEach(async () => { await adm.flushall(); await adm.call('RL.CLOCK', 'SET', String(NOW_MS)); });

const advance = (ms) => adm.call('RL.CLOCK', 'ADVANCE', String(ms));

test('policy window w', () => {
  assert.equal(windowSeconds({ algorithm: 'gcra', burst: 10, count: 10, periodMs: 60000 }), 60);
  assert.equal(windowSeconds({ algorithm: 'gcra', burst: 3, count: 1, periodMs: 1500 }), 5);
  assert.equal(windowSeconds({ algorithm: 'tokenbucket', capacity: 100, refillTokens: 10, refillPeriodMs: 1000 }), 10);
  assert.equal(windowSeconds({ algorithm: 'sliding', limit: 10, windowMs: 60000 }), 60);
  assert.equal(windowSeconds({ algorithm: 'fixed', limit: 10, windowMs: 500 }), 1);
  assert.equal(windowSeconds({ algorithm: 'queue', capacity: 5, intervalMs: 1000 }), 5);
});

test('structured-field strings are escaped', () => {
  assert.equal(sfString('a"b\\c'), '"a\\"b\\\\c"');
  assert.equal(sfString('é'), '"?"');
});

// For each rule: spend some, render t, advance the clock by t seconds: the quota must be back
// at t (remaining grows) and, for GCRA, not much earlier. SLIDING's t is the current
// window's end (decision 3), where its count starts to age out.
const cases = [
  ['gcra', { algorithm: 'gcra', burst: 10, count: 1, periodMs: 6000 }, 4],
  ['tokenbucket', { algorithm: 'tokenbucket', capacity: 10, refillTokens: 1, refillPeriodMs: 6000 }, 4],
  ['queue', { algorithm: 'queue', capacity: 10, intervalMs: 6000 }, 4],
  ['sliding', { algorithm: 'sliding', limit: 10, windowMs: 60000 }, 4],
  ['fixed', { algorithm: 'fixed', limit: 10, windowMs: 60000 }, 4],
  ['log', { algorithm: 'log', limit: 10, windowMs: 60000 }, 4],
];
for (const [name, rule, spent] of cases) {
  test(`t for ${name}: additional quota is there after t seconds`, async () => {
    await advance(12345); // not at a window start
    let d;
    for (let i = 0; i < spent; i++) d = await limiter.check('k', rule);
    const t = resetParameter(d, rule);
    assert.ok(t > 0);
    if (name === 'sliding') {
      // 4 in the current window: reset_after_ms is the next window's end; t the current's
      assert.equal(d.resetAfterMs, 120000 - 12345);
      assert.equal(t, Math.ceil((d.resetAfterMs - 60000) / 1000));
      await advance(t * 1000 + 15000); // a quarter window later, one of the 4 has aged out
      const later = await limiter.check('k', rule, { dryrun: true });
      assert.ok(later.remaining + 1 > d.remaining, `${later.remaining + 1} units, had ${d.remaining}`);
      return;
    }
    assert.ok(t * 1000 <= d.resetAfterMs + 999, `t ${t} s within the full reset ${d.resetAfterMs} ms`);
    await advance(t * 1000);
    const later = await limiter.check('k', rule, { dryrun: true });
    // DRYRUN counts the request it imagines: remaining + 1 units are there now
    assert.ok(later.remaining + 1 > d.remaining, `${name}: ${later.remaining + 1} units after ${t} s, had ${d.remaining}`);
    if (name === 'gcra' || name === 'tokenbucket' || name === 'queue') {
      // one emission interval is 6 s: t is the next unit, not the 24 s full reset
      assert.equal(t, 6);
      assert.equal(d.resetAfterMs, 24000);
    }
    if (name === 'fixed') assert.equal(t * 1000 >= d.resetAfterMs, true);
  });
}

test('sliding: t is the current window\'s end, else the previous window\'s weight end', async () => {
  const rule = { algorithm: 'sliding', limit: 10, windowMs: 60000 };
  let a;
  for (let i = 0; i < 5; i++) a = await limiter.check('s', rule);
  assert.equal(a.resetAfterMs, 120000);
  assert.equal(resetParameter(a, rule), 60);
  // Only the previous window weighs (a peek): reset_after_ms itself.
  const peek = { allowed: true, limit: 10, remaining: 5, retryAfterMs: 0, resetAfterMs: 54000 };
  assert.equal(resetParameter(peek, rule), 54);
});

test('refused: t equals Retry-After (at most w); fresh quota: t=0', () => {
  const rule = { algorithm: 'gcra', burst: 3, count: 1, periodMs: 1500 };
  const refused = { allowed: false, limit: 3, remaining: 0, retryAfterMs: 1500, resetAfterMs: 4500 };
  assert.deepEqual(rateLimitHeaders([{ name: 'user', rule, decision: refused }]), {
    'RateLimit-Policy': '"user";q=3;w=5', RateLimit: '"user";r=0;t=2', 'Retry-After': '2',
  });
  assert.equal(nextQuotaMs({ allowed: true, limit: 3, remaining: 3, retryAfterMs: 0, resetAfterMs: 0 }, rule), 0);
  assert.equal(rateLimitHeaders([{ name: 'p', rule, decision: { allowed: true, limit: 3, remaining: 3, retryAfterMs: 0, resetAfterMs: 0 } }]).RateLimit,
    '"p";r=3;t=0');
  // a block far beyond the window: Retry-After says it, t stays within w
  const blocked = { allowed: false, limit: 3, remaining: 0, retryAfterMs: 900000, resetAfterMs: 900000 };
  assert.deepEqual(rateLimitHeaders([{ name: 'user', rule, decision: blocked }]), {
    'RateLimit-Policy': '"user";q=3;w=5', RateLimit: '"user";r=0;t=5', 'Retry-After': '900',
  });
});

test('several limits; legacy X-RateLimit-* on request', () => {
  const user = { name: 'user', rule: { algorithm: 'gcra', burst: 3, count: 1, periodMs: 1500 },
    decision: { allowed: true, limit: 3, remaining: 1, retryAfterMs: 0, resetAfterMs: 3000 } };
  const org = { name: 'org', rule: { algorithm: 'sliding', limit: 4, windowMs: 60000 },
    decision: { allowed: false, limit: 4, remaining: 0, retryAfterMs: 75000, resetAfterMs: 120000 } };
  const h = rateLimitHeaders([user, org], { legacy: true, nowMs: 1_000_000 });
  assert.deepEqual(h, {
    'RateLimit-Policy': '"user";q=3;w=5, "org";q=4;w=60',
    RateLimit: '"user";r=1;t=2, "org";r=0;t=60', // t at most w; Retry-After the module's
    'X-RateLimit-Limit': '4',
    'X-RateLimit-Remaining': '0',
    'X-RateLimit-Reset': String(Math.ceil((1_000_000 + 120000) / 1000)),
    'Retry-After': '75',
  });
  assert.equal(rateLimitHeaders([user], { draft: false }).RateLimit, undefined);
});

test('IPv6 keyed on the /64; IPv4 as is; mapped IPv4', () => {
  assert.equal(addressKey('2001:db8:1:2:aaaa:bbbb:cccc:dddd'), '2001:db8:1:2::/64');
  assert.equal(addressKey('2001:DB8:1:2::1'), '2001:db8:1:2::/64');
  assert.equal(addressKey('[2001:db8:1:2::1]:443'), '2001:db8:1:2::/64');
  assert.equal(addressKey('2001:db8::1', 128), '2001:db8::1');
  assert.equal(addressKey('2001:db8:1:2:3::1', 48), '2001:db8:1::/48');
  assert.equal(addressKey('::ffff:203.0.113.7'), '203.0.113.7');
  assert.equal(addressKey('203.0.113.7:8080'), '203.0.113.7');
  assert.equal(addressKey('fe80::1%eth0'), 'fe80::/64');
  assert.equal(addressKey('0:0:1:0:0:0:0:1', 128), '0:0:1::1');
  for (const bad of ['', 'x', '1.2.3', '1.2.3.256', '01.2.3.4', '1::2::3', '1:2:3:4:5:6:7:8:9', 'gggg::']) {
    assert.equal(addressKey(bad), null, bad);
  }
});

test('trusted proxies: a count or networks', () => {
  const cases = [
    ['10.0.0.1', undefined, 0, '10.0.0.1'],
    ['10.0.0.1', '1.2.3.4', 0, '10.0.0.1'], // header ignored
    ['10.0.0.1', '6.6.6.6, 1.2.3.4', 1, '1.2.3.4'], // forged leftmost ignored
    ['10.0.0.1', ['9.9.9.9, 1.2.3.4', '10.0.0.2'], 2, '1.2.3.4'],
    ['10.0.0.1', '1.2.3.4', 2, '10.0.0.1'], // fewer entries than proxies: the peer
    ['10.0.0.1', 'garbage', 1, '10.0.0.1'],
    ['10.0.0.1', '6.6.6.6, 1.2.3.4, 10.0.0.7', ['10.0.0.0/8'], '1.2.3.4'],
    ['203.0.113.9', '1.2.3.4', ['10.0.0.0/8'], '203.0.113.9'], // peer not trusted: header ignored
    ['::1', '2001:db8::5', ['::1'], '2001:db8::5'],
    ['10.0.0.1', '10.0.0.2', ['10.0.0.0/8'], '10.0.0.2'], // all trusted: the leftmost
  ];
  for (const [peer, xff, trusted, expected] of cases) {
    assert.equal(clientAddress(peer, xff, trusted), expected, JSON.stringify([peer, xff, trusted]));
  }
});

test('in-memory fallback limiter', () => {
  let now = NOW_MS;
  const m = new MemoryLimiter({ now: () => now, maxKeys: 2 });
  const rule = { algorithm: 'gcra', burst: 2, count: 1, periodMs: 1000 };
  assert.deepEqual(m.check('a', rule), { allowed: true, limit: 2, remaining: 1, retryAfterMs: 0, resetAfterMs: 1000 });
  assert.deepEqual(m.check('a', rule), { allowed: true, limit: 2, remaining: 0, retryAfterMs: 0, resetAfterMs: 2000 });
  assert.deepEqual(m.check('a', rule), { allowed: false, limit: 2, remaining: 0, retryAfterMs: 1000, resetAfterMs: 2000 });
  now += 1000;
  assert.equal(m.check('a', rule).allowed, true);
  const fixed = { algorithm: 'fixed', limit: 1, windowMs: 60000 };
  assert.equal(m.check('f', fixed).allowed, true);
  assert.deepEqual(m.check('f', fixed), { allowed: false, limit: 1, remaining: 0, retryAfterMs: 59000, resetAfterMs: 59000 });
  m.check('x', fixed);
  assert.equal(m.size, 2); // bounded
  const sliding = { algorithm: 'sliding', limit: 2, windowMs: 60000 };
  now = NOW_MS;
  assert.equal(m.check('s', sliding).allowed, true);
  assert.equal(m.check('s', sliding).allowed, true);
  const r = m.check('s', sliding);
  assert.equal(r.allowed, false);
  now += r.retryAfterMs;
  assert.equal(m.check('s', sliding).allowed, true, 'admitted at its retry time');
});
