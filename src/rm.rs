//! The one place that touches the raw Redis module API: every `unsafe` of the module is in
//! this file, each with its `SAFETY` comment, behind safe functions.
//!
//! Every raw function is an `Option<fn>` filled in by `RedisModule_Init`; a missing one is
//! treated as a no-op or a failure, never unwrapped. Nothing on the command path allocates.
//! The server's handles (contexts, INFO contexts, commands) are opaque pointers passed
//! straight back to the server, never dereferenced here. What Rust does read through a
//! pointer has a lifetime: a command's arguments ([`RStr`]) borrow from the call
//! ([`entry`]), a key's value borrows from its open [`Key`].
//!
//! Also here, because they turn the server's raw pointers into Rust values: the command
//! entry point ([`entry`]), the data type's callbacks ([`create_type`]) and the INFO
//! callback ([`register_info`]); each calls safe code that the layer above hands in (a
//! [`Command`], a [`DataType`], an INFO function). This file imports nothing of the module:
//! it is the bottom layer.

// The wrappers pass the server's opaque handles (contexts, INFO contexts, commands, keys)
// straight to the server's API; they are not dereferenced in Rust, so the lint's concern
// does not apply.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use redis_module::raw;
use std::borrow::Cow;
use std::ffi::{c_int, c_void, CStr};
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

pub type Ctx = *mut raw::RedisModuleCtx;
/// The server's INFO context, passed through to the `InfoAdd*` functions.
pub type InfoCtx = *mut raw::RedisModuleInfoCtx;
/// A registered command, passed through to `SetCommandInfo` and `SetCommandACLCategories`.
pub type Cmd = *mut raw::RedisModuleCommand;

/// A command argument: a Redis string the server keeps alive for the whole call.
///
/// Only ever seen by reference, borrowed from the argument vector of the call ([`entry`]):
/// not `Copy`, not constructible outside this file, so what is read from it ([`bytes`])
/// cannot outlive the call.
#[repr(transparent)]
pub struct RStr(*mut raw::RedisModuleString);

/// Calls a raw API function if the server provides it, else evaluates `$default`.
/// Private to this file.
macro_rules! api {
    ($name:ident($($arg:expr),* $(,)?) else $default:expr) => {
        // SAFETY: the function pointer was set by RedisModule_Init for this server (read
        // on the main thread after load, never written again); its arguments are handles
        // the server gave us for the current call or pointers valid for the call's duration,
        // as each wrapper below ensures.
        match unsafe { raw::$name } {
            // SAFETY: as above.
            Some(f) => unsafe { f($($arg),*) },
            None => $default,
        }
    };
}

pub const OK: c_int = raw::REDISMODULE_OK as c_int;
pub const ERR: c_int = raw::REDISMODULE_ERR as c_int;

/// A command implementation behind [`entry`].
pub trait Command {
    /// Runs the command on its arguments (`args[0]` is the command name).
    fn call(ctx: Ctx, args: &[RStr]) -> c_int;
}

/// The `extern "C"` entry point of command `C`, for `RedisModule_CreateCommand`: turns the
/// server's argument vector into a slice borrowed for this call only.
///
/// # Safety
/// Called by the server with its context and `argc` valid argument strings at `argv`.
pub unsafe extern "C" fn entry<C: Command>(
    ctx: Ctx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let args: &[RStr] = match usize::try_from(argc) {
        // SAFETY: the server passes `argc` valid string pointers at `argv`, alive until
        // the command returns; `RStr` is a transparent wrapper of such a pointer; the slice's
        // lifetime ends with this call (`C::call` cannot keep it).
        Ok(n) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv.cast::<RStr>(), n) },
        _ => &[],
    };
    C::call(ctx, args)
}

/// The bytes of a command argument, borrowed from it (so valid for the current call).
#[inline]
pub fn bytes(s: &RStr) -> &[u8] {
    let mut len: usize = 0;
    let p = api!(RedisModule_StringPtrLen(s.0, &mut len) else ptr::null());
    if p.is_null() {
        return &[];
    }
    // SAFETY: the server guarantees `len` readable bytes at `p` while the string lives and
    // is unmodified; the module never modifies an argument, and `s` borrows the argument.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
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
    api!(RedisModule_ReplyWithMap(ctx, n as std::ffi::c_long) else {
        reply_array(ctx, 2 * n);
        OK
    });
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
pub fn signal_modified(ctx: Ctx, name: &RStr) {
    api!(RedisModule_SignalModifiedKey(ctx, name.0) else ERR);
}

/// The server's cached command time in µs (Valkey, Redis 7.2+: the command's start time,
/// frozen for a whole MULTI/EXEC or script), or None where the server has no such clock.
#[inline]
pub fn cached_us() -> Option<u64> {
    Some(u64::try_from(api!(RedisModule_CachedMicroseconds() else return None)).unwrap_or(0))
}

/// The system realtime clock in µs since the epoch (0 if unreadable or before the epoch):
/// `clock_gettime(CLOCK_REALTIME)`, the clock Redis 7.0's own `gettimeofday` reads
/// (`SystemTime::now` reads it too, with more work around it on every command).
pub fn realtime_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one `timespec` through the pointer, a valid, exclusive
    // local; CLOCK_REALTIME is always supported on Linux.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) } != 0 {
        return 0;
    }
    match (u64::try_from(ts.tv_sec), u64::try_from(ts.tv_nsec)) {
        (Ok(s), Ok(ns)) => s.saturating_mul(1_000_000).saturating_add(ns / 1000),
        _ => 0,
    }
}

/// Whether the server has the cached command clock ([`cached_us`]).
pub fn has_cached_clock() -> bool {
    // SAFETY: a function pointer set once by RedisModule_Init; only whether it is set is read.
    unsafe { raw::RedisModule_CachedMicroseconds }.is_some()
}

/// The server's clock in ms, as the server itself uses it for expiries: the cached command
/// time where the server has it (Valkey, Redis 7.2+: frozen for a whole MULTI/EXEC or
/// script, so a key's TTL stays equal to `reset_after_ms`), else `RedisModule_Milliseconds`.
pub fn server_ms() -> u64 {
    if let Some(us) = cached_us() {
        return us / 1000;
    }
    u64::try_from(api!(RedisModule_Milliseconds() else 0)).unwrap_or(0)
}

/// Fires keyspace event `event` (e.g. `ratelimit.gcra`) of type `module` (`d` in
/// notify-keyspace-events) on key `name`.
pub fn notify(ctx: Ctx, event: &CStr, name: &RStr) {
    api!(RedisModule_NotifyKeyspaceEvent(ctx, raw::REDISMODULE_NOTIFY_MODULE, event.as_ptr(), name.0) else ERR);
}

/// Most `key payload` pairs [`replicate_pairs`] sends as one command.
pub const MAX_PAIRS: usize = 4;

/// Propagates `cmd k1 p1 [k2 p2 ...]` to replicas and the AOF (`RedisModule_Replicate`,
/// "sb" per pair): one effect for up to [`MAX_PAIRS`] keys; nothing for none or more.
#[inline]
pub fn replicate_pairs(ctx: Ctx, cmd: &CStr, pairs: &[(&RStr, &[u8])]) {
    // `RedisModule_Replicate` is variadic: one call of fixed arity per number of pairs.
    macro_rules! by_length {
        ($($fmt:literal => $($k:ident $p:ident),+;)+) => {
            match pairs {
                $([$(($k, $p)),+] => api!(RedisModule_Replicate(
                    ctx,
                    cmd.as_ptr(),
                    $fmt.as_ptr(),
                    $($k.0, $p.as_ptr(), $p.len()),+
                ) else ERR),)+
                _ => ERR,
            }
        };
    }
    by_length! {
        c"sb" => k1 p1;
        c"sbsb" => k1 p1, k2 p2;
        c"sbsbsb" => k1 p1, k2 p2, k3 p3;
        c"sbsbsbsb" => k1 p1, k2 p2, k3 p3, k4 p4;
    };
}

/// Propagates the call itself, as the client sent it (`RedisModule_ReplicateVerbatim`):
/// only for a call that already is an effect (`RL._APPLY`).
pub fn replicate_verbatim(ctx: Ctx) {
    api!(RedisModule_ReplicateVerbatim(ctx) else ERR);
}

/// Propagates `cmd key` to replicas and the AOF (`RedisModule_Replicate`, "s").
pub fn replicate_key(ctx: Ctx, cmd: &CStr, key: &RStr) {
    api!(RedisModule_Replicate(ctx, cmd.as_ptr(), c"s".as_ptr(), key.0) else ERR);
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

// ---- Loading: module options, INFO, commands.

/// Sets the module's options (`REDISMODULE_OPTIONS_*`), where the server supports it.
pub fn set_module_options(ctx: Ctx, options: c_int) {
    api!(RedisModule_SetModuleOptions(ctx, options) else ());
}

/// The module's INFO function, given to [`register_info`].
static INFO: OnceLock<fn(InfoCtx, bool)> = OnceLock::new();

/// Registers `info` as the module's INFO function (replacing the framework's): the server
/// calls it with an INFO context for the `InfoAdd*` functions below, and whether the INFO is
/// for a crash report. The first function registered stays.
pub fn register_info(ctx: Ctx, info: fn(InfoCtx, bool)) {
    let _ = INFO.set(info);
    api!(RedisModule_RegisterInfoFunc(ctx, Some(info_callback)) else ERR);
}

/// The INFO callback: the function given to [`register_info`].
///
/// # Safety
/// Called by the server with a valid INFO context.
unsafe extern "C" fn info_callback(ctx: InfoCtx, for_crash_report: c_int) {
    if let Some(info) = INFO.get() {
        info(ctx, for_crash_report != 0);
    }
}

pub fn info_section(ctx: InfoCtx, name: &CStr) {
    api!(RedisModule_InfoAddSection(ctx, name.as_ptr()) else 0);
}

pub fn info_u64(ctx: InfoCtx, name: &CStr, v: u64) {
    api!(RedisModule_InfoAddFieldULongLong(ctx, name.as_ptr(), v) else 0);
}

pub fn info_str(ctx: InfoCtx, name: &CStr, v: &CStr) {
    // The server copies the value; it never writes through the pointer.
    api!(RedisModule_InfoAddFieldCString(ctx, name.as_ptr(), v.as_ptr().cast_mut()) else 0);
}

/// Whether the server lets a module set its commands' ACL categories (Redis 7.2+).
pub fn can_set_acl_categories() -> bool {
    // SAFETY: a function pointer set once by RedisModule_Init; only whether it is set is read.
    unsafe { raw::RedisModule_SetCommandACLCategories }.is_some()
}

/// Whether the server has defrag callbacks for modules (Redis 7.2+, Valkey).
pub fn has_defrag_callbacks() -> bool {
    // SAFETY: a function pointer set once by RedisModule_Init; only whether it is set is read.
    unsafe { raw::RedisModule_RegisterDefragCallbacks }.is_some()
}

/// Whether the server lets a module create ACL categories (Redis 7.4+, Valkey 8+).
pub fn can_add_acl_category() -> bool {
    // SAFETY: a function pointer set once by RedisModule_Init; only whether it is set is read.
    unsafe { raw::RedisModule_AddACLCategory }.is_some()
}

/// Creates the ACL category `name` (Redis 7.4+, Valkey 8+); false if the server cannot, or
/// already has a category of that name.
pub fn add_acl_category(ctx: Ctx, name: &CStr) -> bool {
    api!(RedisModule_AddACLCategory(ctx, name.as_ptr()) else ERR) == OK
}

/// Creates a command (`RedisModule_CreateCommand`); false on failure.
pub fn create_command(
    ctx: Ctx,
    name: &CStr,
    func: raw::RedisModuleCmdFunc,
    flags: &CStr,
    (first, last, step): (c_int, c_int, c_int),
) -> bool {
    api!(RedisModule_CreateCommand(ctx, name.as_ptr(), func, flags.as_ptr(), first, last, step) else ERR)
        == OK
}

/// Creates subcommand `name` of container command `parent`
/// (`RedisModule_CreateSubcommand`); false on failure.
pub fn create_subcommand(
    parent: Cmd,
    name: &CStr,
    func: raw::RedisModuleCmdFunc,
    flags: &CStr,
    (first, last, step): (c_int, c_int, c_int),
) -> bool {
    api!(RedisModule_CreateSubcommand(parent, name.as_ptr(), func, flags.as_ptr(), first, last, step) else ERR)
        == OK
}

/// A server config's value (`CONFIG GET name`), if the server answers it.
pub fn config_get(ctx: Ctx, name: &CStr) -> Option<Vec<u8>> {
    let reply = api!(RedisModule_Call(ctx, c"CONFIG".as_ptr(), c"cc".as_ptr(), c"GET".as_ptr(), name.as_ptr()) else ptr::null_mut());
    if reply.is_null() {
        return None;
    }
    // CONFIG GET answers `[name, value]` (a map on RESP3 callers: Call is RESP2 here).
    let value = api!(RedisModule_CallReplyArrayElement(reply, 1) else ptr::null_mut());
    let mut out = None;
    if !value.is_null() {
        let mut len: usize = 0;
        let p = api!(RedisModule_CallReplyStringPtr(value, &mut len) else ptr::null());
        if !p.is_null() {
            // SAFETY: the server returned `len` bytes at `p`, alive until the reply is freed.
            out = Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec());
        }
    }
    api!(RedisModule_FreeCallReply(reply) else ());
    out
}

/// Whether this node serves a key now (Redis Cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Here,
    /// Its slot is another node's, or the key moved out of a migrating slot.
    Elsewhere,
    /// The cluster is down.
    Down,
}

/// Whether this node serves `key` (in the selected database) now: the server's own routing
/// check, which a module's call of a keyed command goes through on a cluster node.
pub fn key_served(ctx: Ctx, key: &RStr) -> Served {
    let reply =
        api!(RedisModule_Call(ctx, c"EXISTS".as_ptr(), c"s".as_ptr(), key.0) else ptr::null_mut());
    if !reply.is_null() {
        api!(RedisModule_FreeCallReply(reply) else ());
        return Served::Here;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        // EPERM (EACCES before Redis 7.2).
        Some(libc::EPERM) | Some(libc::EACCES) => Served::Elsewhere,
        Some(libc::ENETDOWN) | Some(libc::EROFS) => Served::Down,
        _ => Served::Here,
    }
}

/// `CLUSTER NODES` as the server answers it (None where it does not).
pub fn cluster_nodes(ctx: Ctx) -> Option<Vec<u8>> {
    let reply = api!(RedisModule_Call(ctx, c"CLUSTER".as_ptr(), c"c".as_ptr(), c"NODES".as_ptr()) else ptr::null_mut());
    if reply.is_null() {
        return None;
    }
    let mut len: usize = 0;
    let p = api!(RedisModule_CallReplyStringPtr(reply, &mut len) else ptr::null());
    let out = (!p.is_null()).then(|| {
        // SAFETY: the server returned `len` bytes at `p`, alive until the reply is freed.
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec()
    });
    api!(RedisModule_FreeCallReply(reply) else ());
    out
}

/// What [`on_loading`] calls at the start of a full load of the dataset.
static ON_LOADING: OnceLock<fn()> = OnceLock::new();

/// Calls `f` when the server starts loading a whole dataset (an RDB, an AOF, a full sync
/// from a primary, DEBUG RELOAD), before anything is loaded; false if the server cannot
/// tell.
pub fn on_loading(ctx: Ctx, f: fn()) -> bool {
    let _ = ON_LOADING.set(f);
    let event = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_LOADING,
        dataver: 1,
    };
    api!(RedisModule_SubscribeToServerEvent(ctx, event, Some(loading_callback)) else ERR) == OK
}

unsafe extern "C" fn loading_callback(
    _ctx: Ctx,
    _event: raw::RedisModuleEvent,
    sub: u64,
    _data: *mut c_void,
) {
    let start = [
        raw::REDISMODULE_SUBEVENT_LOADING_RDB_START,
        raw::REDISMODULE_SUBEVENT_LOADING_AOF_START,
        raw::REDISMODULE_SUBEVENT_LOADING_REPL_START,
    ];
    if start.contains(&sub) {
        if let Some(f) = ON_LOADING.get() {
            guarded(f);
        }
    }
}

/// The command `name` registered by this module, if any.
pub fn get_command(ctx: Ctx, name: &CStr) -> Option<Cmd> {
    let cmd = api!(RedisModule_GetCommand(ctx, name.as_ptr()) else ptr::null_mut());
    (!cmd.is_null()).then_some(cmd)
}

/// Sets a command's info (`RedisModule_SetCommandInfo`, which copies it all); false on
/// failure. The pointers in `info` must be valid C strings and zero-terminated arrays.
pub fn set_command_info(cmd: Cmd, info: &mut raw::RedisModuleCommandInfo) -> bool {
    api!(RedisModule_SetCommandInfo(cmd, info) else ERR) == OK
}

/// Sets a command's ACL categories (space separated); false on failure.
pub fn set_acl_categories(cmd: Cmd, categories: &CStr) -> bool {
    api!(RedisModule_SetCommandACLCategories(cmd, categories.as_ptr()) else ERR) == OK
}

/// An all-zero command argument: the terminator of an argument array, and "unset" for
/// every field.
pub fn blank_arg() -> raw::RedisModuleCommandArg {
    // SAFETY: a plain C struct of pointers and integers, for which all-zero (null pointers,
    // 0) is valid and the documented terminator / unset value.
    unsafe { std::mem::zeroed() }
}

/// An all-zero key spec: the terminator of a key-spec array, and "unset" for every field.
pub fn blank_key_spec() -> raw::RedisModuleCommandKeySpec {
    // SAFETY: a plain C struct (integers, a pointer, unions of integers), for which
    // all-zero is valid and the documented terminator / unset value.
    unsafe { std::mem::zeroed() }
}

// ---- The data type: its values and its callbacks.

/// The module's data type, whose values are `Self`, described by the layer that owns it
/// (`datatype.rs`): what a value means, how it packs and how it is encoded is that layer's
/// business; how a value is held (a word, a boxed pair, a box: [`Owned`]), handed to the
/// server and read back ([`Key::value`], the callbacks of [`create_type`]) is this file's.
///
/// A module has one data type, and implements `DataType` once: [`create_type`] creates it
/// (once), and the `T` of [`Key::value`], [`Key::set_value`] and [`Key::replace_value`] is
/// that type.
///
/// Only the type's callbacks call these functions (RDB, AOF rewrite, DEBUG DIGEST, MEMORY
/// USAGE, COPY), never a command.
pub trait DataType: Clone + 'static {
    /// The value a packed word holds (low bit set), None if it is not one.
    fn unpack(word: usize) -> Option<Self>;
    /// The value a pair of words holds, None if it is not one.
    fn unpack_pair(pair: [u64; 2]) -> Option<Self>;
    /// The value to hand to the server for `v`: packed into a word or a pair of words when
    /// it can be, else boxed.
    fn value_of(v: Self) -> Owned<Self>;
    /// RDB load: the value whose bytes [`DataType::rdb_save`] gave, at encoding version
    /// `encver`; None refuses them.
    fn rdb_load(encver: c_int, bytes: &[u8]) -> Option<Self>;
    /// RDB save and DEBUG DIGEST: calls `f` with the bytes of `v`.
    fn rdb_save(v: &Self, f: impl FnOnce(&[u8]));
    /// AOF rewrite: calls `f` with the command and its payload after the key that recreate
    /// `v` (the server appends the key's PEXPIREAT itself).
    fn aof_rewrite(v: &Self, f: impl FnOnce(&CStr, &[u8]));
    /// MEMORY USAGE of a boxed value: the box and what it owns.
    fn mem_usage(v: &Self) -> usize;
    /// The module's node data saved in RDB beside the keys (before them): None when there
    /// is none (then, where the server allows it, the RDB holds no record of the module).
    fn aux_save() -> Option<Vec<u8>>;
    /// Loads what [`DataType::aux_save`] gave; false refuses it (the load fails).
    fn aux_load(bytes: &[u8]) -> bool;
}

/// The server's handle of the module's data type, null until [`create_type`] writes it
/// (nothing else does). Read by non-generic functions only ([`Key::type_value`],
/// [`Key::set_raw`], [`Key::replace_raw`]), so that it stays internal to this library and is
/// read straight, not through the GOT, on the command path.
static TYPE: AtomicPtr<raw::RedisModuleType> = AtomicPtr::new(ptr::null_mut());

/// Creates the module's data type `T` (`RedisModule_CreateDataType`, at load) named `name`
/// (9 characters), at RDB encoding version `encver`; false on failure, or if it was created
/// already.
pub fn create_type<T: DataType>(ctx: Ctx, name: &CStr, encver: c_int) -> bool {
    create_type_with(ctx, name, encver, type_methods::<T>())
}

/// [`create_type`] with `T`'s callbacks (not generic: it alone writes [`TYPE`]).
fn create_type_with(
    ctx: Ctx,
    name: &CStr,
    encver: c_int,
    mut methods: raw::RedisModuleTypeMethods,
) -> bool {
    if !TYPE.load(Ordering::Relaxed).is_null() {
        return false;
    }
    // The server copies the methods.
    let t = api!(RedisModule_CreateDataType(ctx, name.as_ptr(), encver, &mut methods) else ptr::null_mut());
    TYPE.store(t, Ordering::Relaxed);
    !t.is_null()
}

/// Whether a value word of our type is a packed word (low bit set; a box is aligned).
fn is_word(v: *const c_void) -> bool {
    (v as usize) & 1 == 1
}

/// The low bits of a value pointer that mark a boxed pair of words (`Box<[u64; 2]>`, 8-byte
/// aligned, with bit 1 set; a packed word has bit 0 set, a box of the value neither).
const PAIR_TAG: usize = 2;

/// Whether a value of the module's type is a boxed pair of words.
fn is_pair(v: *const c_void) -> bool {
    (v as usize) & 3 == PAIR_TAG
}

/// The pair behind a value for which [`is_pair`] holds.
fn pair_ptr(v: *const c_void) -> *mut [u64; 2] {
    ((v as usize) & !PAIR_TAG) as *mut [u64; 2]
}

/// A value of data type `T`, owned until handed to the server: packed into the word itself
/// (low bit 1), a pair of words in a box (bit 1, see [`PAIR_TAG`]), or a `Box<T>` (aligned,
/// so low bits 0). Freed on drop.
pub struct Owned<T>(*mut c_void, PhantomData<Box<T>>);

impl<T> Owned<T> {
    /// A packed word; None unless its low bit is set.
    pub fn word(w: usize) -> Option<Owned<T>> {
        (w & 1 == 1).then_some(Owned(w as *mut c_void, PhantomData))
    }

    /// A pair of words in a box (16 bytes).
    pub fn pair(p: [u64; 2]) -> Owned<T> {
        let b = Box::into_raw(Box::new(p));
        Owned(((b as usize) | PAIR_TAG) as *mut c_void, PhantomData)
    }

    /// A boxed value.
    pub fn boxed(v: T) -> Owned<T> {
        Owned(Box::into_raw(Box::new(v)).cast(), PhantomData)
    }

    /// A value of type `T` the server gives back (or null): ours again.
    fn from_raw(v: *mut c_void) -> Owned<T> {
        Owned(v, PhantomData)
    }

    /// Hands the value to the server (which frees it with the type's `free`).
    fn into_raw(self) -> *mut c_void {
        let p = self.0;
        std::mem::forget(self);
        p
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if self.0.is_null() || is_word(self.0) {
            return;
        }
        if is_pair(self.0) {
            // SAFETY: a pair `Owned` is a pointer from `Box::into_raw` (`Owned::pair`) with
            // `PAIR_TAG` added, owned by `self`; `pair_ptr` takes the tag off.
            drop(unsafe { Box::from_raw(pair_ptr(self.0)) });
            return;
        }
        // SAFETY: any other `Owned<T>` is a pointer from `Box::<T>::into_raw`
        // (`Owned::boxed`), or a value of type `T` the server handed back to be freed (so
        // made the same way: a type's values are the `Owned<T>` of its callbacks and of
        // `Key::set_value`/`replace_value`), owned by `self`.
        drop(unsafe { Box::from_raw(self.0.cast::<T>()) });
    }
}

/// The value of a key of data type `T`, borrowed from the open key.
pub enum Stored<'a, T> {
    /// A packed word.
    Word(usize),
    /// A boxed value, changed in place.
    Boxed(&'a mut T),
    /// A value packed into a boxed pair of words, rewritten in place.
    Pair(&'a mut [u64; 2]),
}

/// An open key, closed on drop.
pub struct Key {
    ptr: *mut raw::RedisModuleKey,
}

impl Key {
    pub fn open(ctx: Ctx, name: &RStr, write: bool) -> Key {
        let mode = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        } as c_int;
        let ptr = api!(RedisModule_OpenKey(ctx, name.0, mode) else ptr::null_mut());
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

    /// The key's value pointer if it is of the module's type.
    fn type_value(&self) -> Option<*mut c_void> {
        let ty = TYPE.load(Ordering::Relaxed);
        // A null type (not created) or another type's key: not ours.
        if ty.is_null() || api!(RedisModule_ModuleTypeGetType(self.ptr) else ptr::null_mut()) != ty
        {
            return None;
        }
        Some(api!(RedisModule_ModuleTypeGetValue(self.ptr) else ptr::null_mut()))
    }

    /// The key's value if it is of the module's type `T` (None for any other key), borrowed
    /// from the key: one view at a time, which ends before the key is written or closed.
    pub fn value<T: DataType>(&mut self) -> Option<Stored<'_, T>> {
        let v = self.type_value()?;
        if is_word(v) {
            return Some(Stored::Word(v as usize));
        }
        if is_pair(v) {
            // SAFETY: a value of type `T` tagged as a pair is a `Box<[u64; 2]>` this module
            // created (`Owned::pair`), owned by the key's value while it is stored; the
            // `&mut` borrows `self` exclusively, as for a boxed value below.
            return unsafe { pair_ptr(v).as_mut() }.map(Stored::Pair);
        }
        // SAFETY: a key of the module's type holds values made by the callbacks of `T` (the
        // module's one `DataType`, see there) or handed over as `Owned<T>`; one that is
        // neither a word nor a pair is a `Box<T>` pointer (`Owned::boxed`), owned by the key's value while it is
        // stored. The `&mut` borrows `self` exclusively: no other view of this key exists
        // while it lives, and the key can be neither written (`set_value`, `replace_value`,
        // `delete` take `&mut self`) nor closed before it ends. Commands run on the server's
        // main thread only. (Two `Key`s open on the same key at once do not happen: a
        // command opens each of its keys once, and RL.ALL refuses duplicate keys.)
        unsafe { v.cast::<T>().as_mut() }.map(Stored::Boxed)
    }

    /// Stores a new value of the module's type `T` (the key takes ownership on success;
    /// freed on failure).
    pub fn set_value<T: DataType>(&mut self, v: Owned<T>) -> bool {
        let ok = self.set_raw(v.0);
        if ok {
            v.into_raw();
        }
        ok
    }

    /// `RedisModule_ModuleTypeSetValue` with the module's type.
    fn set_raw(&mut self, v: *mut c_void) -> bool {
        let ty = TYPE.load(Ordering::Relaxed);
        api!(RedisModule_ModuleTypeSetValue(self.ptr, ty, v) else ERR) == OK
    }

    /// Swaps in a new value of the module's type `T`, keeping the key and its TTL; the old
    /// one (of type `T`: the server refuses to replace another type's value) is freed.
    pub fn replace_value<T: DataType>(&mut self, v: Owned<T>) -> bool {
        let mut old: *mut c_void = ptr::null_mut();
        let ok = self.replace_raw(v.0, &mut old);
        if ok {
            v.into_raw();
            // The key no longer holds the old value: ours to free.
            drop(Owned::<T>::from_raw(old));
        }
        ok
    }

    /// `RedisModule_ModuleTypeReplaceValue` with the module's type; on success the old
    /// value is in `old`.
    fn replace_raw(&mut self, v: *mut c_void, old: &mut *mut c_void) -> bool {
        let ty = TYPE.load(Ordering::Relaxed);
        api!(RedisModule_ModuleTypeReplaceValue(self.ptr, ty, v, old) else ERR) == OK
    }

    pub fn delete(&mut self) {
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
        // SAFETY: the server guarantees `len` bytes at `p` while the key stays open and
        // unmodified: the slice borrows the key, and the module opens it read-only for DMA.
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

// ---- The data type's callbacks, each calling `T`'s functions.

/// The callbacks of data type `T`: RDB, AOF rewrite, DEBUG DIGEST, MEMORY USAGE, COPY and
/// freeing. Values are [`Owned<T>`] words, pairs or boxes.
fn type_methods<T: DataType>() -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load::<T>),
        rdb_save: Some(rdb_save::<T>),
        aof_rewrite: Some(aof_rewrite::<T>),
        mem_usage: Some(mem_usage::<T>),
        digest: Some(digest::<T>),
        free: Some(free::<T>),
        aux_load: Some(aux_load::<T>),
        aux_save: Some(aux_save::<T>),
        aux_save2: Some(aux_save2::<T>),
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as c_int,
        free_effort: None,
        unlink: None,
        copy: Some(copy::<T>),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
    }
}

/// The value behind a value pointer the server hands to a callback (unpacked if packed).
///
/// # Safety
/// `value` is a value of type `T`, alive for `'a`.
unsafe fn read<'a, T: DataType>(value: *const c_void) -> Option<Cow<'a, T>> {
    if is_word(value) {
        return T::unpack(value as usize).map(Cow::Owned);
    }
    if is_pair(value) {
        // SAFETY: the caller passes a value of type `T`; tagged as a pair, so a
        // `Box<[u64; 2]>` this module created, which the server keeps alive meanwhile.
        let pair = unsafe { pair_ptr(value).as_ref() }.copied()?;
        return T::unpack_pair(pair).map(Cow::Owned);
    }
    // SAFETY: the caller passes a value of type `T`; neither, so a `Box<T>` pointer this
    // module created, which the server keeps alive during the callback.
    unsafe { value.cast::<T>().as_ref() }.map(Cow::Borrowed)
}

unsafe extern "C" fn rdb_load<T: DataType>(
    rdb: *mut raw::RedisModuleIO,
    encver: c_int,
) -> *mut c_void {
    let mut len: usize = 0;
    let p = api!(RedisModule_LoadStringBuffer(rdb, &mut len) else ptr::null_mut());
    if p.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: the server returned `len` bytes at `p`, ours until freed just below.
    let loaded = T::rdb_load(encver, unsafe {
        std::slice::from_raw_parts(p.cast::<u8>(), len)
    });
    api!(RedisModule_Free(p.cast()) else ());
    if api!(RedisModule_IsIOError(rdb) else 0) != 0 {
        return ptr::null_mut();
    }
    loaded.map_or(ptr::null_mut(), |v| T::value_of(v).into_raw())
}

unsafe extern "C" fn rdb_save<T: DataType>(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: the server passes a value of our type, alive during the callback.
    if let Some(v) = unsafe { read::<T>(value) } {
        T::rdb_save(&v, |buf| {
            api!(RedisModule_SaveStringBuffer(rdb, buf.as_ptr().cast(), buf.len()) else ());
        });
    }
}

unsafe extern "C" fn aof_rewrite<T: DataType>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: the server passes a value of our type, alive during the callback.
    if let Some(v) = unsafe { read::<T>(value) } {
        T::aof_rewrite(&v, |cmd, payload| {
            api!(RedisModule_EmitAOF(
                aof,
                cmd.as_ptr(),
                c"sb".as_ptr(),
                key,
                payload.as_ptr(),
                payload.len()
            ) else ());
        });
    }
}

unsafe extern "C" fn mem_usage<T: DataType>(value: *const c_void) -> usize {
    if is_word(value) {
        // The value is the word itself: report that word, never 0 (Valkey 8.1 counts only
        // what this callback says, and MEMORY USAGE 0 would read as "no value").
        return std::mem::size_of::<*mut c_void>();
    }
    if is_pair(value) {
        return std::mem::size_of::<[u64; 2]>();
    }
    // SAFETY: the server passes a value of our type, alive during the callback.
    unsafe { read::<T>(value) }.map_or(0, |v| T::mem_usage(&v))
}

unsafe extern "C" fn digest<T: DataType>(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: the server passes a value of our type, alive during the callback.
    if let Some(v) = unsafe { read::<T>(value) } {
        T::rdb_save(&v, |buf| {
            api!(RedisModule_DigestAddStringBuffer(md, buf.as_ptr().cast(), buf.len()) else ());
            api!(RedisModule_DigestEndSequence(md) else ());
        });
    }
}

/// Node data, the server before 7.2 (`aux_save`: a record is always written, so it is
/// always saved, empty or not).
unsafe extern "C" fn aux_save<T: DataType>(rdb: *mut raw::RedisModuleIO, _when: c_int) {
    let bytes = T::aux_save().unwrap_or_default();
    api!(RedisModule_SaveStringBuffer(rdb, bytes.as_ptr().cast(), bytes.len()) else ());
}

/// Node data, Redis 7.2+ and Valkey (`aux_save2`): nothing is written when there is none, so
/// such an RDB loads without the module.
unsafe extern "C" fn aux_save2<T: DataType>(rdb: *mut raw::RedisModuleIO, _when: c_int) {
    if let Some(bytes) = T::aux_save() {
        api!(RedisModule_SaveStringBuffer(rdb, bytes.as_ptr().cast(), bytes.len()) else ());
    }
}

unsafe extern "C" fn aux_load<T: DataType>(
    rdb: *mut raw::RedisModuleIO,
    _encver: c_int,
    _when: c_int,
) -> c_int {
    let mut len: usize = 0;
    let p = api!(RedisModule_LoadStringBuffer(rdb, &mut len) else ptr::null_mut());
    if p.is_null() {
        return ERR;
    }
    // SAFETY: the server returned `len` bytes at `p`, ours until freed just below.
    let ok = T::aux_load(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) });
    api!(RedisModule_Free(p.cast()) else ());
    if ok && api!(RedisModule_IsIOError(rdb) else 0) == 0 {
        OK
    } else {
        ERR
    }
}

unsafe extern "C" fn free<T: DataType>(value: *mut c_void) {
    // The server gives back a value of our type to free: ours again.
    drop(Owned::<T>::from_raw(value));
}

unsafe extern "C" fn copy<T: DataType>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    if is_word(value) {
        // A word owns nothing: it is its own copy.
        return value.cast_mut();
    }
    // SAFETY: the server passes a value of our type, alive during the callback.
    match unsafe { read::<T>(value) } {
        Some(v) => T::value_of(v.into_owned()).into_raw(),
        None => ptr::null_mut(),
    }
}

// ---- Blocked clients, timers and events (`WAIT`: `wait.rs`).

/// A string the module owns (not tied to a call): a waiting client's key name.
pub struct OwnedStr(RStr);

impl OwnedStr {
    /// A copy of `bytes` (None if the server cannot make one).
    pub fn new(bytes: &[u8]) -> Option<OwnedStr> {
        let s = api!(RedisModule_CreateString(ptr::null_mut(), bytes.as_ptr().cast(), bytes.len()) else ptr::null_mut());
        (!s.is_null()).then_some(OwnedStr(RStr(s)))
    }
}

// SAFETY: the string is the module's own (no context, no auto-memory): the server's string
// functions may be called on it from any thread that holds the module's lock, and the
// module only touches it from the main thread (the waiters' registry is behind a mutex).
unsafe impl Send for OwnedStr {}

impl std::ops::Deref for OwnedStr {
    type Target = RStr;
    fn deref(&self) -> &RStr {
        &self.0
    }
}

impl Drop for OwnedStr {
    fn drop(&mut self) {
        // Created with no context (`new`): freed with none.
        api!(RedisModule_FreeString(ptr::null_mut(), self.0 .0) else ());
    }
}

/// A blocked client's handle (`RedisModule_BlockClient`), passed back to the server only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockedClient(*mut raw::RedisModuleBlockedClient);

// SAFETY: a blocked client's handle is made to be passed between threads (the server's
// own API: `RedisModule_UnblockClient` may be called from any thread); the module passes it
// back to the server only.
unsafe impl Send for BlockedClient {}

/// Frees a blocked client's handle after a timeout or a disconnection (the server frees it
/// once the module unblocks it; there is no one left to reply to).
pub fn release_blocked(bc: BlockedClient) {
    api!(RedisModule_UnblockClient(bc.0, ptr::null_mut()) else ERR);
}

/// What the server calls for a blocked client: its reply once unblocked with a value
/// ([`unblock`]), its reply on a timeout or `CLIENT UNBLOCK`, and on disconnection.
pub struct BlockHandlers {
    pub reply: fn(Ctx, Option<&(dyn std::any::Any + 'static)>) -> c_int,
    pub timeout: fn(Ctx, BlockedClient) -> c_int,
    pub disconnected: fn(BlockedClient),
}

static BLOCK_HANDLERS: OnceLock<&'static BlockHandlers> = OnceLock::new();

/// Sets what blocked clients call (once, at load: `handlers` lives for the program).
pub fn set_block_handlers(handlers: &'static BlockHandlers) {
    let _ = BLOCK_HANDLERS.set(handlers);
}

fn block_handlers() -> Option<&'static BlockHandlers> {
    BLOCK_HANDLERS.get().copied()
}

/// Runs a callback of the module's from a server callback: a panic is caught there (it
/// would abort the server), never let through.
fn guarded<R: Default>(f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_default()
}

/// Blocks the calling client with no server timeout (the module times it out on its own
/// clock); None if the server cannot block it here.
pub fn block_client(ctx: Ctx) -> Option<BlockedClient> {
    let bc = api!(RedisModule_BlockClient(ctx, Some(block_reply), Some(block_timeout), Some(block_free), 0) else ptr::null_mut());
    if bc.is_null() {
        return None;
    }
    api!(RedisModule_SetDisconnectCallback(bc, Some(block_disconnected)) else ());
    Some(BlockedClient(bc))
}

/// Unblocks `bc`: the server then calls the reply handler with `value`.
pub fn unblock<T: std::any::Any>(bc: BlockedClient, value: T) {
    let boxed: Box<Box<dyn std::any::Any>> = Box::new(Box::new(value));
    let p = Box::into_raw(boxed);
    if api!(RedisModule_UnblockClient(bc.0, p.cast()) else ERR) != OK {
        // SAFETY: the server did not take it: still ours, from `Box::into_raw` above.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// The blocked client a reply or timeout callback is about.
pub fn blocked_handle(ctx: Ctx) -> BlockedClient {
    BlockedClient(api!(RedisModule_GetBlockedClientHandle(ctx) else ptr::null_mut()))
}

unsafe extern "C" fn block_reply(
    ctx: Ctx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let p = api!(RedisModule_GetBlockedClientPrivateData(ctx) else ptr::null_mut());
    // SAFETY: a private value is only ever set by `unblock`: a `Box<Box<dyn Any>>`, alive
    // until `block_free`, after this callback.
    let value = unsafe { p.cast::<Box<dyn std::any::Any>>().as_ref() }.map(|b| &**b);
    guarded(|| block_handlers().map_or(OK, |h| (h.reply)(ctx, value)))
}

unsafe extern "C" fn block_timeout(
    ctx: Ctx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let bc = blocked_handle(ctx);
    guarded(|| block_handlers().map_or(OK, |h| (h.timeout)(ctx, bc)))
}

unsafe extern "C" fn block_free(_ctx: Ctx, privdata: *mut c_void) {
    if !privdata.is_null() {
        // SAFETY: set by `unblock` from `Box::into_raw`; the server frees it once, here.
        drop(unsafe { Box::from_raw(privdata.cast::<Box<dyn std::any::Any>>()) });
    }
}

unsafe extern "C" fn block_disconnected(_ctx: Ctx, bc: *mut raw::RedisModuleBlockedClient) {
    guarded(|| {
        if let Some(h) = block_handlers() {
            (h.disconnected)(BlockedClient(bc));
        }
    });
}

/// The database a call runs in.
pub fn selected_db(ctx: Ctx) -> c_int {
    api!(RedisModule_GetSelectedDb(ctx) else 0)
}

/// Selects database `db` for the rest of a timer's or event's context.
pub fn select_db(ctx: Ctx, db: c_int) -> bool {
    api!(RedisModule_SelectDb(ctx, db) else ERR) == OK
}

/// What [`create_timer`] calls, with the timer's `u64` value.
static TIMER_FN: OnceLock<fn(Ctx, u64)> = OnceLock::new();

/// Sets the function every timer calls (once, at load).
pub fn set_timer_fn(f: fn(Ctx, u64)) {
    let _ = TIMER_FN.set(f);
}

/// Calls the timer function with `value` in `ms` ms (a context that may open keys and
/// propagate: the server propagates what it replicates when the callback returns).
pub fn create_timer(ctx: Ctx, ms: u64, value: u64) -> u64 {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    api!(RedisModule_CreateTimer(ctx, ms, Some(timer_callback), value as usize as *mut c_void) else 0)
}

/// Stops a timer that has not fired.
pub fn stop_timer(ctx: Ctx, id: u64) {
    api!(RedisModule_StopTimer(ctx, id, ptr::null_mut()) else ERR);
}

unsafe extern "C" fn timer_callback(ctx: Ctx, data: *mut c_void) {
    if let Some(f) = TIMER_FN.get() {
        guarded(|| f(ctx, data as usize as u64));
    }
}

/// What [`on_key_gone`] calls.
static KEY_GONE_FN: OnceLock<fn(Ctx, &RStr)> = OnceLock::new();

/// Calls `f(ctx, key)` when a key is deleted, expires or is evicted (keyspace events `g`,
/// `x`, `e`; the callback may not write: it may create a timer).
pub fn on_key_gone(ctx: Ctx, f: fn(Ctx, &RStr)) -> bool {
    let _ = KEY_GONE_FN.set(f);
    let types = (raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED) as c_int;
    api!(RedisModule_SubscribeToKeyspaceEvents(ctx, types, Some(key_gone_callback)) else ERR) == OK
}

unsafe extern "C" fn key_gone_callback(
    ctx: Ctx,
    _type: c_int,
    event: *const std::ffi::c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    let Some(f) = KEY_GONE_FN.get() else {
        return OK;
    };
    if key.is_null() || event.is_null() {
        return OK;
    }
    // SAFETY: the server passes a zero-terminated event name, alive during the callback.
    let event = unsafe { CStr::from_ptr(event) }.to_bytes();
    // Generic events that remove a key (not `expire`, `rename_to`, ...).
    if !matches!(
        event,
        b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from"
    ) {
        return OK;
    }
    // `k` borrows the server's string (an `RStr` frees nothing).
    let k = RStr(key);
    guarded(|| f(ctx, &k));
    OK
}

/// What [`on_role_change`] calls.
static ROLE_FN: OnceLock<fn(Ctx, bool)> = OnceLock::new();

/// Calls `f(ctx, became_replica)` when the server turns replica or primary.
pub fn on_role_change(ctx: Ctx, f: fn(Ctx, bool)) -> bool {
    let _ = ROLE_FN.set(f);
    let event = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        dataver: 1,
    };
    api!(RedisModule_SubscribeToServerEvent(ctx, event, Some(role_callback)) else ERR) == OK
}

unsafe extern "C" fn role_callback(
    ctx: Ctx,
    _event: raw::RedisModuleEvent,
    sub: u64,
    _data: *mut c_void,
) {
    if let Some(f) = ROLE_FN.get() {
        let replica = sub == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA;
        guarded(|| f(ctx, replica));
    }
}
