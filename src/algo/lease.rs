//! Concurrency limit with expiring leases and fencing tokens.
//!
//! At most `limit` unexpired leases at once. Each lease carries a token `<ms>-<seq>`
//! ordered like a stream ID: the acquisition time in ms and a sequence within that ms.
//! Tokens of one key strictly increase: a new token is `(now_ms, 0)` if `now_ms` is past the
//! last token's ms, else `(last.ms, last.seq + 1)` (so also when the clock goes back).
//! The key lives until its last lease expires, and at least until the millisecond after its
//! last token's (`horizon`), even after RELEASE: a re-created key's tokens then carry a later
//! time than every earlier token.
//! A lease expiring later than `now + max_lease_ms` (written under a clock that ran ahead)
//! is read as expiring at `now + max_lease_ms`.

use super::{div_ceil, positive, sat_u64, span, Decision, ParamError, US_PER_MS};

/// A fencing token: ordered by ms, then seq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Token {
    pub ms: u64,
    pub seq: u64,
}

impl Token {
    /// Parses `<ms>-<seq>` (decimal digits only).
    pub fn parse(s: &[u8]) -> Option<Token> {
        let dash = s.iter().position(|&b| b == b'-')?;
        let num = |d: &[u8]| -> Option<u64> {
            if d.is_empty() || d.len() > 20 || !d.iter().all(u8::is_ascii_digit) {
                return None;
            }
            std::str::from_utf8(d).ok()?.parse().ok()
        };
        Some(Token {
            ms: num(&s[..dash])?,
            seq: num(&s[dash + 1..])?,
        })
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub expiry_us: u64,
    pub token: Token,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub limit: u64,
    pub lease_ms: u64,
}

impl Params {
    pub fn new(limit: u64, lease_ms: u64) -> Result<Self, ParamError> {
        positive(limit, "limit")?;
        span(lease_ms, "lease_ms")?;
        Ok(Params { limit, lease_ms })
    }
}

/// The leases of one key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Leases {
    /// The last token granted.
    pub last: Token,
    /// The instant the key may vanish, µs: the last live lease's expiry, and never before
    /// the ms after the last token's.
    pub horizon_us: u64,
    /// The longest lease ever granted or renewed, ms (bounds clock-jump clamping).
    pub max_lease_ms: u64,
    /// Leases, possibly including expired ones not yet purged.
    pub leases: Vec<Lease>,
}

/// The largest token time a state may hold (the codec refuses more): twice the latest module
/// time, so `(ms + 1) * 1000` stays a valid µs instant.
pub const MAX_TOKEN_MS: u64 = 2 * super::MAX_TIME_MS - 1;

fn ms_until(at_us: u64, now_us: u64) -> u64 {
    sat_u64(div_ceil(
        u128::from(at_us.saturating_sub(now_us)),
        u128::from(US_PER_MS),
    ))
}

impl Leases {
    fn cap(&self, now_us: u64, lease_ms: u64) -> u64 {
        now_us.saturating_add(self.max_lease_ms.max(lease_ms).saturating_mul(US_PER_MS))
    }

    /// Expiries as read at `now_us` (clamped), live ones only.
    fn live(&self, now_us: u64, cap: u64) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.leases
            .iter()
            .enumerate()
            .map(move |(i, l)| (i, l.expiry_us.min(cap)))
            .filter(move |&(_, e)| e > now_us)
    }

    /// Drops expired leases, clamps the rest and recomputes the horizon (only when writing).
    fn purge(&mut self, now_us: u64, cap: u64) {
        self.leases.retain(|l| l.expiry_us.min(cap) > now_us);
        for l in &mut self.leases {
            l.expiry_us = l.expiry_us.min(cap);
        }
        let last = self.leases.iter().map(|l| l.expiry_us).max().unwrap_or(0);
        let after_token = self.last.ms.saturating_add(1).saturating_mul(US_PER_MS);
        self.horizon_us = last.max(after_token);
    }

    /// ms until the key is back to fresh (its TTL).
    pub fn reset_after_ms(&self, now_us: u64, cap: u64) -> u64 {
        let last = self.live(now_us, cap).map(|(_, e)| e).max().unwrap_or(0);
        ms_until(last.max(self.horizon_us.min(cap)), now_us)
    }

    /// Whether any stored expiry lies beyond `cap` (written under a clock that ran ahead).
    fn ahead(&self, cap: u64) -> bool {
        self.horizon_us > cap || self.leases.iter().any(|l| l.expiry_us > cap)
    }

    /// `RL.ACQUIRE`: grants a lease if fewer than `limit` are live. Returns the decision,
    /// the token granted (or that would be granted, with `commit` false), and whether the
    /// state changed (granted, or clamped after a clock jump, when `commit`).
    pub fn acquire(
        &mut self,
        p: &Params,
        now_us: u64,
        commit: bool,
    ) -> (Decision, Option<Token>, bool) {
        let cap = self.cap(now_us, p.lease_ms);
        let live = self.live(now_us, cap).count() as u64;
        if live >= p.limit {
            let changed = commit && self.ahead(cap);
            let first = self
                .live(now_us, cap)
                .map(|(_, e)| e)
                .min()
                .unwrap_or(now_us);
            let d = Decision {
                allowed: false,
                limit: p.limit,
                remaining: 0,
                retry_after_ms: ms_until(first, now_us).max(1),
                reset_after_ms: self.reset_after_ms(now_us, cap),
            };
            if changed {
                self.purge(now_us, cap);
            }
            return (d, None, changed);
        }
        let now_ms = now_us / US_PER_MS;
        let token = if now_ms > self.last.ms {
            Token { ms: now_ms, seq: 0 }
        } else if self.last.seq < u64::MAX {
            Token {
                ms: self.last.ms,
                seq: self.last.seq + 1,
            }
        } else {
            // 2^64 tokens in one ms: move to the next ms rather than repeat a token.
            Token {
                ms: self.last.ms.saturating_add(1).min(MAX_TOKEN_MS),
                seq: 0,
            }
        };
        let expiry = now_us.saturating_add(p.lease_ms.saturating_mul(US_PER_MS));
        let mut reset = ms_until(expiry.max(self.horizon_us.min(cap)), now_us);
        reset = reset.max(self.reset_after_ms(now_us, cap));
        if commit {
            self.purge(now_us, cap);
            if self.leases.is_empty() {
                // A key's first lease: no room for growth it may never need.
                self.leases.reserve_exact(1);
            }
            self.leases.push(Lease {
                expiry_us: expiry,
                token,
            });
            self.last = token;
            self.horizon_us = self.horizon_us.max(expiry);
            self.max_lease_ms = self.max_lease_ms.max(p.lease_ms);
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

    fn find(&self, token: Token, now_us: u64, cap: u64) -> Option<usize> {
        self.live(now_us, cap)
            .find(|&(i, _)| self.leases[i].token == token)
            .map(|(i, _)| i)
    }

    /// `RL.RELEASE`: ends the live lease with `token`; false (and no change) if none.
    pub fn release(&mut self, token: Token, now_us: u64) -> bool {
        let cap = self.cap(now_us, 0);
        let Some(i) = self.find(token, now_us, cap) else {
            return false;
        };
        self.leases.swap_remove(i);
        self.purge(now_us, cap);
        true
    }

    /// `RL.RENEW`: sets the live lease's expiry to `now + lease_ms`; false if none.
    pub fn renew(&mut self, token: Token, lease_ms: u64, now_us: u64) -> bool {
        let cap = self.cap(now_us, lease_ms);
        let Some(i) = self.find(token, now_us, cap) else {
            return false;
        };
        let expiry = now_us.saturating_add(lease_ms.saturating_mul(US_PER_MS));
        if let Some(l) = self.leases.get_mut(i) {
            l.expiry_us = expiry;
        }
        self.max_lease_ms = self.max_lease_ms.max(lease_ms);
        self.purge(now_us, self.cap(now_us, lease_ms));
        true
    }

    /// Live leases at `now_us`.
    pub fn live_count(&self, now_us: u64) -> u64 {
        self.live(now_us, self.cap(now_us, 0)).count() as u64
    }

    /// TTL after a RELEASE or RENEW at `now_us`.
    pub fn ttl_ms(&self, now_us: u64) -> u64 {
        self.reset_after_ms(now_us, self.cap(now_us, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_040_000_000;

    #[test]
    fn limit_release_expiry_renew() {
        let p = Params::new(3, 10_000).unwrap();
        let mut s = Leases::default();
        let mut toks = vec![];
        for i in 0..3u64 {
            let (d, t, _) = s.acquire(&p, T0 + i * 1_000_000, true);
            assert!(d.allowed);
            assert_eq!(d.remaining, 2 - i);
            toks.push(t.unwrap());
        }
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

    proptest! {
        /// Never more than `limit` live leases; tokens strictly increase.
        #[test]
        fn never_more_than_limit(
            limit in 1u64..6, lease_ms in 1u64..5000,
            steps in prop::collection::vec((0u64..3, -500_000i64..2_000_000, 0usize..8), 1..100),
        ) {
            let p = Params::new(limit, lease_ms).unwrap();
            let mut s = Leases::default();
            let mut now = T0 as i64;
            let mut granted: Vec<Token> = vec![];
            for (op, dt, pick) in steps {
                now += dt;
                let now = now as u64;
                match op {
                    0 => {
                        if let (d, Some(t), _) = s.acquire(&p, now, true) {
                            prop_assert!(d.allowed);
                            if let Some(last) = granted.last() {
                                prop_assert!(t > *last);
                            }
                            granted.push(t);
                        }
                    }
                    1 => { if let Some(t) = granted.get(pick) { s.release(*t, now); } }
                    _ => { if let Some(t) = granted.get(pick) { s.renew(*t, lease_ms, now); } }
                }
                prop_assert!(s.live_count(now) <= limit);
            }
        }
    }
}
