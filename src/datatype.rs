//! The `ratelimit` Redis data type, and the callbacks Redis calls for RDB, AOF rewrite,
//! DEBUG DIGEST, MEMORY USAGE, COPY and freeing.
//!
//! A key's value is either a `Box<State>` pointer (aligned: low bit 0) or, for the GCRA family
//! (gcra, tokenbucket, queue), the state itself packed into the pointer-sized word with the
//! low bit set, so such a key allocates nothing beyond what any Redis key costs:
//!
//! ```text
//! bit 0: 1 (inline) | bits 1-2: algorithm | bits 3-9: rule index | bits 10-63: TAT in µs
//! ```
//!
//! The rule's numbers live in a small table of interned rules (at most 128, in memory only;
//! RDB, AOF and replication always carry the full encoding). A state is packed only when its
//! TAT is a whole number of µs and its rule has a slot; otherwise it is boxed.

use crate::algo::gcra;
use crate::rm::{api, Key};
use crate::state::{Bucket, State, ENCODING_VERSION};
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::borrow::Cow;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

pub static RL_TYPE: RedisType = RedisType::new(
    "ratelimit",
    ENCODING_VERSION as i32,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
    },
);

/// The registered type, cached at load for the hot path.
static TYPE_PTR: AtomicPtr<raw::RedisModuleType> = AtomicPtr::new(std::ptr::null_mut());

/// Remembers the type pointer created by `RedisModule_CreateDataType`.
pub fn init() {
    if let Ok(t) = RL_TYPE.raw_type.try_borrow() {
        TYPE_PTR.store(*t, Ordering::Relaxed);
    }
}

pub fn type_ptr() -> *mut raw::RedisModuleType {
    TYPE_PTR.load(Ordering::Relaxed)
}

/// Interned GCRA-family rules, indexed by the packed word's rule index.
static RULES: Mutex<Vec<gcra::Params>> = Mutex::new(Vec::new());
const MAX_RULES: usize = 128;

fn intern(p: &gcra::Params) -> Option<usize> {
    let mut t = RULES.lock().ok()?;
    if let Some(i) = t.iter().position(|q| q == p) {
        return Some(i);
    }
    if t.len() >= MAX_RULES {
        return None;
    }
    t.push(*p);
    Some(t.len() - 1)
}

fn rule(i: usize) -> Option<gcra::Params> {
    RULES.lock().ok()?.get(i).copied()
}

/// The packed word for `s`, if it can be packed.
fn pack(s: &State) -> Option<usize> {
    let (tag, b) = match s {
        State::Gcra(b) => (0usize, b),
        State::TokenBucket(b) => (1, b),
        State::Queue(b) => (2, b),
        _ => return None,
    };
    if usize::BITS < 64 || b.tat.frac != 0 || b.tat.ns % 1000 != 0 {
        return None;
    }
    let us = usize::try_from(b.tat.ns / 1000)
        .ok()
        .filter(|&us| us < 1 << 54)?;
    let idx = intern(&b.params)?;
    Some((us << 10) | (idx << 3) | (tag << 1) | 1)
}

fn unpack(w: usize) -> Option<State> {
    let params = rule((w >> 3) & (MAX_RULES - 1))?;
    let tat = gcra::Tat {
        ns: u64::try_from(w >> 10).ok()?.checked_mul(1000)?,
        frac: 0,
    };
    let b = Bucket { params, tat };
    match (w >> 1) & 3 {
        0 => Some(State::Gcra(b)),
        1 => Some(State::TokenBucket(b)),
        2 => Some(State::Queue(b)),
        _ => None,
    }
}

fn is_packed(v: *const c_void) -> bool {
    (v as usize) & 1 == 1
}

/// The value to hand to Redis for `s`: packed when possible, else a box.
fn value_of(s: State) -> *mut c_void {
    match pack(&s) {
        Some(w) => w as *mut c_void,
        None => Box::into_raw(Box::new(s)).cast(),
    }
}

/// Frees a value we created.
fn release(v: *mut c_void) {
    if !v.is_null() && !is_packed(v) {
        // SAFETY: unpacked values of our type are Box<State> pointers we leaked.
        drop(unsafe { Box::from_raw(v.cast::<State>()) });
    }
}

/// A state read from a key: in place behind its box, or unpacked from the value word.
pub enum Held<'a> {
    Boxed(&'a mut State),
    Packed(State),
}

impl std::ops::Deref for Held<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        match self {
            Held::Boxed(s) => s,
            Held::Packed(s) => s,
        }
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut State {
        match self {
            Held::Boxed(s) => s,
            Held::Packed(s) => s,
        }
    }
}

impl Held<'_> {
    /// The state to store after a change: None when it was changed in place.
    pub fn to_store(self) -> Option<State> {
        match self {
            Held::Boxed(_) => None,
            Held::Packed(s) => Some(s),
        }
    }
}

/// What a key holds, as far as this module is concerned.
pub enum Slot<'a> {
    Empty,
    Ours(Held<'a>),
    Foreign,
}

/// Looks at an open key.
pub fn slot(key: &Key) -> Slot<'_> {
    match key.kind() {
        raw::REDISMODULE_KEYTYPE_EMPTY => Slot::Empty,
        raw::REDISMODULE_KEYTYPE_MODULE if key.module_type() == type_ptr() => {
            let v = key.module_value();
            if is_packed(v) {
                return unpack(v as usize).map_or(Slot::Foreign, |s| Slot::Ours(Held::Packed(s)));
            }
            // SAFETY: unpacked values of our type are always `Box<State>` pointers we created.
            match unsafe { v.cast::<State>().as_mut() } {
                Some(s) => Slot::Ours(Held::Boxed(s)),
                None => Slot::Foreign,
            }
        }
        _ => Slot::Foreign,
    }
}

/// Stores `s` in an open (writable) key: in place when it holds a boxed state of ours,
/// swapped in when it holds a packed one (both keep the key's TTL), else as a new value.
pub fn store(key: &Key, s: State) -> bool {
    match slot(key) {
        Slot::Ours(Held::Boxed(cur)) => {
            *cur = s;
            true
        }
        Slot::Ours(Held::Packed(_)) => {
            let v = value_of(s);
            match key.replace_module_value(type_ptr(), v) {
                Some(old) => {
                    release(old);
                    true
                }
                None => {
                    release(v);
                    false
                }
            }
        }
        _ => {
            let v = value_of(s);
            if key.set_module_value(type_ptr(), v) {
                true
            } else {
                release(v);
                false
            }
        }
    }
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if encver < 1 || encver > c_int::from(ENCODING_VERSION) {
        return std::ptr::null_mut();
    }
    let mut len: usize = 0;
    let p = api!(RedisModule_LoadStringBuffer(rdb, &mut len) else std::ptr::null_mut());
    if p.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: Redis returned `len` bytes at `p`, ours to free with RedisModule_Free.
    let decoded = State::decode(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) });
    api!(RedisModule_Free(p.cast()) else ());
    if api!(RedisModule_IsIOError(rdb) else 0) != 0 {
        return std::ptr::null_mut();
    }
    match decoded {
        Ok(s) => value_of(s),
        Err(_) => std::ptr::null_mut(),
    }
}

/// The state behind a value Redis hands back to us (unpacked if packed).
unsafe fn state<'a>(value: *mut c_void) -> Option<Cow<'a, State>> {
    if is_packed(value) {
        return unpack(value as usize).map(Cow::Owned);
    }
    // SAFETY: Redis only passes values of our type, which are Box<State> pointers.
    unsafe { value.cast::<State>().as_ref() }.map(Cow::Borrowed)
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    if let Some(s) = unsafe { state(value) } {
        let enc = s.encode();
        let buf = enc.as_slice();
        api!(RedisModule_SaveStringBuffer(rdb, buf.as_ptr().cast(), buf.len()) else ());
    }
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // Redis appends the key's PEXPIREAT after this itself.
    if let Some(s) = unsafe { state(value) } {
        let mut enc = s.encode();
        let buf = enc.with_expiry(0);
        api!(RedisModule_EmitAOF(
            aof,
            c"RL._APPLY".as_ptr(),
            c"sb".as_ptr(),
            key,
            buf.as_ptr(),
            buf.len()
        ) else ());
    }
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    if is_packed(value) {
        return 0;
    }
    unsafe { state(value.cast_mut()) }.map_or(0, |s| s.mem_usage())
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    if let Some(s) = unsafe { state(value) } {
        let enc = s.encode();
        let buf = enc.as_slice();
        api!(RedisModule_DigestAddStringBuffer(md, buf.as_ptr().cast(), buf.len()) else ());
        api!(RedisModule_DigestEndSequence(md) else ());
    }
}

unsafe extern "C" fn free(value: *mut c_void) {
    release(value);
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    if is_packed(value) {
        return value.cast_mut();
    }
    match unsafe { state(value.cast_mut()) } {
        Some(s) => value_of(s.into_owned()),
        None => std::ptr::null_mut(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(ns: u64, frac: u64) -> Bucket {
        Bucket {
            params: gcra::Params::new(10, 4, 1000, gcra::GCRA_NAMES).unwrap(),
            tat: gcra::Tat { ns, frac },
        }
    }

    #[test]
    fn gcra_family_packs_into_the_value_word() {
        for s in [
            State::Gcra(bucket(1_700_000_040_250_000_000, 0)),
            State::TokenBucket(bucket(1_700_000_040_250_000_000, 0)),
            State::Queue(bucket(0, 0)),
        ] {
            let w = pack(&s).expect("packs");
            assert_eq!(w & 1, 1);
            assert_eq!(unpack(w), Some(s));
        }
        // Not a whole µs, or a fraction of a ns: boxed.
        assert_eq!(
            pack(&State::Gcra(bucket(1_700_000_040_250_000_001, 0))),
            None
        );
        assert_eq!(
            pack(&State::Gcra(bucket(1_700_000_040_250_000_000, 1))),
            None
        );
        // Boxed pointers are aligned: never taken for packed words.
        let v = value_of(State::Gcra(bucket(1, 0)));
        assert!(!is_packed(v));
        release(v);
    }
}
