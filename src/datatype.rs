//! The `ratelimit` Redis data type: a `Box<State>` per key, and the callbacks Redis calls
//! for RDB, AOF rewrite, DEBUG DIGEST, MEMORY USAGE, COPY and freeing.

use crate::rm::{api, Key};
use crate::state::{State, ENCODING_VERSION};
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

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

fn boxed(s: State) -> *mut c_void {
    Box::into_raw(Box::new(s)).cast()
}

/// What a key holds, as far as this module is concerned.
pub enum Slot<'a> {
    Empty,
    Ours(&'a mut State),
    Foreign,
}

/// Looks at an open key.
pub fn slot(key: &Key) -> Slot<'_> {
    match key.kind() {
        raw::REDISMODULE_KEYTYPE_EMPTY => Slot::Empty,
        raw::REDISMODULE_KEYTYPE_MODULE if key.module_type() == type_ptr() => {
            let v = key.module_value().cast::<State>();
            // SAFETY: values of our type are always `Box<State>` pointers we created.
            match unsafe { v.as_mut() } {
                Some(s) => Slot::Ours(s),
                None => Slot::Foreign,
            }
        }
        _ => Slot::Foreign,
    }
}

/// Stores `s` in an open (writable) key: in place when it already holds our type (keeping
/// its TTL handle valid), else as a new value.
pub fn store(key: &Key, s: State) -> bool {
    if let Slot::Ours(cur) = slot(key) {
        *cur = s;
        return true;
    }
    let v = boxed(s);
    if key.set_module_value(type_ptr(), v) {
        true
    } else {
        // SAFETY: not taken by Redis; reclaim it.
        drop(unsafe { Box::from_raw(v.cast::<State>()) });
        false
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
        Ok(s) => boxed(s),
        Err(_) => std::ptr::null_mut(),
    }
}

/// The state behind a value pointer Redis hands back to us.
unsafe fn state<'a>(value: *mut c_void) -> Option<&'a State> {
    // SAFETY: Redis only passes values of our type, which are Box<State> pointers.
    unsafe { value.cast::<State>().as_ref() }
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
    unsafe { state(value.cast_mut()) }.map_or(0, State::mem_usage)
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
    if !value.is_null() {
        // SAFETY: every value of our type is a Box<State> we leaked with `boxed`.
        drop(unsafe { Box::from_raw(value.cast::<State>()) });
    }
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    match unsafe { state(value.cast_mut()) } {
        Some(s) => boxed(s.clone()),
        None => std::ptr::null_mut(),
    }
}
