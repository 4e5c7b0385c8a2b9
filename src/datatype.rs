//! The `ratelimit` Redis data type: reading and storing a key's state, in whichever form
//! the key holds it (boxed, or packed into the value word or a pair of words: `packed.rs`).
//! The type's callbacks, which turn the server's raw value pointers into states, are in
//! `rm`.

pub use crate::packed::{pack, pack_pair, unpack, unpack_pair};
use crate::rm::{self, Key, Owned, Stored, TYPE_METHODS};
use crate::state::{State, ENCODING_VERSION};
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::ffi::c_int;

pub static RL_TYPE: RedisType = RedisType::new("ratelimit", ENCODING_VERSION as i32, TYPE_METHODS);

/// Remembers the type created by `RedisModule_CreateDataType` (for [`Key::value`]).
pub fn init() {
    if let Ok(t) = RL_TYPE.raw_type.try_borrow() {
        rm::set_type(*t);
    }
}

/// Whether an RDB encoding version is one this module reads.
pub fn encoding_known(encver: c_int) -> bool {
    (1..=c_int::from(ENCODING_VERSION)).contains(&encver)
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
        raw::REDISMODULE_KEYTYPE_MODULE => match key.value() {
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
    let packed = match key.value() {
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
