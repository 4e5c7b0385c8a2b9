//! Every write a command can make to a stored state, as data ([`Write`]), and CL.THROTTLE's
//! decision on a stored state ([`throttle`]). Pure: no Redis types.
//!
//! The codec is closed under [`Write`]: whatever [`State::decode`] accepts (RDB, RESTORE,
//! AOF, `RL._APPLY`) stays storable after any write at any module time, so one command can
//! never turn a loadable state into one the next load refuses (which would lose the whole
//! RDB). The property tests below say it once per algorithm; the `state_decode` fuzz target
//! runs [`Write::run`] on what it decodes and decodes the result again.

use crate::algo::{cell, gcra, NS_PER_MS};
use crate::replay::Op;
use crate::state::{Bucket, State};

/// One write any command may make to a key's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// A rate command, RL.ALL's rule, RL.ACQUIRE, RL.RELEASE, RL.RENEW: what `RL._APPLY`
    /// replays ([`Op`]).
    Op(Op),
    /// `CL.THROTTLE` of `quantity` under `p` at `now_us`.
    Throttle {
        p: cell::Params,
        quantity: u64,
        now_us: u64,
    },
    /// `RL.PAUSE` for `ms` (with `PROBE probe_ms`) at `now_us`.
    Pause {
        ms: u64,
        probe_ms: Option<u64>,
        now_us: u64,
    },
    /// `RL.RESUME` at `now_us`.
    Resume { now_us: u64 },
}

impl Write {
    /// Runs the write on `s` (a state of another algorithm is left as it is, as the
    /// command answers WRONGTYPE).
    pub fn run(&self, s: &mut State) {
        match self {
            Write::Op(op) => {
                if s.fits(op.algo()) {
                    op.run(s);
                }
            }
            Write::Throttle {
                p,
                quantity,
                now_us,
            } => {
                let Ok(gp) = gcra_params(p) else { return };
                if !s.fits(crate::algo::table::Algo::Gcra) {
                    return;
                }
                if let Some(next) = throttle(s, p, &gp, *quantity, *now_us).next {
                    *s = next;
                }
            }
            Write::Pause {
                ms,
                probe_ms,
                now_us,
            } => {
                crate::rule::pause(s, *ms, *probe_ms, *now_us);
            }
            Write::Resume { now_us } => {
                // Nothing left (TTL 0): the key is deleted; what `s` holds then is not stored.
                crate::rule::resume(s, *now_us);
            }
        }
    }
}

/// What one `CL.THROTTLE` decides on a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Throttled {
    /// redis-cell's five integers.
    pub reply: cell::Reply,
    /// The state to store (None: nothing is written).
    pub next: Option<State>,
    /// The key's TTL after the write, ms: until its TAT, rounded up.
    pub ttl_ms: u64,
    /// Answered under a BLOCK penalty set by a rate command on the same key.
    pub blocked: bool,
}

/// The emission interval of a stored GCRA rule as redis-cell counts it (whole ns).
fn stored_interval_ns(g: &gcra::Params) -> i128 {
    cell::interval_ns(i128::from(g.period_ms) * i128::from(NS_PER_MS), g.count)
}

/// The GCRA rule a `CL.THROTTLE` rule is stored under.
pub fn gcra_params(p: &cell::Params) -> Result<gcra::Params, crate::algo::ParamError> {
    let names = ["max_burst", "count_per_period", "period"];
    gcra::Params::new(p.limit(), p.count, p.period_s.saturating_mul(1000), names)
}

/// A `gcra` state under `gp` with its TAT at `ns`: redis-cell's own state (the TAT in ns,
/// adopted), or with `ns` 0 the state of an empty key.
pub fn cell_state(gp: &gcra::Params, ns: u64) -> State {
    State::Gcra(Bucket {
        params: *gp,
        tat: gcra::Tat { ns, frac: 0 },
    })
}

/// `CL.THROTTLE` of `quantity` at `now_us` under `p` (stored as `gp`, its [`gcra_params`])
/// on the key's state (a `gcra` state, possibly under a BLOCK; [`cell_state`] for an empty
/// or adopted key).
pub fn throttle(
    state: &State,
    p: &cell::Params,
    gp: &gcra::Params,
    quantity: u64,
    now_us: u64,
) -> Throttled {
    let now_ns = now_us.saturating_mul(1000);
    // A pause (CL.THROTTLE takes no PROBE) refuses as a block does, to its end (in probe
    // mode: for probe_ms more, until RL.RESUME), and keeps the key to its end.
    let paused = state.pause().and_then(|p| {
        let left = p.refusing_us(now_us)?;
        Some((now_us.saturating_add(left), p.lasts_until_us()))
    });
    let (blocked_until_us, lasts_us) = match paused {
        Some(p) => p,
        None => (state.blocked_until_us(), state.blocked_until_us()),
    };
    // The stored TAT; `retimed`: written under another emission interval, so re-timed by
    // its units (stored even on a refusal, as RL.GCRA does).
    let (tat, retimed) = match state.own() {
        // The same interval as redis-cell counts it (whole ns): the TAT as it is, as
        // redis-cell reads it, whatever exact rate wrote it.
        Some(State::Gcra(b)) if stored_interval_ns(&b.params) == i128::from(p.t_ns()) => (
            Some(b.tat.ns.saturating_add(u64::from(b.tat.frac > 0))),
            false,
        ),
        Some(State::Gcra(b)) => {
            let (ns, retimed) = gcra::view_ns(b.stored(), gp, p.t_ns(), now_us);
            (Some(ns), retimed)
        }
        _ => (None, false),
    };
    if blocked_until_us > now_us {
        // Refused until the block ends, and no sooner than the state alone would admit this
        // quantity; a peek (quantity 0) is answered as RL.*'s are: not limited, nothing
        // remaining. Nothing is written.
        let (peek, _, _) = cell::throttle(tat, p, 0, now_ns);
        let (alone, _, _) = cell::throttle(tat, p, quantity, now_ns);
        let left_s = i64::try_from((blocked_until_us - now_us).div_ceil(1_000_000)).unwrap_or(0);
        let lasts_s = i64::try_from(lasts_us.saturating_sub(now_us).div_ceil(1_000_000));
        let mut reply = peek;
        reply.remaining = 0;
        reply.reset_after_s = reply.reset_after_s.max(lasts_s.unwrap_or(0));
        if quantity > 0 {
            reply.limited = true;
            reply.retry_after_s = match (alone.limited, alone.retry_after_s) {
                // Above the limit: never admitted, as redis-cell answers.
                (true, -1) => -1,
                (true, r) => r.max(left_s),
                (false, _) => left_s,
            };
        }
        return Throttled {
            reply,
            next: None,
            ttl_ms: 0,
            blocked: true,
        };
    }
    let (reply, stored, ttl_ns) = cell::throttle(tat, p, quantity, now_ns);
    // A peek (quantity 0) writes nothing, not even a re-timed state.
    let stored = if quantity == 0 {
        None
    } else {
        stored.or(tat.filter(|_| retimed))
    };
    let next = stored.map(|ns| cell_state(gp, ns));
    // The key lives until its TAT, rounded up to whole ms: a debt under 1 ms keeps the key
    // to the end of the current millisecond at least (redis-cell's key, expiring at its
    // truncated TTL, lives to the end of that millisecond too), so every call until then
    // sees the debt. Decisions are redis-cell's; only PTTL reads up to 1 ms longer.
    let ttl_ms = u64::try_from(ttl_ns).unwrap_or(0).div_ceil(NS_PER_MS);
    Throttled {
        reply,
        next,
        ttl_ms,
        blocked: false,
    }
}

/// `s` after `w`, encoded and decoded again: Err with what failed when the codec refuses
/// what the write made, or decodes it to something else.
pub fn stays_storable(s: &State, w: &Write) -> Result<State, String> {
    let mut after = s.clone();
    w.run(&mut after);
    // The codec's form (RDB, DUMP) and the effect's (RL._APPLY) alike.
    for enc in [after.encode(), after.encode_effect()] {
        match State::decode(enc.as_slice()) {
            Ok(back) if back == after => {}
            Ok(back) => {
                return Err(format!(
                    "{w:?} on {s:?} gave {after:?}, decoded as {back:?}"
                ))
            }
            Err(e) => return Err(format!("{w:?} on {s:?} gave {after:?}, refused: {e:?}")),
        }
    }
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::table::Algo;
    use crate::algo::{lease, window, MAX_SPAN_MS, MAX_TIME_MS, US_PER_MS};
    use crate::rule::{Ask, Request, Rule, WindowAlgo, WindowRule};
    use crate::state::ENCODING_VERSION;
    use proptest::prelude::*;

    const MAX_NOW_US: u64 = MAX_TIME_MS * US_PER_MS;

    /// A number in `0..=max`, mostly at the edges where bounds break.
    fn edge(max: u64) -> impl Strategy<Value = u64> {
        let marks = [
            0,
            1,
            2,
            999,
            1_000,
            MAX_SPAN_MS,
            MAX_TIME_MS,
            MAX_TIME_MS + MAX_SPAN_MS,
            MAX_TIME_MS * US_PER_MS,
            2 * MAX_TIME_MS * US_PER_MS,
            (MAX_TIME_MS + MAX_SPAN_MS) * NS_PER_MS,
            lease::MAX_TOKEN_MS,
            u64::MAX,
        ];
        let near: Vec<u64> = marks
            .iter()
            .flat_map(|&m| [m.saturating_sub(1), m, m.saturating_add(1)])
            .filter(|&v| v <= max)
            .collect();
        prop_oneof![
            3 => proptest::sample::select(near),
            1 => 0..=max,
            1 => 0..=max.min(100),
        ]
    }

    /// A rule's numbers, valid or not (the rule constructors validate).
    fn numbers() -> impl Strategy<Value = [u64; 3]> {
        let small = || prop_oneof![2 => 1u64..=20, 1 => edge(i64::MAX as u64)];
        [small(), small(), small()]
    }

    /// Encoded states of `algo`, mostly ones the decoder accepts, with times at its bounds.
    fn payload(algo: Algo) -> impl Strategy<Value = Vec<u8>> {
        let t = || edge(u64::MAX);
        let body: BoxedStrategy<Vec<u64>> = match algo {
            Algo::Gcra | Algo::TokenBucket | Algo::Queue => {
                (numbers(), t(), 0u64..20).prop_map(move |(n, ns, frac)| {
                    let count = if algo == Algo::Queue { 1 } else { n[1] };
                    vec![n[0], count, n[2], ns, frac % count.max(1)]
                })
            }
            .boxed(),
            Algo::Sliding | Algo::Fixed => (numbers(), t(), edge(u64::MAX), edge(u64::MAX))
                .prop_map(|(n, start, prev, cur)| vec![n[0], n[2], start, prev, cur])
                .boxed(),
            Algo::Log => (numbers(), proptest::collection::vec(t(), 0..6))
                .prop_map(|(n, mut e)| {
                    e.sort_unstable();
                    let mut v = vec![n[0].min(8), n[2], e.len() as u64];
                    v.extend(e);
                    v
                })
                .boxed(),
            Algo::Concurrency => (
                numbers(),
                t(),
                edge(u64::MAX),
                t(),
                proptest::collection::vec((t(), 0u64..3), 0..5),
            )
                .prop_map(|(n, last_ms, last_seq, horizon, leases)| {
                    let mut v = vec![n[0].min(8), n[2], last_ms, last_seq, horizon];
                    v.push(leases.len() as u64);
                    for (i, (expiry, back)) in leases.into_iter().enumerate() {
                        // Tokens at most the last one, all distinct.
                        let seq = last_seq.saturating_sub(i as u64);
                        v.extend([expiry, last_ms.saturating_sub(back), seq]);
                    }
                    v
                })
                .boxed(),
        };
        let blocked = algo != Algo::Concurrency;
        let pause = (edge(u64::MAX), edge(MAX_SPAN_MS + 1));
        (
            body,
            proptest::option::of(edge(u64::MAX)),
            any::<bool>(),
            proptest::option::of(pause),
        )
            .prop_map(move |(fields, until, wrap, pause)| {
                let mut v = vec![ENCODING_VERSION];
                if let (true, true, Some(u)) = (blocked, wrap, until) {
                    v.push(8);
                    v.extend(u.to_le_bytes());
                } else if let Some((until, probe_ms)) = pause {
                    v.push(9);
                    v.extend(until.to_le_bytes());
                    v.extend(probe_ms.to_le_bytes());
                }
                v.push(algo.tag());
                for f in fields {
                    v.extend(f.to_le_bytes());
                }
                v
            })
    }

    /// A state of `algo` the decoder accepts.
    fn decodable(algo: Algo) -> impl Strategy<Value = State> {
        payload(algo).prop_filter_map("refused by the decoder", |b| State::decode(&b).ok())
    }

    /// The options of one valid request on a rule whose limit is `limit`.
    fn request(limit: u64) -> impl Strategy<Value = Request> {
        (
            0..=limit.min(1 << 20),
            any::<bool>(),
            any::<bool>(),
            0..limit,
            prop_oneof![Just(0), edge(MAX_SPAN_MS).prop_map(|v| v.max(1))],
        )
            .prop_map(move |(n, refund, partial, reserve, block_ms)| Request {
                ask: if refund && n > 0 {
                    Ask::Refund(n)
                } else {
                    Ask::Spend(n)
                },
                partial: partial && n > 0 && !refund,
                reserve: if partial { 0 } else { reserve },
                block_ms,
                // Never replayed from an operation (a paused key's writes carry the state),
                // but every state it writes must stay storable.
                probe: !(refund && n > 0) && reserve % 2 == 1,
                commit: true,
            })
    }

    /// Any write a command may make to a state of `algo` that holds `tokens`.
    fn write(algo: Algo, tokens: Vec<lease::Token>) -> impl Strategy<Value = Write> {
        let now = || edge(MAX_NOW_US);
        let rule =
            (numbers(), 0u64..16_384).prop_filter_map("not a valid rule", move |(n, slot)| {
                let n = if algo == Algo::Log || algo == Algo::Concurrency {
                    [n[0].min(8), n[1], n[2]]
                } else {
                    n
                };
                let numbers = match algo {
                    Algo::Queue | Algo::Sliding | Algo::Fixed | Algo::Log | Algo::Concurrency => {
                        [n[0], n[2], 0]
                    }
                    _ => n,
                };
                match Rule::new(algo, numbers).ok()? {
                    Rule::Window(r) if slot % 2 == 1 => Some(Rule::Window(WindowRule {
                        offset_ms: window::stagger_ms(slot as u16, r.params.span_ms),
                        ..r
                    })),
                    r => Some(r),
                }
            });
        let request = rule
            .prop_flat_map(move |r| (Just(r), request(r.limit()), now()))
            .prop_map(|(rule, req, now_us)| {
                let req = match rule {
                    Rule::Acquire(_) => Request::spend(1, true),
                    _ => req,
                };
                Write::Op(Op::Request { rule, req, now_us })
            });
        let token = if tokens.is_empty() {
            any::<(u64, u64)>()
                .prop_map(|(ms, seq)| lease::Token { ms, seq })
                .boxed()
        } else {
            proptest::sample::select(tokens).boxed()
        };
        let lease_op = (token, edge(MAX_SPAN_MS), now(), any::<bool>()).prop_map(
            |(token, lease_ms, now_us, release)| {
                Write::Op(if release {
                    Op::Release { token, now_us }
                } else {
                    Op::Renew {
                        token,
                        lease_ms: lease_ms.max(1),
                        now_us,
                    }
                })
            },
        );
        let throttle = (numbers(), edge(1 << 40), now()).prop_filter_map(
            "not a valid CL.THROTTLE",
            |(n, quantity, now_us)| {
                let p = cell::Params::new(
                    n[0].saturating_sub(1),
                    n[1],
                    n[2] % (MAX_SPAN_MS / 1000) + 1,
                )
                .ok()?;
                Some(Write::Throttle {
                    p,
                    quantity,
                    now_us,
                })
            },
        );
        let pause = (
            edge(MAX_SPAN_MS).prop_map(|v| v.max(1)),
            proptest::option::of(edge(MAX_SPAN_MS).prop_map(|v| v.max(1))),
            now(),
            any::<bool>(),
        )
            .prop_map(|(ms, probe_ms, now_us, resume)| {
                if resume {
                    Write::Resume { now_us }
                } else {
                    Write::Pause {
                        ms,
                        probe_ms,
                        now_us,
                    }
                }
            });
        match algo {
            Algo::Concurrency => prop_oneof![2 => request, 2 => lease_op, 1 => pause].boxed(),
            Algo::Gcra => prop_oneof![2 => request, 2 => throttle, 1 => pause].boxed(),
            _ => prop_oneof![4 => request, 1 => pause].boxed(),
        }
    }

    /// The tokens a state holds (what RELEASE and RENEW name).
    fn tokens_of(s: &State) -> Vec<lease::Token> {
        match s.own() {
            Some(State::Concurrency(c)) => c.leases.leases.iter().map(|l| l.token).collect(),
            _ => Vec::new(),
        }
    }

    /// A decodable state of `algo` and a few writes on it.
    fn case(algo: Algo) -> impl Strategy<Value = (State, Vec<Write>)> {
        decodable(algo).prop_flat_map(move |s| {
            let w = proptest::collection::vec(write(algo, tokens_of(&s)), 1..4);
            (Just(s), w)
        })
    }

    fn closed(s: State, writes: Vec<Write>) -> Result<(), TestCaseError> {
        let mut s = s;
        for w in &writes {
            s = stays_storable(&s, w).map_err(TestCaseError::fail)?;
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, max_local_rejects: 1 << 22, ..ProptestConfig::default() })]
        #[test] fn gcra_states_stay_storable((s, w) in case(Algo::Gcra)) { closed(s, w)? }
        #[test] fn tokenbucket_states_stay_storable((s, w) in case(Algo::TokenBucket)) { closed(s, w)? }
        #[test] fn queue_states_stay_storable((s, w) in case(Algo::Queue)) { closed(s, w)? }
        #[test] fn sliding_states_stay_storable((s, w) in case(Algo::Sliding)) { closed(s, w)? }
        #[test] fn fixed_states_stay_storable((s, w) in case(Algo::Fixed)) { closed(s, w)? }
        #[test] fn log_states_stay_storable((s, w) in case(Algo::Log)) { closed(s, w)? }
        #[test] fn lease_states_stay_storable((s, w) in case(Algo::Concurrency)) { closed(s, w)? }
        /// A key holding only a pause, then writes of any algorithm.
        #[test] fn pause_only_states_stay_storable(
            (until, probe_ms) in (edge(u64::MAX), edge(MAX_SPAN_MS + 1)),
            (algo, w) in proptest::sample::select(crate::algo::table::ALL.to_vec())
                .prop_flat_map(|a| (Just(a), proptest::collection::vec(write(a, Vec::new()), 1..4))),
        ) {
            let mut v = vec![ENCODING_VERSION, 9];
            v.extend(until.to_le_bytes());
            v.extend(probe_ms.to_le_bytes());
            if let Ok(s) = State::decode(&v) {
                prop_assert!(s.algo().is_none() && s.fits(algo));
                closed(s, w)?
            }
        }
    }

    /// The repro: a lease state whose last token lies far ahead (accepted), then one
    /// RL.ACQUIRE.
    #[test]
    fn a_lease_state_far_ahead_stays_storable_after_acquire() {
        let mut v = vec![ENCODING_VERSION, Algo::Concurrency.tag()];
        for f in [5u64, 60_000, lease::MAX_TOKEN_MS, 0, 0, 0] {
            v.extend(f.to_le_bytes());
        }
        if let Ok(s) = State::decode(&v) {
            let rule = Rule::new(Algo::Concurrency, [5, 60_000, 0]).unwrap();
            let w = Write::Op(Op::Request {
                rule,
                req: Request::spend(1, true),
                now_us: 1_900_000_000_000_000,
            });
            stays_storable(&s, &w).unwrap();
        }
    }

    #[test]
    fn windows_are_not_other_algorithms() {
        // A write of another algorithm leaves the state as it is.
        let r = Rule::new(Algo::Fixed, [5, 1_000, 0]).unwrap();
        let s = r.fresh();
        let w = Write::Throttle {
            p: cell::Params::new(1, 1, 1).unwrap(),
            quantity: 1,
            now_us: 1,
        };
        assert_eq!(stays_storable(&s, &w), Ok(s.clone()));
        assert!(matches!(r, Rule::Window(w) if w.algo == WindowAlgo::Fixed));
    }
}
