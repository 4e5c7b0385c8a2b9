//! Thin, safe wrappers around the raw Redis module API used on the command path.
//!
//! Every raw function is an `Option<fn>` filled in by `RedisModule_Init`; a missing one is
//! treated as a no-op or a failure, never unwrapped. Nothing here allocates.

use redis_module::raw;
use std::ffi::{c_int, c_void, CStr};
use std::ptr;

pub type Ctx = *mut raw::RedisModuleCtx;
pub type RStr = *mut raw::RedisModuleString;

/// Calls a raw API function if the server provides it, else evaluates `$default`.
macro_rules! api {
    ($name:ident($($arg:expr),* $(,)?) else $default:expr) => {
        // SAFETY: the pointer was set by RedisModule_Init for this server; arguments are
        // handles the server gave us for the current call.
        match unsafe { raw::$name } {
            Some(f) => unsafe { f($($arg),*) },
            None => $default,
        }
    };
}
pub(crate) use api;

pub const OK: c_int = raw::REDISMODULE_OK as c_int;
pub const ERR: c_int = raw::REDISMODULE_ERR as c_int;

/// The bytes of a Redis string argument (valid for the current call).
pub fn bytes<'a>(s: RStr) -> &'a [u8] {
    let mut len: usize = 0;
    let p = api!(RedisModule_StringPtrLen(s, &mut len) else ptr::null());
    if p.is_null() {
        return &[];
    }
    // SAFETY: Redis guarantees `len` readable bytes at `p` while the argument lives.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
}

/// Parses a Redis string as a signed 64-bit integer, exactly as Redis does.
pub fn to_i64(s: RStr) -> Option<i64> {
    let mut v: std::ffi::c_longlong = 0;
    (api!(RedisModule_StringToLongLong(s, &mut v) else ERR) == OK).then_some(v)
}

pub fn reply_i64(ctx: Ctx, v: i64) {
    api!(RedisModule_ReplyWithLongLong(ctx, v) else ERR);
}

pub fn reply_u64(ctx: Ctx, v: u64) {
    reply_i64(ctx, i64::try_from(v).unwrap_or(i64::MAX));
}

pub fn reply_array(ctx: Ctx, n: usize) {
    api!(RedisModule_ReplyWithArray(ctx, n as std::ffi::c_long) else ERR);
}

/// A map of `n` pairs (RESP3), a flat array of `2n` elements on RESP2.
pub fn reply_map(ctx: Ctx, n: usize) {
    match unsafe { raw::RedisModule_ReplyWithMap } {
        Some(f) => unsafe {
            f(ctx, n as std::ffi::c_long);
        },
        None => reply_array(ctx, 2 * n),
    }
}

pub fn reply_simple(ctx: Ctx, s: &CStr) {
    api!(RedisModule_ReplyWithSimpleString(ctx, s.as_ptr()) else ERR);
}

pub fn reply_bulk(ctx: Ctx, s: &[u8]) {
    api!(RedisModule_ReplyWithStringBuffer(ctx, s.as_ptr().cast(), s.len()) else ERR);
}

pub fn reply_null(ctx: Ctx) {
    api!(RedisModule_ReplyWithNull(ctx) else ERR);
}

pub fn reply_error(ctx: Ctx, msg: &CStr) {
    api!(RedisModule_ReplyWithError(ctx, msg.as_ptr()) else ERR);
}

pub fn wrong_arity(ctx: Ctx) -> c_int {
    api!(RedisModule_WrongArity(ctx) else ERR)
}

pub fn context_flags(ctx: Ctx) -> u32 {
    api!(RedisModule_GetContextFlags(ctx) else 0) as u32
}

/// Marks the key modified (WATCH, client-side caching); implicit signals are off.
pub fn signal_modified(ctx: Ctx, name: RStr) {
    api!(RedisModule_SignalModifiedKey(ctx, name) else ERR);
}

/// The server's clock in ms, as the server itself uses it for expiries: the cached command
/// time where the server has it (Valkey, Redis 7.2+: frozen for a whole MULTI/EXEC or
/// script, so a key's TTL stays equal to `reset_after_ms`), else `RedisModule_Milliseconds`.
pub fn server_ms() -> u64 {
    if let Some(f) = unsafe { raw::RedisModule_CachedMicroseconds } {
        // SAFETY: provided by the server for the current call.
        return u64::try_from(unsafe { f() }).unwrap_or(0) / 1000;
    }
    u64::try_from(api!(RedisModule_Milliseconds() else 0)).unwrap_or(0)
}

/// Fires the keyspace event of a write: type `module` (`d` in notify-keyspace-events), event
/// named after the algorithm, e.g. `ratelimit.gcra`.
pub fn notify(ctx: Ctx, algo: crate::state::Algo, name: RStr) {
    api!(RedisModule_NotifyKeyspaceEvent(ctx, raw::REDISMODULE_NOTIFY_MODULE, algo.event().as_ptr(), name) else ERR);
}

/// Whether this call only asks for the command's key positions (`getkeys-api`).
pub fn is_keys_position_request(ctx: Ctx) -> bool {
    api!(RedisModule_IsKeysPositionRequest(ctx) else 0) != 0
}

/// Reports argument `pos` as a key, answering a key-position request.
pub fn key_at_pos(ctx: Ctx, pos: usize) {
    if let Ok(p) = c_int::try_from(pos) {
        api!(RedisModule_KeyAtPos(ctx, p) else ());
    }
}

/// An open key, closed on drop.
pub struct Key {
    ptr: *mut raw::RedisModuleKey,
}

impl Key {
    pub fn open(ctx: Ctx, name: RStr, write: bool) -> Key {
        let mode = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        } as c_int;
        let ptr = api!(RedisModule_OpenKey(ctx, name, mode) else ptr::null_mut());
        Key { ptr: ptr.cast() }
    }

    pub fn is_null(&self) -> bool {
        self.ptr.is_null()
    }

    /// `REDISMODULE_KEYTYPE_*`.
    pub fn kind(&self) -> isize {
        if self.ptr.is_null() {
            return raw::REDISMODULE_KEYTYPE_EMPTY;
        }
        api!(RedisModule_KeyType(self.ptr) else 0) as isize
    }

    pub fn module_type(&self) -> *mut raw::RedisModuleType {
        api!(RedisModule_ModuleTypeGetType(self.ptr) else ptr::null_mut())
    }

    pub fn module_value(&self) -> *mut c_void {
        api!(RedisModule_ModuleTypeGetValue(self.ptr) else ptr::null_mut())
    }

    /// Stores a module value (takes ownership on success).
    pub fn set_module_value(&self, ty: *mut raw::RedisModuleType, v: *mut c_void) -> bool {
        api!(RedisModule_ModuleTypeSetValue(self.ptr, ty, v) else ERR) == OK
    }

    /// Swaps in a new module value, keeping the key and its TTL; returns the old value.
    pub fn replace_module_value(
        &self,
        ty: *mut raw::RedisModuleType,
        v: *mut c_void,
    ) -> Option<*mut c_void> {
        let mut old: *mut c_void = ptr::null_mut();
        (api!(RedisModule_ModuleTypeReplaceValue(self.ptr, ty, v, &mut old) else ERR) == OK)
            .then_some(old)
    }

    pub fn delete(&self) {
        api!(RedisModule_DeleteKey(self.ptr) else ERR);
    }

    pub fn set_expire(&self, ms: i64) {
        api!(RedisModule_SetExpire(self.ptr, ms) else ERR);
    }

    /// Remaining TTL in ms, or -1 without one.
    pub fn expire(&self) -> i64 {
        api!(RedisModule_GetExpire(self.ptr) else -1)
    }

    /// Absolute expiry, unix ms, or -1.
    pub fn abs_expire(&self) -> i64 {
        api!(RedisModule_GetAbsExpire(self.ptr) else -1)
    }

    /// The bytes of a string key (valid while the key is open and unmodified).
    pub fn string_value(&self) -> Option<&[u8]> {
        let mut len: usize = 0;
        let p = api!(RedisModule_StringDMA(self.ptr, &mut len, raw::REDISMODULE_READ as c_int) else ptr::null_mut());
        if p.is_null() {
            return None;
        }
        // SAFETY: Redis guarantees `len` bytes at `p` while the key stays open.
        Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
    }

    pub fn set_abs_expire(&self, unix_ms: i64) {
        api!(RedisModule_SetAbsExpire(self.ptr, unix_ms) else ERR);
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            api!(RedisModule_CloseKey(self.ptr) else ());
        }
    }
}
