//! redis-ratelimit: native rate-limiting commands for Redis 7.0+ and Valkey.
//!
//! Layout (a map with the path of one request: `docs/internals.md`): pure, no Redis types:
//! `algo/` (the table of algorithms, `algo/table.rs`, and one file per algorithm), `options`,
//! `rule` (a rule and one request with its options, decided on a state), `state` (the
//! stored value and its codec), `packed` (a state packed into the value word or a pair),
//! `replay` (operation effects). The thin Redis shell: `table` (the command table),
//! `register` (registers it), `commands/` (one file per command family), `args` (integers
//! and the option parser), `datatype` (the data type: reading and storing a key's state),
//! `propagate`, `config`, `stats` (INFO), `clock`, `error` and, at the bottom, `rm` (the raw
//! module API: the only file with `unsafe`, holding the command entry point and the type
//! and INFO callbacks; it imports nothing of the module).

// Every unsafe block (all in `rm`) says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod algo;
pub mod args;
pub mod clock;
pub mod commands;
pub mod config;
pub mod datatype;
pub mod decide;
pub mod error;
pub mod ops;
pub mod options;
pub mod packed;
pub mod policy;
pub mod propagate;
pub mod register;
pub mod replay;
pub mod reply;
pub mod rm;
pub mod rule;
pub mod state;
pub mod stats;
pub mod table;
pub mod txn;
pub mod wait;

use config::{ACQUIRE_MAX_LIMIT, LOG_MAX_LIMIT, TEST_CLOCK};
use redis_module::configuration::ConfigurationFlags;
use redis_module::{raw, redis_module, Context, RedisString, Status};

#[cfg(not(test))]
use redis_module::alloc::RedisAlloc as Alloc;
#[cfg(test)]
use std::alloc::System as Alloc;

/// Module options: handle RDB read errors ourselves (a corrupt payload is refused, never a
/// crash); signal modified keys explicitly (only when a state is written); and declare
/// support for Valkey's atomic slot migration (bit 5, ignored by older servers).
const MODULE_OPTIONS: i32 = (raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
    | raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED
    | (1 << 5)) as i32;

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    if !datatype::create(ctx.ctx) {
        ctx.log_warning("ratelimit: the data type could not be created");
        return Status::Err;
    }
    rm::set_module_options(ctx.ctx, MODULE_OPTIONS);
    // Policies are node data: a whole dataset loaded (RDB, AOF, a full sync) brings its own.
    if !rm::on_loading(ctx.ctx, policy::clear) {
        ctx.log_warning("ratelimit: cannot subscribe to loading events");
        return Status::Err;
    }
    // WAIT: blocked clients, their timers, and the events that wake them.
    if !wait::init(ctx.ctx) {
        ctx.log_warning("ratelimit: cannot subscribe to the events WAIT needs");
        return Status::Err;
    }
    // Replaces the INFO callback the framework registered with this module's sections.
    rm::register_info(ctx.ctx, table::info);
    if !rm::has_defrag_callbacks() {
        // The library logs "Skip register defrag callbacks ..." at warning level on servers
        // without them (Redis 7.0); say at once that it is harmless.
        ctx.log_notice(
            "ratelimit: the 'Skip register defrag ...' line above is not an error: this \
             server has no defrag callbacks, and the module needs none",
        );
    }
    match register::register(ctx.ctx) {
        Ok(()) => Status::Ok,
        Err(e) => {
            ctx.log_warning(&format!("ratelimit: {e}"));
            Status::Err
        }
    }
}

redis_module! {
    name: "ratelimit",
    version: 1,
    allocator: (Alloc, Alloc),
    data_types: [],
    init: init,
    configurations: [
        i64: [
            ["log-max-limit", &LOG_MAX_LIMIT, 10_000, 1, 1_000_000, ConfigurationFlags::DEFAULT, None],
            ["acquire-max-limit", &ACQUIRE_MAX_LIMIT, 10_000, 1, 1_000_000, ConfigurationFlags::DEFAULT, None],
            ["max-waiters-per-key", &wait::MAX_PER_KEY, 1000, 0, 1_000_000, ConfigurationFlags::DEFAULT, None],
            ["max-waiters", &wait::MAX_TOTAL, 100_000, 0, 10_000_000, ConfigurationFlags::DEFAULT, None],
        ],
        string: [],
        bool: [
            ["test-clock", &TEST_CLOCK, false, ConfigurationFlags::IMMUTABLE, None],
        ],
        enum: [],
        module_args_as_configuration: true,
    ]
}
