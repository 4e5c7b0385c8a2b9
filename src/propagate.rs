//! Propagating effects to replicas and the AOF.
//!
//! Every write is sent as `RL._APPLY key <expiry + state>` (or `DEL key`) with
//! `RedisModule_Replicate`, never as the clock-dependent command, and always: whether the
//! server then keeps it (a replica, a replication backlog, an AOF, a replica's full sync
//! about to fork, a `redis-cli --rdb`, Valkey's slot migration) or drops it is the server's
//! business. There is no path on which the module decides that nothing listens, so there is
//! none on which a listener could receive the user's command.
//!
//! A call that writes several keys (RL.ALL) sends them as one effect, `RL._APPLY key
//! payload [key payload ...]` (up to [`MAX_PAIRS`] pairs each: [`Batch`]): every key of such a
//! call is in one slot, and one `RedisModule_Replicate` costs one command lookup, not one
//! per key.
//!
//! The price, on Redis 7.0 with nothing listening: about 3,000 instructions per write (the
//! command-table lookup and argument vector `RedisModule_Replicate` builds, and the encoding),
//! measured with `make instructions` (README, "Replication").

use crate::rm::{self, Ctx, RStr, MAX_PAIRS};
use crate::state::Encoded;
use std::ffi::CStr;

/// The internal command every effect is sent as (the AOF rewrite too); its row in `table.rs`.
pub const APPLY: &CStr = c"RL._APPLY";

/// Propagates a write of key `name`: its absolute expiry and encoded state.
pub fn apply(ctx: Ctx, name: &RStr, payload: &[u8]) {
    rm::replicate_pairs(ctx, APPLY, &[(name, payload)]);
}

/// Propagates the deletion of key `name`.
pub fn del(ctx: Ctx, name: &RStr) {
    rm::replicate_key(ctx, c"DEL", name);
}

/// The effects of one call on several keys, sent together: `RL._APPLY` with up to
/// [`MAX_PAIRS`] `key payload` pairs per command (on the stack, no allocation), in the order
/// the keys were written. An `RL._APPLY` passed on verbatim is only marked, and sent once
/// by the caller.
pub struct Batch<'a> {
    ctx: Ctx,
    pairs: [Option<(&'a RStr, Encoded, u64)>; MAX_PAIRS],
    len: usize,
    /// An effect that is the call itself was written: the caller passes it on verbatim.
    pub verbatim: bool,
}

impl<'a> Batch<'a> {
    pub fn new(ctx: Ctx) -> Batch<'a> {
        Batch {
            ctx,
            pairs: std::array::from_fn(|_| None),
            len: 0,
            verbatim: false,
        }
    }

    /// Adds the write of key `name`: its encoded state or operation, and its absolute
    /// expiry (unix ms, 0: none).
    pub fn push(&mut self, name: &'a RStr, enc: Encoded, at: u64) {
        if self.len == MAX_PAIRS {
            self.flush();
        }
        if let Some(p) = self.pairs.get_mut(self.len) {
            *p = Some((name, enc, at));
            self.len += 1;
        }
    }

    /// Sends what was added since the last flush, as one `RL._APPLY`.
    pub fn flush(&mut self) {
        let n = std::mem::take(&mut self.len);
        let first: &RStr = match self.pairs.first() {
            Some(Some((name, ..))) => name,
            _ => return,
        };
        let mut sent: [(&RStr, &[u8]); MAX_PAIRS] = [(first, &[]); MAX_PAIRS];
        for (out, p) in sent.iter_mut().zip(self.pairs.iter_mut().take(n)) {
            if let Some((name, enc, at)) = p {
                *out = (*name, enc.with_expiry(*at));
            }
        }
        rm::replicate_pairs(self.ctx, APPLY, sent.get(..n).unwrap_or_default());
        for p in self.pairs.iter_mut().take(n) {
            *p = None;
        }
    }
}
