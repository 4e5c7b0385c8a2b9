//! The key transaction: the one write path of every command and of `RL._APPLY`. Open the
//! key, read its state, run a pure decision on it, and when the decision wrote: store, set
//! the absolute expiry, signal and notify, propagate the effect. The caller replies.
//!
//! The storage forms of a state (boxed, packed into the value word or a pair: `datatype`)
//! stay inside this file and `datatype`: a decision sees a `&mut State`, whatever the key
//! holds. A store the server refuses is an error reply (counted as the command's error),
//! never "admitted".

use crate::clock;
use crate::datatype::{self, Held, Holds, Pending};
use crate::error::{Error, STORE, WRONGTYPE};
use crate::propagate::{self, Batch};
use crate::rm::{self, Ctx, Key, RStr};
use crate::state::{Algo, Encoded, State};
use std::ffi::CStr;

/// What a write sends to replicas and the AOF (see `propagate`).
pub enum Effect {
    /// The encoded state, or the operation that made it (`replay.rs`), with the keyspace
    /// event of the write (its algorithm's); sent as `RL._APPLY key <absolute expiry +
    /// encoding>`.
    Encoded(&'static CStr, Encoded),
    /// The call itself, already an effect (`RL._APPLY` on a replica or while loading),
    /// with its keyspace event.
    Verbatim(&'static CStr),
}

impl Effect {
    /// The effect of writing `s` whole (compact for the five-field states).
    #[inline]
    pub fn state(s: &State) -> Effect {
        Effect::Encoded(s.event(), s.encode_effect())
    }

    fn event(&self) -> &'static CStr {
        match self {
            Effect::Encoded(e, _) | Effect::Verbatim(e) => e,
        }
    }
}

/// What runs after every write of a key (`wait.rs` registers it at load: a write may free
/// room for the key's waiters). Registered, not imported: the key transaction knows
/// nothing of waiting.
static ON_WRITE: std::sync::OnceLock<fn(Ctx, &RStr)> = std::sync::OnceLock::new();

/// Sets what runs after every write (once, at load).
pub fn on_write(f: fn(Ctx, &RStr)) {
    let _ = ON_WRITE.set(f);
}

#[inline]
fn wrote(ctx: Ctx, name: &RStr) {
    if let Some(f) = ON_WRITE.get() {
        f(ctx, name);
    }
}

/// When the written key expires.
pub enum Expiry {
    /// `ms` after the module time the write was decided at (0: the state is fresh again, so
    /// the key is deleted).
    After(u64),
    /// At this absolute unix ms on the server's clock (None: no expiry), as `RL._APPLY`
    /// carries it.
    At(Option<u64>),
}

/// A decision's write: what to propagate and when the key expires.
pub struct Written {
    pub effect: Effect,
    pub expiry: Expiry,
}

/// What a key that holds something other than a state of the decision's algorithm becomes.
pub enum Other<'f> {
    /// An error: another algorithm's state, or `WRONGTYPE`.
    Refuse,
    /// A string is read as a state by this function (None: `WRONGTYPE`), e.g. redis-cell's
    /// own state, adopted by CL.THROTTLE; anything else is refused.
    AdoptString(&'f dyn Fn(&[u8]) -> Option<State>),
    /// Whatever it holds is replaced: the decision starts from the fresh state
    /// (`RL._APPLY`, whose primary decided on what the replica must hold).
    Overwrite,
    /// A state of another algorithm starts from the fresh state (a policy whose new
    /// version has another algorithm: its keys cannot carry their units over); anything
    /// else is `WRONGTYPE`.
    Restart,
    /// A state of any algorithm is decided on as it is (RL.PAUSE, RL.RESUME); anything else
    /// is `WRONGTYPE`.
    Any,
}

/// An open key of one call.
pub struct Txn<'a> {
    ctx: Ctx,
    name: &'a RStr,
    key: Key,
    now_us: u64,
}

/// Where the state a decision ran on came from, i.e. how to store it.
enum Source<'k> {
    Held(Held<'k>),
    /// The key was empty (or is overwritten): set a new value.
    Fresh(State),
    /// The key held a value of another type, read as a state: replaced.
    Adopted(State),
}

impl<'a> Txn<'a> {
    /// Opens key `name` (for writing unless `writable` is false: a dry run) for a call
    /// decided at module time `now_us`.
    #[inline]
    pub fn open(ctx: Ctx, name: &'a RStr, writable: bool, now_us: u64) -> Txn<'a> {
        Txn {
            ctx,
            name,
            key: Key::open(ctx, name, writable),
            now_us,
        }
    }

    /// The module time the call is decided at.
    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// Runs `decide` on the key's state of `algo`, or on `fresh()` when the key is empty
    /// (`fresh` giving None: nothing to decide on, and None is returned); a key holding
    /// anything else is handled as `other` says. When `decide` returns a write, the state
    /// it left is stored, expired, signalled and propagated.
    #[inline]
    pub fn decide<T>(
        &mut self,
        algo: Algo,
        other: Other<'_>,
        fresh: impl FnOnce() -> Option<State>,
        decide: impl FnOnce(&mut State) -> (T, Option<Written>),
    ) -> Result<Option<T>, Error> {
        self.decide_in(algo, other, fresh, decide, None)
    }

    /// [`Txn::decide`], with the effect added to `batch` when there is one (sent with the
    /// call's other effects) instead of propagated at once.
    #[inline(always)]
    pub fn decide_in<T>(
        &mut self,
        algo: Algo,
        other: Other<'_>,
        fresh: impl FnOnce() -> Option<State>,
        decide: impl FnOnce(&mut State) -> (T, Option<Written>),
        batch: Option<&mut Batch<'a>>,
    ) -> Result<Option<T>, Error> {
        let source = match datatype::holds(&mut self.key) {
            Holds::Ours(h) if h.fits(algo) => Source::Held(h),
            Holds::Empty => match fresh() {
                Some(s) => Source::Fresh(s),
                None => return Ok(None),
            },
            slot => match (other, slot) {
                (Other::Any, Holds::Ours(h)) => Source::Held(h),
                (Other::Overwrite, _) | (Other::Restart, Holds::Ours(_)) => match fresh() {
                    Some(s) => Source::Fresh(s),
                    None => return Ok(None),
                },
                (Other::Refuse | Other::AdoptString(_), Holds::Ours(h)) => {
                    return Err(Error::other_algorithm(h.algo().map_or("none", Algo::name)))
                }
                (Other::AdoptString(adopt), _) => {
                    let s = self
                        .key
                        .string_value()
                        .and_then(adopt)
                        .ok_or(Error::Static(WRONGTYPE))?;
                    Source::Adopted(s)
                }
                _ => return Err(Error::Static(WRONGTYPE)),
            },
        };
        // Each source stores its own way; nothing is stored unless the decision wrote.
        let value = match source {
            Source::Held(mut h) => {
                let (v, w) = decide(&mut h);
                if let Some(w) = w {
                    let p = h.to_store();
                    self.finish(p, w, batch)?;
                }
                v
            }
            Source::Fresh(mut s) => {
                let (v, w) = decide(&mut s);
                if let Some(w) = w {
                    if !matches!(datatype::holds(&mut self.key), Holds::Empty) {
                        self.key.delete();
                    }
                    self.finish(Pending::Set(s), w, batch)?;
                }
                v
            }
            Source::Adopted(mut s) => {
                let (v, w) = decide(&mut s);
                if let Some(w) = w {
                    self.finish(Pending::Store(s), w, batch)?;
                }
                v
            }
        };
        Ok(Some(value))
    }

    /// Replaces whatever the key holds by `s` (`RL._APPLY` of a whole state), then expires,
    /// signals and propagates as [`Txn::decide`] does.
    pub fn replace(&mut self, s: State, w: Written) -> Result<(), Error> {
        self.replace_in(s, w, None)
    }

    /// [`Txn::replace`], with the effect added to `batch` when there is one (see
    /// [`Txn::decide_in`]): RL.ALL stores the states it decided on copies of.
    pub fn replace_in(
        &mut self,
        s: State,
        w: Written,
        batch: Option<&mut Batch<'a>>,
    ) -> Result<(), Error> {
        if let Holds::Foreign = datatype::holds(&mut self.key) {
            self.key.delete();
        }
        self.finish(Pending::Store(s), w, batch)
    }

    /// Stores `s`, decided in this call on a copy of what the key holds (a state of `s`'s
    /// algorithm, or nothing), then expires, signals and propagates as [`Txn::decide_in`]
    /// does: RL.ALL decides every key before it stores any.
    pub fn store_in(
        &mut self,
        s: State,
        w: Written,
        batch: Option<&mut Batch<'a>>,
    ) -> Result<(), Error> {
        self.finish(Pending::Store(s), w, batch)
    }

    /// Stores what `pending` leaves to store, sets the expiry, signals the change and
    /// propagates the effect (never the clock-dependent command), or adds it to `batch`.
    fn finish(
        &mut self,
        pending: Pending,
        w: Written,
        batch: Option<&mut Batch<'a>>,
    ) -> Result<(), Error> {
        let at = match w.expiry {
            Expiry::After(0) => {
                // Equivalent to a fresh key: no state at all.
                if !matches!(datatype::holds(&mut self.key), Holds::Empty) {
                    self.key.delete();
                    propagate::del(self.ctx, self.name);
                    wrote(self.ctx, self.name);
                }
                return Ok(());
            }
            // The absolute expiry on the server's clock (what a relative SetExpire would
            // compute), set here and sent to replicas as is: both sides expire the key at
            // the same instant.
            Expiry::After(ttl_ms) => {
                Some(clock::expiry_base_ms(self.now_us).saturating_add(ttl_ms))
            }
            Expiry::At(at) => at,
        };
        if !datatype::finish(&mut self.key, pending) {
            return Err(Error::Static(STORE));
        }
        if let Some(at) = at {
            self.key
                .set_abs_expire(i64::try_from(at).unwrap_or(i64::MAX));
        }
        rm::signal_modified(self.ctx, self.name);
        rm::notify(self.ctx, w.effect.event(), self.name);
        match (w.effect, batch) {
            (Effect::Encoded(_, enc), Some(b)) => b.push(self.name, enc, at.unwrap_or(0)),
            (Effect::Encoded(_, mut enc), None) => {
                propagate::apply(self.ctx, self.name, enc.with_expiry(at.unwrap_or(0)))
            }
            (Effect::Verbatim(_), Some(b)) => b.verbatim = true,
            (Effect::Verbatim(_), None) => rm::replicate_verbatim(self.ctx),
        }
        // A write may free room for the key's waiters.
        wrote(self.ctx, self.name);
        Ok(())
    }
}
