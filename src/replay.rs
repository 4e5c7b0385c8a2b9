//! Effects as deltas for the states that grow with their limit (RL.LOG's entries, RL.ACQUIRE's
//! leases): such a write is propagated as the operation that made it, with the module time
//! it was decided at, not as the whole state. A replica, or an AOF load, runs the same pure
//! function ([`Rule::request`], [`Leases::release`], [`Leases::renew`]) on the same state
//! at the same instant, so it holds exactly what the primary holds, and the bytes sent per
//! write do not depend on the limit. Nothing in an operation reads a clock: the instant is
//! the primary's, carried in the payload. The AOF rewrite, RDB, DUMP and a full sync still
//! carry whole states (`state.rs`).
//!
//! Encoding (after the `RL._APPLY` payload's 8-byte expiry): byte 0 is [`OP_VERSION`]
//! (never a state's codec version), byte 1 the operation, then little-endian `u64` fields:
//! - log request (1): limit, window_ms, now_us, ask (0 spend, 1 refund), units, partial
//!   (0/1), reserve, block_ms
//! - acquire (2): limit, lease_ms, now_us
//! - release (3): token_ms, token_seq, now_us
//! - renew (4): token_ms, token_seq, lease_ms, now_us
//!
//! Decoding validates every field like the command parser does; anything odd is refused.

use crate::algo::lease::{self, Leases, Token, MAX_TOKEN_MS};
use crate::algo::{window, MAX_TIME_MS, US_PER_MS};
use crate::options;
use crate::rule::{Ask, Request, Rule};
use crate::state::{Algo, DecodeError, Encoded, Reader, State, MAX_ENTRIES};

/// The first byte of an operation's encoding (a state's is its codec version, 1).
pub const OP_VERSION: u8 = 0x81;

const LOG_REQUEST: u8 = 1;
const ACQUIRE: u8 = 2;
const RELEASE: u8 = 3;
const RENEW: u8 = 4;

/// The latest module time an operation may carry (µs).
const MAX_NOW_US: u64 = MAX_TIME_MS * US_PER_MS;

/// A write, replayable on the state it was decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A committed request of an RL.LOG or RL.ACQUIRE rule at `now_us`.
    Request {
        rule: Rule,
        req: Request,
        now_us: u64,
    },
    /// `RL.RELEASE` of `token` at `now_us`.
    Release { token: Token, now_us: u64 },
    /// `RL.RENEW` of `token` for `lease_ms` at `now_us`.
    Renew {
        token: Token,
        lease_ms: u64,
        now_us: u64,
    },
}

impl Op {
    /// The operation that replays `req` of `rule` at `now_us`, for the rules whose state
    /// grows with the limit; None for the others (their whole state is as small as an
    /// operation).
    #[inline]
    pub fn of_request(rule: &Rule, req: &Request, now_us: u64) -> Option<Op> {
        rule.grows().then_some(Op::Request {
            rule: *rule,
            req: Request {
                commit: true,
                ..*req
            },
            now_us,
        })
    }

    /// Runs the operation on `s` (the key's state, or its rule's fresh state when the key
    /// is empty; see [`Op::fresh`]). Returns whether `s` changed: on the state the primary
    /// decided on, always.
    pub fn run(&self, s: &mut State) -> bool {
        match *self {
            Op::Request { rule, req, now_us } => rule.request(s, &req, now_us).wrote,
            Op::Release { token, now_us } => leases(s).is_some_and(|l| l.release(token, now_us)),
            Op::Renew {
                token,
                lease_ms,
                now_us,
            } => leases(s).is_some_and(|l| l.renew(token, lease_ms, now_us)),
        }
    }

    /// The module time the operation was decided at.
    pub fn now_us(&self) -> u64 {
        match *self {
            Op::Request { now_us, .. } | Op::Release { now_us, .. } | Op::Renew { now_us, .. } => {
                now_us
            }
        }
    }

    /// The algorithm of the state the operation writes.
    pub fn algo(&self) -> Algo {
        match self {
            Op::Request { rule, .. } => rule.algo(),
            _ => Algo::Concurrency,
        }
    }

    /// The state an empty key starts from: the rule's fresh state for a request; None for
    /// RELEASE and RENEW (they never create a key).
    pub fn fresh(&self) -> Option<State> {
        match self {
            Op::Request { rule, .. } => Some(rule.fresh()),
            _ => None,
        }
    }

    /// The encoded form, with room for the `RL._APPLY` payload's expiry in front.
    pub fn encode(&self) -> Encoded {
        let (tag, fields): (u8, [u64; 8]) = match *self {
            Op::Request {
                rule: Rule::Log(p),
                req,
                now_us,
            } => {
                let (ask, units) = match req.ask {
                    Ask::Spend(n) => (0, n),
                    Ask::Refund(n) => (1, n),
                };
                let partial = u64::from(req.partial);
                let f = [
                    p.limit,
                    p.span_ms,
                    now_us,
                    ask,
                    units,
                    partial,
                    req.reserve,
                    req.block_ms,
                ];
                (LOG_REQUEST, f)
            }
            Op::Request {
                rule: Rule::Acquire(p),
                now_us,
                ..
            } => (ACQUIRE, [p.limit, p.span_ms, now_us, 0, 0, 0, 0, 0]),
            // Never built (see `of_request`): an operation nothing decodes.
            Op::Request { .. } => (0, [0; 8]),
            Op::Release { token, now_us } => {
                (RELEASE, [token.ms, token.seq, now_us, 0, 0, 0, 0, 0])
            }
            Op::Renew {
                token,
                lease_ms,
                now_us,
            } => (RENEW, [token.ms, token.seq, lease_ms, now_us, 0, 0, 0, 0]),
        };
        let n = match tag {
            LOG_REQUEST => 8,
            RENEW => 4,
            _ => 3,
        };
        let mut e = Encoded::with_header(OP_VERSION, tag, 8 * n);
        for f in fields.iter().take(n) {
            e.push(*f);
        }
        e
    }

    /// Parses and validates an encoded operation (see the module documentation).
    pub fn decode(buf: &[u8]) -> Result<Op, DecodeError> {
        let [version, tag, rest @ ..] = buf else {
            return Err(DecodeError("truncated"));
        };
        if *version != OP_VERSION {
            return Err(DecodeError("unknown encoding version"));
        }
        let mut r = Reader::new(rest);
        let op = match *tag {
            LOG_REQUEST => {
                let p = window::Params::new(r.u64()?, r.u64()?)
                    .map_err(|_| DecodeError("bad window parameters"))?;
                let now_us = time(r.u64()?)?;
                let (ask, units, partial) = (r.u64()?, r.u64()?, r.u64()?);
                let (reserve, block_ms) = (r.u64()?, r.u64()?);
                let req = Request {
                    ask: match ask {
                        0 => Ask::Spend(units),
                        1 => Ask::Refund(units),
                        _ => return Err(DecodeError("bad request")),
                    },
                    partial: partial == 1,
                    reserve,
                    block_ms,
                    probe: false,
                    commit: true,
                };
                // A write spends or refunds at least one unit; its options combine as the
                // parser's do.
                if p.limit > MAX_ENTRIES
                    || partial > 1
                    || units == 0
                    || options::check(&req, p.limit, "limit").is_err()
                {
                    return Err(DecodeError("bad request"));
                }
                Op::Request {
                    rule: Rule::Log(p),
                    req,
                    now_us,
                }
            }
            ACQUIRE => {
                let p = lease::Params::new(r.u64()?, r.u64()?)
                    .map_err(|_| DecodeError("bad lease parameters"))?;
                if p.limit > MAX_ENTRIES {
                    return Err(DecodeError("bad lease parameters"));
                }
                Op::Request {
                    rule: Rule::Acquire(p),
                    req: Request::spend(1, true),
                    now_us: time(r.u64()?)?,
                }
            }
            RELEASE => Op::Release {
                token: token(r.u64()?, r.u64()?)?,
                now_us: time(r.u64()?)?,
            },
            RENEW => {
                let token = token(r.u64()?, r.u64()?)?;
                let lease_ms =
                    lease::lease_ms(r.u64()?).map_err(|_| DecodeError("bad lease parameters"))?;
                Op::Renew {
                    token,
                    lease_ms,
                    now_us: time(r.u64()?)?,
                }
            }
            _ => return Err(DecodeError("unknown operation")),
        };
        if !r.is_empty() {
            return Err(DecodeError("trailing bytes"));
        }
        Ok(op)
    }
}

fn leases(s: &mut State) -> Option<&mut Leases> {
    match s {
        State::Concurrency(c) => Some(&mut c.leases),
        // RELEASE and RENEW act on the leases under a pause.
        State::Paused(p) => match &mut p.state {
            Some(State::Concurrency(c)) => Some(&mut c.leases),
            _ => None,
        },
        _ => None,
    }
}

fn time(now_us: u64) -> Result<u64, DecodeError> {
    if now_us > MAX_NOW_US {
        return Err(DecodeError("bad time"));
    }
    Ok(now_us)
}

fn token(ms: u64, seq: u64) -> Result<Token, DecodeError> {
    if ms > MAX_TOKEN_MS {
        return Err(DecodeError("bad token"));
    }
    Ok(Token { ms, seq })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::MAX_SPAN_MS;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_040_000_000;

    fn log_rule(limit: u64, window_ms: u64) -> Rule {
        Rule::Log(window::Params::new(limit, window_ms).unwrap())
    }

    fn acquire_rule(limit: u64, lease_ms: u64) -> Rule {
        Rule::Acquire(lease::Params::new(limit, lease_ms).unwrap())
    }

    #[test]
    fn round_trip_and_refusals() {
        let ops = [
            Op::of_request(
                &log_rule(10, 1000),
                &Request {
                    ask: Ask::Spend(3),
                    partial: true,
                    reserve: 2,
                    block_ms: 500,
                    probe: false,
                    commit: true,
                },
                T0,
            )
            .unwrap(),
            Op::of_request(
                &log_rule(10, 1000),
                &Request {
                    ask: Ask::Refund(40),
                    ..Request::spend(1, true)
                },
                T0,
            )
            .unwrap(),
            Op::of_request(&acquire_rule(5, 100), &Request::spend(1, false), T0).unwrap(),
            Op::Release {
                token: Token { ms: 5, seq: 7 },
                now_us: T0,
            },
            Op::Renew {
                token: Token { ms: 5, seq: 7 },
                lease_ms: 9,
                now_us: T0,
            },
        ];
        for op in ops {
            let e = op.encode();
            assert_eq!(Op::decode(e.as_slice()), Ok(op));
            let b = e.as_slice();
            assert!(Op::decode(&b[..b.len() - 1]).is_err());
            let mut longer = b.to_vec();
            longer.push(0);
            assert!(Op::decode(&longer).is_err());
            // A state's codec never takes an operation, nor the reverse.
            assert!(State::decode(b).is_err());
        }
        // The small states never replay.
        let gcra = Rule::new(Algo::Fixed, [1, 1, 0]).unwrap();
        assert_eq!(Op::of_request(&gcra, &Request::spend(1, true), T0), None);
        // Numbers the parser refuses are refused.
        let bad = |f: [u64; 8]| {
            let mut e = Encoded::with_header(OP_VERSION, LOG_REQUEST, 64);
            for v in f {
                e.push(v);
            }
            Op::decode(e.as_slice()).is_err()
        };
        assert!(!bad([10, 1000, T0, 0, 1, 0, 0, 0]));
        assert!(bad([0, 1000, T0, 0, 1, 0, 0, 0]));
        assert!(bad([10, 1000, T0, 0, 0, 0, 0, 0]));
        assert!(bad([10, 1000, T0, 0, 11, 0, 0, 0]));
        assert!(!bad([10, 1000, T0, 0, 11, 1, 0, 0]));
        assert!(bad([10, 1000, T0, 2, 1, 0, 0, 0]));
        assert!(bad([10, 1000, T0, 1, 1, 1, 0, 0]));
        assert!(bad([10, 1000, T0, 0, 1, 0, 10, 0]));
        assert!(bad([10, 1000, MAX_NOW_US + 1, 0, 1, 0, 0, 0]));
        assert!(bad([10, 1000, T0, 0, 1, 0, 0, MAX_SPAN_MS + 1]));
    }

    /// One step of a workload on a log or lease key.
    #[derive(Debug, Clone)]
    enum Step {
        Log(Request),
        Acquire,
        Release(usize),
        Renew(usize, u64),
    }

    fn step() -> impl Strategy<Value = (Step, i64)> {
        let req = (0u8..4, 1u64..6, any::<bool>(), 0u64..3, 0u64..3).prop_map(
            |(k, n, partial, reserve, block)| {
                let mut r = Request::spend(n, true);
                match k {
                    0 => r.ask = Ask::Refund(n),
                    1 => {
                        r.partial = partial;
                        r.reserve = reserve;
                        r.block_ms = block * 700;
                    }
                    _ => {}
                }
                r
            },
        );
        (
            prop_oneof![
                4 => req.prop_map(Step::Log),
                3 => Just(Step::Acquire),
                1 => (0usize..8).prop_map(Step::Release),
                1 => (0usize..8, 1u64..3000).prop_map(|(i, ms)| Step::Renew(i, ms)),
            ],
            prop_oneof![6 => -300_000i64..900_000, 1 => -5_000_000i64..5_000_000],
        )
    }

    proptest! {
        /// Replaying the encoded operations of every write on a copy of the state (the
        /// replica) yields exactly the primary's state, whatever the options and the clock
        /// do.
        #[test]
        fn a_replica_replaying_operations_holds_the_primary_state(
            limit in 1u64..6, window_ms in 1u64..3000,
            steps in prop::collection::vec(step(), 1..120),
        ) {
            let log = log_rule(limit, window_ms);
            let acq = acquire_rule(limit, window_ms);
            let (mut plog, mut rlog) = (log.fresh(), log.fresh());
            let (mut pacq, mut racq) = (acq.fresh(), acq.fresh());
            let mut tokens = vec![];
            let mut now = T0 as i64;
            for (st, dt) in steps {
                now += dt;
                let now_us = now as u64;
                let (primary, replica, op) = match st {
                    Step::Log(req) => {
                        // Only what the parser accepts reaches a primary.
                        let op = Op::of_request(&log, &req, now_us).unwrap();
                        if Op::decode(op.encode().as_slice()).is_err() {
                            continue;
                        }
                        let before = plog.clone();
                        let out = log.request(&mut plog, &req, now_us);
                        if !out.wrote {
                            prop_assert_eq!(&plog, &before);
                            continue;
                        }
                        (&plog, &mut rlog, op)
                    }
                    Step::Acquire => {
                        let req = Request::spend(1, true);
                        let out = acq.request(&mut pacq, &req, now_us);
                        if let crate::rule::Extra::Token(Some(t)) = out.extra {
                            tokens.push(t);
                        }
                        if !out.wrote {
                            continue;
                        }
                        (&pacq, &mut racq, Op::of_request(&acq, &req, now_us).unwrap())
                    }
                    Step::Release(i) | Step::Renew(i, _) => {
                        let Some(&token) = tokens.get(i) else { continue };
                        let op = match st {
                            Step::Renew(_, lease_ms) => Op::Renew { token, lease_ms, now_us },
                            _ => Op::Release { token, now_us },
                        };
                        if !op.run(&mut pacq) {
                            continue;
                        }
                        (&pacq, &mut racq, op)
                    }
                };
                let decoded = Op::decode(op.encode().as_slice()).unwrap();
                prop_assert!(decoded.run(replica));
                prop_assert_eq!(&*replica, primary);
            }
        }

        /// Decoding never panics, and what it accepts encodes back to the same bytes.
        #[test]
        fn decode_is_total(bytes in prop::collection::vec(any::<u8>(), 0..80), tag in 0u8..6) {
            let mut b = vec![OP_VERSION, tag];
            b.extend_from_slice(&bytes);
            if let Ok(op) = Op::decode(&b) {
                let e = op.encode();
                prop_assert_eq!(e.as_slice(), &b[..]);
            }
        }
    }
}
