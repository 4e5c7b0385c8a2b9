//! A lease and its fencing token (`RL.ACQUIRE`), and what a store of leases answers: the
//! values the concurrency algorithm (`lease.rs`), its lease store (`leaseset.rs`) and a
//! request's reply (`request.rs`) share.

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

/// What the algorithm asks of the leases one key holds (including expired ones not yet
/// purged). `LeaseSet` answers every question in O(log n); the tests hold the leases in a
/// plain vector too, every question a scan, and check that both answer alike.
pub trait Held {
    /// Leases live at `at_us` (expiring after it).
    fn count_live(&self, at_us: u64) -> u64;
    /// The earliest expiry of a lease live at `at_us`.
    fn first_live(&self, at_us: u64) -> Option<u64>;
    /// The latest expiry of any lease held.
    fn last_expiry(&self) -> Option<u64>;
    /// The expiry of the lease with `token`, if it is live at `at_us`.
    fn live_expiry(&self, token: Token, at_us: u64) -> Option<u64>;
    /// Adds a lease (its token is normally above every token held).
    fn insert(&mut self, lease: Lease);
    /// Removes the lease with `token`; whether there was one.
    fn remove(&mut self, token: Token) -> bool;
    /// Sets the expiry of the lease with `token`; whether there is one.
    fn set_expiry(&mut self, token: Token, expiry_us: u64) -> bool;
    /// Drops the leases expired at `at_us`.
    fn purge(&mut self, at_us: u64);
}
