//! The `ratelimit` Redis data type: what its values are (a `State`, boxed, or packed into
//! the value word or a pair of words: `packed.rs`), how they are encoded for RDB, the AOF
//! rewrite and DEBUG DIGEST (`state.rs`'s codec, at [`ENCODING_VERSION`]), and reading and
//! storing a key's state in whichever form the key holds it. `rm` holds the values and
//! calls this layer's [`DataType`] functions from the type's callbacks.

use crate::packed::{pack, pack_pair, unpack, unpack_pair};
use crate::propagate::APPLY;
use crate::rm::{self, Ctx, DataType, Key, Stored};
use crate::state::{State, ENCODING_VERSION};
use redis_module::raw;
use std::ffi::{c_int, CStr};

/// A value of the type, to hand to the server.
pub type Owned = rm::Owned<State>;

/// Creates the `ratelimit` data type (at load); false on failure.
pub fn create(ctx: Ctx) -> bool {
    rm::create_type::<State>(ctx, c"ratelimit", c_int::from(ENCODING_VERSION))
}

/// The type's values, for `rm` (its callbacks and [`Key::value`]).
impl DataType for State {
    fn unpack(word: usize) -> Option<State> {
        unpack(word)
    }

    fn unpack_pair(pair: [u64; 2]) -> Option<State> {
        unpack_pair(pair)
    }

    fn value_of(s: State) -> Owned {
        value_of(s)
    }

    /// Any encoding version from 1 to this module's.
    fn rdb_load(encver: c_int, bytes: &[u8]) -> Option<State> {
        if !(1..=c_int::from(ENCODING_VERSION)).contains(&encver) {
            return None;
        }
        State::decode(bytes).ok()
    }

    fn rdb_save(s: &State, f: impl FnOnce(&[u8])) {
        f(s.encode().as_slice());
    }

    /// `RL._APPLY key <no expiry + encoding>`, as a write is propagated.
    fn aof_rewrite(s: &State, f: impl FnOnce(&CStr, &[u8])) {
        let mut enc = s.encode();
        f(APPLY, enc.with_expiry(0));
    }

    fn mem_usage(s: &State) -> usize {
        s.mem_usage()
    }

    /// The node's policies (`policy.rs`): node configuration, saved beside the keys.
    fn aux_save() -> Option<Vec<u8>> {
        crate::policy::save_all()
    }

    fn aux_load(bytes: &[u8]) -> bool {
        crate::policy::load_all(bytes)
    }
}

/// The value to hand to Redis for `s`: packed into the word when possible, else into a
/// pair of words, else a box.
#[inline]
pub fn value_of(s: State) -> Owned {
    if let Some(w) = pack(&s).and_then(Owned::word) {
        return w;
    }
    match pack_pair(&s) {
        Some(p) => Owned::pair(p),
        None => Owned::boxed(s),
    }
}

/// A state read from a key: in place behind its box, or unpacked from the value word or
/// from a pair of words (kept, to be rewritten in place).
pub enum Held<'a> {
    Boxed(&'a mut State),
    Packed(State),
    Paired(&'a mut [u64; 2], State),
}

impl std::ops::Deref for Held<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        match self {
            Held::Boxed(s) => s,
            Held::Packed(s) | Held::Paired(_, s) => s,
        }
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut State {
        match self {
            Held::Boxed(s) => s,
            Held::Packed(s) | Held::Paired(_, s) => s,
        }
    }
}

/// What storing a changed state still takes, known from how the key held it (so the key's
/// value is not read again).
pub enum Pending {
    /// Changed in place (a boxed state, or a pair rewritten).
    Done,
    /// The key holds a packed word: swap in this value (keeps the TTL).
    Swap(Owned),
    /// The key holds a packed word: swap in the state's value (keeps the TTL).
    Replace(State),
    /// The key is empty: set a new value.
    Set(State),
    /// Whatever the key holds (see [`store`]).
    Store(State),
}

impl Held<'_> {
    /// Finishes a change of the held state: in place when it can be, else what is left.
    #[inline]
    pub fn to_store(self) -> Pending {
        match self {
            Held::Boxed(_) => Pending::Done,
            Held::Packed(s) => match pack(&s).and_then(Owned::word) {
                // Packed again (the hot path): the state is the word.
                Some(w) => Pending::Swap(w),
                None => Pending::Replace(s),
            },
            Held::Paired(p, s) => match pack(&s).is_none().then(|| pack_pair(&s)).flatten() {
                Some(next) => {
                    *p = next;
                    Pending::Done
                }
                None => Pending::Replace(s),
            },
        }
    }
}

impl Held<'_> {
    /// Replaces the held state by `s`: in place when it can be, else what is left.
    pub fn replace_with(mut self, s: State) -> Pending {
        *self = s;
        self.to_store()
    }
}

/// Stores what [`Held::to_store`] (or a fresh key's [`Pending::Set`]) left to store.
#[inline]
pub fn finish(key: &mut Key, p: Pending) -> bool {
    match p {
        Pending::Done => true,
        // Swapped in: the key keeps its TTL; the old word or pair is freed.
        Pending::Swap(v) => key.replace_value(v),
        Pending::Replace(s) => key.replace_value(value_of(s)),
        Pending::Set(s) => key.set_value(value_of(s)),
        Pending::Store(s) => store(key, s),
    }
}

/// What a key holds, as far as this module is concerned.
pub enum Holds<'a> {
    Empty,
    Ours(Held<'a>),
    Foreign,
}

/// Looks at an open key.
#[inline]
pub fn holds(key: &mut Key) -> Holds<'_> {
    match key.kind() {
        raw::REDISMODULE_KEYTYPE_EMPTY => Holds::Empty,
        raw::REDISMODULE_KEYTYPE_MODULE => match key.value::<State>() {
            Some(Stored::Word(w)) => {
                unpack(w).map_or(Holds::Foreign, |s| Holds::Ours(Held::Packed(s)))
            }
            Some(Stored::Boxed(s)) => Holds::Ours(Held::Boxed(s)),
            Some(Stored::Pair(p)) => match unpack_pair(*p) {
                Some(s) => Holds::Ours(Held::Paired(p, s)),
                None => Holds::Foreign,
            },
            None => Holds::Foreign,
        },
        _ => Holds::Foreign,
    }
}

/// Stores `s` in an open (writable) key: in place when it holds a boxed state of ours (or a
/// pair that `s` packs into), swapped in when it holds a packed one (both keep the key's
/// TTL), else as a new value.
pub fn store(key: &mut Key, s: State) -> bool {
    // What the key holds, without unpacking a packed value (the caller just did).
    let packed = match key.value::<State>() {
        Some(Stored::Boxed(b)) => {
            *b = s;
            return true;
        }
        Some(Stored::Pair(p)) => match pack(&s).is_none().then(|| pack_pair(&s)).flatten() {
            // Still a pair: rewritten in place.
            Some(next) => {
                *p = next;
                return true;
            }
            None => true,
        },
        Some(Stored::Word(_)) => true,
        None => false,
    };
    let v = value_of(s);
    if packed {
        // Swapped in: the key keeps its TTL; the old word owns nothing.
        key.replace_value(v)
    } else {
        key.set_value(v)
    }
}
