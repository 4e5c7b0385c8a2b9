//! Propagating effects to replicas and the AOF.
//!
//! Every write is sent as `RL._APPLY key <expiry + state>` (or `DEL key`) with
//! `RedisModule_Replicate`, never as the clock-dependent command, and always: whether the
//! server then keeps it (a replica, a replication backlog, an AOF, a replica's full sync
//! about to fork, a `redis-cli --rdb`, Valkey's slot migration) or drops it is the server's
//! business. There is no path on which the module decides that nothing listens, so there is
//! none on which a listener could receive the user's command.
//!
//! The price, on Redis 7.0 with nothing listening: about 3,000 instructions per write (the
//! command-table lookup and argument vector `RedisModule_Replicate` builds, and the encoding),
//! measured with `make instructions` (README, "Replication").

use crate::rm::{self, Ctx, RStr};
use std::ffi::CStr;

/// The internal command every effect is sent as (the AOF rewrite too); its row in `table.rs`.
pub const APPLY: &CStr = c"RL._APPLY";

/// Propagates a write of key `name`: its absolute expiry and encoded state.
pub fn apply(ctx: Ctx, name: &RStr, payload: &[u8]) {
    rm::replicate_key_bytes(ctx, APPLY, name, payload);
}

/// Propagates the deletion of key `name`.
pub fn del(ctx: Ctx, name: &RStr) {
    rm::replicate_key(ctx, c"DEL", name);
}
