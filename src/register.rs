//! The command table: names, flags, arity, key specs and ACL categories, registered at load
//! with `RedisModule_CreateCommand` + `RedisModule_SetCommandInfo` (both Redis 7.0), so
//! `COMMAND INFO`, `COMMAND GETKEYS` and cluster routing work as for built-in commands.

use crate::commands::{self, apply, clock, info, lease, rate, throttle, Handler};
use crate::rm::{self, api, Ctx};
use redis_module::raw;
use std::ffi::{c_int, CStr};
use std::ptr;

/// How a command touches its key (argument 1), if it has one.
#[derive(Clone, Copy)]
enum Keys {
    None,
    /// Read-write, may update the value.
    Update,
    /// Read-only access.
    Read,
    /// Overwrites the value.
    Overwrite,
}

struct Command {
    name: &'static CStr,
    func: raw::RedisModuleCmdFunc,
    flags: &'static CStr,
    arity: c_int,
    keys: Keys,
    /// ACL categories where the server supports setting them (7.2+, Valkey).
    acl: &'static CStr,
    summary: &'static CStr,
}

/// One `extern "C"` entry point per handler.
macro_rules! entry {
    ($name:ident, $handler:path) => {
        unsafe extern "C" fn $name(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            commands::dispatch(ctx, argv, argc, $handler as Handler)
        }
    };
}

entry!(c_gcra, rate::gcra);
entry!(c_tokenbucket, rate::tokenbucket);
entry!(c_sliding, rate::sliding);
entry!(c_fixed, rate::fixed);
entry!(c_log, rate::log);
entry!(c_queue, rate::queue);
entry!(c_acquire, rate::acquire);
entry!(c_release, lease::release);
entry!(c_renew, lease::renew);
entry!(c_throttle, throttle::throttle);
entry!(c_info, info::info);
entry!(c_clock, clock::clock);
entry!(c_apply, apply::apply);

/// The ACL category the module adds where the server supports it.
pub const CATEGORY: &CStr = c"ratelimit";

fn table() -> [Command; 13] {
    const RATE: &CStr = c"write deny-oom fast";
    const RATE_ACL: &CStr = c"write fast ratelimit";
    [
        Command {
            name: c"rl.gcra",
            func: Some(c_gcra),
            flags: RATE,
            arity: -5,
            keys: Keys::Update,
            acl: RATE_ACL,
            summary: c"GCRA rate limit: burst at once, then count per period_ms",
        },
        Command {
            name: c"rl.tokenbucket",
            func: Some(c_tokenbucket),
            flags: RATE,
            arity: -5,
            keys: Keys::Update,
            acl: RATE_ACL,
            summary: c"Token bucket: capacity tokens, refill_tokens every refill_period_ms",
        },
        Command {
            name: c"rl.sliding",
            func: Some(c_sliding),
            flags: RATE,
            arity: -4,
            keys: Keys::Update,
            acl: RATE_ACL,
            summary: c"Sliding window counter: limit per trailing window_ms (weighted estimate)",
        },
        Command {
            name: c"rl.fixed",
            func: Some(c_fixed),
            flags: RATE,
            arity: -4,
            keys: Keys::Update,
            acl: RATE_ACL,
            summary: c"Fixed window counter: limit per aligned window_ms",
        },
        Command {
            name: c"rl.log",
            func: Some(c_log),
            flags: RATE,
            arity: -4,
            keys: Keys::Update,
            acl: RATE_ACL,
            summary: c"Exact sliding log: limit per trailing window_ms",
        },
        Command {
            name: c"rl.queue",
            func: Some(c_queue),
            flags: RATE,
            arity: -4,
            keys: Keys::Update,
            acl: RATE_ACL,
            summary: c"Leaky bucket as a queue: one request per interval_ms, capacity waiting",
        },
        Command {
            name: c"rl.acquire",
            func: Some(c_acquire),
            flags: RATE,
            arity: -4,
            keys: Keys::Update,
            acl: RATE_ACL,
            summary:
                c"Concurrency limit: acquires a lease of lease_ms if fewer than limit are held",
        },
        Command {
            name: c"rl.release",
            func: Some(c_release),
            flags: c"write fast",
            arity: 3,
            keys: Keys::Update,
            acl: c"write fast ratelimit",
            summary: c"Releases a lease acquired with RL.ACQUIRE",
        },
        Command {
            name: c"rl.renew",
            func: Some(c_renew),
            flags: c"write fast",
            arity: 4,
            keys: Keys::Update,
            acl: c"write fast ratelimit",
            summary: c"Extends a lease acquired with RL.ACQUIRE to now + lease_ms",
        },
        Command {
            name: c"cl.throttle",
            func: Some(c_throttle),
            flags: RATE,
            arity: -5,
            keys: Keys::Update,
            acl: RATE_ACL,
            summary: c"redis-cell compatible GCRA throttle",
        },
        Command {
            name: c"rl.info",
            func: Some(c_info),
            flags: c"readonly fast",
            arity: 2,
            keys: Keys::Read,
            acl: c"read fast ratelimit",
            summary: c"Shows a rate-limit key's algorithm, stored state and TTL",
        },
        Command {
            name: c"rl.clock",
            func: Some(c_clock),
            flags: c"fast",
            arity: -2,
            keys: Keys::None,
            acl: c"fast ratelimit",
            summary: c"Test clock (only with ratelimit.test-clock yes): GET, SET, ADVANCE, REAL",
        },
        Command {
            name: c"rl._apply",
            func: Some(c_apply),
            flags: c"write",
            arity: -3,
            keys: Keys::Overwrite,
            acl: c"write ratelimit",
            summary: c"Internal: applies a replicated state (primary link and AOF only)",
        },
    ]
}

static INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// A key spec for "the key is argument 1", plus the zeroed terminator.
fn key_specs(keys: Keys) -> Option<&'static mut [raw::RedisModuleCommandKeySpec; 2]> {
    let flags = match keys {
        Keys::None => return None,
        Keys::Update => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE,
        Keys::Read => raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
        Keys::Overwrite => raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
    };
    // SAFETY: all-zero is the documented terminator / "unset" for these C structs.
    let mut spec: raw::RedisModuleCommandKeySpec = unsafe { std::mem::zeroed() };
    spec.flags = u64::from(flags);
    spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    spec.bs.index.pos = 1;
    spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    spec.fk.range.lastkey = 0;
    spec.fk.range.keystep = 1;
    spec.fk.range.limit = 0;
    // Leaked once at load: Redis may keep pointers into it.
    Some(Box::leak(Box::new([spec, unsafe { std::mem::zeroed() }])))
}

/// Registers every command; `Err` with a message on failure.
pub fn register(ctx: Ctx) -> Result<(), String> {
    let acl_ok = unsafe { raw::RedisModule_SetCommandACLCategories }.is_some()
        && api!(RedisModule_AddACLCategory(ctx, CATEGORY.as_ptr()) else rm::ERR) == rm::OK;
    for c in table() {
        let (first, last, step) = match c.keys {
            Keys::None => (0, 0, 0),
            _ => (1, 1, 1),
        };
        let rc = api!(RedisModule_CreateCommand(ctx, c.name.as_ptr(), c.func, c.flags.as_ptr(), first, last, step) else rm::ERR);
        if rc != rm::OK {
            return Err(format!("cannot create command {:?}", c.name));
        }
        let cmd = api!(RedisModule_GetCommand(ctx, c.name.as_ptr()) else ptr::null_mut());
        if cmd.is_null() {
            return Err(format!("cannot find command {:?}", c.name));
        }
        let info = Box::leak(Box::new(raw::RedisModuleCommandInfo {
            version: &INFO_VERSION,
            summary: c.summary.as_ptr(),
            complexity: c"O(1)".as_ptr(),
            since: c"0.1.0".as_ptr(),
            history: ptr::null_mut(),
            tips: ptr::null(),
            arity: c.arity,
            key_specs: key_specs(c.keys).map_or(ptr::null_mut(), |k| k.as_mut_ptr()),
            args: ptr::null_mut(),
        }));
        if api!(RedisModule_SetCommandInfo(cmd, info) else rm::ERR) != rm::OK {
            return Err(format!("cannot set command info of {:?}", c.name));
        }
        if acl_ok {
            api!(RedisModule_SetCommandACLCategories(cmd, c.acl.as_ptr()) else rm::ERR);
        }
    }
    Ok(())
}
