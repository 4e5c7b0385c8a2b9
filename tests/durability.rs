//! Persistence and replication on real redis-servers: DEBUG RELOAD (RDB) keeps every
//! state and TTL; a replica holds exactly the primary's state whatever its own test
//! clock says; refused and dry-run requests propagate nothing; AOF reload (also after a
//! rewrite) restores the same state.

#[macro_use]
mod common;

use common::*;
use redis::Connection;
use std::collections::{BTreeMap, BTreeSet};

const DAY_MS: i64 = 86_400_000;

/// A workload over keys of all three algorithms with clock moves, leaving varied states
/// (partly spent, drained, previous-window counts, fractional rates). Long periods keep
/// the real TTLs in minutes, so nothing expires while a test runs. Returns, per key, the
/// arguments of a cost-1 request on it.
fn workload(c: &mut Connection, tag: &str) -> BTreeMap<String, Vec<String>> {
    let mut keys = BTreeMap::new();
    let mut req = |c: &mut Connection, a: Vec<String>, cost: i64| {
        let mut full = a.clone();
        full.extend(args!("COST", cost));
        let r = rate(c, &full);
        keys.insert(a[1].clone(), a);
        r
    };
    for i in 0..8i64 {
        for _ in 0..=i {
            req(
                c,
                args!("RL.GCRA", format!("{tag}g{i}"), 10, 1 + i % 3, 60000),
                1 + i % 4,
            );
            req(
                c,
                args!("RL.TOKENBUCKET", format!("{tag}t{i}"), 10, 1 + i % 3, 60000),
                1 + i % 4,
            );
            req(
                c,
                args!("RL.SLIDING", format!("{tag}s{i}"), 10, 60000),
                1 + i % 3,
            );
        }
        clock_advance(c, 1_111);
    }
    // Into the next sliding window: previous counts become non-zero.
    clock_advance(c, 61_000);
    for i in (0..8i64).step_by(2) {
        for _ in 0..2 {
            req(
                c,
                args!("RL.GCRA", format!("{tag}g{i}"), 10, 1 + i % 3, 60000),
                2,
            );
            req(
                c,
                args!("RL.TOKENBUCKET", format!("{tag}t{i}"), 10, 1 + i % 3, 60000),
                2,
            );
            req(c, args!("RL.SLIDING", format!("{tag}s{i}"), 10, 60000), 2);
        }
    }
    clock_advance(c, 1_234);
    for _ in 0..4 {
        req(c, args!("RL.GCRA", format!("{tag}gf"), 7, 3, 60000), 1);
        req(
            c,
            args!("RL.TOKENBUCKET", format!("{tag}tf"), 7, 3, 60000),
            1,
        );
        req(c, args!("RL.SLIDING", format!("{tag}sf"), 7, 70000), 2);
    }
    keys
}

#[derive(Debug, PartialEq, Eq, Clone)]
struct Durable {
    info: BTreeMap<String, String>,
    pexpiretime: i64,
    digest: String,
}

/// Per key: RL.INFO minus `skip` fields, PEXPIRETIME, DEBUG DIGEST-VALUE.
fn durable_all(c: &mut Connection, skip: &[&str]) -> BTreeMap<String, Durable> {
    let mut out = BTreeMap::new();
    for k in scan_all(c) {
        let info = info(c, &k).unwrap_or_else(|| panic!("RL.INFO {k} nil"));
        out.insert(
            k.clone(),
            Durable {
                info: strip(info, skip),
                pexpiretime: pexpiretime(c, &k),
                digest: digest(c, &k),
            },
        );
    }
    out
}

/// The digests are real (the type's digest callback is implemented): not all zeros, and
/// different states digest differently.
fn assert_digests_meaningful(d: &BTreeMap<String, Durable>) {
    let distinct: BTreeSet<&String> = d.values().map(|x| &x.digest).collect();
    assert!(
        !d.values().any(|x| x.digest.chars().all(|ch| ch == '0')),
        "DEBUG DIGEST-VALUE is all zeros for a module key: {d:?}"
    );
    assert!(
        distinct.len() > d.len() / 2,
        "DEBUG DIGEST-VALUE hardly depends on the state: {} distinct for {} keys",
        distinct.len(),
        d.len()
    );
}

fn assert_same(label: &str, want: &BTreeMap<String, Durable>, got: &BTreeMap<String, Durable>) {
    let wk: Vec<&String> = want.keys().collect();
    let gk: Vec<&String> = got.keys().collect();
    assert_eq!(wk, gk, "{label}: key sets differ");
    for (k, w) in want {
        assert_eq!(&got[k], w, "{label}: key {k} differs");
    }
}

fn pttls(c: &mut Connection, keys: &[String]) -> Vec<i64> {
    let cmds: Vec<Vec<String>> = keys.iter().map(|k| args!("PTTL", k)).collect();
    multi(c, &cmds).iter().map(int).collect()
}

#[test]
fn debug_reload_keeps_every_state_and_ttl() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let keys = workload(&mut c, "");
    let names: Vec<String> = keys.keys().cloned().collect();
    let now = clock_get(&mut c);
    // Only ttl_ms reads the real clock; the module clock is frozen, so `tokens` stays.
    let before = durable_all(&mut c, &["ttl_ms"]);
    assert_eq!(before.len(), keys.len());
    assert_digests_meaningful(&before);
    let dry_before: Vec<[i64; 5]> = keys
        .values()
        .map(|a| {
            let mut d = a.clone();
            d.push("DRYRUN".into());
            rate(&mut c, &d)
        })
        .collect();
    let started = std::time::Instant::now();
    let pttl_before = pttls(&mut c, &names);
    assert_eq!(text(&ok(&mut c, &args!("DEBUG", "RELOAD"))), "OK");
    let pttl_after = pttls(&mut c, &names);
    // Short of the first readings by at most the real time between them.
    let gap = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX) + 2;
    assert_eq!(clock_get(&mut c), now, "DEBUG RELOAD moved the test clock");
    let after = durable_all(&mut c, &["ttl_ms"]);
    assert_same("after DEBUG RELOAD", &before, &after);
    for (i, k) in names.iter().enumerate() {
        let (b, a) = (pttl_before[i], pttl_after[i]);
        assert!(b > 0, "{k}: PTTL {b}");
        assert!(
            a <= b && a >= b - gap,
            "{k}: PTTL {b} before DEBUG RELOAD, {a} after"
        );
    }
    // And the algorithms carry on exactly where they were.
    for (i, a) in keys.values().enumerate() {
        assert_eq!(rate(&mut c, a), dry_before[i], "{a:?} after DEBUG RELOAD");
    }
}

#[test]
fn replica_holds_the_primary_state_whatever_its_clock() {
    let p = Server::start();
    let mut pc = p.con();
    clock_set(&mut pc, T0);
    let r1 = p.start_replica();
    let mut rc1 = r1.con();
    clock_set(&mut rc1, T0 - DAY_MS); // a day behind
    let keys = workload(&mut pc, "a:");
    sync_replica(&mut pc, &mut rc1);

    // A second replica attached after the workload (full sync), a week ahead.
    let r2 = p.start_replica();
    let mut rc2 = r2.con();
    clock_set(&mut rc2, T0 + 7 * DAY_MS);

    // More work on the primary, streamed to both.
    clock_advance(&mut pc, 5_000);
    let more = workload(&mut pc, "b:");
    // Rule changes and a clock jump back: states re-timed by their units (a refusal under a
    // new interval stores that), and requests decided at the keys' own time.
    rate(&mut pc, &args!("RL.GCRA", "a:g7", 3, 1, 60000));
    rate(&mut pc, &args!("RL.TOKENBUCKET", "a:t7", 3, 1, 60000));
    rate(&mut pc, &args!("RL.SLIDING", "a:s7", 3, 60000));
    let back = clock_get(&mut pc) - 3_600_000;
    clock_set(&mut pc, back);
    for k in ["b:g1", "b:g6", "b:t1", "b:t6", "b:s1", "b:s6"] {
        let mut a = more[k].clone();
        a.extend(args!("COST", 1));
        rate(&mut pc, &a);
    }
    sync_replica(&mut pc, &mut rc1);
    sync_replica(&mut pc, &mut rc2);

    // `tokens` and `ttl_ms` depend on the reading server's clocks; all else must match.
    let skip = ["tokens", "ttl_ms"];
    let want = durable_all(&mut pc, &skip);
    assert_eq!(want.len(), keys.len() + more.len());
    assert_digests_meaningful(&want);
    assert_same(
        "replica 1 (clock a day behind)",
        &want,
        &durable_all(&mut rc1, &skip),
    );
    assert_same(
        "replica 2 (clock a week ahead)",
        &want,
        &durable_all(&mut rc2, &skip),
    );

    // The test clock is never replicated.
    assert_eq!(clock_get(&mut rc1), T0 - DAY_MS);
    assert_eq!(clock_get(&mut rc2), T0 + 7 * DAY_MS);

    // `tokens` is read on each server's own clock: a week ahead the buckets are full;
    // a day behind, the states lie ahead of its clock and read as spent (the key's own
    // time is later than the clock).
    for k in want.keys().filter(|k| k.contains(":t")) {
        let m2 = info(&mut rc2, k).unwrap();
        assert_eq!(m2["tokens"], m2["capacity"], "{k} on replica 2: {m2:?}");
        let m1 = info(&mut rc1, k).unwrap();
        assert_eq!(m1["tokens"], "0", "{k} on replica 1: {m1:?}");
    }
}

#[test]
fn refused_and_dry_run_requests_propagate_nothing() {
    let p = Server::builder()
        .config("repl-ping-replica-period", 3600)
        .start();
    let mut pc = p.con();
    clock_set(&mut pc, T0);
    let r = p.start_replica();
    let mut rc = r.con();
    clock_set(&mut rc, T0 + 5_000);
    let full = [
        args!("RL.GCRA", "full:g", 2, 1, 60000),
        args!("RL.TOKENBUCKET", "full:t", 2, 1, 60000),
        args!("RL.SLIDING", "full:s", 2, 60000),
    ];
    for a in &full {
        rate(&mut pc, a);
        rate(&mut pc, a);
        assert_eq!(rate(&mut pc, a)[0], 0);
    }
    sync_replica(&mut pc, &mut rc);
    let replica_before: Vec<KeySnap> = full.iter().map(|a| snap(&mut rc, &a[1])).collect();
    assert!(replica_before.iter().all(|s| s.ktype == "ratelimit"));
    let offset = |c: &mut Connection| info_field(c, "replication", "master_repl_offset").unwrap();
    let o1 = offset(&mut pc);

    for a in &full {
        for extra in [
            &[][..],
            &["COST", "2"][..],
            &["DRYRUN"][..],
            &["COST", "1", "DRYRUN"][..],
        ] {
            let mut x = a.clone();
            x.extend(extra.iter().map(|s| s.to_string()));
            assert_eq!(rate(&mut pc, &x)[0], 0, "{x:?}");
        }
        // A peek (COST 0) writes nothing, so it propagates nothing.
        let mut peek = a.clone();
        peek.extend(args!("COST", 0));
        assert_eq!(rate(&mut pc, &peek)[0], 1, "{peek:?}");
        ok(&mut pc, &args!("RL.INFO", a[1]));
        // A bad request is no write either.
        let mut bad = a.clone();
        bad.extend(args!("COST", -1));
        err(&mut pc, &bad);
    }
    let fresh = [
        args!("RL.GCRA", "new:g", 2, 1, 60000, "DRYRUN"),
        args!("RL.TOKENBUCKET", "new:t", 2, 1, 60000, "DRYRUN"),
        args!("RL.SLIDING", "new:s", 2, 60000, "DRYRUN"),
    ];
    for a in &fresh {
        assert_eq!(rate(&mut pc, a)[0], 1);
    }
    ok(&mut pc, &args!("RL.CLOCK", "ADVANCE", 0));
    ok(&mut pc, &args!("RL.CLOCK", "GET"));
    assert_eq!(
        offset(&mut pc),
        o1,
        "refused / dry-run / read-only commands fed the replication stream"
    );

    // Something real, to know the replica has seen everything before it.
    assert_eq!(
        rate(&mut pc, &args!("RL.GCRA", "sentinel", 2, 1, 60000))[0],
        1
    );
    sync_replica(&mut pc, &mut rc);
    assert!(exists(&mut rc, "sentinel"));
    for a in &fresh {
        assert!(!exists(&mut rc, &a[1]), "{} appeared on the replica", a[1]);
        assert!(!exists(&mut pc, &a[1]), "{} appeared on the primary", a[1]);
    }
    for (a, before) in full.iter().zip(&replica_before) {
        assert_eq!(
            &snap(&mut rc, &a[1]),
            before,
            "{} changed on the replica",
            a[1]
        );
    }
    assert_eq!(
        clock_get(&mut rc),
        T0 + 5_000,
        "the test clock was replicated"
    );
}

#[test]
fn aof_reload_and_rewrite_restore_the_same_state() {
    let s = Server::builder()
        .appendonly()
        .config("aof-use-rdb-preamble", "no")
        .start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    workload(&mut c, "");
    let skip = ["tokens", "ttl_ms"];
    let want = durable_all(&mut c, &skip);
    assert_digests_meaningful(&want);
    // Reload an hour later on the module clock: re-running clock-dependent commands
    // would give other states; replaying effects gives the same ones.
    clock_advance(&mut c, 3_600_000);
    let now = clock_get(&mut c);
    assert_eq!(text(&ok(&mut c, &args!("DEBUG", "LOADAOF"))), "OK");
    assert_same("after DEBUG LOADAOF", &want, &durable_all(&mut c, &skip));

    bgrewriteaof(&mut c);
    clock_advance(&mut c, 3_600_000);
    assert_eq!(text(&ok(&mut c, &args!("DEBUG", "LOADAOF"))), "OK");
    assert_same(
        "after BGREWRITEAOF + DEBUG LOADAOF",
        &want,
        &durable_all(&mut c, &skip),
    );
    assert_eq!(clock_get(&mut c), now + 3_600_000);
}
