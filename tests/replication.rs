//! Replication on real servers (Redis 7.0 and Valkey 9): a randomized workload over every
//! algorithm on the real clock, with single commands, RL.ALL, MULTI/EXEC blocks and Lua
//! scripts, leaves every key identical on the primary and its replicas (RL.INFO minus the
//! fields read on the reading server's clock, DEBUG DIGEST-VALUE, PEXPIRETIME), also on
//! replicas that joined late through a full resync (diskless and disk-based). After a
//! failover the new primary continues every limit from the replicated state.

#[macro_use]
mod common;
#[path = "support/workload.rs"]
mod workload;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::Duration;
use workload::{dry_replies, durable, durable_keys, flat, Durable, Probes};

/// Read on the reading server's own clock: never compared across servers.
const CLOCK_FIELDS: &[&str] = &["tokens", "ttl_ms"];

/// One key of the randomized workload: its command and two rules (the second one is used
/// now and then: rule changes are normal operation).
struct Spec {
    key: String,
    cmd: &'static str,
    rules: [Vec<i64>; 2],
}

fn specs() -> Vec<Spec> {
    let mut v = Vec::new();
    let mut add = |name: &str, cmd: &'static str, a: Vec<i64>, b: Vec<i64>| {
        for i in 0..4 {
            v.push(Spec {
                key: format!("{name}:{i}"),
                cmd,
                rules: [a.clone(), b.clone()],
            });
        }
    };
    // Rates fast enough that refills and window changes happen during the run, TTLs from
    // a second to a minute.
    add("gcra", "RL.GCRA", vec![40, 5, 1000], vec![20, 7, 1000]);
    add(
        "gcra:slow",
        "RL.GCRA",
        vec![10, 1, 60_000],
        vec![12, 2, 60_000],
    );
    add("tb", "RL.TOKENBUCKET", vec![30, 3, 1000], vec![20, 5, 1000]);
    add("sliding", "RL.SLIDING", vec![40, 1500], vec![30, 1000]);
    add(
        "sliding:long",
        "RL.SLIDING",
        vec![60, 60_000],
        vec![50, 60_000],
    );
    add("fixed", "RL.FIXED", vec![30, 700], vec![20, 900]);
    add("log", "RL.LOG", vec![50, 2000], vec![40, 1500]);
    add("log:long", "RL.LOG", vec![80, 60_000], vec![90, 60_000]);
    add("queue", "RL.QUEUE", vec![10, 300], vec![8, 200]);
    add("queue:long", "RL.QUEUE", vec![5, 5000], vec![6, 4000]);
    add("lease", "RL.ACQUIRE", vec![5, 1500], vec![4, 1200]);
    add("lease:long", "RL.ACQUIRE", vec![4, 30_000], vec![5, 20_000]);
    add("cell", "CL.THROTTLE", vec![20, 10, 1], vec![15, 10, 1]);
    add("cell:long", "CL.THROTTLE", vec![10, 1, 60], vec![12, 1, 60]);
    // A fixed window's key lives until its window ends (aligned to the epoch): windows of
    // different lengths end at different times, so some are always far from their end.
    for (i, w) in [60_000, 70_000, 80_000, 90_000].into_iter().enumerate() {
        v.push(Spec {
            key: format!("fixed:long:{i}"),
            cmd: "RL.FIXED",
            rules: [vec![60, w], vec![70, w]],
        });
    }
    v
}

/// One random command of the workload.
fn random_op(
    rng: &mut StdRng,
    specs: &[Spec],
    tokens: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    let s = &specs[rng.gen_range(0..specs.len())];
    let rule = &s.rules[usize::from(rng.gen_bool(0.1))];
    let mut a = vec![s.cmd.to_string(), s.key.clone()];
    match s.cmd {
        "RL.ACQUIRE" => {
            let known = tokens.get(&s.key).filter(|t| !t.is_empty());
            match (rng.gen_range(0..10), known) {
                (0..=1, Some(t)) => {
                    return args!("RL.RELEASE", s.key, t[rng.gen_range(0..t.len())]);
                }
                (2, Some(t)) => {
                    return args!("RL.RENEW", s.key, t[rng.gen_range(0..t.len())], rule[1] * 2);
                }
                (3, _) => return args!("RL.RELEASE", s.key, "1-0"),
                _ => {}
            }
            a.extend(rule.iter().map(|x| x.to_string()));
            if rng.gen_bool(0.1) {
                a.push("DRYRUN".into());
            }
        }
        "CL.THROTTLE" => {
            a.extend(rule.iter().map(|x| x.to_string()));
            if rng.gen_bool(0.3) {
                a.push(rng.gen_range(1..=3).to_string());
            }
        }
        _ => {
            a.extend(rule.iter().map(|x| x.to_string()));
            let cost = rng.gen_range(1..=3);
            if cost > 1 || rng.gen_bool(0.2) {
                a.extend(args!("COST", cost));
            }
            if rng.gen_bool(0.1) {
                a.push("DRYRUN".into());
            }
        }
    }
    a
}

/// A random RL.ALL over 2 or 3 keys of the rate algorithms (several limits, all or
/// nothing: its effects reach the replica wrapped in MULTI/EXEC).
fn random_all(rng: &mut StdRng, specs: &[Spec]) -> Vec<String> {
    let rated: Vec<&Spec> = specs
        .iter()
        .filter(|s| !matches!(s.cmd, "RL.ACQUIRE" | "CL.THROTTLE"))
        .collect();
    let n = rng.gen_range(2..=3);
    let mut chosen: Vec<&Spec> = Vec::new();
    while chosen.len() < n {
        let s = rated[rng.gen_range(0..rated.len())];
        if !chosen.iter().any(|c| c.key == s.key) {
            chosen.push(s);
        }
    }
    let mut a = args!("RL.ALL", n);
    a.extend(chosen.iter().map(|s| s.key.clone()));
    for s in &chosen {
        a.push(s.cmd.trim_start_matches("RL.").to_string());
        a.extend(
            s.rules[usize::from(rng.gen_bool(0.1))]
                .iter()
                .map(|x| x.to_string()),
        );
        if rng.gen_bool(0.3) {
            a.extend(args!("COST", rng.gen_range(1..=3)));
        }
    }
    if rng.gen_bool(0.1) {
        a.push("DRYRUN".into());
    }
    a
}

/// Remembers the tokens of admitted ACQUIREs, so RELEASE / RENEW can name real leases.
fn note_reply(tokens: &mut BTreeMap<String, Vec<String>>, op: &[String], v: &Value) {
    if op[0] == "RL.ACQUIRE" && !op.iter().any(|a| a == "DRYRUN") {
        let f = flat(v);
        if f[0] == "1" {
            let t = tokens.entry(op[1].clone()).or_default();
            t.push(f[5].clone());
            if t.len() > 8 {
                t.remove(0);
            }
        }
    }
}

/// Runs each op of the batch in one Lua script (keys in KEYS, the rest of each command
/// space-separated in ARGV).
const SCRIPT: &str = r#"
local res = {}
for i, spec in ipairs(ARGV) do
  local a = {}
  for w in string.gmatch(spec, '%S+') do a[#a + 1] = w end
  local cmd = table.remove(a, 1)
  res[i] = redis.call(cmd, KEYS[i], unpack(a))
end
return res
"#;

fn eval_batch(c: &mut Connection, ops: &[Vec<String>]) -> Vec<Value> {
    let mut a = args!("EVAL", SCRIPT, ops.len());
    a.extend(ops.iter().map(|o| o[1].clone()));
    for o in ops {
        let mut rest = vec![o[0].clone()];
        rest.extend(o[2..].iter().cloned());
        a.push(rest.join(" "));
    }
    match ok(c, &a) {
        Value::Array(items) => items,
        other => panic!("EVAL answered {other:?}"),
    }
}

/// Runs `rounds` rounds of random traffic on the primary (real clock): single commands,
/// MULTI/EXEC blocks and Lua scripts, with short pauses so that time passes.
fn random_workload(
    c: &mut Connection,
    rng: &mut StdRng,
    specs: &[Spec],
    tokens: &mut BTreeMap<String, Vec<String>>,
    rounds: usize,
) -> (usize, usize, usize) {
    let (mut singles, mut multis, mut scripts) = (0, 0, 0);
    for _ in 0..rounds {
        for _ in 0..25 {
            match rng.gen_range(0..10) {
                0..=6 => {
                    let op = if rng.gen_bool(0.1) {
                        random_all(rng, specs)
                    } else {
                        random_op(rng, specs, tokens)
                    };
                    let v = ok(c, &op);
                    note_reply(tokens, &op, &v);
                    singles += 1;
                }
                7..=8 => {
                    let n = rng.gen_range(2..=6);
                    let ops: Vec<Vec<String>> = (0..n)
                        .map(|_| {
                            if rng.gen_bool(0.1) {
                                random_all(rng, specs)
                            } else {
                                random_op(rng, specs, tokens)
                            }
                        })
                        .collect();
                    for (op, v) in ops.iter().zip(multi(c, &ops)) {
                        assert!(error_text(&v).is_none(), "{op:?} in MULTI: {v:?}");
                        note_reply(tokens, op, &v);
                    }
                    multis += 1;
                }
                _ => {
                    let n = rng.gen_range(2..=6);
                    let ops: Vec<Vec<String>> =
                        (0..n).map(|_| random_op(rng, specs, tokens)).collect();
                    for (op, v) in ops.iter().zip(eval_batch(c, &ops)) {
                        note_reply(tokens, op, &v);
                    }
                    scripts += 1;
                }
            }
        }
        thread::sleep(Duration::from_millis(40));
    }
    (singles, multis, scripts)
}

/// Compares every key of the primary with the replica. Keys that are about to expire
/// (PTTL under 1.5 s on the primary) are left out: the two reads are not one instant.
/// Returns how many keys were compared.
fn compare(label: &str, pc: &mut Connection, rc: &mut Connection) -> usize {
    let keys_p: BTreeSet<String> = scan_all(pc).into_iter().collect();
    let keys_r: BTreeSet<String> = scan_all(rc).into_iter().collect();
    let mut compared = 0;
    let mut algos = BTreeSet::new();
    for k in keys_p.union(&keys_r) {
        let ttl = pttl(pc, k);
        if ttl < 1500 {
            continue; // expiring (or gone) on the primary: not comparable at one instant
        }
        assert!(
            keys_r.contains(k),
            "{label}: {k} (PTTL {ttl}) missing on the replica"
        );
        let want = durable(pc, k, CLOCK_FIELDS);
        let got = durable(rc, k, CLOCK_FIELDS);
        assert_eq!(
            got, want,
            "{label}: {k} differs between primary and replica"
        );
        algos.insert(want.info["algorithm"].clone());
        compared += 1;
    }
    assert!(
        compared * 10 >= keys_p.len() * 6,
        "{label}: only {compared} of {} keys comparable",
        keys_p.len()
    );
    assert_eq!(algos.len(), 7, "{label}: algorithms compared: {algos:?}");
    compared
}

/// The replica applied effects only: RL._APPLY, never the clock-dependent commands or the
/// scripts that called them.
fn assert_effects_only(label: &str, rc: &mut Connection) {
    let stats = text(&ok(rc, &args!("INFO", "commandstats"))).to_lowercase();
    assert!(
        stats.contains("cmdstat_rl._apply:"),
        "{label}: the replica applied no RL._APPLY:\n{stats}"
    );
    for c in [
        "rl.gcra",
        "rl.tokenbucket",
        "rl.sliding",
        "rl.fixed",
        "rl.log",
        "rl.queue",
        "rl.acquire",
        "rl.release",
        "rl.renew",
        "cl.throttle",
        "eval",
    ] {
        assert!(
            !stats.contains(&format!("cmdstat_{c}:")),
            "{label}: the replica executed {c} itself:\n{stats}"
        );
    }
}

#[test]
fn randomized_workload_replicas_hold_identical_state() {
    let seed: u64 = std::env::var("RL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("replication workload: seed {seed} (RL_SEED={seed} to replay)");
    let mut rng = StdRng::seed_from_u64(seed);
    let specs = specs();
    let mut tokens = BTreeMap::new();

    let p = Server::start();
    let mut pc = p.con();
    ok(&mut pc, &args!("RL.CLOCK", "REAL"));
    let r1 = p.start_replica();
    let mut rc1 = r1.con();

    let n1 = random_workload(&mut pc, &mut rng, &specs, &mut tokens, 40);
    eprintln!("phase 1 (singles, MULTI blocks, scripts): {n1:?}");
    sync_replica(&mut pc, &mut rc1);
    let c1 = compare("replica (streamed)", &mut pc, &mut rc1);

    // Late replicas: full resyncs from a primary full of state, one diskless (the
    // default), one through an RDB file on disk loaded by a replica that keeps the old
    // data aside while it loads.
    let r2 = p.start_replica();
    let mut rc2 = r2.con();
    compare("late replica (diskless full sync)", &mut pc, &mut rc2);
    ok(&mut pc, &args!("CONFIG", "SET", "repl-diskless-sync", "no"));
    let r3 = p.start_replica_with(ServerOptions {
        extra: args!("--repl-diskless-load", "swapdb"),
        ..Default::default()
    });
    let mut rc3 = r3.con();
    compare("late replica (disk-based full sync)", &mut pc, &mut rc3);

    // More traffic, streamed to all three.
    let n2 = random_workload(&mut pc, &mut rng, &specs, &mut tokens, 20);
    eprintln!("phase 2: {n2:?}");
    for (label, rc) in [
        ("replica 1", &mut rc1),
        ("replica 2", &mut rc2),
        ("replica 3", &mut rc3),
    ] {
        sync_replica(&mut pc, rc);
        let n = compare(label, &mut pc, rc);
        eprintln!("{label}: {n} keys identical (phase 1: {c1})");
        assert_effects_only(label, rc);
    }
}

#[test]
fn failover_new_primary_continues_every_limit() {
    let p = Server::start();
    let mut pc = p.con();
    let r = p.start_replica();
    let mut rc = r.con();
    for c in [&mut pc, &mut rc] {
        clock_set(c, T0);
    }
    // Per algorithm a key at its limit ("f:") and one with room left ("o:").
    let rules = [
        args!("RL.GCRA", "gcra", 3, 1, 600_000),
        args!("RL.TOKENBUCKET", "tb", 3, 1, 600_000),
        args!("RL.SLIDING", "sliding", 3, 600_000),
        args!("RL.FIXED", "fixed", 3, 600_000),
        args!("RL.LOG", "log", 3, 600_000),
        args!("RL.QUEUE", "queue", 3, 60_000),
        args!("RL.ACQUIRE", "lease", 3, 600_000),
    ];
    let mut probes = Probes::new();
    let mut lease_tokens = Vec::new();
    for rule in &rules {
        for (prefix, n) in [("f:", 3), ("o:", 1)] {
            let mut a = rule.clone();
            a[1] = format!("{prefix}{}", rule[1]);
            for _ in 0..n {
                let v = ok(&mut pc, &a);
                assert_eq!(flat(&v)[0], "1", "{a:?}");
                if a[0] == "RL.ACQUIRE" && prefix == "f:" {
                    lease_tokens.push(flat(&v)[5].clone());
                }
            }
            probes.insert(a[1].clone(), Some(a));
        }
    }
    for _ in 0..3 {
        ok(&mut pc, &args!("CL.THROTTLE", "f:cell", 2, 1, 600));
    }
    ok(&mut pc, &args!("CL.THROTTLE", "o:cell", 2, 1, 600));
    for c in [&mut pc, &mut rc] {
        clock_advance(c, 1_000);
    }
    let dry = dry_replies(&mut pc, &probes);
    for (k, d) in &dry {
        let refused = k.starts_with("f:");
        assert_eq!(d[0], if refused { "0" } else { "1" }, "{k}: {d:?}");
    }
    sync_replica(&mut pc, &mut rc);
    let keys: Vec<String> = scan_all(&mut pc);
    let want = durable_keys(&mut pc, &keys, CLOCK_FIELDS);

    // The primary dies; the replica takes over.
    drop(pc);
    drop(p);
    assert_eq!(text(&ok(&mut rc, &args!("REPLICAOF", "NO", "ONE"))), "OK");
    assert_eq!(
        info_field(&mut rc, "replication", "role").as_deref(),
        Some("master")
    );
    let got = durable_keys(&mut rc, &keys, CLOCK_FIELDS);
    let wk: Vec<_> = want.keys().collect();
    assert_eq!(got.keys().collect::<Vec<_>>(), wk);
    for (k, w) in &want {
        assert_eq!(&got[k], w, "{k} on the new primary");
    }

    // Every limit continues where the old primary left it: the same DRYRUN replies, and
    // the real requests answer exactly what the old primary said they would.
    assert_eq!(
        dry_replies(&mut rc, &probes),
        dry,
        "DRYRUN on the new primary"
    );
    for (k, p) in &probes {
        let a = p.as_ref().unwrap();
        assert_eq!(flat(&ok(&mut rc, a)), dry[k], "{a:?} on the new primary");
    }
    let cell = |c: &mut Connection, k: &str| flat(&ok(c, &args!("CL.THROTTLE", k, 2, 1, 600)));
    assert_eq!(
        cell(&mut rc, "f:cell")[0],
        "1",
        "f:cell admitted after failover"
    );
    assert_eq!(cell(&mut rc, "o:cell")[..3], ["0", "3", "1"]);

    // Leases granted by the old primary are known to the new one; fencing tokens keep
    // increasing.
    let max_old = lease_tokens.iter().map(|t| token_key(t)).max().unwrap();
    let a = args!("RL.ACQUIRE", "f:lease", 3, 600_000);
    assert_eq!(flat(&ok(&mut rc, &a))[0], "0", "f:lease over its limit");
    assert_eq!(
        int(&ok(
            &mut rc,
            &args!("RL.RELEASE", "f:lease", lease_tokens[0])
        )),
        1
    );
    assert_eq!(
        int(&ok(
            &mut rc,
            &args!("RL.RENEW", "f:lease", lease_tokens[1], 900_000)
        )),
        1
    );
    let v = flat(&ok(&mut rc, &a));
    assert_eq!(v[0], "1", "f:lease after a RELEASE on the new primary");
    assert!(
        token_key(&v[5]) > max_old,
        "token {} after {max_old:?}",
        v[5]
    );

    // Time passes on the new primary: the at-limit GCRA key admits exactly when its retry
    // time says, not earlier.
    let g = args!("RL.GCRA", "f:gcra", 3, 1, 600_000);
    let retry: i64 = flat(&ok(&mut rc, &g))[3].parse().unwrap();
    assert!(retry > 0);
    clock_advance(&mut rc, retry - 1);
    assert_eq!(flat(&ok(&mut rc, &g))[0], "0");
    clock_advance(&mut rc, 1);
    assert_eq!(flat(&ok(&mut rc, &g))[0], "1");

    // The new primary feeds a replica of its own with the same states.
    let r2 = r.start_replica();
    let mut rc2 = r2.con();
    let keys = scan_all(&mut rc);
    let want: BTreeMap<String, Durable> = durable_keys(&mut rc, &keys, CLOCK_FIELDS);
    assert_eq!(durable_keys(&mut rc2, &keys, CLOCK_FIELDS), want);
}

fn token_key(t: &str) -> (u64, u64) {
    let (ms, seq) = t.split_once('-').expect("token <ms>-<seq>");
    (ms.parse().unwrap(), seq.parse().unwrap())
}

/// A primary that nobody listens to skips building RL._APPLY (INFO says so), also after a
/// BGSAVE. Replicas that join such a primary, diskless or disk-based, while writes keep
/// coming from another client, end up with every key identical, and from then on the
/// primary propagates effects.
#[test]
fn replicas_joining_a_quiet_primary_get_every_write() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    let effects = |c: &mut Connection| info_field(c, "ratelimit", "ratelimit_effects_to_replicas");
    for (label, diskless) in [("diskless", "yes"), ("disk-based", "no")] {
        let mut rng = StdRng::seed_from_u64(7);
        let spec = specs();
        let mut tokens = BTreeMap::new();
        let p = Server::start();
        let mut pc = p.con();
        ok(&mut pc, &args!("RL.CLOCK", "REAL"));
        assert_eq!(effects(&mut pc).as_deref(), Some("no"), "{label}");
        random_workload(&mut pc, &mut rng, &spec, &mut tokens, 4);
        // A BGSAVE forks; Redis finds no replica and no backlog and stays quiet (Valkey
        // propagates after any fork).
        ok(&mut pc, &args!("BGSAVE"));
        thread::sleep(Duration::from_millis(50));
        while info_field(&mut pc, "persistence", "rdb_bgsave_in_progress").as_deref() != Some("0") {
            thread::sleep(Duration::from_millis(10));
        }
        if info_field(&mut pc, "server", "server_name").as_deref() != Some("valkey") {
            assert_eq!(effects(&mut pc).as_deref(), Some("no"), "{label}");
        }
        // Filler in db 1 makes the sync take long enough for many writes to land in it.
        ok(&mut pc, &args!("SELECT", "1"));
        ok(&mut pc, &args!("DEBUG", "POPULATE", "300000"));
        ok(&mut pc, &args!("SELECT", "0"));
        ok(
            &mut pc,
            &args!("CONFIG", "SET", "repl-diskless-sync", diskless),
        );
        ok(
            &mut pc,
            &args!("CONFIG", "SET", "repl-diskless-sync-delay", "1"),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let mut c = p.con();
            let stop = stop.clone();
            let wspecs = specs();
            thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(11);
                let mut tokens = BTreeMap::new();
                let mut n = 0usize;
                while !stop.load(Relaxed) {
                    let op = random_op(&mut rng, &wspecs, &tokens);
                    let v = ok(&mut c, &op);
                    note_reply(&mut tokens, &op, &v);
                    // And writes that are always admitted: some must land between the
                    // fork and the end of the sync.
                    let k = format!("w:{}", n % 50);
                    ok(&mut c, &args!("RL.GCRA", k, 1_000_000, 1, 1000));
                    n += 1;
                }
                n
            })
        };
        let r = p.start_replica();
        stop.store(true, Relaxed);
        let written = writer.join().expect("writer thread");
        eprintln!("{label}: {written} commands during the sync");
        assert_eq!(effects(&mut pc).as_deref(), Some("yes"), "{label}");
        let mut rc = r.con();
        random_workload(&mut pc, &mut rng, &spec, &mut tokens, 4);
        sync_replica(&mut pc, &mut rc);
        let n = compare(
            &format!("replica of a quiet primary ({label})"),
            &mut pc,
            &mut rc,
        );
        eprintln!("{label}: {n} keys identical");
        assert_effects_only(label, &mut rc);
    }
}
