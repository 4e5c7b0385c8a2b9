//! The command table: one row per command (its handler, flags, arity, key, ACL categories
//! and docs). Registration, `COMMAND DOCS` and the `INFO ratelimit` counters all follow from
//! it (`register.rs`, `stats.rs`); a rate command's arguments and arity follow from its
//! algorithm's row in `algo/table.rs`.

use crate::algo::table::Algo;
use crate::commands::{
    self, all, apply, info, lease, pause, policy, rate, testclock, throttle, Handler,
};
use crate::rm::{self, Ctx, InfoCtx, RStr};
use crate::stats::{self, Counters};
use redis_module::raw;
use std::ffi::{c_int, CStr};

/// How a command touches its key (argument 1), if it has one.
#[derive(Clone, Copy)]
pub enum Keys {
    None,
    /// Read-write, may update the value.
    Update,
    /// Read-only access.
    Read,
    /// `key payload [key payload ...]` from argument 1: every other argument a key, whose
    /// value is overwritten (RL._APPLY).
    Pairs,
    /// `numkeys key [key ...]` from argument 1, read-write.
    Counted,
}

/// A command's flags, key access and server ACL categories.
pub struct Kind {
    pub flags: &'static CStr,
    pub keys: Keys,
    /// The server's ACL categories of the command, where the server supports setting them
    /// (Redis 7.2+, Valkey); the module's own `@ratelimit` is added where it can be created
    /// (Redis 7.4+, Valkey 8+).
    pub acl: &'static CStr,
}

impl Kind {
    const fn new(flags: &'static CStr, keys: Keys, acl: &'static CStr) -> Kind {
        Kind { flags, keys, acl }
    }
}

/// A rate command: writes its key, refused when out of memory.
const RATE: Kind = Kind::new(c"write deny-oom fast", Keys::Update, c"write fast");
/// RL.RELEASE, RL.RENEW, RL.RESUME: write their key, never grow it.
const LEASE: Kind = Kind::new(c"write fast", Keys::Update, c"write fast");
/// RL.ALL. Redis 7.0 routes cluster requests by the legacy key range or the getkeys API,
/// not by key specs: the keys' positions depend on numkeys, so it asks the command.
const MANY: Kind = Kind::new(
    c"write deny-oom fast getkeys-api",
    Keys::Counted,
    c"write fast",
);
const READ: Kind = Kind::new(c"readonly fast", Keys::Read, c"read fast");
const NO_KEY: Kind = Kind::new(c"fast", Keys::None, c"fast");
const INTERNAL: Kind = Kind::new(c"write", Keys::Pairs, c"write");
/// An operator's change of a policy (no key): `@admin` where categories can be set, so
/// ACL rules can keep callers to RL.ALLOW.
const POLICY_CHANGE: Kind = Kind::new(c"write deny-oom", Keys::None, c"write admin");
/// Reading policies (no key): also on a read-only replica.
const POLICY_READ: Kind = Kind::new(c"readonly", Keys::None, c"read");
/// RL._POLICY: a policy's definition from the primary link or the AOF (no key).
const POLICY_LOAD: Kind = Kind::new(c"write", Keys::None, c"write");

/// One argument in `COMMAND DOCS`.
#[derive(Clone, Copy)]
pub enum Arg {
    Key(&'static CStr),
    Int(&'static CStr),
    Str(&'static CStr),
    /// A required keyword (inside a choice or block).
    Word(&'static CStr),
    /// An optional positional integer.
    OptPos(&'static CStr),
    /// One of several.
    OneOf(&'static CStr, &'static [Arg]),
    /// A keyword followed by a value: (token, value name).
    Pair(&'static CStr, &'static CStr),
    /// `numkeys key [key ...]`.
    NumKeys,
    /// Repeated free-form words (RL.ALL's rules).
    Many(&'static CStr),
    /// A rate command's arguments: the key, the rule's numbers and the options, from the
    /// algorithm's row.
    Rule(Algo),
    /// The `DRYRUN` flag alone.
    DryRun,
    /// An optional keyword alone (`RESET`).
    Flag(&'static CStr),
    /// An optional positional string.
    OptStr(&'static CStr),
    /// An optional keyword followed by an integer: (token, value name).
    OptPair(&'static CStr, &'static CStr),
}

/// A command.
pub struct Command {
    pub name: &'static CStr,
    pub func: raw::RedisModuleCmdFunc,
    pub kind: Kind,
    pub arity: c_int,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// Arguments after the command name, for `COMMAND DOCS` and redis-cli's hints.
    pub args: &'static [Arg],
}

impl Command {
    /// The command's name in `INFO ratelimit` counters: its name after the prefix
    /// (`rl.gcra` -> `gcra`, `cl.throttle` -> `throttle`, `rl._apply` -> `apply`).
    /// A subcommand's is its container's and its own (`rl.policy|set` -> `policy_set`).
    pub fn stat_name(&self) -> String {
        let name = self.name.to_str().unwrap_or("");
        let bare = name.split_once('.').map_or(name, |(_, b)| b);
        bare.trim_start_matches('_').replace('|', "_")
    }
}

/// The entry point of row `I` (see [`rm::entry`]).
pub struct Entry<const I: usize>;

/// The arity of a rate command of `algo`: its name, the key, the rule's numbers, options.
const fn rate_arity(algo: Algo) -> c_int {
    -2 - algo.spec().args.len() as c_int
}

/// Defines [`Stat`] (a row's index, its counters' slot), each row's entry point (calling
/// [`commands::dispatch`] with the handler and the row's counters) and [`COMMANDS`], from one list.
macro_rules! commands {
    ($($id:ident: $name:literal => $handler:expr, $kind:expr, $arity:expr,
        $summary:literal, $complexity:literal, $args:expr;)*) => {
        /// A command's row in [`COMMANDS`], and its `INFO ratelimit` counters.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Stat {
            $($id),*
        }

        $(impl rm::Command for Entry<{ Stat::$id as usize }> {
            #[inline]
            fn call(ctx: Ctx, args: &[RStr]) -> c_int {
                commands::dispatch(ctx, args, $handler as Handler, Stat::$id.counters())
            }
        })*

        /// Every command, in [`Stat`] order.
        pub const COMMANDS: &[Command] = &[$(Command {
            name: $name,
            func: Some(rm::entry::<Entry<{ Stat::$id as usize }>>),
            kind: $kind,
            arity: $arity,
            summary: $summary,
            complexity: $complexity,
            args: $args,
        }),*];
    };
}

commands! {
    Gcra: c"rl.gcra" => |c, a| rate::rate(c, a, Algo::Gcra), RATE, rate_arity(Algo::Gcra),
        c"GCRA rate limit: burst at once, then count per period_ms", c"O(1)",
        &[Arg::Rule(Algo::Gcra)];
    TokenBucket: c"rl.tokenbucket" => |c, a| rate::rate(c, a, Algo::TokenBucket), RATE,
        rate_arity(Algo::TokenBucket),
        c"Token bucket: capacity tokens, refill_tokens every refill_period_ms", c"O(1)",
        &[Arg::Rule(Algo::TokenBucket)];
    Sliding: c"rl.sliding" => |c, a| rate::rate(c, a, Algo::Sliding), RATE, rate_arity(Algo::Sliding),
        c"Sliding window counter: limit per trailing window_ms (weighted estimate)", c"O(1)",
        &[Arg::Rule(Algo::Sliding)];
    Fixed: c"rl.fixed" => |c, a| rate::rate(c, a, Algo::Fixed), RATE, rate_arity(Algo::Fixed),
        c"Fixed window counter: limit per aligned window_ms", c"O(1)",
        &[Arg::Rule(Algo::Fixed)];
    Log: c"rl.log" => |c, a| rate::rate(c, a, Algo::Log), RATE, rate_arity(Algo::Log),
        c"Exact sliding log: limit per trailing window_ms",
        c"O(log N) to decide, O(N) to drop expired entries, N = entries in the window",
        &[Arg::Rule(Algo::Log)];
    Queue: c"rl.queue" => |c, a| rate::rate(c, a, Algo::Queue), RATE, rate_arity(Algo::Queue),
        c"Leaky bucket as a queue: one request per interval_ms, capacity waiting", c"O(1)",
        &[Arg::Rule(Algo::Queue)];
    Acquire: c"rl.acquire" => |c, a| rate::rate(c, a, Algo::Concurrency), RATE,
        rate_arity(Algo::Concurrency),
        c"Concurrency limit: acquires a lease of lease_ms if fewer than limit are held",
        c"O(log N) where N is the number of leases held",
        &[Arg::Rule(Algo::Concurrency)];
    Release: c"rl.release" => lease::release, LEASE, 3,
        c"Releases a lease acquired with RL.ACQUIRE",
        c"O(log N) where N is the number of leases held",
        &[Arg::Key(c"key"), Arg::Str(c"token")];
    Renew: c"rl.renew" => lease::renew, LEASE, 4,
        c"Extends a lease acquired with RL.ACQUIRE to now + lease_ms",
        c"O(log N) where N is the number of leases held",
        &[Arg::Key(c"key"), Arg::Str(c"token"), Arg::Int(c"lease_ms")];
    Throttle: c"cl.throttle" => throttle::throttle, RATE, -5,
        c"redis-cell compatible GCRA throttle (period in seconds)", c"O(1)",
        &[
            Arg::Key(c"key"),
            Arg::Int(c"max_burst"),
            Arg::Int(c"count_per_period"),
            Arg::Int(c"period"),
            Arg::OptPos(c"quantity"),
        ];
    All: c"rl.all" => all::all, MANY, -4,
        c"Checks several limits and spends them all or none, atomically",
        c"O(N) where N is the number of rules",
        &[Arg::NumKeys, Arg::Many(c"rule"), Arg::DryRun, Arg::OptPair(c"WAIT", c"ms")];
    Info: c"rl.info" => info::info, READ, 2,
        c"Shows a rate-limit key's algorithm, stored state and TTL", c"O(1)",
        &[Arg::Key(c"key")];
    Clock: c"rl.clock" => testclock::clock, NO_KEY, -2,
        c"Test clock (only with ratelimit.test-clock yes): GET, SET, ADVANCE, REAL", c"O(1)",
        &[Arg::OneOf(
            c"subcommand",
            &[
                Arg::Word(c"GET"),
                Arg::Pair(c"SET", c"unix_ms"),
                Arg::Pair(c"ADVANCE", c"ms"),
                Arg::Word(c"REAL"),
            ],
        )];
    Apply: c"rl._apply" => |c, a| apply::apply(c, a, Stat::Apply.counters()), INTERNAL, -3,
        c"Internal: applies a replicated state (primary link and AOF only)",
        c"O(N) where N is the size of the state",
        &[Arg::Key(c"key"), Arg::Str(c"payload")];
    Allow: c"rl.allow" => policy::allow, RATE, -3,
        c"A policy's rule on a key: the version of the policy that applies to the key",
        c"O(1), as the policy's algorithm",
        &[
            Arg::Key(c"key"),
            Arg::Str(c"policy"),
            Arg::Many(c"option"),
        ];
    PolicySet: c"rl.policy|set" => policy::set, POLICY_CHANGE, -5,
        c"Sets a policy's rule: a new version, at once or rolled out to a share of keys",
        c"O(1)",
        &[
            Arg::Str(c"name"),
            Arg::Many(c"rule"),
        ];
    PolicyRollout: c"rl.policy|rollout" => policy::rollout, POLICY_CHANGE, 4,
        c"Moves a policy's candidate version to a share of keys (100: current)", c"O(1)",
        &[Arg::Str(c"name"), Arg::Int(c"percent")];
    PolicyRollback: c"rl.policy|rollback" => policy::rollback, POLICY_CHANGE, 3,
        c"Drops a policy's candidate, or goes back to its previous version", c"O(1)",
        &[Arg::Str(c"name")];
    PolicyDel: c"rl.policy|del" => policy::del, POLICY_CHANGE, 3,
        c"Deletes a policy (keys written under it keep their state and TTL)", c"O(1)",
        &[Arg::Str(c"name")];
    PolicyGet: c"rl.policy|get" => policy::get, POLICY_READ, 3,
        c"A policy's current version, rule, mode, digest and candidate", c"O(1)",
        &[Arg::Str(c"name")];
    PolicyList: c"rl.policy|list" => policy::list, POLICY_READ, -2,
        c"Every policy (or those matching a pattern): version, digest, mode, rollout",
        c"O(N) where N is the number of policies",
        &[Arg::OptStr(c"pattern")];
    PolicyHistory: c"rl.policy|history" => policy::history, POLICY_READ, 3,
        c"A policy's last versions with their rules and times", c"O(1)",
        &[Arg::Str(c"name")];
    PolicyStats: c"rl.policy|stats" => policy::stats, POLICY_READ, -3,
        c"A policy's counters and the keys refused most, since the last RESET", c"O(1)",
        &[Arg::Str(c"name"), Arg::Flag(c"RESET")];
    PolicyLoad: c"rl._policy" => policy::load, POLICY_LOAD, -2,
        c"Internal: sets or deletes a replicated policy (primary link and AOF only)", c"O(1)",
        &[Arg::Str(c"name"), Arg::OptStr(c"payload")];
    Pause: c"rl.pause" => pause::pause, RATE, -3,
        c"Pauses a key for ms (every request refused); with PROBE, then one probe at a time",
        c"O(1)",
        &[Arg::Key(c"key"), Arg::Int(c"ms"), Arg::OptPair(c"PROBE", c"probe_ms")];
    Resume: c"rl.resume" => pause::resume, LEASE, 2,
        c"Lifts a key's pause or BLOCK penalty at once", c"O(1)",
        &[Arg::Key(c"key")];
}

/// How many commands there are.
pub const COUNT: usize = COMMANDS.len();

/// Every command's `INFO ratelimit` counters, in [`Stat`] order.
static STATS: [Counters; COUNT] = [const { Counters::new() }; COUNT];

impl Stat {
    /// The command's `INFO ratelimit` counters.
    #[inline]
    pub fn counters(self) -> &'static Counters {
        // In bounds: a `Stat` is the index of a row of `COMMANDS`, and `STATS` has one
        // `Counters` per row.
        &STATS[self as usize]
    }
}

/// The module's INFO function (`lib.rs` registers it): [`stats::info`] with every command's
/// counters under its name.
pub fn info(ctx: InfoCtx, _for_crash_report: bool) {
    let named: Vec<(String, &Counters)> = COMMANDS
        .iter()
        .zip(&STATS)
        .map(|(c, s)| (c.stat_name(), s))
        .collect();
    stats::info(ctx, named.iter().map(|(n, s)| (n.as_str(), *s)));
    use crate::wait;
    use std::sync::atomic::Ordering::Relaxed;
    stats::info_wait(
        ctx,
        [
            ("waiting_clients", wait::waiting()),
            ("waits_started", wait::STARTED.load(Relaxed)),
            ("waits_admitted", wait::ADMITTED.load(Relaxed)),
            ("waits_timed_out", wait::TIMED_OUT.load(Relaxed)),
            ("waits_refused_bounds", wait::OVER_BOUNDS.load(Relaxed)),
        ],
    );
}
