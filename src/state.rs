//! The `ratelimit` data type: one value per key holding the state of any algorithm, and
//! its one binary codec, used for RDB, the AOF rewrite, replication and `RL._APPLY`.
//!
//! Encoding (version 1): byte 0 is the codec version, byte 1 the algorithm tag, then five
//! little-endian `u64` fields:
//! - gcra (1), tokenbucket (2): burst, count, period_ms, tat_ns, tat_frac
//!   (the TAT is `tat_ns + tat_frac / count` ns since the epoch)
//! - sliding (3): limit, window_ms, window_start_ms, previous_count, current_count
//!
//! Decoding validates every field; anything odd is refused, never trusted.

use crate::algo::{gcra, window, MAX_TIME_MS, NS_PER_MS};

/// Which algorithm a state belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    Gcra,
    TokenBucket,
    Sliding,
}

impl Algo {
    /// The name shown by `RL.INFO` and in errors.
    pub fn name(self) -> &'static str {
        match self {
            Algo::Gcra => "gcra",
            Algo::TokenBucket => "tokenbucket",
            Algo::Sliding => "sliding",
        }
    }

    fn tag(self) -> u8 {
        match self {
            Algo::Gcra => 1,
            Algo::TokenBucket => 2,
            Algo::Sliding => 3,
        }
    }
}

/// A GCRA-family state: the rule last applied and the theoretical arrival time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub params: gcra::Params,
    pub tat: gcra::Tat,
}

/// A window-counter state: the rule last applied and the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub params: window::Params,
    pub counters: window::Counters,
}

/// The value stored under a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Gcra(Bucket),
    TokenBucket(Bucket),
    Sliding(Window),
}

/// Current codec version (also the RDB encoding version).
pub const ENCODING_VERSION: u8 = 1;
const FIELDS: usize = 5;
/// Size of an encoded state.
pub const ENCODED_LEN: usize = 2 + 8 * FIELDS;

/// Why a payload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl State {
    pub fn algo(&self) -> Algo {
        match self {
            State::Gcra(_) => Algo::Gcra,
            State::TokenBucket(_) => Algo::TokenBucket,
            State::Sliding(_) => Algo::Sliding,
        }
    }

    /// The encoded form (fixed size, no allocation).
    pub fn encode(&self) -> [u8; ENCODED_LEN] {
        let fields: [u64; FIELDS] = match self {
            State::Gcra(b) | State::TokenBucket(b) => [
                b.params.burst,
                b.params.count,
                b.params.period_ms,
                b.tat.ns,
                b.tat.frac,
            ],
            State::Sliding(w) => [
                w.params.limit,
                w.params.window_ms,
                w.counters.start_ms,
                w.counters.prev,
                w.counters.cur,
            ],
        };
        let mut out = [0u8; ENCODED_LEN];
        out[0] = ENCODING_VERSION;
        out[1] = self.algo().tag();
        for (chunk, f) in out[2..].chunks_exact_mut(8).zip(fields) {
            chunk.copy_from_slice(&f.to_le_bytes());
        }
        out
    }

    /// Parses and validates an encoded state.
    pub fn decode(buf: &[u8]) -> Result<State, DecodeError> {
        if buf.len() != ENCODED_LEN {
            return Err(DecodeError("bad length"));
        }
        if buf[0] != ENCODING_VERSION {
            return Err(DecodeError("unknown encoding version"));
        }
        let mut f = [0u64; FIELDS];
        for (v, chunk) in f.iter_mut().zip(buf[2..].chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *v = u64::from_le_bytes(b);
        }
        let max_ns = MAX_TIME_MS.saturating_mul(NS_PER_MS).saturating_mul(2);
        match buf[1] {
            1 | 2 => {
                let names = if buf[1] == 1 {
                    gcra::GCRA_NAMES
                } else {
                    gcra::BUCKET_NAMES
                };
                let params = gcra::Params::new(f[0], f[1], f[2], names)
                    .map_err(|_| DecodeError("bad gcra parameters"))?;
                if f[3] > max_ns || f[4] >= params.count {
                    return Err(DecodeError("bad gcra arrival time"));
                }
                let tat = gcra::Tat {
                    ns: f[3],
                    frac: f[4],
                    den: params.count,
                };
                let b = Bucket { params, tat };
                Ok(if buf[1] == 1 {
                    State::Gcra(b)
                } else {
                    State::TokenBucket(b)
                })
            }
            3 => {
                let params = window::Params::new(f[0], f[1])
                    .map_err(|_| DecodeError("bad window parameters"))?;
                if f[2] > MAX_TIME_MS {
                    return Err(DecodeError("bad window start"));
                }
                let counters = window::Counters {
                    start_ms: f[2],
                    prev: f[3],
                    cur: f[4],
                };
                Ok(State::Sliding(Window { params, counters }))
            }
            _ => Err(DecodeError("unknown algorithm")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bucket() -> Bucket {
        Bucket {
            params: gcra::Params::new(10, 3, 1000, gcra::GCRA_NAMES).unwrap(),
            tat: gcra::Tat {
                ns: 1_700_000_000_000_000_000,
                frac: 2,
                den: 3,
            },
        }
    }

    #[test]
    fn round_trip_every_algorithm() {
        let w = Window {
            params: window::Params::new(100, 60_000).unwrap(),
            counters: window::Counters {
                start_ms: 1_700_000_040_000,
                prev: 7,
                cur: 9,
            },
        };
        for s in [
            State::Gcra(bucket()),
            State::TokenBucket(bucket()),
            State::Sliding(w),
        ] {
            assert_eq!(State::decode(&s.encode()), Ok(s));
        }
    }

    #[test]
    fn refuses_bad_payloads() {
        let good = State::Gcra(bucket()).encode();
        assert!(State::decode(&good[..ENCODED_LEN - 1]).is_err());
        let mut v = good;
        v[0] = 9;
        assert!(State::decode(&v).is_err());
        let mut v = good;
        v[1] = 99;
        assert!(State::decode(&v).is_err());
        let mut v = good;
        v[2..10].copy_from_slice(&0u64.to_le_bytes()); // burst 0
        assert!(State::decode(&v).is_err());
        let mut v = good;
        v[34..42].copy_from_slice(&3u64.to_le_bytes()); // frac >= count
        assert!(State::decode(&v).is_err());
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(s) = State::decode(&bytes) {
                prop_assert_eq!(State::decode(&s.encode()), Ok(s));
            }
        }
    }
}
