//! Propagating effects to replicas and the AOF, and skipping the work when nothing can
//! receive them.
//!
//! A write is normally sent as `RL._APPLY key <expiry + state>` with `RedisModule_Replicate`,
//! never as the clock-dependent command. On Redis 7.0 that call costs about 3,000
//! instructions (a command-table lookup that allocates, and an argument vector), even when
//! the server then drops the command because it has no AOF, no replica and no replication
//! backlog: Redis's own commands pay nothing in that case. So a command takes the quiet path
//! when this is *proven*:
//!
//! - the AOF is off (`REDISMODULE_CTX_FLAGS_AOF`, checked on every call), and
//! - `INFO replication` said `role:master`, no connected replica, no replica waiting for a
//!   PSYNC and no replication backlog, when checked at load or at the end of a load (and
//!   again at the first command after either, once the server has finished starting); and no
//!   event since then could have changed that: a replica connecting or a role change makes
//!   the module propagate until a later load reads INFO again; so does any fork on Valkey
//!   (its atomic slot migration streams writes to the target after a fork); on Redis a fork
//!   re-reads `INFO replication` (a replica's full sync creates the backlog before it forks,
//!   and writes before the fork are in the snapshot).
//!
//! The quiet path still marks the write for the server (`RedisModule_ReplicateVerbatim`, once
//! per command: `server.dirty` drives `save` points), and the server drops it as it drops
//! an `INCR`. Should a listener ever exist unnoticed, it would receive the user's command
//! verbatim and re-run it on its own clock, never nothing.

use crate::rm::{api, Ctx, RStr};
use redis_module::raw;
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// False only while it is proven that nothing receives the replication stream.
static LISTENED: AtomicBool = AtomicBool::new(true);
/// The server is Valkey.
static VALKEY: AtomicBool = AtomicBool::new(false);
/// The current command wrote on the quiet path: mark it once when it finishes.
static PENDING: AtomicBool = AtomicBool::new(false);
/// `INFO replication` is to be read again before the next command: set at load and when a
/// load ends (the server may restore a replication backlog after its load-ended event).
static RECHECK: AtomicBool = AtomicBool::new(false);

/// Whether the current command may skip propagation.
pub fn quiet(ctx: Ctx) -> bool {
    if RECHECK.load(Relaxed) && RECHECK.swap(false, Relaxed) {
        recheck(ctx);
    }
    !LISTENED.load(Relaxed) && crate::rm::context_flags(ctx) & raw::REDISMODULE_CTX_FLAGS_AOF == 0
}

/// Whether effects are currently propagated (for INFO and tests).
pub fn listened() -> bool {
    LISTENED.load(Relaxed)
}

/// Records a write whose propagation was skipped ([`quiet`]).
pub fn skipped() {
    PENDING.store(true, Relaxed);
}

/// Propagates a write of key `name`: its absolute expiry and encoded state.
pub fn apply(ctx: Ctx, name: RStr, payload: &[u8]) {
    api!(RedisModule_Replicate(
        ctx,
        c"RL._APPLY".as_ptr(),
        c"sb".as_ptr(),
        name,
        payload.as_ptr(),
        payload.len()
    ) else raw::REDISMODULE_ERR as c_int);
}

/// Propagates the deletion of key `name`.
pub fn del(ctx: Ctx, name: RStr) {
    api!(RedisModule_Replicate(ctx, c"DEL".as_ptr(), c"s".as_ptr(), name) else raw::REDISMODULE_ERR as c_int);
}

/// Called when a command returns: marks a quiet write once.
pub fn finish(ctx: Ctx) {
    if PENDING.swap(false, Relaxed) {
        api!(RedisModule_ReplicateVerbatim(ctx) else 0);
    }
}

/// An `INFO` section, freed on drop.
struct Info {
    ctx: Ctx,
    data: *mut raw::RedisModuleServerInfoData,
}

impl Info {
    fn get(ctx: Ctx, section: &CStr) -> Option<Info> {
        let data = api!(RedisModule_GetServerInfo(ctx, section.as_ptr()) else std::ptr::null_mut());
        (!data.is_null()).then_some(Info { ctx, data })
    }

    fn signed(&self, field: &CStr) -> Option<i64> {
        let mut err: c_int = 0;
        let v = api!(RedisModule_ServerInfoGetFieldSigned(self.data, field.as_ptr(), &mut err) else { err = 1; 0 });
        (err == 0).then_some(v)
    }

    fn text(&self, field: &CStr) -> Option<&[u8]> {
        let p =
            api!(RedisModule_ServerInfoGetFieldC(self.data, field.as_ptr()) else std::ptr::null());
        // SAFETY: a NUL-terminated string owned by `self.data`, which outlives the borrow.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

impl Drop for Info {
    fn drop(&mut self) {
        api!(RedisModule_FreeServerInfo(self.ctx, self.data) else ());
    }
}

/// Whether `INFO replication` proves that nothing receives the replication stream.
fn proven_unlistened(ctx: Ctx) -> bool {
    let Some(i) = Info::get(ctx, c"replication") else {
        return false;
    };
    i.text(c"role") == Some(b"master")
        && i.signed(c"connected_slaves") == Some(0)
        && i.signed(c"repl_backlog_active") == Some(0)
        && i.signed(c"replicas_waiting_psync").unwrap_or(0) == 0
}

fn recheck(ctx: Ctx) {
    LISTENED.store(!proven_unlistened(ctx), Relaxed);
}

unsafe extern "C" fn on_event(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    sub: u64,
    _: *mut c_void,
) {
    match eid.id {
        raw::REDISMODULE_EVENT_FORK_CHILD if sub == raw::REDISMODULE_SUBEVENT_FORK_CHILD_BORN => {
            if VALKEY.load(Relaxed) {
                LISTENED.store(true, Relaxed);
            } else if !LISTENED.load(Relaxed) {
                recheck(ctx);
            }
        }
        raw::REDISMODULE_EVENT_FORK_CHILD => {}
        raw::REDISMODULE_EVENT_LOADING if sub == raw::REDISMODULE_SUBEVENT_LOADING_ENDED => {
            // Now, and again at the first command, once the load is complete.
            recheck(ctx);
            RECHECK.store(true, Relaxed);
        }
        raw::REDISMODULE_EVENT_LOADING => {}
        // A role change, a replica connecting or leaving, the link to a primary.
        _ => LISTENED.store(true, Relaxed),
    }
}

/// At load: learns the server, subscribes to the events that can add a listener, and checks
/// whether one exists now. Without the events, effects are always propagated.
pub fn init(ctx: Ctx) {
    let valkey = Info::get(ctx, c"server").is_some_and(|i| i.text(c"valkey_version").is_some());
    VALKEY.store(valkey, Relaxed);
    let mut subscribed = true;
    for id in [
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        raw::REDISMODULE_EVENT_REPLICA_CHANGE,
        raw::REDISMODULE_EVENT_MASTER_LINK_CHANGE,
        raw::REDISMODULE_EVENT_FORK_CHILD,
        raw::REDISMODULE_EVENT_LOADING,
    ] {
        let ev = raw::RedisModuleEvent { id, dataver: 1 };
        subscribed &= api!(RedisModule_SubscribeToServerEvent(ctx, ev, Some(on_event)) else raw::REDISMODULE_ERR as c_int)
            == raw::REDISMODULE_OK as c_int;
    }
    if subscribed {
        recheck(ctx);
        RECHECK.store(true, Relaxed);
    } else {
        LISTENED.store(true, Relaxed);
    }
}
