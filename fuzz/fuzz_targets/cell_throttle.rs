//! `CL.THROTTLE` (redis-cell's GCRA) over a sequence of requests: any accepted arguments,
//! any quantity, a clock that moves forward and jumps, and a starting state that may be an
//! adopted redis-cell string (any u64 of nanoseconds). Checks: no panic; the reply's limit is
//! `max_burst + 1`, remaining not negative; a refusal stores nothing and the key is fresh
//! after its reset; an admission's TTL (time to fresh) is at most the tolerance `dvt` and
//! the key is fresh after it; within a stretch where the clock does not
//! go back, `sum(quantity) * T <= dvt + elapsed`; the state the command stores (a `gcra`
//! state) survives the codec; the rule's GCRA parameters are accepted whenever redis-cell's are.
#![no_main]

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use rl_fuzz::algo::{cell, gcra, MAX_SPAN_MS, NS_PER_MS};
use rl_fuzz::state::{Bucket, State};
use rl_fuzz::{num, round_trip, MAX_NOW_US};

fn run(u: &mut Unstructured) -> Result<()> {
    let big = i64::MAX as u64;
    let (b, c, p) = (num(u, big)?, num(u, big)?, num(u, big)?);
    let Ok(params) = cell::Params::new(b, c, p) else {
        return Ok(());
    };
    let names = ["max_burst", "count_per_period", "period"];
    let gp = gcra::Params::new(
        params.limit(),
        params.count,
        params.period_s.saturating_mul(1000),
        names,
    );
    assert!(
        gp.is_ok(),
        "CL.THROTTLE {b} {c} {p}: cell accepts, gcra refuses: {gp:?}"
    );
    let gp = gp.unwrap();
    let limit = params.limit();
    let mut now_ns = num(u, MAX_NOW_US)? * 1_000;
    let mut tat: Option<u64> = if u.arbitrary()? {
        Some(num(u, u64::MAX)?)
    } else {
        None
    };
    let mut expires_at: u64 = if tat.is_some() { u64::MAX } else { 0 };
    let mut seg_start = now_ns;
    let mut seg_total: u128 = 0;
    for _ in 0..u.int_in_range(1..=48)? {
        if u.is_empty() {
            break;
        }
        match u.int_in_range(0u8..=7)? {
            0 => {
                let to = num(u, MAX_NOW_US)? * 1_000;
                if to < now_ns {
                    seg_start = to;
                    seg_total = 0;
                }
                now_ns = to;
            }
            _ => {
                now_ns = (now_ns + num(u, MAX_SPAN_MS * NS_PER_MS)?).min(MAX_NOW_US * 1_000);
            }
        }
        if tat.is_some() && now_ns >= expires_at {
            tat = None;
        }
        let q = num(u, big)?.max(1);
        let (reply, stored, ttl_ns) = cell::throttle(tat, &params, q, now_ns);
        let ctx = || {
            format!("{params:?} tat {tat:?} q {q} now {now_ns}: {reply:?} {stored:?} ttl {ttl_ns}")
        };
        assert_eq!(reply.limit, limit as i64, "{}", ctx());
        // (No upper bound on remaining: redis-cell's float truncation can exceed the limit,
        // e.g. max_burst 36421 count 42186 period 10 quantity above the limit answers
        // remaining 36428 > limit 36422, and the contract says: identical replies.)
        assert!(reply.remaining >= 0, "{}", ctx());
        assert!(reply.reset_after_s >= 0, "{}", ctx());
        if reply.limited {
            // A refusal stores nothing: a TAT ahead of the clock is read as it is.
            assert_eq!(stored, None, "{}", ctx());
            // What the caller is told: fresh once `reset_after` has run (a TAT far ahead
            // needs that long; beyond the clock's range nothing is checked).
            let later = now_ns.saturating_add(u64::try_from(ttl_ns.max(0)).unwrap());
            let Some(later) = later.div_ceil(NS_PER_MS).checked_mul(NS_PER_MS) else {
                continue;
            };
            let (r2, _, _) = cell::throttle(tat, &params, limit, later);
            assert!(
                !r2.limited,
                "refused with a reset of {ttl_ns} ns, still refused then: {}",
                ctx()
            );
            continue;
        }
        assert!(stored.is_some(), "{}", ctx());
        seg_total += u128::from(q);
        let t = {
            // T as redis-cell truncates it: dvt / (max_burst + 1).
            let (_, _, dvt_ttl) = cell::throttle(None, &params, 1, now_ns);
            dvt_ttl as u128
        };
        let dvt = t * u128::from(limit);
        assert!(
            seg_total * t <= dvt + u128::from(now_ns - seg_start),
            "admitted {seg_total} since {seg_start}: {}",
            ctx()
        );
        assert!(
            ttl_ns > 0 && ttl_ns as u128 <= dvt,
            "TTL beyond dvt: {}",
            ctx()
        );
        let new = stored.unwrap();
        let st = State::Gcra(Bucket {
            params: gp,
            tat: gcra::Tat { ns: new, frac: 0 },
        });
        round_trip(&st);
        // Fresh once the TTL has run: a request of the whole limit is admitted.
        let ttl_ms = (ttl_ns as u64).div_ceil(NS_PER_MS);
        let later = now_ns + ttl_ms * NS_PER_MS;
        let (r2, _, _) = cell::throttle(Some(new), &params, limit, later);
        assert!(
            !r2.limited,
            "not fresh after its TTL: {} then {r2:?}",
            ctx()
        );
        tat = Some(new);
        expires_at = later;
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
