//! The one rendering of a decision: the five standard fields and the extra ones, in the
//! contract's order (`delay_ms` or `token`, `granted`, `probe`, `waited_ms`).

use crate::algo::Decision;
use crate::rm::{self, Ctx};
use crate::rule::{Extra, Outcome};
use std::io::Write;

/// Replies an array of `values` and room for `extra` more elements.
pub fn reply_ints(ctx: Ctx, values: &[i64], extra: usize) {
    rm::reply_array(ctx, values.len() + extra);
    for &v in values {
        rm::reply_i64(ctx, v);
    }
}

/// Replies the five standard fields, and room for `extra_fields` more.
pub fn reply_decision(ctx: Ctx, d: &Decision, extra_fields: usize) {
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let fields = [
        i64::from(d.allowed),
        int(d.limit),
        int(d.remaining),
        int(d.retry_after_ms),
        int(d.reset_after_ms),
    ];
    reply_ints(ctx, &fields, extra_fields);
}

/// Replies an outcome: the five fields, the command's extra field if any (QUEUE's
/// `delay_ms`, ACQUIRE's `token`), then `granted` for a PARTIAL request, then `probe` for a
/// PROBE request.
pub fn reply_outcome(ctx: Ctx, o: &Outcome) {
    let more = usize::from(o.granted.is_some())
        + usize::from(o.probe.is_some())
        + usize::from(o.waited.is_some());
    match o.extra {
        Extra::None => reply_decision(ctx, &o.decision, more),
        Extra::Delay(ms) => {
            reply_decision(ctx, &o.decision, 1 + more);
            rm::reply_u64(ctx, ms);
        }
        Extra::Token(t) => {
            reply_decision(ctx, &o.decision, 1 + more);
            match t {
                Some(t) => {
                    let mut buf = [0u8; 48];
                    let n = {
                        let mut w = &mut buf[..];
                        let _ = write!(w, "{t}");
                        48 - w.len()
                    };
                    rm::reply_bulk(ctx, buf.get(..n).unwrap_or(&[]));
                }
                None => rm::reply_null(ctx),
            }
        }
    }
    if let Some(g) = o.granted {
        rm::reply_u64(ctx, g);
    }
    if let Some(p) = o.probe {
        rm::reply_i64(ctx, i64::from(p));
    }
    if let Some(w) = o.waited {
        rm::reply_u64(ctx, w);
    }
}
