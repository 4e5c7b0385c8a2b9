//! A rule is one algorithm with its parameters: what a rate command asks for. It connects
//! the stored [`State`] to the pure algorithms (each behind [`Algorithm`]), and builds the
//! request options (`PARTIAL`, `RESERVE`, `BLOCK`, `REFUND`, `PROBE`, peeks, dry runs) on
//! their `spend` and `refund` once for every algorithm, and `RL.PAUSE` / `RL.RESUME` on a
//! stored state ([`pause`], [`resume`]); still no Redis types here.

use crate::algo::algorithm::{Algorithm, Spent};
pub use crate::algo::gcra::{BucketAlgo, BucketRule};
pub use crate::algo::request::{Ask, Event, Extra, Outcome, Request};
pub use crate::algo::window::{WindowAlgo, WindowRule};
use crate::algo::{lease, window, Decision, ParamError, US_PER_MS};
use crate::state::{Algo, Blocked, Bucket, LeaseState, LogState, Paused, State, Window};

/// A rule: an algorithm and its numbers (only combinations that exist can be written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// GCRA, token bucket or queue.
    Bucket(BucketRule),
    /// Sliding or fixed window counter (with its `STAGGER` offset).
    Window(WindowRule),
    /// Exact sliding log.
    Log(window::Params),
    /// Concurrency leases (`RL.ACQUIRE`).
    Acquire(lease::Params),
}

/// Runs `$body` with `$r` bound to the rule of `$rule` and `$s` to the state of `$state`
/// when both are of one algorithm's [`Algorithm`] type; else `$other`. The one list of the
/// rule enum's variants with their states.
macro_rules! paired {
    ($rule:expr, $state:expr, |$r:ident, $s:ident| $body:expr, else $other:expr) => {
        match ($rule, $state) {
            (Rule::Bucket($r), State::Gcra($s) | State::TokenBucket($s) | State::Queue($s)) => {
                $body
            }
            (Rule::Window($r), State::Sliding($s) | State::Fixed($s)) => $body,
            (Rule::Log($r), State::Log($s)) => $body,
            (Rule::Acquire($r), State::Concurrency($s)) => $body,
            _ => $other,
        }
    };
}

/// Runs `$body` with `$r` bound to the rule of `$rule` and `$A` to its state's
/// [`Algorithm`] type.
macro_rules! by_rule {
    ($rule:expr, |$A:ident, $r:ident| $body:expr) => {
        match $rule {
            Rule::Bucket($r) => {
                type $A = Bucket;
                $body
            }
            Rule::Window($r) => {
                type $A = Window;
                $body
            }
            Rule::Log($r) => {
                type $A = LogState;
                $body
            }
            Rule::Acquire($r) => {
                type $A = LeaseState;
                $body
            }
        }
    };
}

/// ms, rounded up, from `now_us` until `until_us` (0 if not after).
fn ms_until(until_us: u64, now_us: u64) -> u64 {
    until_us.saturating_sub(now_us).div_ceil(US_PER_MS)
}

impl Rule {
    /// The rule of `algo` from its numbers, in the order of its row's `args` (each already
    /// at least 1; unused ones 0).
    pub fn new(algo: Algo, numbers: [u64; 3]) -> Result<Rule, ParamError> {
        Ok(match algo {
            Algo::Gcra | Algo::TokenBucket | Algo::Queue => {
                Rule::Bucket(Bucket::rule(algo, numbers)?)
            }
            Algo::Sliding | Algo::Fixed => Rule::Window(Window::rule(algo, numbers)?),
            Algo::Log => Rule::Log(LogState::rule(algo, numbers)?),
            Algo::Concurrency => Rule::Acquire(LeaseState::rule(algo, numbers)?),
        })
    }

    #[inline]
    pub fn algo(&self) -> Algo {
        by_rule!(self, |A, r| A::algo(r))
    }

    /// Its state grows with the limit ([`Algorithm::GROWS`]).
    #[inline]
    pub fn grows(&self) -> bool {
        by_rule!(self, |A, _r| A::GROWS)
    }

    /// The most cost-1 requests a fresh key admits at once (the reply's `limit`).
    #[inline]
    pub fn limit(&self) -> u64 {
        by_rule!(self, |A, r| A::limit(r))
    }

    /// The state of a key that does not exist.
    pub fn fresh(&self) -> State {
        match self {
            Rule::Bucket(r) => {
                let b = Bucket::fresh(r);
                match r.algo {
                    BucketAlgo::Gcra => State::Gcra(b),
                    BucketAlgo::TokenBucket => State::TokenBucket(b),
                    BucketAlgo::Queue => State::Queue(b),
                }
            }
            Rule::Window(r) => {
                let w = Window::fresh(r);
                match r.algo {
                    WindowAlgo::Sliding => State::Sliding(w),
                    WindowAlgo::Fixed => State::Fixed(w),
                }
            }
            Rule::Log(r) => State::Log(LogState::fresh(r)),
            Rule::Acquire(r) => State::Concurrency(Box::new(LeaseState::fresh(r))),
        }
    }

    /// A plain request of `cost` (see [`Rule::request`]).
    pub fn hit(&self, s: &mut State, cost: u64, now_us: u64, commit: bool) -> Outcome {
        self.request(s, &Request::spend(cost, commit), now_us)
    }

    /// Decides `req` against `s` (the stored state, or [`Rule::fresh`]) at `now_us`, as of
    /// the key's own time when the clock reads earlier, and updates `s` in place when the
    /// request writes (`Outcome::wrote`): an admitted request or a refund when `commit`, a
    /// refusal that starts or extends a block, and a GCRA-family state re-timed under
    /// another emission interval. Anything else changes nothing.
    #[inline]
    pub fn request(&self, s: &mut State, req: &Request, now_us: u64) -> Outcome {
        // The hot path: a plain request (no option but COST and DRYRUN) on a state with no
        // block costs what it did before the options existed. `spend` refuses, without
        // writing, a state of another algorithm.
        if req.is_plain() && !matches!(s, State::Blocked(_) | State::Paused(_)) {
            return self.spend(s, req.cost(), now_us, req.commit);
        }
        let mut out = self.request_with_options(s, req, now_us);
        if req.probe && out.probe.is_none() {
            // A request carrying PROBE always says whether it was the probe.
            out.probe = Some(false);
        }
        out
    }

    /// [`Rule::request`] for everything but a plain request on a state with no block or
    /// pause.
    #[inline(never)]
    fn request_with_options(&self, s: &mut State, req: &Request, now_us: u64) -> Outcome {
        if !s.fits(self.algo()) {
            let dry = Request {
                commit: false,
                ..*req
            };
            return self.request(&mut self.fresh(), &dry, now_us);
        }
        if let State::Paused(_) = s {
            return self.paused(s, req, now_us);
        }
        let until = s.blocked_until_us();
        if until > now_us {
            return self.under_block(s, req, now_us);
        }
        let out = match &mut *s {
            // The penalty is over: the wrapped state applies as before.
            State::Blocked(b) => self.unblocked(&mut b.state, req, now_us),
            other => self.unblocked(other, req, now_us),
        };
        let out = self.maybe_block(s, req, out, now_us);
        if out.wrote && until != 0 && s.blocked_until_us() == until {
            // A write after the penalty stores the state without it.
            let taken = std::mem::replace(s, self.fresh());
            *s = match taken {
                State::Blocked(b) => b.state,
                other => other,
            };
        }
        out
    }

    /// A refused request with `BLOCK ms` blocks the key for `ms` from now (stored when
    /// `commit`); the reply counts the block.
    fn maybe_block(&self, s: &mut State, req: &Request, mut out: Outcome, now_us: u64) -> Outcome {
        if out.decision.allowed || req.block_ms == 0 || matches!(req.ask, Ask::Refund(_)) {
            return out;
        }
        let until = now_us.saturating_add(req.block_ms.saturating_mul(US_PER_MS));
        block_reply(&mut out.decision, until, now_us);
        if req.commit {
            let inner = std::mem::replace(s, self.fresh());
            let inner = match inner {
                State::Blocked(b) => b.state,
                other => other,
            };
            *s = State::Blocked(Box::new(Blocked {
                until_us: until,
                state: inner,
            }));
            out.wrote = true;
            out.events |= Event::BlockSet.bit();
        }
        out
    }

    /// `req` on a key blocked until after `now_us`: spends are refused (a BLOCK extends the
    /// block, never shortens it); peeks and refunds act on the wrapped state. Replies count
    /// the block.
    fn under_block(&self, s: &mut State, req: &Request, now_us: u64) -> Outcome {
        let State::Blocked(b) = s else {
            return self.unblocked(s, req, now_us);
        };
        let mut out = match req.ask {
            Ask::Spend(cost) if cost > 0 => {
                // What the wrapped state alone would answer (nothing is spent).
                let dry = Request {
                    commit: false,
                    block_ms: 0,
                    ..*req
                };
                let alone = self.unblocked(&mut b.state, &dry, now_us);
                let peek = self.unblocked(&mut b.state, &Request::spend(0, false), now_us);
                let mut d = alone.decision;
                if d.allowed {
                    d.retry_after_ms = 0;
                }
                d.allowed = false;
                d.reset_after_ms = peek.decision.reset_after_ms;
                let mut out = Outcome {
                    decision: d,
                    extra: match alone.extra {
                        Extra::Delay(_) => Extra::Delay(0),
                        e => e,
                    },
                    granted: req.partial.then_some(0),
                    probe: None,
                    wrote: false,
                    events: Event::Blocked.bit(),
                    waited: None,
                };
                let wanted = now_us.saturating_add(req.block_ms.saturating_mul(US_PER_MS));
                if req.block_ms > 0 && wanted > b.until_us && req.commit {
                    b.until_us = wanted;
                    out.wrote = true;
                    out.events |= Event::BlockSet.bit();
                } else if req.block_ms > 0 && wanted > b.until_us {
                    // A dry run answers as if the block were extended.
                    block_reply(&mut out.decision, wanted, now_us);
                    return out;
                }
                out
            }
            _ => self.unblocked(&mut b.state, req, now_us),
        };
        block_reply(&mut out.decision, b.until_us, now_us);
        out
    }

    /// `req` on a paused key (`RL.PAUSE`): refused while the pause refuses (peeks and
    /// refunds act on the wrapped state, or the fresh one for a key holding only a pause),
    /// nothing written; in probe mode after the pause's end a `PROBE` request its algorithm
    /// admits is the probe (admitted, and the key paused again for `probe_ms`); after a
    /// plain pause's end the wrapped state decides, and a write stores it unwrapped.
    #[inline(never)]
    fn paused(&self, s: &mut State, req: &Request, now_us: u64) -> Outcome {
        let empty = Paused {
            until_us: 0,
            probe_ms: 0,
            state: None,
        };
        let mut p = match std::mem::replace(s, State::Paused(Box::new(empty))) {
            State::Paused(p) => p,
            other => {
                *s = other;
                return self.unblocked(s, req, now_us);
            }
        };
        let had = p.state.is_some();
        let mut own = p.state.take().unwrap_or_else(|| self.fresh());
        let spend = matches!(req.ask, Ask::Spend(c) if c > 0);
        // BLOCK never writes on a paused key.
        let unpenalised = Request {
            block_ms: 0,
            probe: false,
            ..*req
        };
        let (out, keep) = match p.refusing_us(now_us) {
            // A plain pause is over: the wrapped state as before (a write drops the pause).
            None => {
                let out = self.request(&mut own, req, now_us);
                if out.wrote {
                    *s = own;
                    return out;
                }
                (out, false)
            }
            // Probe mode, past the end: a PROBE request its algorithm admits is the probe.
            Some(_) if spend && req.probe && now_us >= p.until_us => {
                let dry = Request {
                    commit: false,
                    ..unpenalised
                };
                let mut out = self.request(&mut own, &dry, now_us);
                let probed = out.decision.allowed;
                if probed && req.commit {
                    out = self.request(&mut own, &unpenalised, now_us);
                    p.until_us = now_us.saturating_add(p.probe_ms.saturating_mul(US_PER_MS));
                    out.wrote = true;
                }
                out.probe = Some(probed);
                let lasts = ms_until(p.lasts_until_us(), now_us);
                out.decision.remaining = 0;
                out.decision.reset_after_ms = out.decision.reset_after_ms.max(lasts);
                (out, probed && req.commit)
            }
            Some(left_us) if spend => {
                // What the wrapped state alone would answer (nothing is spent).
                let dry = Request {
                    commit: false,
                    ..unpenalised
                };
                let alone = self.request(&mut own, &dry, now_us);
                let peek = self.peek(&mut own, now_us, 0);
                let mut d = alone.decision;
                if d.allowed {
                    d.retry_after_ms = 0;
                }
                d.allowed = false;
                d.reset_after_ms = peek.decision.reset_after_ms;
                let left = left_us.div_ceil(US_PER_MS);
                d.retry_after_ms = d.retry_after_ms.max(left);
                let out = Outcome {
                    decision: d,
                    extra: match alone.extra {
                        Extra::Delay(_) => Extra::Delay(0),
                        Extra::Token(_) => Extra::Token(None),
                        e => e,
                    },
                    granted: req.partial.then_some(0),
                    probe: None,
                    wrote: false,
                    events: 0,
                    waited: None,
                };
                (pause_reply(out, &p, now_us), false)
            }
            // Peeks and refunds act on the wrapped state.
            Some(_) => {
                let mut out = self.request(&mut own, &unpenalised, now_us);
                // A refund never goes past fresh: on a key holding only a pause it changes
                // nothing.
                out.wrote &= had;
                let wrote = out.wrote;
                (pause_reply(out, &p, now_us), wrote)
            }
        };
        if keep || had {
            p.state = Some(own);
        }
        *s = State::Paused(p);
        out
    }

    /// `req` on a state with no block in force.
    fn unblocked(&self, s: &mut State, req: &Request, now_us: u64) -> Outcome {
        match req.ask {
            Ask::Spend(0) => self.peek(s, now_us, Event::Peek.bit()),
            Ask::Refund(n) if req.commit => {
                let wrote = self.refund(s, n, now_us);
                let mut out = self.peek(s, now_us, Event::Refund.bit());
                out.wrote = wrote;
                out
            }
            Ask::Refund(n) => {
                let mut after = s.clone();
                self.refund(&mut after, n, now_us);
                self.peek(&mut after, now_us, Event::Refund.bit())
            }
            Ask::Spend(cost) if !req.partial && req.reserve == 0 => {
                self.spend(s, cost, now_us, req.commit)
            }
            Ask::Spend(cost) => self.spend_with_options(s, cost, req, now_us),
        }
    }

    /// A peek: the state as a cost-0 request sees it; allowed, nothing written.
    fn peek(&self, s: &mut State, now_us: u64, events: u8) -> Outcome {
        let mut out = self.spend(s, 0, now_us, false);
        out.decision.allowed = true;
        out.decision.retry_after_ms = 0;
        out.wrote = false;
        out.events = events;
        out
    }

    /// `PARTIAL` and `RESERVE`: the units available now (what a peek counts) decide how
    /// many are spent; a request that gets none is refused as the smallest one that would
    /// have been admitted (1 unit for PARTIAL, the cost otherwise, plus the reserve), so its
    /// retry_after_ms is the time until that one is.
    fn spend_with_options(&self, s: &mut State, cost: u64, req: &Request, now_us: u64) -> Outcome {
        let avail = self.spend(s, 0, now_us, false).decision.remaining;
        let room = avail.saturating_sub(req.reserve);
        let grant = if req.partial {
            cost.min(room)
        } else if cost <= room {
            cost
        } else {
            0
        };
        let need = if req.partial { 1 } else { cost };
        let mut out = if grant > 0 {
            self.spend(s, grant, now_us, req.commit)
        } else {
            let smallest = need.saturating_add(req.reserve);
            let dry = self.spend(s, smallest, now_us, false);
            if dry.decision.allowed {
                // Cannot happen (a request is admitted iff its cost fits what a peek counts;
                // property-tested): refuse, and write nothing, rather than spend `smallest`.
                let mut out = dry;
                out.decision.allowed = false;
                out.decision.retry_after_ms = 1;
                out.extra = Extra::None;
                out
            } else if req.commit {
                // A refusal writes nothing, but for a re-timed GCRA-family state.
                self.spend(s, smallest, now_us, true)
            } else {
                dry
            }
        };
        if !out.decision.allowed && need <= avail {
            // Without the reserve it would have been admitted.
            out.events |= Event::ReserveRefused.bit();
        }
        if req.partial {
            let got = if out.decision.allowed { grant } else { 0 };
            out.granted = Some(got);
            if got > 0 && got < cost {
                out.events |= Event::PartialShort.bit();
            }
        }
        out
    }

    /// `REFUND n` on `s` (in place): true if the state changed (never a copy of the state:
    /// a log's may hold 10^6 entries).
    fn refund(&self, s: &mut State, n: u64, now_us: u64) -> bool {
        paired!(self, s, |r, st| st.refund(r, n, now_us), else false)
    }

    /// The algorithm itself: a request of `cost` (0: a peek, never stored). When admitted
    /// and `commit`, updates `s` in place under this rule's parameters; a refusal or a dry
    /// run changes nothing (but for a GCRA-family state re-timed under another emission
    /// interval, which a committed refusal stores).
    #[inline]
    fn spend(&self, s: &mut State, cost: u64, now_us: u64, commit: bool) -> Outcome {
        let commit = commit && cost > 0;
        let spent: Spent = paired!(self, s, |r, st| st.spend(r, cost, now_us, commit), else {
            // Unreachable: the algorithms were checked equal, and blocks unwrapped, before.
            let mut fresh = self.fresh();
            return self.spend(&mut fresh, cost, now_us, false);
        });
        let (decision, extra, wrote) = spent;
        Outcome {
            decision,
            extra,
            granted: None,
            probe: None,
            wrote,
            events: 0,
            waited: None,
        }
    }
}

/// Counts a pause in a reply that is not the probe's: nothing remains, and neither the
/// key's reset nor a refused request comes before the pause stops refusing it.
fn pause_reply(mut out: Outcome, p: &Paused, now_us: u64) -> Outcome {
    let d = &mut out.decision;
    d.remaining = 0;
    if !d.allowed {
        let left = p.refusing_us(now_us).unwrap_or(0).div_ceil(US_PER_MS);
        d.retry_after_ms = d.retry_after_ms.max(left);
    }
    d.reset_after_ms = d.reset_after_ms.max(ms_until(p.lasts_until_us(), now_us));
    out
}

/// The rule a state of the GCRA family, a window or a log (not under a wrapper) was last
/// written under (a window's offset from its stored start), so it can be read without a
/// request's numbers.
fn own_rule(s: &State) -> Option<Rule> {
    let bucket = |algo, b: &Bucket| {
        Rule::Bucket(BucketRule {
            algo,
            params: b.params,
        })
    };
    let window = |algo, w: &Window| {
        Rule::Window(WindowRule {
            algo,
            params: w.params,
            offset_ms: w.counters.start_ms % w.params.span_ms.max(1),
        })
    };
    Some(match s {
        State::Gcra(b) => bucket(BucketAlgo::Gcra, b),
        State::TokenBucket(b) => bucket(BucketAlgo::TokenBucket, b),
        State::Queue(b) => bucket(BucketAlgo::Queue, b),
        State::Sliding(w) => window(WindowAlgo::Sliding, w),
        State::Fixed(w) => window(WindowAlgo::Fixed, w),
        State::Log(l) => Rule::Log(l.params),
        State::Concurrency(_) | State::Blocked(_) | State::Paused(_) => return None,
    })
}

/// ms, rounded up, until `s` is equivalent to a fresh key at `now_us` (the TTL a write of
/// it sets), read under the numbers it was written with; a BLOCK or a pause counts to its
/// end (a probe-mode pause's plus `probe_ms`). Never changes `s`.
pub fn reset_ms(s: &mut State, now_us: u64) -> u64 {
    let (wrapper, inner) = match s {
        State::Blocked(b) => (ms_until(b.until_us, now_us), Some(&mut b.state)),
        State::Paused(p) => (ms_until(p.lasts_until_us(), now_us), p.state.as_mut()),
        s => (0, Some(s)),
    };
    let own = match inner {
        Some(State::Concurrency(c)) => c.leases.ttl_ms(now_us),
        Some(inner) => {
            own_rule(inner).map_or(0, |r| r.peek(inner, now_us, 0).decision.reset_after_ms)
        }
        None => 0,
    };
    own.max(wrapper)
}

/// `RL.PAUSE key ms [PROBE probe_ms]` on the key's state `s` (a key holding nothing: a
/// pause with no state and `until_us` 0) at `now_us`: pauses it until `ms` from now,
/// extending, never shortening, a pause or a BLOCK penalty (which the pause replaces);
/// `probe_ms` (PROBE) sets probe mode, None keeps the pause's mode. Returns the ms until
/// the pause ends (the reply) and the key's TTL.
pub fn pause(s: &mut State, ms: u64, probe_ms: Option<u64>, now_us: u64) -> (u64, u64) {
    let empty = Paused {
        until_us: 0,
        probe_ms: 0,
        state: None,
    };
    let mut p = match std::mem::replace(s, State::Paused(Box::new(empty.clone()))) {
        State::Paused(p) => p,
        State::Blocked(b) => Box::new(Paused {
            until_us: b.until_us,
            state: Some(b.state),
            ..empty
        }),
        other => Box::new(Paused {
            state: Some(other),
            ..empty
        }),
    };
    let want = now_us.saturating_add(ms.saturating_mul(US_PER_MS));
    p.until_us = p.until_us.max(want);
    if let Some(probe_ms) = probe_ms {
        p.probe_ms = probe_ms;
    }
    let left = ms_until(p.until_us, now_us);
    *s = State::Paused(p);
    let ttl = reset_ms(s, now_us);
    (left, ttl)
}

/// `RL.RESUME key` on the key's state `s` at `now_us`: lifts a pause (in force, or in probe
/// mode) or a BLOCK penalty in force, keeping the wrapped state. Returns None if there was
/// none (nothing changes), else the key's TTL (0: nothing is left, the key goes).
pub fn resume(s: &mut State, now_us: u64) -> Option<u64> {
    let lifted = match &*s {
        State::Paused(p) => p.refusing_us(now_us).is_some(),
        State::Blocked(b) => b.until_us > now_us,
        _ => false,
    };
    if !lifted {
        return None;
    }
    let empty = Paused {
        until_us: 0,
        probe_ms: 0,
        state: None,
    };
    let inner = match std::mem::replace(s, State::Paused(Box::new(empty))) {
        State::Paused(p) => p.state,
        State::Blocked(b) => Some(b.state),
        other => Some(other),
    };
    Some(match inner {
        Some(inner) => {
            *s = inner;
            reset_ms(s, now_us)
        }
        None => 0,
    })
}

/// Counts a block that lasts until `until_us` in a reply: nothing remains, and neither this
/// request nor the state's reset comes before the block's end.
fn block_reply(d: &mut Decision, until_us: u64, now_us: u64) {
    let left = ms_until(until_us, now_us);
    d.remaining = 0;
    if !d.allowed {
        d.retry_after_ms = d.retry_after_ms.max(left);
    }
    d.reset_after_ms = d.reset_after_ms.max(left);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::gcra;
    use crate::options::{Given, Opt, Opts};

    fn bucket_rule(algo: BucketAlgo, params: gcra::Params) -> Rule {
        Rule::Bucket(BucketRule { algo, params })
    }

    fn window_rule(algo: WindowAlgo, params: window::Params, offset_ms: u64) -> Rule {
        Rule::Window(WindowRule {
            algo,
            params,
            offset_ms,
        })
    }

    /// The options `opts` (with their values) make for a rule of limit 10.
    fn opts(given: &[(Opt, u64)]) -> Result<Opts, ParamError> {
        let mut g = Given::default();
        for &(o, v) in given {
            g.set(o, v);
        }
        Opts::from_given(&g, 10, "limit")
    }

    #[test]
    fn options_combine_or_are_refused() {
        use Opt::*;
        let ask = |g: &[(Opt, u64)]| opts(g).map(|o| o.ask);
        assert_eq!(opts(&[]), Ok(Opts::PLAIN));
        assert_eq!(ask(&[(Cost, 0)]), Ok(Ask::Spend(0)));
        assert_eq!(ask(&[(Refund, 50)]), Ok(Ask::Refund(50)));
        assert_eq!(ask(&[(Cost, 11), (Partial, 1)]), Ok(Ask::Spend(11)));
        assert_eq!(ask(&[(Cost, 11)]), Err(ParamError::CostAboveLimit("limit")));
        assert_eq!(
            ask(&[(Cost, 6), (Reserve, 5)]),
            Err(ParamError::OptionAbove("COST plus RESERVE", "limit"))
        );
        assert_eq!(
            ask(&[(Reserve, 10)]),
            Err(ParamError::OptionBelow("RESERVE", "limit"))
        );
        for conflict in [
            &[(Refund, 1), (Cost, 1)][..],
            &[(Refund, 1), (Partial, 1)],
            &[(Refund, 1), (Reserve, 1)],
            &[(Refund, 1), (Block, 100)],
            &[(Cost, 0), (Partial, 1)],
            &[(Cost, 0), (Reserve, 1)],
            &[(Cost, 0), (Block, 100)],
        ] {
            assert_eq!(opts(conflict), Err(ParamError::Syntax), "{conflict:?}");
        }
        let o = opts(&[(Block, 100), (Stagger, 1), (DryRun, 1)]).unwrap();
        assert_eq!((o.block_ms, o.stagger, o.dryrun), (100, true, true));
        assert!(!o.request().commit);
    }

    const T0: u64 = 1_700_000_040_000_000;

    #[test]
    fn queue_shapes_one_per_interval() {
        let rule = bucket_rule(
            BucketAlgo::Queue,
            gcra::Params::new(5, 1, 1000, gcra::GCRA_NAMES).unwrap(),
        );
        let mut s = rule.fresh();
        let mut got = vec![];
        for _ in 0..8 {
            let o = rule.hit(&mut s, 1, T0, true);
            got.push((o.decision.allowed, o.extra));
        }
        let delays: Vec<_> = got.iter().map(|g| g.1).collect();
        assert_eq!(
            delays,
            [0, 1000, 2000, 3000, 4000, 0, 0, 0]
                .map(Extra::Delay)
                .to_vec()
        );
        assert_eq!(got.iter().filter(|g| g.0).count(), 5);
        let o = rule.hit(&mut s, 1, T0 + 1_000_000, true);
        assert_eq!((o.decision.allowed, o.extra), (true, Extra::Delay(4000)));
        assert!(!rule.hit(&mut s, 1, T0 + 1_000_000, true).decision.allowed);
    }

    #[test]
    fn refused_and_dry_run_change_nothing() {
        let rules = [
            bucket_rule(
                BucketAlgo::Gcra,
                gcra::Params::new(2, 1, 1000, gcra::GCRA_NAMES).unwrap(),
            ),
            window_rule(
                WindowAlgo::Sliding,
                window::Params::new(2, 1000).unwrap(),
                0,
            ),
            window_rule(WindowAlgo::Fixed, window::Params::new(2, 1000).unwrap(), 0),
            Rule::Log(window::Params::new(2, 1000).unwrap()),
            Rule::Acquire(lease::Params::new(2, 1000).unwrap()),
        ];
        for rule in rules {
            let mut s = rule.fresh();
            assert!(rule.hit(&mut s, 1, T0, true).wrote);
            let before = s.clone();
            let o = rule.hit(&mut s, 1, T0, false);
            assert!(o.decision.allowed && !o.wrote);
            assert_eq!(s, before);
            assert!(rule.hit(&mut s, 1, T0, true).wrote);
            let before = s.clone();
            let o = rule.hit(&mut s, 1, T0, true);
            assert!(!o.decision.allowed && !o.wrote, "{rule:?}");
            assert_eq!(s, before);
        }
    }

    #[test]
    fn a_block_is_extended_never_shortened() {
        let rule = window_rule(
            WindowAlgo::Fixed,
            window::Params::new(1, 60_000).unwrap(),
            0,
        );
        let mut s = rule.fresh();
        assert!(rule.hit(&mut s, 1, T0, true).decision.allowed);
        let block = |ms| Request {
            block_ms: ms,
            ..Request::spend(1, true)
        };
        let o = rule.request(&mut s, &block(900_000), T0);
        assert_eq!((o.decision.retry_after_ms, o.wrote), (900_000, true));
        assert_eq!(o.events, Event::BlockSet.bit());
        // A shorter block leaves it as it is; a longer one extends it.
        let o = rule.request(&mut s, &block(1_000), T0 + 1_000_000);
        assert_eq!((o.decision.retry_after_ms, o.wrote), (899_000, false));
        assert_eq!(o.events, Event::Blocked.bit());
        let o = rule.request(&mut s, &block(900_000), T0 + 1_000_000);
        assert_eq!((o.decision.retry_after_ms, o.wrote), (900_000, true));
        assert_eq!(s.blocked_until_us(), T0 + 901_000_000);
        // A dry run answers as if extended and changes nothing.
        let before = s.clone();
        let dry = Request {
            commit: false,
            ..block(990_000)
        };
        let o = rule.request(&mut s, &dry, T0 + 2_000_000);
        assert_eq!((o.decision.retry_after_ms, o.wrote), (990_000, false));
        assert_eq!(s, before);
        // Over: the window has long rolled, so the rule admits again and drops the block.
        let o = rule.request(&mut s, &block(5_000), T0 + 901_000_000);
        assert!(o.decision.allowed && o.wrote);
        assert_eq!(s.blocked_until_us(), 0);
    }

    fn probe(cost: u64) -> Request {
        Request {
            probe: true,
            ..Request::spend(cost, true)
        }
    }

    fn nothing() -> State {
        State::Paused(Box::new(Paused {
            until_us: 0,
            probe_ms: 0,
            state: None,
        }))
    }

    #[test]
    fn a_pause_on_a_missing_key_refuses_then_starts_fresh() {
        let rule = bucket_rule(
            BucketAlgo::Gcra,
            gcra::Params::new(5, 1, 1000, gcra::GCRA_NAMES).unwrap(),
        );
        let mut s = nothing();
        assert_eq!(pause(&mut s, 3_000, None, T0), (3_000, 3_000));
        assert_eq!(s.algo(), None);
        let before = s.clone();
        let o = rule.request(&mut s, &Request::spend(1, true), T0 + 1_000);
        assert!(!o.decision.allowed && !o.wrote);
        assert_eq!(
            (o.decision.remaining, o.decision.retry_after_ms),
            (0, 2_999)
        );
        assert_eq!(o.decision.reset_after_ms, 2_999);
        // A peek answers (nothing remains), a refund on nothing writes nothing.
        let o = rule.request(&mut s, &Request::spend(0, true), T0);
        assert!(o.decision.allowed && !o.wrote && o.decision.remaining == 0);
        let refund = Request {
            ask: Ask::Refund(2),
            ..Request::spend(0, true)
        };
        assert!(!rule.request(&mut s, &refund, T0).wrote);
        assert_eq!(s, before);
        // After the end: the algorithm's fresh state, stored unwrapped on the first write.
        let o = rule.request(&mut s, &Request::spend(1, true), T0 + 3_000_000);
        assert!(o.decision.allowed && o.wrote);
        assert_eq!((o.decision.remaining, o.decision.reset_after_ms), (4, 1000));
        assert!(matches!(s, State::Gcra(_)));
    }

    #[test]
    fn a_pause_extends_never_shortens_and_replaces_a_block() {
        let rule = window_rule(
            WindowAlgo::Fixed,
            window::Params::new(1, 60_000).unwrap(),
            0,
        );
        let mut s = rule.fresh();
        rule.hit(&mut s, 1, T0, true);
        let fixed = s.clone();
        // A window state keeps its own TTL when longer than the pause.
        assert_eq!(pause(&mut s, 1_000, None, T0), (1_000, 60_000));
        assert_eq!(pause(&mut s, 500, None, T0 + 100_000), (900, 59_900));
        assert_eq!(pause(&mut s, 90_000, None, T0), (90_000, 90_000));
        assert_eq!(s.own(), Some(&fixed));
        // A BLOCK penalty is replaced by a pause ending no sooner.
        let block = Request {
            block_ms: 900_000,
            ..Request::spend(1, true)
        };
        let mut b = fixed.clone();
        assert!(rule.request(&mut b, &block, T0).wrote);
        assert_eq!(pause(&mut b, 1_000, None, T0), (900_000, 900_000));
        assert_eq!(b.own(), Some(&fixed));
        assert!(matches!(&b, State::Paused(p) if p.state.as_ref() == Some(&fixed)));
        // Under the pause BLOCK writes nothing.
        let before = b.clone();
        let o = rule.request(&mut b, &block, T0 + 1_000);
        assert!(!o.wrote && !o.decision.allowed);
        assert_eq!(b, before);
    }

    #[test]
    fn every_algorithm_is_refused_while_paused_and_peeks_refunds_release_still_act() {
        let acquire = Rule::Acquire(lease::Params::new(2, 10_000).unwrap());
        let mut s = acquire.fresh();
        let o = acquire.hit(&mut s, 1, T0, true);
        let Extra::Token(Some(token)) = o.extra else {
            panic!("{o:?}")
        };
        pause(&mut s, 5_000, None, T0);
        let o = acquire.hit(&mut s, 1, T0, true);
        assert!(!o.decision.allowed && !o.wrote);
        assert_eq!(o.extra, Extra::Token(None));
        assert_eq!(o.decision.retry_after_ms, 5_000);
        assert_eq!(o.decision.reset_after_ms, 10_000);
        // RL.RELEASE acts on the leases under the pause; the TTL is the pause's end.
        let op = crate::replay::Op::Release { token, now_us: T0 };
        assert!(op.run(&mut s));
        assert_eq!(reset_ms(&mut s, T0), 5_000);
        // Log: a refund under the pause writes the wrapped log and keeps the pause.
        let log = Rule::Log(window::Params::new(3, 1_000).unwrap());
        let mut s = log.fresh();
        log.hit(&mut s, 3, T0, true);
        pause(&mut s, 5_000, None, T0);
        let refund = Request {
            ask: Ask::Refund(2),
            ..Request::spend(0, true)
        };
        let o = log.request(&mut s, &refund, T0);
        assert!(o.wrote && o.decision.allowed);
        assert_eq!(
            (o.decision.remaining, o.decision.reset_after_ms),
            (0, 5_000)
        );
        let State::Paused(p) = &s else { panic!() };
        assert!(matches!(&p.state, Some(State::Log(l)) if l.log.entries().len() == 1));
        // A queue: refused with delay 0; PARTIAL says granted 0.
        let q = bucket_rule(
            BucketAlgo::Queue,
            gcra::Params::new(5, 1, 1000, gcra::GCRA_NAMES).unwrap(),
        );
        let mut s = nothing();
        pause(&mut s, 5_000, None, T0);
        let req = Request {
            partial: true,
            ..probe(2)
        };
        let o = q.request(&mut s, &req, T0);
        assert_eq!(
            (o.extra, o.granted, o.probe),
            (Extra::Delay(0), Some(0), Some(false))
        );
    }

    #[test]
    fn the_probe_flow() {
        let rule = bucket_rule(
            BucketAlgo::Gcra,
            gcra::Params::new(2, 1, 1000, gcra::GCRA_NAMES).unwrap(),
        );
        let mut s = rule.fresh();
        rule.hit(&mut s, 1, T0, true);
        assert_eq!(pause(&mut s, 10_000, Some(2_000), T0), (10_000, 12_000));
        // A PROBE request before the end is refused like any other.
        let o = rule.request(&mut s, &probe(1), T0 + 1_000_000);
        assert!(!o.decision.allowed && !o.wrote);
        assert_eq!((o.probe, o.decision.retry_after_ms), (Some(false), 9_000));
        let t = T0 + 10_000_000;
        // After the end, without PROBE: refused for probe_ms.
        let o = rule.request(&mut s, &Request::spend(1, true), t);
        assert!(!o.decision.allowed && !o.wrote && o.probe.is_none());
        assert_eq!(o.decision.retry_after_ms, 2_000);
        // A dry-run probe answers as the probe and changes nothing.
        let before = s.clone();
        let dry = Request {
            commit: false,
            ..probe(1)
        };
        let o = rule.request(&mut s, &dry, t);
        assert!(o.decision.allowed && !o.wrote && o.probe == Some(true));
        assert_eq!(s, before);
        // The probe: admitted, written, and the key paused again for probe_ms.
        let o = rule.request(&mut s, &probe(1), t);
        assert!(o.decision.allowed && o.wrote);
        assert_eq!((o.probe, o.decision.remaining), (Some(true), 0));
        assert_eq!(o.decision.reset_after_ms, 4_000);
        assert_eq!(reset_ms(&mut s, t), 4_000);
        let State::Paused(p) = &s else { panic!() };
        assert_eq!((p.until_us, p.probe_ms), (t + 2_000_000, 2_000));
        // Everyone else, probes included, is refused until then.
        let o = rule.request(&mut s, &probe(1), t + 1_000);
        assert!(!o.decision.allowed && o.probe == Some(false) && !o.wrote);
        assert_eq!(o.decision.retry_after_ms, 1_999);
        // The prober died: after probe_ms the next PROBE request is the probe.
        let t2 = t + 2_000_000;
        let o = rule.request(&mut s, &probe(1), t2);
        assert!(o.decision.allowed && o.probe == Some(true));
        // A probe its algorithm refuses is refused, and writes nothing.
        let t3 = t2 + 2_000_000;
        let cost2 = probe(2);
        let mut full = s.clone();
        rule.hit(
            match &mut full {
                State::Paused(p) => p.state.as_mut().unwrap(),
                _ => unreachable!(),
            },
            2,
            t3,
            true,
        );
        let before = full.clone();
        let o = rule.request(&mut full, &cost2, t3);
        assert!(!o.decision.allowed && !o.wrote && o.probe == Some(false));
        assert_eq!(full, before);
        assert!(o.decision.retry_after_ms >= 1);
        // RL.RESUME lifts the probe-mode pause; the wrapped state stays, with its own TTL.
        let inner = s.own().cloned().unwrap();
        assert_eq!(resume(&mut s, t3), Some(reset_ms(&mut inner.clone(), t3)));
        assert_eq!(s, inner);
        assert_eq!(resume(&mut s, t3), None);
        // PROBE on a key that is not paused: decided normally, probe 0.
        let o = rule.request(&mut s, &probe(1), t3);
        assert!(o.decision.allowed && o.probe == Some(false));
    }

    #[test]
    fn resume_lifts_a_block_or_a_pause_only_while_in_force() {
        let mut s = nothing();
        pause(&mut s, 1_000, None, T0);
        assert_eq!(resume(&mut s.clone(), T0 + 1_000_000), None);
        // A key holding only a pause: nothing is left.
        assert_eq!(resume(&mut s, T0), Some(0));
        let rule = window_rule(
            WindowAlgo::Fixed,
            window::Params::new(1, 60_000).unwrap(),
            0,
        );
        let mut s = rule.fresh();
        rule.hit(&mut s, 1, T0, true);
        let plain = s.clone();
        let block = Request {
            block_ms: 900_000,
            ..Request::spend(1, true)
        };
        rule.request(&mut s, &block, T0);
        assert_eq!(resume(&mut s, T0 + 1_000_000), Some(59_000));
        assert_eq!(s, plain);
        assert_eq!(resume(&mut s, T0), None);
    }

    #[test]
    fn staggered_windows_start_at_the_offset() {
        // Window 60 s, slot 8192: offset 30 s. At T0 (a whole minute) the window began 30 s
        // before and ends 30 s later.
        let off = window::stagger_ms(8192, 60_000);
        assert_eq!(off, 30_000);
        for algo in [WindowAlgo::Fixed, WindowAlgo::Sliding] {
            let rule = window_rule(algo, window::Params::new(5, 60_000).unwrap(), off);
            let mut s = rule.fresh();
            let o = rule.hit(&mut s, 1, T0, true);
            let want = if algo == WindowAlgo::Fixed {
                30_000
            } else {
                90_000
            };
            assert_eq!(o.decision.reset_after_ms, want, "{algo:?}");
            let (State::Sliding(w) | State::Fixed(w)) = &s else {
                panic!("{s:?}")
            };
            assert_eq!(w.counters.start_ms, T0 / 1000 - 30_000);
        }
    }

    #[test]
    fn refunds_per_algorithm() {
        let g = bucket_rule(
            BucketAlgo::Gcra,
            gcra::Params::new(5, 1, 1000, gcra::GCRA_NAMES).unwrap(),
        );
        let refund = |n| Request {
            ask: Ask::Refund(n),
            ..Request::spend(0, true)
        };
        let mut s = g.fresh();
        g.hit(&mut s, 4, T0, true);
        let o = g.request(&mut s, &refund(3), T0);
        assert_eq!((o.decision.remaining, o.decision.reset_after_ms), (4, 1000));
        // Never past fresh: the TAT stops at now, and a fresh state has no key.
        let o = g.request(&mut s, &refund(5), T0);
        assert_eq!((o.decision.remaining, o.decision.reset_after_ms), (5, 0));
        // Sliding: the current window's count, then the previous one's.
        let w = window_rule(
            WindowAlgo::Sliding,
            window::Params::new(10, 1000).unwrap(),
            0,
        );
        let mut s = w.fresh();
        w.hit(&mut s, 4, T0, true);
        w.hit(&mut s, 2, T0 + 1_000_000, true);
        w.request(&mut s, &refund(3), T0 + 1_000_000);
        let State::Sliding(c) = &s else { panic!() };
        assert_eq!((c.counters.prev, c.counters.cur), (3, 0));
        // Log: the newest units.
        let l = Rule::Log(window::Params::new(10, 1000).unwrap());
        let mut s = l.fresh();
        l.hit(&mut s, 2, T0, true);
        l.hit(&mut s, 3, T0 + 100_000, true);
        l.request(&mut s, &refund(4), T0 + 200_000);
        let State::Log(g) = &s else { panic!() };
        assert_eq!(g.log.entries().iter().collect::<Vec<_>>(), vec![T0]);
    }

    use crate::algo::testutil::clock_step;
    use proptest::prelude::*;

    fn any_rule() -> impl Strategy<Value = Rule> {
        let n = (1u64..8, 1u64..4, 1u64..3000);
        prop_oneof![
            n.clone().prop_map(|(b, c, p)| bucket_rule(
                BucketAlgo::Gcra,
                gcra::Params::new(b, c, p, gcra::GCRA_NAMES).unwrap()
            )),
            n.clone().prop_map(|(b, c, p)| bucket_rule(
                BucketAlgo::TokenBucket,
                gcra::Params::new(b, c, p, gcra::BUCKET_NAMES).unwrap()
            )),
            n.clone().prop_map(|(b, _, p)| bucket_rule(
                BucketAlgo::Queue,
                gcra::Params::new(b, 1, p, gcra::GCRA_NAMES).unwrap()
            )),
            (n.clone(), 0u16..16_384).prop_map(|((l, _, w), slot)| window_rule(
                WindowAlgo::Sliding,
                window::Params::new(l, w).unwrap(),
                window::stagger_ms(slot, w)
            )),
            (n.clone(), 0u16..16_384).prop_map(|((l, _, w), slot)| window_rule(
                WindowAlgo::Fixed,
                window::Params::new(l, w).unwrap(),
                window::stagger_ms(slot, w)
            )),
            n.clone()
                .prop_map(|(l, _, w)| Rule::Log(window::Params::new(l, w).unwrap())),
            n.prop_map(|(l, _, w)| Rule::Acquire(lease::Params::new(l, w).unwrap())),
        ]
    }

    proptest! {
            /// Every algorithm, one rule, a clock stepping back and forward: (c) a refusal or a
            /// dry run changes nothing and writes nothing; (b) after a write whose
            /// reset_after_ms is R, the key decides like a fresh one R ms later on the clock,
            /// and no refusal before then counts beyond that instant.
            #[test]
            fn refusals_write_nothing_and_ttls_hold(
                rule in any_rule(),
                steps in prop::collection::vec((
                    clock_step(-2_000_000..2_000_000, -100_000_000..-1, 1..100_000_000),
                    1u64..8,
                    prop::bool::weighted(0.8),
                ), 1..60),
            ) {
                let limit = rule.limit();
                let mut s = rule.fresh();
                let mut now = T0 as i64;
                let mut fresh_at: Option<u64> = None;
                for (dt, cost, commit) in steps {
                    now += dt;
                    let now_us = now as u64;
                    let cost = if matches!(rule, Rule::Acquire(_)) { 1 } else { cost.min(limit) };
                    let before = s.clone();
                    let o = rule.hit(&mut s, cost, now_us, commit);
                    if let Some(f) = fresh_at {
                        if now_us >= f {
                            let fresh = rule.hit(&mut rule.fresh(), cost, now_us, false);
                            prop_assert_eq!(o.decision, fresh.decision);
                        } else if !o.decision.allowed {
                            prop_assert!(o.decision.reset_after_ms <= (f - now_us).div_ceil(1000));
                        }
                    }
                    if o.wrote {
                        prop_assert!(o.decision.allowed && commit);
                        fresh_at = Some(now_us + o.decision.reset_after_ms * 1000);
                    } else {
                        prop_assert_eq!(&s, &before);
                    }
                }
            }

            /// `COST 0` (a peek) writes nothing and is always allowed; a request of `k` units is
            /// admitted exactly when `k` is at most what the peek counts (what PARTIAL and
            /// RESERVE rely on); PARTIAL grants exactly what a sequence of cost-1 requests would
            /// (capped at its cost, less the reserve); RESERVE never lets `remaining` drop below
            /// it; a refund gives back at most `n` units and never goes past fresh.
            #[test]
            fn options_follow_the_units_a_peek_counts(
                rule in any_rule().prop_filter("rate commands", |r| !matches!(r, Rule::Acquire(_))),
                steps in prop::collection::vec((
                    clock_step(-2_000_000..2_000_000, -100_000_000..-1, 1..100_000_000),
                    0u64..9,
                    0u8..4,
                    0u64..8,
                ), 1..50),
            ) {
                let limit = rule.limit();
                let mut s = rule.fresh();
                let mut now = T0 as i64;
                for (dt, cost, kind, extra) in steps {
                    now += dt;
                    let now_us = now as u64;
                    let cost = cost.min(limit);
                    let before = s.clone();
                    let peek = rule.request(&mut s, &Request::spend(0, true), now_us);
                    prop_assert!(peek.decision.allowed && !peek.wrote);
                    prop_assert_eq!(peek.decision.retry_after_ms, 0);
                    prop_assert_eq!(&s, &before);
                    let avail = peek.decision.remaining;
                    prop_assert!(avail <= limit);
                    for k in 1..=limit {
                        let d = rule.request(&mut s.clone(), &Request::spend(k, false), now_us);
                        prop_assert_eq!(d.decision.allowed, k <= avail, "k {}", k);
                    }
                    let mut seq = s.clone();
                    let mut singles = 0;
                    while singles < limit && rule.hit(&mut seq, 1, now_us, true).decision.allowed {
                        singles += 1;
                    }
                    prop_assert_eq!(singles, avail);
                    match kind {
                        0 if cost > 0 => {
                            let reserve = extra.min(limit - 1);
                            let req = Request { partial: true, reserve, ..Request::spend(cost, true) };
                            let o = rule.request(&mut s, &req, now_us);
                            let want = cost.min(avail.saturating_sub(reserve));
                            prop_assert_eq!(o.granted, Some(want));
                            prop_assert_eq!(o.decision.allowed, want > 0);
                            if want > 0 {
                                prop_assert!(o.decision.remaining >= reserve);
                                prop_assert_eq!(o.decision.remaining, avail - want);
                            }
                        }
                        1 if cost > 0 && cost + extra.min(limit - 1) <= limit => {
                            let reserve = extra.min(limit - 1);
                            let req = Request { reserve, ..Request::spend(cost, true) };
                            let o = rule.request(&mut s, &req, now_us);
                            prop_assert_eq!(o.decision.allowed, cost + reserve <= avail);
                            if o.decision.allowed {
                                prop_assert!(o.decision.remaining >= reserve);
                            } else {
                                prop_assert_eq!(o.decision.remaining, avail);
                                prop_assert!(o.decision.retry_after_ms >= 1);
                            }
                        }
                        2 => {
                            let n = extra.clamp(1, limit);
                            let req = Request { ask: Ask::Refund(n), ..Request::spend(0, true) };
                            let o = rule.request(&mut s, &req, now_us);
                            prop_assert!(o.decision.allowed);
                            let after = o.decision.remaining;
                            prop_assert!(after >= avail && after <= limit && after <= avail + n,
                                "refund {} from {} gave {}", n, avail, after);
                            let again = rule.request(&mut s, &Request::spend(0, false), now_us);
                            prop_assert_eq!(again.decision, o.decision);
                            if !o.wrote {
                                prop_assert_eq!(&s, &before);
                            }
                        }
                        _ => {
                            if cost > 0 {
                                rule.hit(&mut s, cost, now_us, true);
                            }
                        }
                    }
                }
            }

            /// `BLOCK ms`: a refusal blocks the key for `ms`; until then every request is
            /// refused (peeks and refunds still answer, with nothing remaining), the replies
            /// and the TTL count the block; from its end the rule applies as before, to the
            /// state as it was.
            #[test]
            fn a_block_refuses_everything_until_it_ends(
                rule in any_rule().prop_filter("rate commands", |r| !matches!(r, Rule::Acquire(_))),
                block_ms in 1u64..5_000,
                probes in prop::collection::vec((0u64..6_000_000, 1u64..8), 1..20),
            ) {
                let limit = rule.limit();
                let mut s = rule.fresh();
                while rule.hit(&mut s, 1, T0, true).decision.allowed {}
                let unblocked = s.clone();
                let req = Request { block_ms, ..Request::spend(1, true) };
                let o = rule.request(&mut s, &req, T0);
                prop_assert!(!o.decision.allowed && o.wrote);
                prop_assert_eq!(o.decision.remaining, 0);
                prop_assert!(o.decision.retry_after_ms >= block_ms);
                prop_assert!(o.decision.reset_after_ms >= block_ms);
                prop_assert_eq!(s.blocked_until_us(), T0 + block_ms * 1000);
                prop_assert_eq!(s.unblocked(), &unblocked);
                let blocked = s.clone();
                for (dt, cost) in probes {
                    let now = T0 + dt;
                    let cost = cost.min(limit);
                    let o = rule.request(&mut s.clone(), &Request::spend(cost, true), now);
                    let alone = rule.request(&mut unblocked.clone(), &Request::spend(cost, true), now);
                    if now < T0 + block_ms * 1000 {
                        prop_assert!(!o.decision.allowed && !o.wrote);
                        let left = (T0 + block_ms * 1000 - now).div_ceil(1000);
                        prop_assert!(o.decision.retry_after_ms >= left);
                        prop_assert_eq!(o.decision.remaining, 0);
                        let peek = rule.request(&mut s.clone(), &Request::spend(0, true), now);
                        prop_assert!(peek.decision.allowed && peek.decision.reset_after_ms >= left);
                    } else {
                        prop_assert_eq!(o.decision, alone.decision);
                        if o.wrote {
                            // The write after the penalty stores the state without it.
                            let mut plain = unblocked.clone();
                            rule.hit(&mut plain, cost, now, true);
                            let mut got = s.clone();
                            rule.hit(&mut got, cost, now, true);
                            prop_assert_eq!(got, plain);
                        }
                    }
                    prop_assert_eq!(&s, &blocked);
                }
            }
    }
}
