//! Randomized runs of every rate command on a real server, each reply compared with an
//! exact model of the contract (GCRA and token bucket in ns, sliding window, fixed window,
//! log, queue), and no key the module writes left without a TTL.
use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rate::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Alg {
    Gcra,
    Tb,
    Sliding,
}

#[derive(Clone, Debug)]
struct Cfg {
    alg: Alg,
    p: Vec<i64>,
}

impl Cfg {
    fn limit(&self) -> i64 {
        self.p[0]
    }

    fn cmd(&self, key: &str, cost: i64, explicit_cost: bool, dry: bool) -> Vec<String> {
        let name = match self.alg {
            Alg::Gcra => "RL.GCRA",
            Alg::Tb => "RL.TOKENBUCKET",
            Alg::Sliding => "RL.SLIDING",
        };
        build(
            name,
            key,
            &self.p,
            if explicit_cost || cost != 1 {
                Some(cost)
            } else {
                None
            },
            dry,
        )
    }
}

fn ceil_div(a: i128, b: i128) -> i128 {
    assert!(b > 0);
    -((-a).div_euclid(b))
}

/// GCRA / token bucket, exact in ns (the test only uses intervals that are whole µs).
/// Returns the reply and, if admitted, the new theoretical arrival time.
fn gcra_model(p: &[i64], tat: Option<i128>, now_ms: i64, cost: i64) -> ([i64; 5], Option<i128>) {
    let (burst, count, period) = (p[0] as i128, p[1] as i128, p[2] as i128);
    let t = period * 1_000_000 / count;
    assert_eq!(
        t * count,
        period * 1_000_000,
        "test uses exact intervals only"
    );
    let now = now_ms as i128 * 1_000_000;
    let cost = cost as i128;
    let tat = tat.unwrap_or(now).max(now);
    let new_tat = tat + cost * t;
    let allow_at = new_tat - burst * t;
    if allow_at <= now {
        let remaining = (now + burst * t - new_tat).div_euclid(t);
        let reset = ceil_div(new_tat - now, 1_000_000);
        (
            [1, burst as i64, remaining as i64, 0, reset as i64],
            Some(new_tat),
        )
    } else {
        let remaining = (now + burst * t - tat).div_euclid(t).max(0);
        let retry = ceil_div(allow_at - now, 1_000_000);
        let reset = ceil_div(tat - now, 1_000_000);
        (
            [
                0,
                burst as i64,
                remaining as i64,
                retry as i64,
                reset as i64,
            ],
            None,
        )
    }
}

fn tokens_model(p: &[i64], tat: i128, now_ms: i64) -> i64 {
    let (cap, count, period) = (p[0] as i128, p[1] as i128, p[2] as i128);
    let t = period * 1_000_000 / count;
    let now = now_ms as i128 * 1_000_000;
    ((now + cap * t - tat.max(now)).div_euclid(t)).clamp(0, cap) as i64
}

/// Sliding window counter, exact, per the contract. State: (window_start_ms, previous,
/// current). Returns the reply and, if admitted, the new state.
fn sliding_model(
    p: &[i64],
    state: Option<(i64, i64, i64)>,
    now: i64,
    cost: i64,
) -> ([i64; 5], Option<(i64, i64, i64)>) {
    let (l, w) = (p[0] as i128, p[1] as i128);
    let now_i = now as i128;
    let cs = now_i.div_euclid(w) * w;
    let (prev, cur) = match state {
        Some((ws, pc, cc)) if ws as i128 == cs => (pc as i128, cc as i128),
        Some((ws, _, cc)) if ws as i128 == cs - w => (cc as i128, 0),
        _ => (0, 0),
    };
    let e = now_i - cs;
    let cost = cost as i128;
    let est_w = prev * (w - e) + cur * w; // estimate * window
    if est_w + cost * w <= l * w {
        let cur2 = cur + cost;
        let remaining = (l * w - prev * (w - e) - cur2 * w).div_euclid(w);
        let reset = cs + 2 * w - now_i;
        (
            [1, l as i64, remaining as i64, 0, reset as i64],
            Some((cs as i64, prev as i64, cur2 as i64)),
        )
    } else {
        let remaining = (l * w - est_w).div_euclid(w).max(0);
        let reset = if cur > 0 {
            cs + 2 * w - now_i
        } else if prev > 0 {
            cs + w - now_i
        } else {
            0
        };
        let retry = if cur + cost <= l {
            // Inside this window: prev*(w - t) <= (l - cur - cost)*w.
            ceil_div(w * (prev - (l - cur - cost)), prev) - e
        } else {
            // Next window: cur*(w - t) <= (l - cost)*w.
            (cs + w - now_i) + ceil_div(w * (cur - (l - cost)), cur)
        };
        (
            [0, l as i64, remaining as i64, retry as i64, reset as i64],
            None,
        )
    }
}

fn random_cfg(rng: &mut StdRng, i: usize) -> Cfg {
    let alg = [Alg::Gcra, Alg::Tb, Alg::Sliding][i % 3];
    let limit = if rng.gen_bool(0.2) {
        rng.gen_range(1..=3)
    } else {
        rng.gen_range(1..=20)
    };
    let p = match alg {
        Alg::Gcra | Alg::Tb => {
            let count = [1, 2, 4, 5, 8, 10][rng.gen_range(0..6)];
            let period = rng.gen_range(1..=3000);
            vec![limit, count, period]
        }
        Alg::Sliding => {
            let window = match rng.gen_range(0..10) {
                0 => rng.gen_range(1..=20),
                1 => 1000,
                _ => rng.gen_range(100..=3000),
            };
            vec![limit, window]
        }
    };
    Cfg { alg, p }
}

#[test]
fn randomized_run_matches_model_and_no_key_lacks_ttl() {
    let s = Server::start();
    let mut c = s.con();
    let mut rng = StdRng::seed_from_u64(0x5EED_2024);
    let mut now = T0;
    clock_set(&mut c, now);
    let cfgs: Vec<Cfg> = (0..200).map(|i| random_cfg(&mut rng, i)).collect();
    let mut admitted = 0;
    let mut refused = 0;
    for step in 0..4000 {
        let adv = match rng.gen_range(0..20) {
            0..=9 => 0,
            10..=15 => rng.gen_range(1..=20),
            16..=18 => rng.gen_range(21..=500),
            _ => rng.gen_range(501..=5000),
        };
        if adv > 0 {
            clock_advance(&mut c, adv);
            now += adv;
        }
        // Mostly a hot subset, so that keys fill up and get refused.
        let i = if rng.gen_bool(0.7) {
            rng.gen_range(0..20)
        } else {
            rng.gen_range(0..cfgs.len())
        };
        let cfg = &cfgs[i];
        let key = format!("rk:{i}");
        let cost = if rng.gen_bool(0.7) {
            1
        } else {
            rng.gen_range(1..=cfg.limit())
        };
        let dry = rng.gen_bool(0.15);
        let cmd = cfg.cmd(&key, cost, rng.gen_bool(0.5), dry);
        let out = multi(
            &mut c,
            &[
                args!("EXISTS", key),
                args!("PEXPIRETIME", key),
                args!("RL.INFO", key),
                cmd.clone(),
                args!("PTTL", key),
                args!("PEXPIRETIME", key),
                args!("RL.INFO", key),
                args!("EXISTS", key),
            ],
        );
        let ctx_s = format!(
            "step {step} now {now} {cmd:?} cfg {cfg:?} before {:?}",
            out[2]
        );
        let ctx = || ctx_s.clone();
        if let Some(e) = error_text(&out[3]) {
            panic!("{}: error {e}", ctx());
        }
        let got = reply5(&out[3]).unwrap_or_else(|m| panic!("{}: {m}", ctx()));
        let before = parse_info(&out[2]);
        let after = parse_info(&out[6]);
        assert_eq!(int(&out[0]) == 1, before.is_some(), "{}", ctx());
        // Model.
        match cfg.alg {
            Alg::Gcra | Alg::Tb => {
                let tat = before
                    .as_ref()
                    .map(|m| m["tat_ns"].parse::<i128>().expect("tat_ns"));
                let (want, new_tat) = gcra_model(&cfg.p, tat, now, cost);
                assert_eq!(got, want, "{}", ctx());
                if let (Some(nt), false) = (new_tat, dry) {
                    let m = after
                        .as_ref()
                        .unwrap_or_else(|| panic!("{}: no key", ctx()));
                    assert_eq!(m["tat_ns"], nt.to_string(), "{}: tat_ns", ctx());
                    let names: [&str; 4] = if cfg.alg == Alg::Gcra {
                        ["gcra", "burst", "count", "period_ms"]
                    } else {
                        [
                            "tokenbucket",
                            "capacity",
                            "refill_tokens",
                            "refill_period_ms",
                        ]
                    };
                    assert_eq!(m["algorithm"], names[0], "{}", ctx());
                    for (f, v) in names[1..].iter().zip(&cfg.p) {
                        assert_eq!(m[*f], v.to_string(), "{}: field {f}", ctx());
                    }
                    if cfg.alg == Alg::Tb {
                        assert_eq!(
                            info_int(m, "tokens"),
                            tokens_model(&cfg.p, nt, now),
                            "{}: tokens",
                            ctx()
                        );
                        assert_eq!(info_int(m, "tokens"), got[2], "{}: tokens", ctx());
                    }
                }
            }
            Alg::Sliding => {
                let st = before.as_ref().map(|m| {
                    (
                        info_int(m, "window_start_ms"),
                        info_int(m, "previous_count"),
                        info_int(m, "current_count"),
                    )
                });
                let (want, new_state) = sliding_model(&cfg.p, st, now, cost);
                assert_eq!(got, want, "{}", ctx());
                if let (Some(ns), false) = (new_state, dry) {
                    let m = after
                        .as_ref()
                        .unwrap_or_else(|| panic!("{}: no key", ctx()));
                    assert_eq!(m["algorithm"], "sliding");
                    assert_eq!(info_int(m, "limit"), cfg.p[0]);
                    assert_eq!(info_int(m, "window_ms"), cfg.p[1]);
                    let got_state = (
                        info_int(m, "window_start_ms"),
                        info_int(m, "previous_count"),
                        info_int(m, "current_count"),
                    );
                    assert_eq!(got_state, ns, "{}: stored state", ctx());
                }
            }
        }
        // Effects.
        if got[0] == 1 && !dry {
            admitted += 1;
            assert_eq!(int(&out[7]), 1, "{}: admitted but no key", ctx());
            let p = int(&out[4]);
            assert_pttl_in_multi(p, got[4], &ctx());
            let m = after.unwrap();
            let ttl = info_int(&m, "ttl_ms");
            // RL.INFO runs after PTTL in the same MULTI: its ttl_ms is shorter by at most the
            // MULTI's real time, and either may be rounded 1 ms the other way.
            let slack = last_multi_ms() + 1;
            assert!(
                ttl <= p + 1 && ttl >= p - slack,
                "{}: ttl_ms {ttl} vs PTTL {p} (shorter at most {slack} ms)",
                ctx()
            );
        } else {
            if got[0] == 0 {
                refused += 1;
            }
            assert_eq!(out[0], out[7], "{}: existence changed", ctx());
            assert_eq!(out[1], out[5], "{}: PEXPIRETIME changed", ctx());
            assert_eq!(
                before.map(|m| strip(m, &["ttl_ms"])),
                after.map(|m| strip(m, &["ttl_ms"])),
                "{}: state changed",
                ctx()
            );
        }
        // Sometimes: the same request is refused at retry_after - 1 and admitted at
        // retry_after (dry runs, in one MULTI so no real-time expiry can interfere).
        if got[0] == 0 && rng.gen_bool(0.3) {
            let r = got[3];
            let dcmd = cfg.cmd(&key, cost, true, true);
            let o = multi(
                &mut c,
                &[
                    args!("EXISTS", key),
                    args!("RL.CLOCK", "ADVANCE", r - 1),
                    dcmd.clone(),
                    args!("RL.CLOCK", "ADVANCE", 1),
                    dcmd.clone(),
                ],
            );
            now += r;
            if int(&o[0]) == 1 {
                let early = reply5(&o[2]).unwrap();
                let late = reply5(&o[4]).unwrap();
                assert_eq!(
                    early[0],
                    0,
                    "{}: admitted at retry_after-1: {early:?}",
                    ctx()
                );
                assert_eq!(late[0], 1, "{}: refused at retry_after: {late:?}", ctx());
            }
        }
    }
    assert!(
        admitted > 500 && refused > 100,
        "admitted {admitted} refused {refused}"
    );
    assert_eq!(clock_get(&mut c), now);
    // No key anywhere without a TTL.
    let keys = scan_all(&mut c);
    assert!(!keys.is_empty(), "no key left to check");
    for k in &keys {
        let p = pttl(&mut c, k);
        assert_ne!(p, -1, "key {k} has no TTL");
    }
}

// ------------------------------------------------------------- fixed, log, queue

/// The contract's fixed window: admitted iff count + cost <= limit; retry = reset = end.
fn fixed_model(st: &mut (i64, i64), limit: i64, w: i64, now: i64, cost: i64) -> [i64; 5] {
    let start = now - now.rem_euclid(w);
    if st.0 != start {
        *st = (start, 0);
    }
    let to_end = start + w - now;
    if st.1 + cost <= limit {
        st.1 += cost;
        [1, limit, limit - st.1, 0, to_end]
    } else {
        let reset = if st.1 > 0 { to_end } else { 0 };
        [0, limit, limit - st.1, to_end, reset]
    }
}

/// The contract's exact log: admitted iff live cost in (now - w, now] + cost <= limit.
fn log_model(entries: &mut Vec<i64>, limit: i64, w: i64, now: i64, cost: i64) -> [i64; 5] {
    entries.retain(|&e| e + w > now);
    let live = entries.len() as i64;
    if live + cost <= limit {
        entries.extend(std::iter::repeat_n(now, cost as usize));
        [1, limit, limit - live - cost, 0, w]
    } else {
        let k = (live + cost - limit) as usize;
        let retry = entries[k - 1] + w - now;
        let reset = entries[entries.len() - 1] + w - now;
        [0, limit, limit - live, retry, reset]
    }
}

/// The contract's queue (a GCRA with one request per interval, capacity at once):
/// (five fields, delay). `tat` in ms (every quantity is whole ms here).
fn queue_model(tat: &mut i64, cap: i64, iv: i64, now: i64, cost: i64) -> [i64; 6] {
    let tau = cap * iv;
    let cur = (*tat).max(now);
    let next = cur + cost * iv;
    if next - now <= tau {
        *tat = next;
        [1, cap, (tau - (next - now)) / iv, 0, next - now, cur - now]
    } else {
        [
            0,
            cap,
            (tau - (cur - now)) / iv,
            next - tau - now,
            cur - now,
            0,
        ]
    }
}

#[test]
fn randomized_runs_match_the_contract_models() {
    let srv = Server::start();
    let mut c = srv.con();
    let mut rng = StdRng::seed_from_u64(0x5eed_0003);
    for round in 0..6 {
        let limit: i64 = rng.gen_range(1..=8);
        // Windows/intervals in whole seconds and up to minutes, so no key expires in real
        // time while the run lasts.
        let w: i64 = [3_000, 7_000, 60_000, 10_000][round % 4];
        let iv: i64 = [1_000, 2_500, 700][round % 3];
        clock_set(&mut c, T0 + rng.gen_range(0..w));
        let (kf, kl, kq) = (
            format!("f{round}"),
            format!("l{round}"),
            format!("q{round}"),
        );
        let mut fst = (0i64, 0i64);
        let mut log: Vec<i64> = Vec::new();
        let mut tat = 0i64;
        for step in 0..250 {
            let dt = match rng.gen_range(0..10) {
                0..=3 => 0,
                4..=7 => rng.gen_range(1..=w / 4),
                _ => rng.gen_range(1..=2 * w),
            };
            clock_advance(&mut c, dt);
            let mut now = clock_get(&mut c);
            // A RL.FIXED key's TTL is the time to its window's end, and TTLs run on the
            // real clock: keep 300 ms of it, so the key cannot expire before its window
            // ends on the test clock (the exact last-ms answers are tested above).
            if now % w > w - 300 {
                clock_advance(&mut c, 300);
                now = clock_get(&mut c);
            }
            let cost = if rng.gen_bool(0.7) {
                1
            } else {
                rng.gen_range(1..=limit)
            };
            let dry = rng.gen_bool(0.15);
            let mut opts: Vec<String> = Vec::new();
            if cost != 1 || rng.gen_bool(0.2) {
                opts.extend(args!("COST", cost));
            }
            if dry {
                opts.push("DRYRUN".into());
            }
            let o: Vec<&str> = opts.iter().map(String::as_str).collect();
            let ctx = format!(
                "round {round} step {step} now +{} cost {cost} dry {dry}",
                now - T0
            );

            let mut f2 = fst;
            let want = fixed_model(if dry { &mut f2 } else { &mut fst }, limit, w, now, cost);
            let got = r5(&mut c, &with(&args!("RL.FIXED", &kf, limit, w), &o));
            assert_eq!(got, want, "RL.FIXED {ctx}");

            let mut l2 = log.clone();
            let want = log_model(if dry { &mut l2 } else { &mut log }, limit, w, now, cost);
            let got = r5(&mut c, &with(&args!("RL.LOG", &kl, limit, w), &o));
            assert_eq!(got, want, "RL.LOG {ctx}");

            let mut t2 = tat;
            let want = queue_model(if dry { &mut t2 } else { &mut tat }, limit, iv, now, cost);
            let got = q6(&mut c, &with(&args!("RL.QUEUE", &kq, limit, iv), &o));
            assert_eq!(got, want, "RL.QUEUE {ctx}");
        }
    }
}
