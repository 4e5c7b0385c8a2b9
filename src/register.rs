//! The command table: names, flags, arity, key specs and ACL categories, registered at load
//! with `RedisModule_CreateCommand` + `RedisModule_SetCommandInfo` (both Redis 7.0), so
//! `COMMAND INFO`, `COMMAND GETKEYS` and cluster routing work as for built-in commands.

use crate::commands::{self, all, apply, clock, info, lease, rate, throttle, Handler};
use crate::rm::{self, Ctx, RStr};
use crate::stats::Stat;
use redis_module::raw;
use std::ffi::{c_int, CStr, CString};
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
    /// `numkeys key [key ...]` from argument 1, read-write.
    Counted,
}

struct Command {
    name: &'static CStr,
    func: raw::RedisModuleCmdFunc,
    flags: &'static CStr,
    arity: c_int,
    keys: Keys,
    /// The server's ACL categories of the command, where the server supports setting them
    /// (Redis 7.2+, Valkey); the module's own `@ratelimit` is added where it can be created
    /// (Redis 7.4+, Valkey 8+).
    acl: &'static CStr,
    summary: &'static CStr,
    complexity: &'static CStr,
    /// Arguments after the command name, for `COMMAND DOCS` and redis-cli's hints.
    args: &'static [Arg],
}

/// One argument in `COMMAND DOCS`.
#[derive(Clone, Copy)]
enum Arg {
    Key(&'static CStr),
    Int(&'static CStr),
    Str(&'static CStr),
    /// A required keyword (inside a choice or block).
    Word(&'static CStr),
    /// An optional `TOKEN value`: (token, value name).
    OptInt(&'static CStr, &'static CStr),
    /// An optional keyword.
    OptWord(&'static CStr),
    /// An optional positional integer.
    OptPos(&'static CStr),
    /// One of several.
    OneOf(&'static CStr, &'static [Arg]),
    /// At most one of several.
    OptOneOf(&'static CStr, &'static [Arg]),
    /// A keyword followed by a value: (token, value name).
    Pair(&'static CStr, &'static CStr),
    /// `numkeys key [key ...]`.
    NumKeys,
    /// Repeated free-form words (RL.ALL's rules).
    Many(&'static CStr),
}

/// One entry point per handler, with its statistics slot: a type for [`rm::entry`].
macro_rules! entry {
    ($name:ident, $handler:path, $stat:expr) => {
        struct $name;
        impl rm::Command for $name {
            #[inline]
            fn call(ctx: Ctx, args: &[RStr]) -> c_int {
                commands::dispatch(ctx, args, $handler as Handler, $stat)
            }
        }
    };
}

entry!(CGcra, rate::gcra, Stat::Gcra);
entry!(CTokenBucket, rate::tokenbucket, Stat::TokenBucket);
entry!(CSliding, rate::sliding, Stat::Sliding);
entry!(CFixed, rate::fixed, Stat::Fixed);
entry!(CLog, rate::log, Stat::Log);
entry!(CQueue, rate::queue, Stat::Queue);
entry!(CAcquire, rate::acquire, Stat::Acquire);
entry!(CRelease, lease::release, Stat::Release);
entry!(CRenew, lease::renew, Stat::Renew);
entry!(CThrottle, throttle::throttle, Stat::Throttle);
entry!(CAll, all::all, Stat::All);
entry!(CInfo, info::info, Stat::Info);
entry!(CClock, clock::clock, Stat::Clock);
entry!(CApply, apply::apply, Stat::Apply);

/// The ACL category the module adds where the server supports it.
pub const CATEGORY: &CStr = c"ratelimit";

/// The options every rate command takes (STAGGER is added for the window counters).
const AMOUNT: &[Arg] = &[Arg::Pair(c"COST", c"cost"), Arg::Pair(c"REFUND", c"refund")];
const OPTIONS: [Arg; 5] = [
    Arg::OptOneOf(c"amount", AMOUNT),
    Arg::OptWord(c"PARTIAL"),
    Arg::OptInt(c"RESERVE", c"reserve"),
    Arg::OptInt(c"BLOCK", c"block_ms"),
    Arg::OptWord(c"DRYRUN"),
];
const GCRA_ARGS: &[Arg] = &[
    Arg::Key(c"key"),
    Arg::Int(c"burst"),
    Arg::Int(c"count"),
    Arg::Int(c"period_ms"),
    OPTIONS[0],
    OPTIONS[1],
    OPTIONS[2],
    OPTIONS[3],
    OPTIONS[4],
];
const BUCKET_ARGS: &[Arg] = &[
    Arg::Key(c"key"),
    Arg::Int(c"capacity"),
    Arg::Int(c"refill_tokens"),
    Arg::Int(c"refill_period_ms"),
    OPTIONS[0],
    OPTIONS[1],
    OPTIONS[2],
    OPTIONS[3],
    OPTIONS[4],
];
const WINDOW_ARGS: &[Arg] = &[
    Arg::Key(c"key"),
    Arg::Int(c"limit"),
    Arg::Int(c"window_ms"),
    OPTIONS[0],
    OPTIONS[1],
    OPTIONS[2],
    OPTIONS[3],
    Arg::OptWord(c"STAGGER"),
    OPTIONS[4],
];
const LOG_ARGS: &[Arg] = &[
    Arg::Key(c"key"),
    Arg::Int(c"limit"),
    Arg::Int(c"window_ms"),
    OPTIONS[0],
    OPTIONS[1],
    OPTIONS[2],
    OPTIONS[3],
    OPTIONS[4],
];
const QUEUE_ARGS: &[Arg] = &[
    Arg::Key(c"key"),
    Arg::Int(c"capacity"),
    Arg::Int(c"interval_ms"),
    OPTIONS[0],
    OPTIONS[1],
    OPTIONS[2],
    OPTIONS[3],
    OPTIONS[4],
];

fn table() -> [Command; 14] {
    const RATE: &CStr = c"write deny-oom fast";
    const RATE_ACL: &CStr = c"write fast";
    let rate = |name, func, arity, summary, complexity, args| Command {
        name,
        func,
        flags: RATE,
        arity,
        keys: Keys::Update,
        acl: RATE_ACL,
        summary,
        complexity,
        args,
    };
    [
        rate(
            c"rl.gcra",
            Some(rm::entry::<CGcra>),
            -5,
            c"GCRA rate limit: burst at once, then count per period_ms",
            c"O(1)",
            GCRA_ARGS,
        ),
        rate(
            c"rl.tokenbucket",
            Some(rm::entry::<CTokenBucket>),
            -5,
            c"Token bucket: capacity tokens, refill_tokens every refill_period_ms",
            c"O(1)",
            BUCKET_ARGS,
        ),
        rate(
            c"rl.sliding",
            Some(rm::entry::<CSliding>),
            -4,
            c"Sliding window counter: limit per trailing window_ms (weighted estimate)",
            c"O(1)",
            WINDOW_ARGS,
        ),
        rate(
            c"rl.fixed",
            Some(rm::entry::<CFixed>),
            -4,
            c"Fixed window counter: limit per aligned window_ms",
            c"O(1)",
            WINDOW_ARGS,
        ),
        rate(
            c"rl.log",
            Some(rm::entry::<CLog>),
            -4,
            c"Exact sliding log: limit per trailing window_ms",
            c"O(log N) to decide, O(N) to drop expired entries, N = entries in the window",
            LOG_ARGS,
        ),
        rate(
            c"rl.queue",
            Some(rm::entry::<CQueue>),
            -4,
            c"Leaky bucket as a queue: one request per interval_ms, capacity waiting",
            c"O(1)",
            QUEUE_ARGS,
        ),
        rate(
            c"rl.acquire",
            Some(rm::entry::<CAcquire>),
            -4,
            c"Concurrency limit: acquires a lease of lease_ms if fewer than limit are held",
            c"O(log N) where N is the number of leases held",
            &[
                Arg::Key(c"key"),
                Arg::Int(c"limit"),
                Arg::Int(c"lease_ms"),
                Arg::OptWord(c"DRYRUN"),
            ],
        ),
        Command {
            name: c"rl.release",
            func: Some(rm::entry::<CRelease>),
            flags: c"write fast",
            arity: 3,
            keys: Keys::Update,
            acl: c"write fast",
            summary: c"Releases a lease acquired with RL.ACQUIRE",
            complexity: c"O(log N) where N is the number of leases held",
            args: &[Arg::Key(c"key"), Arg::Str(c"token")],
        },
        Command {
            name: c"rl.renew",
            func: Some(rm::entry::<CRenew>),
            flags: c"write fast",
            arity: 4,
            keys: Keys::Update,
            acl: c"write fast",
            summary: c"Extends a lease acquired with RL.ACQUIRE to now + lease_ms",
            complexity: c"O(log N) where N is the number of leases held",
            args: &[Arg::Key(c"key"), Arg::Str(c"token"), Arg::Int(c"lease_ms")],
        },
        rate(
            c"cl.throttle",
            Some(rm::entry::<CThrottle>),
            -5,
            c"redis-cell compatible GCRA throttle (period in seconds)",
            c"O(1)",
            &[
                Arg::Key(c"key"),
                Arg::Int(c"max_burst"),
                Arg::Int(c"count_per_period"),
                Arg::Int(c"period"),
                Arg::OptPos(c"quantity"),
            ],
        ),
        Command {
            name: c"rl.all",
            func: Some(rm::entry::<CAll>),
            // Redis 7.0 routes cluster requests by the legacy key range or the getkeys API,
            // not by key specs: the keys' positions depend on numkeys, so ask the command.
            flags: c"write deny-oom fast getkeys-api",
            arity: -4,
            keys: Keys::Counted,
            acl: RATE_ACL,
            summary: c"Checks several limits and spends them all or none, atomically",
            complexity: c"O(N) where N is the number of rules",
            args: &[Arg::NumKeys, Arg::Many(c"rule"), Arg::OptWord(c"DRYRUN")],
        },
        Command {
            name: c"rl.info",
            func: Some(rm::entry::<CInfo>),
            flags: c"readonly fast",
            arity: 2,
            keys: Keys::Read,
            acl: c"read fast",
            summary: c"Shows a rate-limit key's algorithm, stored state and TTL",
            complexity: c"O(1)",
            args: &[Arg::Key(c"key")],
        },
        Command {
            name: c"rl.clock",
            func: Some(rm::entry::<CClock>),
            flags: c"fast",
            arity: -2,
            keys: Keys::None,
            acl: c"fast",
            summary: c"Test clock (only with ratelimit.test-clock yes): GET, SET, ADVANCE, REAL",
            complexity: c"O(1)",
            args: &[Arg::OneOf(
                c"subcommand",
                &[
                    Arg::Word(c"GET"),
                    Arg::Pair(c"SET", c"unix_ms"),
                    Arg::Pair(c"ADVANCE", c"ms"),
                    Arg::Word(c"REAL"),
                ],
            )],
        },
        Command {
            name: c"rl._apply",
            func: Some(rm::entry::<CApply>),
            flags: c"write",
            arity: 3,
            keys: Keys::Overwrite,
            acl: c"write",
            summary: c"Internal: applies a replicated state (primary link and AOF only)",
            complexity: c"O(N) where N is the size of the state",
            args: &[Arg::Key(c"key"), Arg::Str(c"payload")],
        },
    ]
}

/// A zeroed argument (the terminator, and the base of every entry).
fn blank() -> raw::RedisModuleCommandArg {
    rm::blank_arg()
}

/// Owns the C arrays handed to `RedisModule_SetCommandInfo`, which copies them: dropped
/// right after the call.
type Arena = Vec<Box<[raw::RedisModuleCommandArg]>>;

/// Builds the zero-terminated C array for `args`, owned by `arena`.
fn build_args(args: &[Arg], arena: &mut Arena) -> *mut raw::RedisModuleCommandArg {
    use raw::{
        RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK as BLOCK,
        RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER as INT,
        RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY as KEY,
        RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF as ONEOF,
        RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN as TOKEN,
        RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING as STR,
    };
    const OPTIONAL: c_int = raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int;
    const MULTIPLE: c_int = raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int;
    let mut out: Vec<raw::RedisModuleCommandArg> = Vec::with_capacity(args.len() + 2);
    for a in args {
        let mut e = blank();
        match *a {
            Arg::Key(n) => {
                e.name = n.as_ptr();
                e.type_ = KEY;
                e.key_spec_index = 0;
            }
            Arg::Int(n) => {
                e.name = n.as_ptr();
                e.type_ = INT;
            }
            Arg::Str(n) => {
                e.name = n.as_ptr();
                e.type_ = STR;
            }
            Arg::Word(t) => {
                e.name = t.as_ptr();
                e.type_ = TOKEN;
                e.token = t.as_ptr();
            }
            Arg::OptInt(t, n) => {
                e.name = n.as_ptr();
                e.type_ = INT;
                e.token = t.as_ptr();
                e.flags = OPTIONAL;
            }
            Arg::OptWord(t) => {
                e.name = t.as_ptr();
                e.type_ = TOKEN;
                e.token = t.as_ptr();
                e.flags = OPTIONAL;
            }
            Arg::OptPos(n) => {
                e.name = n.as_ptr();
                e.type_ = INT;
                e.flags = OPTIONAL;
            }
            Arg::OneOf(n, subs) => {
                e.name = n.as_ptr();
                e.type_ = ONEOF;
                e.subargs = build_args(subs, arena);
            }
            Arg::OptOneOf(n, subs) => {
                e.name = n.as_ptr();
                e.type_ = ONEOF;
                e.subargs = build_args(subs, arena);
                e.flags = OPTIONAL;
            }
            Arg::Pair(t, n) => {
                e.name = t.as_ptr();
                e.type_ = BLOCK;
                e.subargs = build_args(&[Arg::Word(t), Arg::Int(n)], arena);
            }
            Arg::NumKeys => {
                e.name = c"numkeys".as_ptr();
                e.type_ = INT;
                out.push(e);
                let mut k = blank();
                k.name = c"key".as_ptr();
                k.type_ = KEY;
                k.key_spec_index = 0;
                k.flags = MULTIPLE;
                e = k;
            }
            Arg::Many(n) => {
                e.name = n.as_ptr();
                e.type_ = STR;
                e.flags = MULTIPLE;
            }
        }
        out.push(e);
    }
    out.push(blank());
    let mut owned = out.into_boxed_slice();
    let ptr = owned.as_mut_ptr();
    arena.push(owned);
    ptr
}

static INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// The key spec (plus the zeroed terminator): the key is argument 1, or for `NumKeys` the
/// keys follow a count at argument 1, as for EVAL or ZUNIONSTORE.
fn key_specs(keys: Keys) -> Option<Box<[raw::RedisModuleCommandKeySpec; 2]>> {
    let flags = match keys {
        Keys::None => return None,
        Keys::Update | Keys::Counted => {
            raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE
        }
        Keys::Read => raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
        Keys::Overwrite => raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
    };
    let mut spec = rm::blank_key_spec();
    spec.flags = u64::from(flags);
    spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    spec.bs.index.pos = 1;
    if let Keys::Counted = keys {
        spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
        spec.fk.keynum.keynumidx = 0;
        spec.fk.keynum.firstkey = 1;
        spec.fk.keynum.keystep = 1;
    } else {
        spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        spec.fk.range.lastkey = 0;
        spec.fk.range.keystep = 1;
        spec.fk.range.limit = 0;
    }
    Some(Box::new([spec, rm::blank_key_spec()]))
}

/// Which ACL categories the server lets a module give its commands.
enum Acl {
    /// None (Redis 7.0: no `SetCommandACLCategories`).
    Unsupported,
    /// The server's own categories only (Redis 7.2: no `AddACLCategory`).
    ServerOnly,
    /// The server's categories and the module's `@ratelimit` (Redis 7.4+, Valkey 8+).
    WithModuleCategory,
}

impl Acl {
    fn detect(ctx: Ctx) -> Acl {
        if !rm::can_set_acl_categories() {
            Acl::Unsupported
        } else if rm::add_acl_category(ctx, CATEGORY) {
            Acl::WithModuleCategory
        } else {
            Acl::ServerOnly
        }
    }

    /// The category list to set for a command whose server categories are `base`.
    fn categories(&self, base: &CStr) -> Option<CString> {
        match self {
            Acl::Unsupported => None,
            Acl::ServerOnly => Some(base.to_owned()),
            Acl::WithModuleCategory => {
                let mut s = base.to_bytes().to_vec();
                s.push(b' ');
                s.extend_from_slice(CATEGORY.to_bytes());
                CString::new(s).ok()
            }
        }
    }
}

/// Registers every command; `Err` with a message on failure.
pub fn register(ctx: Ctx) -> Result<(), String> {
    let acl = Acl::detect(ctx);
    for c in table() {
        // Legacy (first, last, step); key specs below are what Redis 7 routes by.
        let (first, last, step) = match c.keys {
            Keys::None => (0, 0, 0),
            Keys::Counted => (2, -1, 1),
            _ => (1, 1, 1),
        };
        if !rm::create_command(ctx, c.name, c.func, c.flags, (first, last, step)) {
            return Err(format!("cannot create command {:?}", c.name));
        }
        let Some(cmd) = rm::get_command(ctx, c.name) else {
            return Err(format!("cannot find command {:?}", c.name));
        };
        // The server copies everything it is given here: these buffers are dropped after.
        let mut arena = Arena::new();
        let mut specs = key_specs(c.keys);
        let mut info = raw::RedisModuleCommandInfo {
            version: &INFO_VERSION,
            summary: c.summary.as_ptr(),
            complexity: c.complexity.as_ptr(),
            since: c"0.1.0".as_ptr(),
            history: ptr::null_mut(),
            tips: ptr::null(),
            arity: c.arity,
            key_specs: specs.as_mut().map_or(ptr::null_mut(), |k| k.as_mut_ptr()),
            args: build_args(c.args, &mut arena),
        };
        if !rm::set_command_info(cmd, &mut info) {
            return Err(format!("cannot set command info of {:?}", c.name));
        }
        if let Some(cats) = acl.categories(c.acl) {
            if !rm::set_acl_categories(cmd, &cats) {
                return Err(format!("cannot set the ACL categories of {:?}", c.name));
            }
        }
    }
    Ok(())
}
