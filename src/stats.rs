//! The `INFO ratelimit` counters: one [`Counters`] per command (kept by the command table,
//! `table.rs`, one per row), and the requests with the options of "Beyond yes or no", by
//! event; and the module's INFO sections ([`info`]).
//!
//! Commands run on the server's main thread only, so the counters are plain relaxed loads
//! and stores (no locked read-modify-write on the hot path).

use crate::clock;
use crate::rm::{self, InfoCtx};
use crate::rule::Event;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One command's counters.
pub struct Counters {
    calls: AtomicU64,
    admitted: AtomicU64,
    refused: AtomicU64,
    errors: AtomicU64,
}

impl Counters {
    pub const fn new() -> Counters {
        Counters {
            calls: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// A call starts.
    #[inline]
    pub fn call(&self) {
        bump(&self.calls);
    }

    /// The call answered an error.
    #[inline]
    pub fn error(&self) {
        bump(&self.errors);
    }

    /// The call decided a request (RELEASE/RENEW: 1 counts as admitted, 0 as refused): what
    /// its handler returned (`commands::Decided`).
    #[inline]
    pub fn decided(&self, allowed: bool) {
        bump(if allowed {
            &self.admitted
        } else {
            &self.refused
        });
    }
}

impl Default for Counters {
    fn default() -> Counters {
        Counters::new()
    }
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
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

fn field_u64(ctx: InfoCtx, name: &str, v: u64) {
    if let Ok(f) = CString::new(name) {
        rm::info_u64(ctx, &f, v);
    }
}

fn field_str(ctx: InfoCtx, name: &CStr, v: &CStr) {
    rm::info_str(ctx, name, v);
}

/// The module's INFO sections `ratelimit_clock` and `ratelimit_stats`, with the counters of
/// `commands`, each under its name (`table::info`, the INFO function `lib.rs` registers).
pub fn info<'a>(ctx: InfoCtx, commands: impl IntoIterator<Item = (&'a str, &'a Counters)>) {
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
    for (name, c) in commands {
        field_u64(ctx, &format!("{name}_calls"), c.calls.load(Relaxed));
        field_u64(ctx, &format!("{name}_admitted"), c.admitted.load(Relaxed));
        field_u64(ctx, &format!("{name}_refused"), c.refused.load(Relaxed));
        field_u64(ctx, &format!("{name}_errors"), c.errors.load(Relaxed));
    }
    for ((_, name), c) in Event::ALL.iter().zip(&EVENTS) {
        field_u64(ctx, name, c.load(Relaxed));
    }
}

/// `INFO ratelimit`'s `wait` section: clients waiting now (`WAIT`), waits begun, admitted
/// after waiting, timed out (or unblocked, or gone), refused at once for the bounds.
pub fn info_wait(ctx: InfoCtx, counters: [(&str, u64); 5]) {
    rm::info_section(ctx, c"wait");
    for (name, v) in counters {
        field_u64(ctx, name, v);
    }
}
