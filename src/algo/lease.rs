//! Concurrency limit with expiring leases and fencing tokens.
//!
//! At most `limit` unexpired leases at once. Each lease carries a token `<ms>-<seq>`
//! ordered like a stream ID: the acquisition time in ms and a sequence within that ms.
//! Tokens of one key strictly increase: a new token is `(now_ms, 0)` if `now_ms` is past the
//! last token's ms, else `(last.ms, last.seq + 1)` (so also when the clock goes back).
//! The key lives until its last lease expires, and at least until the millisecond after its
//! last token's (`horizon`), even after RELEASE: a re-created key's tokens then carry a later
//! time than every earlier token.
//! Time never runs backwards for a key: when the clock reads earlier than the last token's
//! ms (the key's own time), every call is decided as of that time: leases expire, and new
//! ones are granted and renewed, on the key's time; replies and the TTL count from the real
//! now. Nothing is clamped, and a refused ACQUIRE writes nothing.

use super::algorithm::{Algorithm, Spent};
use super::codec::{DecodeError, Encoded, InfoValue, Reader};
pub use super::leaseset::LeaseSet;
use super::request::Extra;
use super::table::Algo;
pub use super::token::{Held, Lease, Token};
use super::{div_ceil, sat_u64, span, Decision, ParamError, Quota, SpanName, US_PER_MS};

/// A concurrency rule: at most `limit` leases held, each of at most `span_ms`.
pub type Params = Quota<LeaseSpan>;

/// The span of a concurrency rule is a lease's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseSpan {}

impl SpanName for LeaseSpan {
    const NAME: &'static str = "lease_ms";
}

/// Checks a lease's length on its own (RL.RENEW's argument): a rule's span bounds.
pub fn lease_ms(v: u64) -> Result<u64, ParamError> {
    span(v, LeaseSpan::NAME)
}

/// The leases of one key, as the module stores them.
pub type Leases = LeasesIn<LeaseSet>;

/// The leases of one key, held in `S`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeasesIn<S> {
    /// The last token granted.
    pub last: Token,
    /// The instant the key may vanish, µs: the last live lease's expiry, and never before
    /// the ms after the last token's.
    pub horizon_us: u64,
    /// The longest lease ever granted or renewed, ms (informational: RL.INFO shows it).
    pub max_lease_ms: u64,
    /// Leases, possibly including expired ones not yet purged (a write purges them; a
    /// refused or dry-run ACQUIRE writes nothing). Every question below is O(log n) in
    /// them, whatever number has expired ([`LeaseSet`]).
    pub leases: S,
}

/// The largest token time a state may hold (the codec refuses more): twice the latest module
/// time, so `(ms + 1) * 1000` stays a valid µs instant.
pub const MAX_TOKEN_MS: u64 = 2 * super::MAX_TIME_MS - 1;

/// The latest lease expiry or horizon a state may hold (the codec refuses more): a lease
/// granted or renewed at the latest effective now (the last token's ms, or the latest module
/// time) for the longest span. Every write keeps a state within it, so whatever the codec
/// accepts stays storable.
pub const MAX_EXPIRY_US: u64 = (MAX_TOKEN_MS + 1 + super::MAX_SPAN_MS) * US_PER_MS;

fn ms_until(at_us: u64, now_us: u64) -> u64 {
    sat_u64(div_ceil(
        u128::from(at_us.saturating_sub(now_us)),
        u128::from(US_PER_MS),
    ))
}

impl<S: Held> LeasesIn<S> {
    /// The effective now: never before the last token's ms (the key's own time: every
    /// acquisition's token carries it).
    #[inline]
    fn effective_us(&self, now_us: u64) -> u64 {
        now_us.max(self.last.ms.saturating_mul(US_PER_MS))
    }

    /// Drops leases expired at `at_us` and recomputes the horizon (only when writing):
    /// O(log n + purged), each lease purged once.
    fn purge(&mut self, at_us: u64) {
        self.leases.purge(at_us);
        let last = self.leases.last_expiry().unwrap_or(0);
        let after_token = self.last.ms.saturating_add(1).saturating_mul(US_PER_MS);
        self.horizon_us = last.max(after_token);
    }

    /// ms from `now_us` until the key is back to fresh (its TTL), as of the effective
    /// instant `at_us`: O(log n).
    fn reset_after_ms(&self, at_us: u64, now_us: u64) -> u64 {
        let last = self
            .leases
            .last_expiry()
            .filter(|&e| e > at_us)
            .unwrap_or(0);
        ms_until(last.max(self.horizon_us), now_us)
    }

    /// `RL.ACQUIRE`: grants a lease if fewer than `limit` are live, as of the effective now.
    /// Returns the decision, the token granted (or that would be granted, with `commit`
    /// false), and whether the state changed (granted, when `commit`); a refusal changes
    /// nothing. O(log n) reading; a grant adds the purge, amortised O(1) per lease.
    pub fn acquire(
        &mut self,
        p: &Params,
        now_us: u64,
        commit: bool,
    ) -> (Decision, Option<Token>, bool) {
        // The token this grant would carry, and its instant: the effective now, or the next
        // ms when 2^64 tokens were granted in this one (then the grant happens there).
        let at = self.effective_us(now_us);
        let token = self.next_token(at / US_PER_MS);
        let at = token.map_or(at, |t| at.max(t.ms.saturating_mul(US_PER_MS)));
        let live = self.leases.count_live(at);
        let Some(token) = token.filter(|_| live < p.limit) else {
            // Full; or no greater token exists (a state only a crafted payload holds): a
            // key that can grant no more until its leases expire.
            let first = match token {
                Some(_) => self.leases.first_live(at).unwrap_or(at),
                None => self.horizon_us,
            };
            let d = Decision {
                allowed: false,
                limit: p.limit,
                remaining: 0,
                retry_after_ms: ms_until(first, now_us).max(1),
                reset_after_ms: self.reset_after_ms(at, now_us),
            };
            return (d, None, false);
        };
        let expiry = at.saturating_add(p.span_ms.saturating_mul(US_PER_MS));
        let reset =
            ms_until(expiry.max(self.horizon_us), now_us).max(self.reset_after_ms(at, now_us));
        if commit {
            self.purge(at);
            self.leases.insert(Lease {
                expiry_us: expiry,
                token,
            });
            self.last = token;
            self.horizon_us = self.horizon_us.max(expiry);
            self.max_lease_ms = self.max_lease_ms.max(p.span_ms);
        }
        let d = Decision {
            allowed: true,
            limit: p.limit,
            remaining: p.limit - live - 1,
            retry_after_ms: 0,
            reset_after_ms: reset,
        };
        (d, Some(token), commit)
    }

    /// The token after the last one at `at_ms` (the effective now's ms): that ms's first,
    /// the next in the last token's ms, or the next ms's first after 2^64 in one ms; None
    /// when no greater token exists.
    fn next_token(&self, at_ms: u64) -> Option<Token> {
        if at_ms > self.last.ms {
            Some(Token { ms: at_ms, seq: 0 })
        } else if self.last.seq < u64::MAX {
            Some(Token {
                ms: self.last.ms,
                seq: self.last.seq + 1,
            })
        } else if self.last.ms < MAX_TOKEN_MS {
            Some(Token {
                ms: self.last.ms + 1,
                seq: 0,
            })
        } else {
            None
        }
    }

    /// `RL.RELEASE`: ends the live lease with `token`; false (and no change) if none.
    /// O(log n) (and the purge).
    pub fn release(&mut self, token: Token, now_us: u64) -> bool {
        let at = self.effective_us(now_us);
        if self.leases.live_expiry(token, at).is_none() {
            return false;
        }
        self.leases.remove(token);
        self.purge(at);
        true
    }

    /// `RL.RENEW`: sets the live lease's expiry to `lease_ms` after the effective now; false
    /// if none. O(log n) (and the purge).
    pub fn renew(&mut self, token: Token, lease_ms: u64, now_us: u64) -> bool {
        let at = self.effective_us(now_us);
        if self.leases.live_expiry(token, at).is_none() {
            return false;
        }
        let expiry = at.saturating_add(lease_ms.saturating_mul(US_PER_MS));
        self.leases.set_expiry(token, expiry);
        self.max_lease_ms = self.max_lease_ms.max(lease_ms);
        self.purge(at);
        true
    }

    /// Live leases at `now_us` (as of the effective now). O(log n).
    pub fn live_count(&self, now_us: u64) -> u64 {
        self.leases.count_live(self.effective_us(now_us))
    }

    /// TTL after a RELEASE or RENEW at `now_us`. O(log n).
    pub fn ttl_ms(&self, now_us: u64) -> u64 {
        self.reset_after_ms(self.effective_us(now_us), now_us)
    }
}

/// A concurrency state: the rule's limit last applied and the leases.
///
/// Codec (concurrency 7): limit, max_lease_ms, last_token_ms, last_token_seq, horizon_us,
/// n, then n leases of (expiry_us, token_ms, token_seq), in token order (any order is read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseState {
    pub limit: u64,
    pub leases: Leases,
}

impl Algorithm for LeaseState {
    type Rule = Params;

    const GROWS: bool = true;

    fn rule(_algo: Algo, numbers: [u64; 3]) -> Result<Params, ParamError> {
        let [x, y, _] = numbers;
        Params::new(x, y)
    }

    #[inline]
    fn algo(_rule: &Params) -> Algo {
        Algo::Concurrency
    }

    #[inline]
    fn limit(rule: &Params) -> u64 {
        rule.limit
    }

    fn fresh(rule: &Params) -> LeaseState {
        LeaseState {
            limit: rule.limit,
            leases: Leases::default(),
        }
    }

    fn spend(&mut self, rule: &Params, _cost: u64, now_us: u64, commit: bool) -> Spent {
        let (d, token, changed) = self.leases.acquire(rule, now_us, commit);
        if d.allowed && commit {
            self.limit = rule.limit;
        }
        (d, Extra::Token(token), changed)
    }

    /// Leases are given back by `RL.RELEASE`, not refunded.
    fn refund(&mut self, _rule: &Params, _n: u64, _now_us: u64) -> bool {
        false
    }

    // Its lease argument is a maximum: RL.RENEW may ask for less.
    fn info(&self, _algo: Algo, _now_us: u64) -> Vec<(&'static str, InfoValue)> {
        let s = &self.leases;
        vec![
            ("limit", InfoValue::Int(self.limit)),
            ("max_lease_ms", InfoValue::Int(s.max_lease_ms)),
            ("leases", InfoValue::Int(s.leases.len() as u64)),
            ("last_token", InfoValue::Owned(s.last.to_string())),
            ("horizon_us", InfoValue::Int(s.horizon_us)),
        ]
    }

    fn encode(&self, algo: Algo) -> Encoded {
        let s = &self.leases;
        let n = s.leases.len();
        let mut e = Encoded::new(algo.tag(), 6 + 3 * n);
        for f in [
            self.limit,
            s.max_lease_ms,
            s.last.ms,
            s.last.seq,
            s.horizon_us,
            n as u64,
        ] {
            e.push(f);
        }
        // Token order: deterministic, whatever the store's form.
        for l in s.leases.iter() {
            for f in [l.expiry_us, l.token.ms, l.token.seq] {
                e.push(f);
            }
        }
        e
    }

    fn decode(_algo: Algo, r: &mut Reader) -> Result<LeaseState, DecodeError> {
        let limit = r.u64()?;
        let max_lease_ms = r.u64()?;
        Params::new(limit, max_lease_ms).map_err(|_| DecodeError("bad lease parameters"))?;
        let last = Token {
            ms: r.u64()?,
            seq: r.u64()?,
        };
        let horizon_us = r.u64()?;
        if horizon_us > MAX_EXPIRY_US || last.ms > MAX_TOKEN_MS {
            return Err(DecodeError("bad lease horizon or token"));
        }
        let n = r.count(3)?;
        let mut leases = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let expiry_us = r.u64()?;
            let token = Token {
                ms: r.u64()?,
                seq: r.u64()?,
            };
            if expiry_us > MAX_EXPIRY_US || token > last {
                return Err(DecodeError("bad lease"));
            }
            leases.push(Lease { expiry_us, token });
        }
        // Any order (earlier encoders wrote the leases as they were held).
        let leases = LeaseSet::from_leases(leases).ok_or(DecodeError("bad entry count"))?;
        Ok(LeaseState {
            limit,
            leases: Leases {
                last,
                horizon_us,
                max_lease_ms,
                leases,
            },
        })
    }

    fn heap_bytes(&self) -> usize {
        self.leases.leases.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::testutil::clock_step;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_040_000_000;

    /// The leases as they were kept before [`LeaseSet`]: a plain vector, every question a
    /// scan. The store must answer, and so the algorithm decide, reply and hold, exactly what
    /// this one does.
    type Reference = LeasesIn<Vec<Lease>>;

    impl Held for Vec<Lease> {
        fn count_live(&self, at_us: u64) -> u64 {
            self.iter().filter(|l| l.expiry_us > at_us).count() as u64
        }

        fn first_live(&self, at_us: u64) -> Option<u64> {
            self.iter()
                .map(|l| l.expiry_us)
                .filter(|&e| e > at_us)
                .min()
        }

        fn last_expiry(&self) -> Option<u64> {
            self.iter().map(|l| l.expiry_us).max()
        }

        fn live_expiry(&self, token: Token, at_us: u64) -> Option<u64> {
            self.iter()
                .find(|l| l.token == token && l.expiry_us > at_us)
                .map(|l| l.expiry_us)
        }

        fn insert(&mut self, lease: Lease) {
            self.push(lease);
        }

        fn remove(&mut self, token: Token) -> bool {
            let Some(i) = self.iter().position(|l| l.token == token) else {
                return false;
            };
            self.swap_remove(i);
            true
        }

        fn set_expiry(&mut self, token: Token, expiry_us: u64) -> bool {
            let Some(l) = self.iter_mut().find(|l| l.token == token) else {
                return false;
            };
            l.expiry_us = expiry_us;
            true
        }

        fn purge(&mut self, at_us: u64) {
            self.retain(|l| l.expiry_us > at_us);
        }
    }

    /// A fresh key after `n` ACQUIREs under `p`, `step_us` apart from T0, each of them
    /// granted: the key, the tokens and each grant's `remaining`.
    fn acquired(p: &Params, n: u64, step_us: u64) -> (Leases, Vec<Token>, Vec<u64>) {
        let mut s = Leases::default();
        let (mut toks, mut remaining) = (vec![], vec![]);
        for i in 0..n {
            let (d, t, _) = s.acquire(p, T0 + i * step_us, true);
            assert!(d.allowed, "ACQUIRE {i}");
            toks.extend(t);
            remaining.push(d.remaining);
        }
        (s, toks, remaining)
    }

    #[test]
    fn limit_release_expiry_renew() {
        let p = Params::new(3, 10_000).unwrap();
        let (mut s, toks, remaining) = acquired(&p, 3, 1_000_000);
        assert_eq!(remaining, [2, 1, 0]);
        assert_eq!(
            toks[0],
            Token {
                ms: T0 / 1000,
                seq: 0
            }
        );
        let (d, t, _) = s.acquire(&p, T0 + 3_000_000, true);
        assert_eq!(
            (d.allowed, t, d.retry_after_ms, d.reset_after_ms),
            (false, None, 7000, 9000)
        );
        assert!(s.release(toks[1], T0 + 3_000_000));
        assert!(!s.release(toks[1], T0 + 3_000_000));
        assert!(s.acquire(&p, T0 + 3_000_000, true).0.allowed);
        // The first lease expires at T0 + 10 s without a RELEASE.
        assert!(!s.acquire(&p, T0 + 9_999_000, true).0.allowed);
        assert!(s.acquire(&p, T0 + 10_000_000, true).0.allowed);
        // RENEW moves the expiry and the TTL.
        assert!(s.renew(toks[2], 60_000, T0 + 10_000_000));
        assert_eq!(s.ttl_ms(T0 + 10_000_000), 60_000);
        // RENEW can shorten a lease; the TTL follows (to the lease acquired at T0 + 10 s).
        assert!(s.renew(toks[2], 1_000, T0 + 10_000_000));
        assert_eq!(s.ttl_ms(T0 + 10_000_000), 10_000);
        let mut one = Leases::default();
        let t = one.acquire(&p, T0, true).1.unwrap();
        assert!(one.renew(t, 1_000, T0));
        assert_eq!(one.ttl_ms(T0), 1_000);
        // Released at once: the key lives 1 ms (past the token's ms), not the lease's 10 s.
        assert!(one.release(t, T0));
        assert_eq!(one.ttl_ms(T0), 1);
        assert!(!s.renew(toks[0], 60_000, T0 + 10_000_000));
    }

    #[test]
    fn tokens_increase_within_a_millisecond_and_when_the_clock_goes_back() {
        let p = Params::new(100, 1000).unwrap();
        let mut s = Leases::default();
        let a = s.acquire(&p, T0, true).1.unwrap();
        let b = s.acquire(&p, T0, true).1.unwrap();
        let c = s.acquire(&p, T0 - 5_000_000, true).1.unwrap();
        assert!(a < b && b < c);
        // Every lease released: the key lives until its last token's ms is past (TTL 1 ms
        // here), so a later ACQUIRE in that ms still gets a larger token.
        for t in [a, b, c] {
            assert!(s.release(t, T0));
        }
        assert_eq!(s.ttl_ms(T0), 1);
        let d = s.acquire(&p, T0, true).1.unwrap();
        assert!(c < d);
        assert_eq!(Token::parse(b"1700000040000-1"), Some(b));
        assert_eq!(b.to_string(), "1700000040000-1");
        for bad in [
            &b""[..],
            b"1",
            b"-1",
            b"1-",
            b"a-1",
            b"1-1-1",
            b"+1-1",
            b"99999999999999999999999-1",
        ] {
            assert_eq!(Token::parse(bad), None);
        }
    }

    #[test]
    fn clock_back_keeps_leases_live() {
        let p = Params::new(1, 10_000).unwrap();
        let mut s = Leases::default();
        let t = s.acquire(&p, T0 + 3_600_000_000, true).1.unwrap();
        let written = s.clone();
        // An hour back: the lease is still live (it expires 10 s after the key's own time);
        // the replies count the hour the clock must catch up; nothing is written.
        let (d, tok, changed) = s.acquire(&p, T0, true);
        assert_eq!(
            (d.allowed, tok, changed, d.retry_after_ms, d.reset_after_ms),
            (false, None, false, 3_610_000, 3_610_000)
        );
        assert_eq!(s, written);
        assert!(!s.acquire(&p, T0 + 3_609_999_000, true).0.allowed);
        // RENEW on the key's time: 20 s after its own time.
        assert!(s.renew(t, 20_000, T0));
        assert_eq!(s.ttl_ms(T0), 3_620_000);
        assert!(s.release(t, T0));
        let (d, tok, _) = s.acquire(&p, T0, true);
        assert!(d.allowed && tok.unwrap() > t);
    }

    /// The leases a store holds, in token order.
    fn held(s: &Leases) -> Vec<Lease> {
        s.leases.iter().collect()
    }

    fn reference_held(r: &Reference) -> Vec<Lease> {
        let mut v = r.leases.clone();
        v.sort_by_key(|l| l.token);
        v
    }

    #[test]
    fn grows_past_the_small_form_and_back() {
        let (mut s, toks, _) = acquired(&Params::new(1_000, 60_000).unwrap(), 600, 10);
        assert_eq!(s.live_count(T0 + 6_000), 600);
        assert!(s.leases.is_large());
        let large = s.leases.heap_bytes();
        assert!((600 * 44..=2 * 600 * 44 + 64).contains(&large), "{large}");
        for t in &toks[..590] {
            assert!(s.release(*t, T0 + 6_000));
        }
        assert_eq!(s.leases.len(), 10);
        // Back in the small form: 16 bytes a lease, in room for at most twice as many.
        assert!(!s.leases.is_large());
        assert!(
            s.leases.heap_bytes() <= 2 * 160,
            "{}",
            s.leases.heap_bytes()
        );
        assert_eq!(
            held(&s).iter().map(|l| l.token).collect::<Vec<_>>(),
            toks[590..]
        );
    }

    #[test]
    fn small_form_is_sixteen_bytes_a_lease() {
        let (s, _, _) = acquired(&Params::new(100, 60_000).unwrap(), 10, 1);
        assert_eq!(s.leases.heap_bytes(), 160);
        assert!(std::mem::size_of::<Leases>() <= 56);
    }

    proptest! {
        /// Whatever the clock does: (a) never more than `limit` leases live in the key's own
        /// time (the latest effective now, which never goes back); tokens strictly increase;
        /// (b) after a write whose TTL is R, the key is fresh R ms later on the clock; (c) a
        /// refused or dry-run ACQUIRE changes nothing.
        #[test]
        fn never_more_than_limit(
            limit in 1u64..6, lease_ms in 1u64..5000,
            steps in prop::collection::vec((
                0u64..4,
                clock_step(-500_000..2_000_000, -60_000_000..-1_000_000, 1_000_000..60_000_000),
                0usize..8,
            ), 1..100),
        ) {
            let p = Params::new(limit, lease_ms).unwrap();
            let mut s = Leases::default();
            let mut now = T0 as i64;
            let mut granted: Vec<Token> = vec![];
            // The model: (token, expiry) of every lease granted and not released.
            let mut model: Vec<(Token, u64)> = vec![];
            let mut key_time = 0u64;
            let mut fresh_at: Option<u64> = None;
            for (op, dt, pick) in steps {
                now += dt;
                let now = now as u64;
                let at = now.max(s.last.ms * US_PER_MS);
                key_time = key_time.max(at);
                let lease = |e: u64| e > at;
                match op {
                    0 | 3 => {
                        let commit = op == 0;
                        let before = s.clone();
                        let (d, t, changed) = s.acquire(&p, now, commit);
                        if let Some(f) = fresh_at {
                            if now >= f {
                                prop_assert_eq!(d, Leases::default().acquire(&p, now, false).0);
                            }
                        }
                        match t {
                            Some(t) if commit => {
                                prop_assert!(d.allowed && changed);
                                if let Some(last) = granted.last() {
                                    prop_assert!(t > *last);
                                }
                                granted.push(t);
                                model.push((t, at + lease_ms * US_PER_MS));
                                fresh_at = Some(now + d.reset_after_ms * US_PER_MS);
                            }
                            _ => {
                                prop_assert!(!changed);
                                prop_assert_eq!(&s, &before);
                            }
                        }
                    }
                    1 => {
                        if let Some(t) = granted.get(pick) {
                            if s.release(*t, now) {
                                prop_assert!(model.iter().any(|m| m.0 == *t && lease(m.1)));
                                model.retain(|m| m.0 != *t);
                                fresh_at = Some(now + s.ttl_ms(now) * US_PER_MS);
                            }
                        }
                    }
                    _ => {
                        if let Some(t) = granted.get(pick) {
                            // A lease the key holds live is live in the model (the key may
                            // have dropped one the model keeps: expired at a later time).
                            let live = s.renew(*t, lease_ms, now);
                            prop_assert!(!live || model.iter().any(|m| m.0 == *t && lease(m.1)));
                            if live {
                                for m in model.iter_mut().filter(|m| m.0 == *t) {
                                    m.1 = at + lease_ms * US_PER_MS;
                                }
                                fresh_at = Some(now + s.ttl_ms(now) * US_PER_MS);
                            }
                        }
                    }
                }
                let live_at_key_time = model.iter().filter(|m| m.1 > key_time).count() as u64;
                prop_assert!(live_at_key_time <= limit);
                prop_assert!(s.live_count(now) <= limit);
            }
        }

        /// The store and the plain vector it replaced decide, reply and hold exactly the
        /// same over any sequence of ACQUIRE (and DRYRUN), RELEASE and RENEW, with the clock
        /// jumping back and forth, lease lengths and limits changing (a limit lowered under
        /// the leases held), sizes on both sides of the small form's and tokens whose seq
        /// does not fit it.
        #[test]
        fn same_as_a_plain_vector(
            limits in prop::collection::vec(prop_oneof![1u64..6, 1u64..300], 1..4),
            acquire_weight in 4u64..10,
            seq0 in prop_oneof![Just(0u64), Just((1 << 19) - 3), Just(u64::MAX - 2)],
            steps in prop::collection::vec((
                0u64..10,
                prop_oneof![
                    6 => -500_000i64..2_000_000,
                    2 => 0i64..2_000,
                    1 => -60_000_000i64..-1_000_000,
                    1 => 1_000_000i64..60_000_000,
                ],
                prop_oneof![1u64..5_000, 1u64..200_000, 100_000u64..10_000_000],
                0usize..1000,
                0usize..4,
            ), 1..600),
        ) {
            let mut s = Leases::default();
            let mut r = Reference::default();
            if seq0 > 0 {
                // A key whose own time is ahead, its last token's seq near a bound.
                let last = Token { ms: T0 / 1000 + 5_000, seq: seq0 };
                s.last = last;
                r.last = last;
            }
            let mut now = T0 as i64;
            let mut granted: Vec<Token> = vec![];
            for (op, dt, lease_ms, pick, li) in steps {
                now += dt;
                let now = now as u64;
                let limit = limits.get(li % limits.len()).copied().unwrap_or(1);
                let p = Params::new(limit, lease_ms).unwrap();
                let pick = granted.get(pick % granted.len().max(1)).copied();
                let release = acquire_weight + (10 - acquire_weight) / 2;
                match (op, pick) {
                    (op, _) if op < acquire_weight => {
                        let commit = op != 0;
                        let got = s.acquire(&p, now, commit);
                        prop_assert_eq!(got, r.acquire(&p, now, commit));
                        if let (Some(t), true) = (got.1, commit) {
                            granted.push(t);
                        }
                    }
                    (_, None) => {
                        let commit = op != 0;
                        let got = s.acquire(&p, now, commit);
                        prop_assert_eq!(got, r.acquire(&p, now, commit));
                        if let (Some(t), true) = (got.1, commit) {
                            granted.push(t);
                        }
                    }
                    (op, Some(t)) if op < release => {
                        prop_assert_eq!(s.release(t, now), r.release(t, now));
                    }
                    (_, Some(t)) => {
                        prop_assert_eq!(s.renew(t, lease_ms, now), r.renew(t, lease_ms, now));
                    }
                }
                prop_assert_eq!(s.ttl_ms(now), r.ttl_ms(now));
                prop_assert_eq!(s.live_count(now), r.live_count(now));
                prop_assert_eq!(
                    (s.last, s.horizon_us, s.max_lease_ms),
                    (r.last, r.horizon_us, r.max_lease_ms)
                );
                prop_assert_eq!(held(&s), reference_held(&r));
                prop_assert_eq!(s.leases.len(), r.leases.len());
                // A store rebuilt from its leases (a decoded state) is the same store.
                let rebuilt = LeaseSet::from_leases(held(&s)).unwrap();
                prop_assert_eq!(&rebuilt, &s.leases);
            }
        }
    }
}
