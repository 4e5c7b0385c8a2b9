//! Per-command counters and the `INFO ratelimit` section.
//!
//! Commands run on the server's main thread only, so the counters are plain relaxed loads
//! and stores (no locked read-modify-write on the hot path).

use crate::clock;
use crate::rm::{self, InfoCtx};
use crate::rule::Event;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub use crate::table::Stat;
use crate::table::{COMMANDS, COUNT as N};

struct Counters {
    calls: [AtomicU64; N],
    admitted: [AtomicU64; N],
    refused: [AtomicU64; N],
    errors: [AtomicU64; N],
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static COUNTERS: Counters = Counters {
    calls: [ZERO; N],
    admitted: [ZERO; N],
    refused: [ZERO; N],
    errors: [ZERO; N],
};
/// Requests with the options of "Beyond yes or no", by event (in `Event::ALL` order).
static EVENTS: [AtomicU64; Event::ALL.len()] = [ZERO; Event::ALL.len()];

/// Counts the events of one request ([`Event`] bits).
#[inline]
pub fn events(bits: u8) {
    if bits == 0 {
        return;
    }
    for ((e, _), c) in Event::ALL.iter().zip(&EVENTS) {
        if bits & e.bit() != 0 {
            bump(c);
        }
    }
}

#[inline]
fn bump(a: &AtomicU64) {
    a.store(a.load(Relaxed).wrapping_add(1), Relaxed);
}

/// A call of `s` starts.
#[inline]
pub fn call(s: Stat) {
    if let Some(c) = COUNTERS.calls.get(s as usize) {
        bump(c);
    }
}

/// A call of `s` answered an error.
#[inline]
pub fn error(s: Stat) {
    if let Some(c) = COUNTERS.errors.get(s as usize) {
        bump(c);
    }
}

/// A call of `s` decided a request (RELEASE/RENEW: 1 counts as admitted, 0 as refused):
/// what its handler returned (`commands::Decided`).
#[inline]
pub fn decided(s: Stat, allowed: bool) {
    let table = if allowed {
        &COUNTERS.admitted
    } else {
        &COUNTERS.refused
    };
    if let Some(c) = table.get(s as usize) {
        bump(c);
    }
}

fn field_u64(ctx: InfoCtx, name: &str, v: u64) {
    if let Ok(f) = CString::new(name) {
        rm::info_u64(ctx, &f, v);
    }
}

fn field_str(ctx: InfoCtx, name: &CStr, v: &CStr) {
    rm::info_str(ctx, name, v);
}

/// The module's INFO sections `ratelimit_clock` and `ratelimit_stats` (the INFO function
/// `lib.rs` registers with `rm::register_info`; the same for a crash report).
pub fn info(ctx: InfoCtx, _for_crash_report: bool) {
    rm::info_section(ctx, c"clock");
    let source = match clock::source() {
        "test" => c"test",
        "cached-microseconds" => c"cached-microseconds",
        _ => c"system-microseconds",
    };
    field_str(ctx, c"clock_source", source);
    let test = crate::config::test_clock_enabled();
    field_str(
        ctx,
        c"test_clock_enabled",
        if test { c"yes" } else { c"no" },
    );
    field_u64(ctx, "clock_ms", clock::now_ms());
    rm::info_section(ctx, c"stats");
    for (i, cmd) in COMMANDS.iter().enumerate() {
        let name = cmd.stat_name();
        let get = |t: &[AtomicU64; N]| t.get(i).map_or(0, |a| a.load(Relaxed));
        field_u64(ctx, &format!("{name}_calls"), get(&COUNTERS.calls));
        field_u64(ctx, &format!("{name}_admitted"), get(&COUNTERS.admitted));
        field_u64(ctx, &format!("{name}_refused"), get(&COUNTERS.refused));
        field_u64(ctx, &format!("{name}_errors"), get(&COUNTERS.errors));
    }
    for ((_, name), c) in Event::ALL.iter().zip(&EVENTS) {
        field_u64(ctx, name, c.load(Relaxed));
    }
}
