//! The value stored under a key, for any algorithm, and its one binary codec, used for RDB,
//! the AOF rewrite, replication (`RL._APPLY`), DEBUG DIGEST and RESTORE.
//!
//! Encoding version 1: byte 0 is the codec version, byte 1 the algorithm tag, then
//! little-endian `u64` fields, each algorithm's own (its state type documents them:
//! [`Bucket`], [`Window`], [`LogState`], [`LeaseState`]), or:
//! - blocked (8, a state under a `BLOCK` penalty): blocked_until_us, then the wrapped state's
//!   own tag and fields (any algorithm but concurrency; never nested)
//! - paused (9, a key under `RL.PAUSE`): paused_until_us, probe_ms (0: a plain pause; else
//!   at most `MAX_SPAN_MS`), then the wrapped state's own tag and fields (any algorithm,
//!   concurrency included; never a blocked or paused state: a pause replaces a BLOCK
//!   penalty, its end at least the penalty's), or nothing for a key that held nothing
//!
//! Effects of a five-field state use the compact encoding ([`COMPACT_VERSION`]).
//! Decoding validates every field; anything odd is refused, never trusted.
//!
//! Every algorithm's own code is in its file under `algo/`, behind [`Algorithm`]; this
//! enum, and the rule's (`rule.rs`), only dispatch to it ([`each!`]).

use crate::algo::algorithm::Algorithm;
pub use crate::algo::codec::{
    DecodeError, Encoded, InfoValue, Reader, COMPACT_VERSION, ENCODING_VERSION, MAX_ENTRIES,
    MAX_TIME_US,
};
pub use crate::algo::gcra::Bucket;
pub use crate::algo::lease::LeaseState;
pub use crate::algo::log::LogState;
pub use crate::algo::table::Algo;
pub use crate::algo::window::Window;

/// A state under a `BLOCK` penalty: every request is refused until `until_us`; then the
/// wrapped state applies as before (it is not changed by the refusals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub until_us: u64,
    pub state: State,
}

/// A paused key (`RL.PAUSE`): every request is refused until `until_us`. With `probe_ms`
/// (`PROBE`; 0: a plain pause) it stays refused after that but for one probe (a request
/// carrying `PROBE` its algorithm admits), which pauses it again for `probe_ms`; until
/// `RL.RESUME`. The wrapped state (None: the key held nothing) is never blocked or paused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paused {
    pub until_us: u64,
    pub probe_ms: u64,
    pub state: Option<State>,
}

impl Paused {
    /// How long from `now_us` a request that is not the probe is refused (µs), if it is:
    /// to the pause's end, or after it `probe_ms` in probe mode.
    #[inline]
    pub fn refusing_us(&self, now_us: u64) -> Option<u64> {
        if now_us < self.until_us {
            Some(self.until_us - now_us)
        } else if self.probe_ms > 0 {
            Some(self.probe_ms.saturating_mul(crate::algo::US_PER_MS))
        } else {
            None
        }
    }

    /// When the pause stops mattering (µs): its end, plus `probe_ms` in probe mode (a
    /// probe-mode pause nobody probes in that time lapses with the key).
    #[inline]
    pub fn lasts_until_us(&self) -> u64 {
        self.until_us
            .saturating_add(self.probe_ms.saturating_mul(crate::algo::US_PER_MS))
    }
}

/// The value stored under a key (48 bytes: the lease list lives behind a box; the log's
/// entries are in one heap block of their own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Gcra(Bucket),
    TokenBucket(Bucket),
    Queue(Bucket),
    Sliding(Window),
    Fixed(Window),
    Log(LogState),
    Concurrency(Box<LeaseState>),
    /// Any of the above but `Concurrency`, under a penalty (boxed: rare, and keeps the
    /// others small).
    Blocked(Box<Blocked>),
    /// Any of the above but `Blocked`, or nothing, under `RL.PAUSE` (boxed).
    Paused(Box<Paused>),
}

/// Runs `$body` with `$s` bound to the algorithm's own state (an [`Algorithm`]) of an
/// unblocked state `$state`, and `$algo` to its [`Algo`]; a blocked or paused state
/// evaluates `$blocked`. The one list of the state enum's variants by algorithm.
macro_rules! each {
    ($state:expr, |$algo:ident, $s:ident| $body:expr, blocked => $blocked:expr) => {
        match $state {
            State::Gcra($s) => {
                let $algo = Algo::Gcra;
                $body
            }
            State::TokenBucket($s) => {
                let $algo = Algo::TokenBucket;
                $body
            }
            State::Queue($s) => {
                let $algo = Algo::Queue;
                $body
            }
            State::Sliding($s) => {
                let $algo = Algo::Sliding;
                $body
            }
            State::Fixed($s) => {
                let $algo = Algo::Fixed;
                $body
            }
            State::Log($s) => {
                let $algo = Algo::Log;
                $body
            }
            State::Concurrency($s) => {
                let $algo = Algo::Concurrency;
                $body
            }
            State::Blocked(_) | State::Paused(_) => $blocked,
        }
    };
}

/// The tag of a state under a `BLOCK` penalty (see the module documentation).
const BLOCKED_TAG: u8 = 8;
/// The tag of a paused key (see the module documentation).
const PAUSED_TAG: u8 = 9;

/// The keyspace event of `RL.PAUSE`, and of a write of a key holding only a pause.
pub const PAUSE_EVENT: &std::ffi::CStr = c"ratelimit.pause";
/// The keyspace event of `RL.RESUME`.
pub const RESUME_EVENT: &std::ffi::CStr = c"ratelimit.resume";

/// Splits an `RL._APPLY` payload into its absolute expiry (None for 0) and state.
pub fn split_payload(p: &[u8]) -> Result<(Option<u64>, State), DecodeError> {
    let (head, rest) = p.split_first_chunk::<8>().ok_or(DecodeError("truncated"))?;
    let at = u64::from_le_bytes(*head);
    Ok(((at != 0).then_some(at), State::decode(rest)?))
}

impl State {
    /// `RL.INFO`'s fields of this state at `now_us` (module clock), all but `ttl_ms`:
    /// `algorithm`, the rule's numbers under their argument names (the algorithm table's),
    /// the state's own fields, and `blocked_until_ms` while a BLOCK is in force; for a
    /// paused key `paused_until_ms` while the pause is in force and `probe_ms` in probe
    /// mode (a key holding only a pause: algorithm `none`).
    pub fn info(&self, now_us: u64) -> Vec<(&'static str, InfoValue)> {
        let name = self.algo().map_or("none", Algo::name);
        let mut fields = vec![("algorithm", InfoValue::Str(name))];
        if let Some(s) = self.own() {
            each!(s, |algo, s| fields.extend(s.info(algo, now_us)), blocked => ());
        }
        if let State::Paused(p) = self {
            if p.until_us > now_us {
                let until_ms = p.until_us.div_ceil(crate::algo::US_PER_MS);
                fields.push(("paused_until_ms", InfoValue::Int(until_ms)));
            }
            if p.probe_ms > 0 {
                fields.push(("probe_ms", InfoValue::Int(p.probe_ms)));
            }
        }
        // A BLOCK penalty in force: when it ends (unix ms, rounded up), before `ttl_ms`.
        let until_us = self.blocked_until_us();
        if until_us > now_us {
            let until_ms = until_us.div_ceil(crate::algo::US_PER_MS);
            fields.push(("blocked_until_ms", InfoValue::Int(until_ms)));
        }
        fields
    }

    /// The state's algorithm (a blocked or paused state's is the wrapped one's; None for a
    /// key holding only a pause). Not recursive (wrappers never nest), so it inlines on the
    /// hot path.
    #[inline]
    pub fn algo(&self) -> Option<Algo> {
        match self {
            State::Paused(p) => p.state.as_ref().map(State::plain_algo),
            s => Some(s.plain_algo()),
        }
    }

    /// The algorithm of a state that is not paused.
    #[inline]
    fn plain_algo(&self) -> Algo {
        each!(self.unblocked(), |algo, _s| algo, blocked => Algo::Concurrency)
    }

    /// A request of `algo` may decide on this state: one of `algo`, or a key holding only a
    /// pause (any algorithm's first request after it starts its fresh state).
    #[inline]
    pub fn fits(&self, algo: Algo) -> bool {
        self.algo().is_none_or(|a| a == algo)
    }

    /// The algorithm's own state, under any BLOCK or pause (None: a key holding only a
    /// pause).
    #[inline]
    pub fn own(&self) -> Option<&State> {
        match self {
            State::Blocked(b) => Some(&b.state),
            State::Paused(p) => p.state.as_ref(),
            s => Some(s),
        }
    }

    /// The pause of a paused key.
    #[inline]
    pub fn pause(&self) -> Option<&Paused> {
        match self {
            State::Paused(p) => Some(p),
            _ => None,
        }
    }

    /// The keyspace event of a write of this state: its algorithm's (`ratelimit.pause` for
    /// a key holding only a pause).
    pub fn event(&self) -> &'static std::ffi::CStr {
        self.algo().map_or(PAUSE_EVENT, Algo::event)
    }

    /// The end of the state's `BLOCK` penalty (µs), or 0 if it has none.
    #[inline]
    pub fn blocked_until_us(&self) -> u64 {
        match self {
            State::Blocked(b) => b.until_us,
            _ => 0,
        }
    }

    /// The state without its penalty, if it has one.
    #[inline]
    pub fn unblocked(&self) -> &State {
        match self {
            State::Blocked(b) => &b.state,
            s => s,
        }
    }

    /// The encoded form.
    pub fn encode(&self) -> Encoded {
        if let State::Paused(p) = self {
            let inner = p.state.as_ref().map(State::encode);
            // The wrapped state's own tag and fields, after its codec version.
            let body = inner.as_ref().and_then(|e| e.as_slice().get(1..));
            let body = body.unwrap_or(&[]);
            let mut e = Encoded::tagged(PAUSED_TAG, 16 + body.len());
            e.push(p.until_us);
            e.push(p.probe_ms);
            e.push_bytes(body);
            return e;
        }
        let State::Blocked(b) = self else {
            return self.encode_plain();
        };
        let inner = b.state.encode_plain();
        // The wrapped state's own tag and fields, after its codec version.
        let body = inner.as_slice().get(1..).unwrap_or(&[]);
        let mut e = Encoded::tagged(BLOCKED_TAG, 8 + body.len());
        e.push(b.until_us);
        e.push_bytes(body);
        e
    }

    /// What a write of this state propagates: the compact encoding for a five-field state
    /// ([`COMPACT_VERSION`]), the codec's otherwise.
    #[inline]
    pub fn encode_effect(&self) -> Encoded {
        let five = each!(self, |algo, s| s.five_fields().map(|f| (algo, f)), blocked => None);
        match five {
            Some((algo, f)) => Encoded::five_compact(algo.tag(), f),
            None => self.encode(),
        }
    }

    /// The encoded form of a state that is not blocked (a blocked one encodes as nothing:
    /// [`State::encode`] handles it).
    #[inline]
    fn encode_plain(&self) -> Encoded {
        each!(self, |algo, s| s.encode(algo), blocked => Encoded::tagged(BLOCKED_TAG, 0))
    }

    /// Parses and validates an encoded state.
    pub fn decode(buf: &[u8]) -> Result<State, DecodeError> {
        let [version, tag, rest @ ..] = buf else {
            return Err(DecodeError("truncated"));
        };
        if *version == COMPACT_VERSION {
            return State::decode_compact(*tag, rest);
        }
        if *version != ENCODING_VERSION {
            return Err(DecodeError("unknown encoding version"));
        }
        if *tag == PAUSED_TAG {
            let r = &mut Reader::new(rest);
            let (until_us, probe_ms) = (r.u64()?, r.u64()?);
            if until_us > MAX_TIME_US || probe_ms > crate::algo::MAX_SPAN_MS {
                return Err(DecodeError("bad pause"));
            }
            let inner = rest.get(16..).unwrap_or(&[]);
            let state = match inner {
                [] => None,
                [BLOCKED_TAG | PAUSED_TAG, ..] => return Err(DecodeError("bad pause")),
                [tag, body @ ..] => Some(State::decode_body(*tag, body)?),
            };
            return Ok(State::Paused(Box::new(Paused {
                until_us,
                probe_ms,
                state,
            })));
        }
        if *tag == BLOCKED_TAG {
            let (until, inner) = rest
                .split_first_chunk::<8>()
                .ok_or(DecodeError("truncated"))?;
            let until_us = u64::from_le_bytes(*until);
            let [tag, rest @ ..] = inner else {
                return Err(DecodeError("truncated"));
            };
            if until_us > MAX_TIME_US || *tag == BLOCKED_TAG || *tag == Algo::Concurrency.tag() {
                return Err(DecodeError("bad block"));
            }
            let state = State::decode_body(*tag, rest)?;
            return Ok(State::Blocked(Box::new(Blocked { until_us, state })));
        }
        State::decode_body(*tag, rest)
    }

    /// Parses a compact encoding's body ([`COMPACT_VERSION`]): five varints, validated as
    /// the same fields in the codec's own form.
    fn decode_compact(tag: u8, mut rest: &[u8]) -> Result<State, DecodeError> {
        let five = matches!(
            Algo::of_tag(tag),
            Some(Algo::Gcra | Algo::TokenBucket | Algo::Queue | Algo::Sliding | Algo::Fixed)
        );
        if !five {
            return Err(DecodeError("no compact encoding for this algorithm"));
        }
        let mut body = [0u8; 40];
        for dst in body.chunks_exact_mut(8) {
            let mut v: u64 = 0;
            let mut shift = 0u32;
            loop {
                let (&b, tail) = rest.split_first().ok_or(DecodeError("truncated"))?;
                rest = tail;
                let part = u64::from(b & 0x7f);
                if shift > 63 || (shift == 63 && part > 1) {
                    return Err(DecodeError("bad varint"));
                }
                v |= part << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
            dst.copy_from_slice(&v.to_le_bytes());
        }
        if !rest.is_empty() {
            return Err(DecodeError("trailing bytes"));
        }
        State::decode_body(tag, &body)
    }

    /// Parses and validates the fields of a state of algorithm tag `tag`: its algorithm's
    /// own decoder, then nothing may be left.
    fn decode_body(tag: u8, rest: &[u8]) -> Result<State, DecodeError> {
        let algo = Algo::of_tag(tag).ok_or(DecodeError("unknown algorithm"))?;
        let r = &mut Reader::new(rest);
        let state = match algo {
            Algo::Gcra => State::Gcra(Bucket::decode(algo, r)?),
            Algo::TokenBucket => State::TokenBucket(Bucket::decode(algo, r)?),
            Algo::Queue => State::Queue(Bucket::decode(algo, r)?),
            Algo::Sliding => State::Sliding(Window::decode(algo, r)?),
            Algo::Fixed => State::Fixed(Window::decode(algo, r)?),
            Algo::Log => State::Log(LogState::decode(algo, r)?),
            Algo::Concurrency => State::Concurrency(Box::new(LeaseState::decode(algo, r)?)),
        };
        if !r.is_empty() {
            return Err(DecodeError("trailing bytes"));
        }
        Ok(state)
    }

    /// Bytes this value holds on the heap and inline (for MEMORY USAGE).
    pub fn mem_usage(&self) -> usize {
        let boxed = match self {
            State::Concurrency(_) => std::mem::size_of::<LeaseState>(),
            State::Blocked(_) => std::mem::size_of::<u64>(),
            State::Paused(_) => 2 * std::mem::size_of::<u64>(),
            _ => 0,
        };
        let heap = each!(self, |_algo, s| s.heap_bytes(), blocked => match self {
            State::Blocked(b) => b.state.mem_usage(),
            State::Paused(p) => p.state.as_ref().map_or(0, State::mem_usage),
            _ => 0,
        });
        std::mem::size_of::<State>() + boxed + heap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::{gcra, lease, log, window};
    use proptest::prelude::*;

    fn bucket() -> Bucket {
        Bucket {
            params: gcra::Params::new(10, 3, 1000, gcra::GCRA_NAMES).unwrap(),
            tat: gcra::Tat {
                ns: 1_700_000_000_000_000_000,
                frac: 2,
            },
        }
    }

    pub fn samples() -> Vec<State> {
        let w = Window {
            params: window::Params::new(100, 60_000).unwrap(),
            counters: window::Counters {
                start_ms: 1_700_000_040_000,
                prev: 7,
                cur: 9,
            },
        };
        let log = log::Log::from_sorted(&[
            1_700_000_040_000_000,
            1_700_000_040_000_000,
            1_700_000_041_000_000,
        ])
        .unwrap();
        let leases = lease::Leases {
            last: lease::Token {
                ms: 1_700_000_040_001,
                seq: 3,
            },
            horizon_us: 1_700_000_050_000_000,
            max_lease_ms: 10_000,
            leases: lease::LeaseSet::from_leases(vec![lease::Lease {
                expiry_us: 1_700_000_050_000_000,
                token: lease::Token {
                    ms: 1_700_000_040_000,
                    seq: 0,
                },
            }])
            .unwrap(),
        };
        vec![
            State::Gcra(bucket()),
            State::TokenBucket(bucket()),
            State::Queue(bucket()),
            State::Sliding(w),
            State::Fixed(w),
            State::Log(LogState {
                params: w.params,
                log,
            }),
            State::Concurrency(Box::new(LeaseState {
                limit: 3,
                leases: leases.clone(),
            })),
            State::Blocked(Box::new(Blocked {
                until_us: 1_700_000_940_000_000,
                state: State::Gcra(bucket()),
            })),
            State::Blocked(Box::new(Blocked {
                until_us: 1_700_000_940_000_000,
                state: State::Fixed(w),
            })),
            State::Paused(Box::new(Paused {
                until_us: 1_700_000_940_000_000,
                probe_ms: 0,
                state: None,
            })),
            State::Paused(Box::new(Paused {
                until_us: 1_700_000_940_000_000,
                probe_ms: 5_000,
                state: Some(State::Gcra(bucket())),
            })),
            State::Paused(Box::new(Paused {
                until_us: 1_700_000_940_000_000,
                probe_ms: 1,
                state: Some(State::Concurrency(Box::new(LeaseState {
                    limit: 3,
                    leases,
                }))),
            })),
        ]
    }

    #[test]
    fn state_is_small() {
        assert!(
            std::mem::size_of::<State>() <= 48,
            "{}",
            std::mem::size_of::<State>()
        );
    }

    #[test]
    fn round_trip_every_algorithm() {
        for s in samples() {
            assert_eq!(State::decode(s.encode().as_slice()), Ok(s));
        }
    }

    #[test]
    fn log_encodes_absolute_timestamps_however_stored() {
        let params = window::Params::new(10, 3 * 3_600_000).unwrap();
        let t0 = 1_700_000_040_000_000u64;
        // Narrow (32-bit offsets), and wide (spanning more than u32::MAX µs).
        for entries in [
            vec![t0, t0, t0 + 4_000_000_000],
            vec![t0, t0 + 5_000_000_000, t0 + 9_000_000_000],
        ] {
            let s = State::Log(LogState {
                params,
                log: log::Log::from_sorted(&entries).unwrap(),
            });
            let mut want = vec![ENCODING_VERSION, 5];
            for f in [10, 3 * 3_600_000, 3].into_iter().chain(entries) {
                want.extend_from_slice(&u64::to_le_bytes(f));
            }
            assert_eq!(s.encode().as_slice(), want);
            assert_eq!(State::decode(&want), Ok(s));
        }
    }

    #[test]
    fn blocks_do_not_nest_and_never_wrap_leases() {
        for s in samples() {
            let body = s.encode().as_slice().to_vec();
            let mut v = vec![ENCODING_VERSION, BLOCKED_TAG];
            v.extend_from_slice(&1_700_000_940_000_000u64.to_le_bytes());
            v.extend_from_slice(&body[1..]);
            let ok = !matches!(
                s,
                State::Blocked(_) | State::Concurrency(_) | State::Paused(_)
            );
            assert_eq!(State::decode(&v).is_ok(), ok, "{s:?}");
        }
    }

    #[test]
    fn pauses_encode_their_header_then_the_wrapped_state() {
        let until = 1_700_000_940_000_000u64;
        let header = |probe: u64| {
            let mut v = vec![ENCODING_VERSION, PAUSED_TAG];
            v.extend(until.to_le_bytes());
            v.extend(probe.to_le_bytes());
            v
        };
        // Nothing wrapped: the header alone.
        let only = State::Paused(Box::new(Paused {
            until_us: until,
            probe_ms: 0,
            state: None,
        }));
        assert_eq!(only.encode().as_slice(), header(0));
        assert_eq!(only.algo(), None);
        assert!(only.fits(Algo::Log) && only.fits(Algo::Concurrency));
        // A wrapped state: its own tag and fields follow.
        let g = State::Gcra(bucket());
        let mut want = header(7);
        want.extend(&g.encode().as_slice()[1..]);
        let s = State::Paused(Box::new(Paused {
            until_us: until,
            probe_ms: 7,
            state: Some(g),
        }));
        assert_eq!(s.encode().as_slice(), want);
        assert_eq!(s.encode_effect().as_slice(), want);
        assert_eq!(State::decode(&want), Ok(s.clone()));
        assert_eq!(s.algo(), Some(Algo::Gcra));
        assert!(!s.fits(Algo::Fixed));
        // Never a block or a pause inside, never a time or probe out of bounds.
        for inner in [samples()[7].clone(), only.clone()] {
            let mut v = header(0);
            v.extend(&inner.encode().as_slice()[1..]);
            assert!(State::decode(&v).is_err(), "{inner:?}");
        }
        let mut v = vec![ENCODING_VERSION, PAUSED_TAG];
        v.extend((MAX_TIME_US + 1).to_le_bytes());
        v.extend(0u64.to_le_bytes());
        assert!(State::decode(&v).is_err());
        let mut v = header(crate::algo::MAX_SPAN_MS + 1);
        assert!(State::decode(&v).is_err());
        v.truncate(17);
        assert!(State::decode(&v).is_err());
        // RL.INFO: the pause while in force, the probe mode while set.
        let info = s.info(until - 1);
        assert!(info.contains(&("paused_until_ms", InfoValue::Int(until / 1000))));
        assert!(info.contains(&("probe_ms", InfoValue::Int(7))));
        assert!(!s.info(until).iter().any(|f| f.0 == "paused_until_ms"));
        assert_eq!(only.info(0)[0], ("algorithm", InfoValue::Str("none")));
    }

    #[test]
    fn apply_payload_carries_the_expiry() {
        for s in samples() {
            let mut e = s.encode();
            let p = e.with_expiry(1_800_000_000_000).to_vec();
            assert_eq!(split_payload(&p), Ok((Some(1_800_000_000_000), s.clone())));
            let p = e.with_expiry(0).to_vec();
            assert_eq!(split_payload(&p), Ok((None, s)));
        }
        assert!(split_payload(&[0; 7]).is_err());
    }

    #[test]
    fn leases_decode_in_any_order_and_encode_in_token_order() {
        // (expiry_us, token_ms, token_seq), as an earlier encoder may have held them.
        let held = [(9, 5, 2), (7, 5, 0), (8, 4, 9)];
        let payload = |leases: &[(u64, u64, u64)]| {
            let mut v = vec![ENCODING_VERSION, 7];
            for f in [3, 10, 5, 2, 20_000, leases.len() as u64] {
                v.extend_from_slice(&f.to_le_bytes());
            }
            for &(e, ms, seq) in leases {
                for f in [e * 1000, ms, seq] {
                    v.extend_from_slice(&f.to_le_bytes());
                }
            }
            v
        };
        let s = State::decode(&payload(&held)).unwrap();
        let sorted = payload(&[(8, 4, 9), (7, 5, 0), (9, 5, 2)]);
        assert_eq!(s.encode().as_slice(), sorted);
        assert_eq!(State::decode(&sorted), Ok(s));
    }

    #[test]
    fn many_leases_round_trip() {
        let p = lease::Params::new(1_000, 60_000).unwrap();
        let mut leases = lease::Leases::default();
        for i in 0..300 {
            leases.acquire(&p, 1_700_000_040_000_000 + i * 700, true);
        }
        let s = State::Concurrency(Box::new(LeaseState {
            limit: 1_000,
            leases,
        }));
        assert_eq!(State::decode(s.encode().as_slice()), Ok(s.clone()));
        assert!(s.mem_usage() > 300 * 44);
    }

    #[test]
    fn refuses_bad_payloads() {
        for s in samples() {
            let good = s.encode().as_slice().to_vec();
            for cut in 0..good.len() {
                // A pause cut right after its header is a pause on nothing (the format's
                // "or nothing"): valid, and another state.
                if good[1] == PAUSED_TAG && cut == 18 {
                    continue;
                }
                assert!(State::decode(&good[..cut]).is_err(), "{s:?} cut at {cut}");
            }
            let mut v = good.clone();
            v.push(0);
            assert!(State::decode(&v).is_err());
            let mut v = good.clone();
            v[0] = 9;
            assert!(State::decode(&v).is_err());
            let mut v = good.clone();
            v[1] = 99;
            assert!(State::decode(&v).is_err());
            let mut v = good.clone();
            // limit/burst 0 (after the block's end for a blocked state, the pause's header
            // and the wrapped tag for a paused one)
            let at = match v[1] {
                BLOCKED_TAG => 11,
                PAUSED_TAG if v.len() == 18 => continue,
                PAUSED_TAG => 19,
                _ => 2,
            };
            v[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
            assert!(State::decode(&v).is_err());
        }
    }

    #[test]
    fn compact_effects_round_trip_in_at_most_44_bytes() {
        for s in samples() {
            let mut e = s.encode_effect();
            assert_eq!(State::decode(e.as_slice()), Ok(s.clone()), "{s:?}");
            let compact = e.as_slice().first() == Some(&COMPACT_VERSION);
            let five = matches!(
                s,
                State::Gcra(_)
                    | State::TokenBucket(_)
                    | State::Queue(_)
                    | State::Sliding(_)
                    | State::Fixed(_)
            );
            assert_eq!(compact, five, "{s:?}");
            if compact {
                let n = e.with_expiry(1_900_000_000_000).len();
                assert!(n <= 44, "{s:?}: {n} bytes");
            }
        }
        // Overlong or truncated varints, trailing bytes, other algorithms: refused.
        let mut v = vec![COMPACT_VERSION, Algo::Gcra.tag()];
        v.extend([0xff; 11]);
        assert!(State::decode(&v).is_err());
        assert!(State::decode(&[COMPACT_VERSION, Algo::Gcra.tag(), 1, 1, 1, 1]).is_err());
        assert!(State::decode(&[COMPACT_VERSION, Algo::Gcra.tag(), 1, 1, 1, 1, 0, 0]).is_err());
        assert!(State::decode(&[COMPACT_VERSION, Algo::Log.tag(), 1, 1, 0]).is_err());
    }

    proptest! {
        #[test]
        fn compact_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..60)) {
            let mut v = vec![COMPACT_VERSION];
            v.extend(bytes);
            if let Ok(s) = State::decode(&v) {
                prop_assert_eq!(State::decode(s.encode_effect().as_slice()), Ok(s));
            }
        }

        #[test]
        fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(s) = State::decode(&bytes) {
                prop_assert_eq!(State::decode(s.encode().as_slice()), Ok(s));
            }
        }

        #[test]
        fn decode_of_mutated_payload_never_panics(i in 0usize..100, b in any::<u8>()) {
            for s in samples() {
                let mut v = s.encode().as_slice().to_vec();
                if let Some(x) = v.get_mut(i) {
                    *x = b;
                }
                let _ = State::decode(&v);
            }
        }
    }
}
