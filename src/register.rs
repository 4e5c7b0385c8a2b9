//! Registers the command table (`table.rs`) at load with `RedisModule_CreateCommand` +
//! `RedisModule_SetCommandInfo` (both Redis 7.0), so `COMMAND INFO`, `COMMAND DOCS`,
//! `COMMAND GETKEYS` and cluster routing work as for built-in commands.

use crate::algo::table::Algo;
use crate::options::Opt;
use crate::rm::{self, Ctx};
use crate::table::{Arg, Command, Keys, COMMANDS};
use redis_module::raw;
use std::ffi::{c_int, CStr, CString};
use std::ptr;

/// The ACL category the module adds where the server supports it.
pub const CATEGORY: &CStr = c"ratelimit";

/// A zeroed argument (the terminator, and the base of every entry).
fn blank() -> raw::RedisModuleCommandArg {
    rm::blank_arg()
}

/// Owns the C arrays and names handed to `RedisModule_SetCommandInfo`, which copies them:
/// dropped right after the call.
#[derive(Default)]
struct Arena {
    args: Vec<Box<[raw::RedisModuleCommandArg]>>,
    names: Vec<CString>,
}

impl Arena {
    /// A C copy of `name`, alive as long as the arena.
    fn name(&mut self, name: &str) -> *const std::ffi::c_char {
        let c = CString::new(name).unwrap_or_default();
        let p = c.as_ptr();
        self.names.push(c);
        p
    }
}

/// One C argument (name, type, token, flags), the base of every entry.
fn arg(
    name: *const std::ffi::c_char,
    type_: raw::RedisModuleCommandArgType,
    token: *const std::ffi::c_char,
    flags: c_int,
) -> raw::RedisModuleCommandArg {
    let mut e = blank();
    e.name = name;
    e.type_ = type_;
    e.token = token;
    e.flags = flags;
    e
}

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
const NONE: *const std::ffi::c_char = ptr::null();

/// A key argument (the command's key spec 0).
fn key(name: *const std::ffi::c_char, flags: c_int) -> raw::RedisModuleCommandArg {
    let mut k = arg(name, KEY, NONE, flags);
    k.key_spec_index = 0;
    k
}

/// `TOKEN value` as a block (COST n, REFUND n, SET unix_ms, ...).
fn pair(
    t: *const std::ffi::c_char,
    value: *const std::ffi::c_char,
    arena: &mut Arena,
) -> raw::RedisModuleCommandArg {
    let mut e = arg(t, BLOCK, NONE, 0);
    e.subargs = zero_terminated(vec![arg(t, TOKEN, t, 0), arg(value, INT, NONE, 0)], arena);
    e
}

/// Terminates `out` with a zeroed entry and hands it to `arena`.
fn zero_terminated(
    mut out: Vec<raw::RedisModuleCommandArg>,
    arena: &mut Arena,
) -> *mut raw::RedisModuleCommandArg {
    out.push(blank());
    let mut owned = out.into_boxed_slice();
    let ptr = owned.as_mut_ptr();
    arena.args.push(owned);
    ptr
}

/// The option `o` as an optional argument: `TOKEN value`, or the token of a flag.
fn option(o: Opt, arena: &mut Arena) -> raw::RedisModuleCommandArg {
    let spec = o.spec();
    let word = arena.name(spec.word);
    match spec.value.name() {
        None => arg(word, TOKEN, word, OPTIONAL),
        Some(value) => arg(arena.name(value), INT, word, OPTIONAL),
    }
}

/// The C arguments of a rate command of `algo`: the key, the rule's numbers, its options
/// (COST and REFUND as `amount`, one of the two).
fn rule_args(algo: Algo, arena: &mut Arena, out: &mut Vec<raw::RedisModuleCommandArg>) {
    let spec = algo.spec();
    out.push(key(c"key".as_ptr(), 0));
    for name in spec.args {
        out.push(arg(arena.name(name), INT, NONE, 0));
    }
    let opts = spec.options;
    let amount = [Opt::Cost, Opt::Refund];
    if amount.iter().all(|&o| opts.has(o)) {
        let pairs = amount.map(|o| {
            let spec = o.spec();
            let value = arena.name(spec.value.name().unwrap_or(""));
            let word = arena.name(spec.word);
            pair(word, value, arena)
        });
        let mut e = arg(c"amount".as_ptr(), ONEOF, NONE, OPTIONAL);
        e.subargs = zero_terminated(pairs.to_vec(), arena);
        out.push(e);
    }
    for o in opts.iter().filter(|o| !amount.contains(o)) {
        out.push(option(o, arena));
    }
}

/// Builds the zero-terminated C array for `args`, owned by `arena`.
fn build_args(args: &[Arg], arena: &mut Arena) -> *mut raw::RedisModuleCommandArg {
    let mut out: Vec<raw::RedisModuleCommandArg> = Vec::with_capacity(args.len() + 2);
    for a in args {
        match *a {
            Arg::Key(n) => out.push(key(n.as_ptr(), 0)),
            Arg::Int(n) => out.push(arg(n.as_ptr(), INT, NONE, 0)),
            Arg::Str(n) => out.push(arg(n.as_ptr(), STR, NONE, 0)),
            Arg::Word(t) => out.push(arg(t.as_ptr(), TOKEN, t.as_ptr(), 0)),
            Arg::OptPos(n) => out.push(arg(n.as_ptr(), INT, NONE, OPTIONAL)),
            Arg::OneOf(n, subs) => {
                let mut e = arg(n.as_ptr(), ONEOF, NONE, 0);
                e.subargs = build_args(subs, arena);
                out.push(e);
            }
            Arg::Pair(t, n) => out.push(pair(t.as_ptr(), n.as_ptr(), arena)),
            Arg::NumKeys => {
                out.push(arg(c"numkeys".as_ptr(), INT, NONE, 0));
                out.push(key(c"key".as_ptr(), MULTIPLE));
            }
            Arg::Many(n) => out.push(arg(n.as_ptr(), STR, NONE, MULTIPLE)),
            Arg::Rule(algo) => rule_args(algo, arena, &mut out),
            Arg::DryRun => out.push(arg(c"DRYRUN".as_ptr(), TOKEN, c"DRYRUN".as_ptr(), OPTIONAL)),
            Arg::Flag(w) => out.push(arg(w.as_ptr(), TOKEN, w.as_ptr(), OPTIONAL)),
            Arg::OptStr(n) => out.push(arg(n.as_ptr(), STR, NONE, OPTIONAL)),
            Arg::OptPair(t, n) => out.push(arg(n.as_ptr(), INT, t.as_ptr(), OPTIONAL)),
        }
    }
    zero_terminated(out, arena)
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
        Keys::Pairs => raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
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
        // One key, or (`Pairs`) every other argument to the last.
        let pairs = matches!(keys, Keys::Pairs);
        spec.fk.range.lastkey = if pairs { -1 } else { 0 };
        spec.fk.range.keystep = if pairs { 2 } else { 1 };
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
    /// The server's categories and `@ratelimit` (Redis 7.4+, Valkey 8+), created by the
    /// module or already the server's own (a Redis built with core's GCRA has one).
    WithModuleCategory,
}

impl Acl {
    fn detect(ctx: Ctx) -> Acl {
        if !rm::can_set_acl_categories() {
            Acl::Unsupported
        } else if !rm::can_add_acl_category() {
            Acl::ServerOnly
        } else {
            // Created now, or refused because the server already has `ratelimit` (the name
            // is valid): the commands join it either way, so `+@ratelimit` grants them too.
            rm::add_acl_category(ctx, CATEGORY);
            Acl::WithModuleCategory
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

/// Creates command `c`: a subcommand (`container|sub`) under its container, which the first
/// of its subcommands creates (`RedisModule_CreateSubcommand`, Redis 7.0).
fn create(ctx: Ctx, c: &Command, keys: (c_int, c_int, c_int)) -> Result<(), String> {
    let full = c.name.to_str().map_err(|e| e.to_string())?;
    let Some((container, sub)) = full.split_once('|') else {
        if rm::create_command(ctx, c.name, c.func, c.kind.flags, keys) {
            return Ok(());
        }
        return Err(format!("cannot create command {full}"));
    };
    let container = CString::new(container).map_err(|e| e.to_string())?;
    let sub = CString::new(sub).map_err(|e| e.to_string())?;
    let parent = match rm::get_command(ctx, &container) {
        Some(p) => p,
        None => {
            if !rm::create_command(ctx, &container, None, c"", (0, 0, 0)) {
                return Err(format!("cannot create command {container:?}"));
            }
            rm::get_command(ctx, &container)
                .ok_or_else(|| format!("cannot find command {container:?}"))?
        }
    };
    if rm::create_subcommand(parent, &sub, c.func, c.kind.flags, keys) {
        Ok(())
    } else {
        Err(format!("cannot create subcommand {full}"))
    }
}

/// Registers every command; `Err` with a message on failure.
pub fn register(ctx: Ctx) -> Result<(), String> {
    let acl = Acl::detect(ctx);
    for c in COMMANDS {
        // Legacy (first, last, step); key specs below are what Redis 7 routes by.
        let (first, last, step) = match c.kind.keys {
            Keys::None => (0, 0, 0),
            Keys::Counted => (2, -1, 1),
            Keys::Pairs => (1, -1, 2),
            _ => (1, 1, 1),
        };
        create(ctx, c, (first, last, step))?;
        let Some(cmd) = rm::get_command(ctx, c.name) else {
            return Err(format!("cannot find command {:?}", c.name));
        };
        // The server copies everything it is given here: these buffers are dropped after.
        let mut arena = Arena::default();
        let mut specs = key_specs(c.kind.keys);
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
        if let Some(cats) = acl.categories(c.kind.acl) {
            // Should the server know no `ratelimit` category after all, the server's own
            // categories still apply (as on Redis 7.2).
            if !rm::set_acl_categories(cmd, &cats) && !rm::set_acl_categories(cmd, c.kind.acl) {
                return Err(format!("cannot set the ACL categories of {:?}", c.name));
            }
        }
    }
    Ok(())
}
