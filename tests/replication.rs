//! Replication on real servers (Redis 7.0 and Valkey 9): a randomized workload over every
//! algorithm on the real clock, with single commands, RL.ALL, MULTI/EXEC blocks and Lua
//! scripts, leaves every key identical on the primary and its replicas (RL.INFO minus the
//! fields read on the reading server's clock, DEBUG DIGEST-VALUE, PEXPIRETIME), also on
//! replicas that joined late through a full resync (diskless and disk-based). After a
//! failover the new primary continues every limit from the replicated state.

use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::fake_replica;
use rl_testkit::rate;
use rl_testkit::workload;

use common::*;
use fake_replica::{FakeReplica, Psync};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rate::{call, lease_op, tok};
use redis::{Connection, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::Duration;
use workload::*;

/// One key of the randomized workload: its command and two rules (the second one is used
/// now and then: rule changes are normal operation).
struct Spec {
    key: String,
    cmd: &'static str,
    rules: [Vec<i64>; 2],
    /// Options every call of it takes (STAGGER).
    opts: &'static [&'static str],
}

fn specs() -> Vec<Spec> {
    let mut v = Vec::new();
    let mut add = |name: &str, cmd: &'static str, a: Vec<i64>, b: Vec<i64>| {
        for i in 0..4 {
            v.push(Spec {
                key: format!("{name}:{i}"),
                cmd,
                rules: [a.clone(), b.clone()],
                opts: &[],
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
    // A fixed window's key lives until its window ends. Windows aligned to the epoch all end
    // together now and then (60, 70, 80 and 90 s at every multiple of 5,040 s: 20:00:00 UTC
    // on 2026-12-01), so four more keys are staggered: 60 s windows whose hash slots (655,
    // 4782, 8909, 13036) start them about 15 s apart, so at any instant at most one of them
    // is within 1.5 s of its end and every comparison has a fixed window to compare.
    for (i, w) in [60_000, 70_000, 80_000, 90_000].into_iter().enumerate() {
        v.push(Spec {
            key: format!("fixed:long:{i}"),
            cmd: "RL.FIXED",
            rules: [vec![60, w], vec![70, w]],
            opts: &[],
        });
        v.push(Spec {
            key: format!("fixed:stagger:{i}"),
            cmd: "RL.FIXED",
            rules: [vec![60, 60_000], vec![70, 60_000]],
            opts: &["STAGGER"],
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
            a.extend(s.opts.iter().map(|o| o.to_string()));
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
        a.extend(s.opts.iter().map(|o| o.to_string()));
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
    let mut skipped = Vec::new();
    for k in keys_p.union(&keys_r) {
        let ttl = pttl(pc, k);
        if ttl < 1500 {
            skipped.push(format!("{k} {ttl}"));
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
    assert_eq!(
        algos.len(),
        7,
        "{label}: algorithms compared: {algos:?}; skipped (PTTL < 1500): {skipped:?}; \
         unix ms {}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    );
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
    let r3 = p.start_replica_with(Server::builder().config("repl-diskless-load", "swapdb"));
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

// ------------------------------------------------------------ what listeners receive
//
// Every write propagates its effect, whatever the module may believe about listeners. These
// tests look at the replication stream itself (a replica faked over TCP, and the backlog
// read back with a partial PSYNC from its first byte) and at the AOF, in the windows where a
// listener appears: a diskless full sync waiting for its fork, a replica that leaves before
// it, a legacy SYNC and `redis-cli --rdb`, `CONFIG SET appendonly yes` at runtime, a replica
// of a replica, and Valkey's dual-channel replication. The primary runs on the test clock
// (years away from its replicas' real clocks), so a command re-run on a replica would leave
// a different state there: real replicas are compared key by key.

/// What a listener may receive: effects, and the replication protocol's own commands
/// (`UNLINK` is how Valkey 8+ propagates an expiry by default).
const EFFECTS: &[&str] = &[
    "RL._APPLY",
    "DEL",
    "UNLINK",
    "MULTI",
    "EXEC",
    "SELECT",
    "PING",
    "REPLCONF",
];

/// Every command `cmds` names is an effect, and there are effects of the module among them.
fn assert_effects(label: &str, cmds: &BTreeMap<String, usize>) {
    for name in cmds.keys() {
        assert!(
            EFFECTS.contains(&name.as_str()),
            "{label}: a listener received {name}: {cmds:?}"
        );
    }
    assert!(
        cmds.get("RL._APPLY").is_some_and(|n| *n > 0),
        "{label}: no RL._APPLY received: {cmds:?}"
    );
}

/// The applied keys include a key of every kind of write made under prefix `p`.
fn assert_applied(label: &str, f: &FakeReplica, p: &str) {
    let keys = f.applied_keys();
    for k in [
        "gcra:a",
        "tb:a",
        "sliding:a",
        "fixed:a",
        "log:a",
        "queue:a",
        "lease:a",
        "cell:a",
        "multi:a",
        "eval:b",
        "all:b",
    ] {
        let k = format!("{p}{k}");
        assert!(keys.contains(&k), "{label}: no RL._APPLY of {k}");
    }
}

/// Writes of every algorithm (`every_algorithm`, on the test clock) and the ways writes come
/// wrapped: a MULTI/EXEC block, a Lua script, RL.ALL.
fn writes(c: &mut Connection, p: &str) {
    every_algorithm(c, p);
    let k = |s: &str| format!("{p}{s}");
    multi(
        c,
        &[
            args!("RL.GCRA", k("multi:a"), 10, 1, 600_000),
            args!("RL.SLIDING", k("multi:b"), 10, 600_000),
        ],
    );
    ok(
        c,
        &args!(
            "EVAL",
            "return {redis.call('RL.FIXED', KEYS[1], 10, 600000), \
             redis.call('CL.THROTTLE', KEYS[2], 5, 1, 600)}",
            2,
            k("eval:a"),
            k("eval:b")
        ),
    );
    ok(
        c,
        &args!(
            "RL.ALL",
            2,
            k("all:a"),
            k("all:b"),
            "GCRA",
            5,
            1,
            600_000,
            "LOG",
            5,
            600_000
        ),
    );
}

/// A write whose effect names `key`: once a listener has read it, it has everything before.
fn marker(c: &mut Connection, key: &str) {
    ok(c, &args!("RL.GCRA", key, 1_000_000, 1, 600_000));
}

/// The `state=` of every replica the primary lists in `INFO replication`.
fn replica_states(c: &mut Connection) -> Vec<String> {
    let t = text(&ok(c, &args!("INFO", "replication")));
    t.lines()
        .filter(|l| l.starts_with("slave"))
        .filter_map(|l| l.split(',').find_map(|f| f.strip_prefix("state=")))
        .map(str::to_string)
        .collect()
}

fn set(c: &mut Connection, name: &str, value: &str) {
    ok(c, &args!("CONFIG", "SET", name, value));
}

/// A primary for these tests: on the test clock, with a backlog large enough that it is
/// never trimmed (its first byte is then the first byte of a command).
fn primary(b: Builder) -> (Server, Connection) {
    let p = b.start();
    let mut pc = p.con();
    clock_set(&mut pc, T0);
    set(&mut pc, "repl-backlog-size", "256mb");
    (p, pc)
}

/// Reads the primary's whole replication backlog (a partial PSYNC from its first byte), up
/// to a marker written after connecting.
fn backlog(p: &Server, pc: &mut Connection, label: &str) -> FakeReplica {
    assert_eq!(
        info_field(pc, "replication", "repl_backlog_active").as_deref(),
        Some("1"),
        "{label}: no backlog"
    );
    let replid = info_field(pc, "replication", "master_replid").unwrap();
    let first = info_field(pc, "replication", "repl_backlog_first_byte_offset").unwrap();
    let mut b = FakeReplica::connect(p.port);
    b.send(&["PSYNC", &replid, &first]);
    assert_eq!(b.psync_answer(), Psync::Continue, "{label}: partial PSYNC");
    let m = format!("marker:backlog:{label}");
    marker(pc, &m);
    b.read_until_key(&m);
    b
}

/// Starts a full sync of a fake replica: announce, `PSYNC ? -1`.
fn fake_psync(port: u16) -> FakeReplica {
    let mut f = FakeReplica::connect(port);
    f.announce(1);
    f.send(&["PSYNC", "?", "-1"]);
    f
}

/// Reads the answer and the snapshot of a full sync, then acknowledges it (a primary starts
/// the stream of a diskless sync at an ACK).
fn finish_full_sync(f: &mut FakeReplica, label: &str) {
    let Psync::FullResync { offset, .. } = f.psync_answer() else {
        panic!("{label}: expected a full resync");
    };
    f.read_snapshot();
    f.keep_acking(offset);
}

/// Every key of the primary is identical on each replica (RL.INFO minus the reading
/// server's clock fields, PEXPIRETIME, DEBUG DIGEST-VALUE), and the replicas applied
/// effects only.
fn assert_replicas_identical(label: &str, pc: &mut Connection, replicas: &mut [Connection]) {
    let keys = scan_all(pc);
    assert!(keys.len() > 20, "{label}: only {} keys", keys.len());
    let want = durable_keys(pc, &keys, CLOCK_FIELDS);
    let target: i64 = info_field(pc, "replication", "master_repl_offset")
        .unwrap()
        .parse()
        .unwrap();
    for (i, rc) in replicas.iter_mut().enumerate() {
        wait_until("a replica to catch up", Duration::from_secs(60), || {
            info_field(rc, "replication", "master_repl_offset")
                .and_then(|o| o.parse::<i64>().ok())
                .is_some_and(|o| o >= target)
        });
        assert_eq!(scan_all(rc), keys, "{label}: replica {i}: key sets differ");
        let got = durable_keys(rc, &keys, CLOCK_FIELDS);
        for (k, w) in &want {
            assert_eq!(&got[k], w, "{label}: replica {i}: {k} differs");
        }
        assert_effects_only(&format!("{label}: replica {i}"), rc);
    }
}

/// A fake replica's diskless full sync that waits for its fork (a minute, unless the delay is
/// lowered), and writes under prefix `window:` made while it waits, with the backlog its
/// request created.
fn waiting_full_sync(p: &Server, pc: &mut Connection) -> FakeReplica {
    set(pc, "repl-diskless-sync", "yes");
    set(pc, "repl-diskless-sync-delay", "60");
    let a = fake_psync(p.port);
    wait_until(
        "the sync to wait for its fork",
        Duration::from_secs(60),
        || {
            replica_states(pc) == ["wait_bgsave"]
                && info_field(pc, "replication", "repl_backlog_active").as_deref() == Some("1")
        },
    );
    writes(pc, "window:");
    a
}

/// A diskless full sync waits for its fork (`repl-diskless-sync-delay`): the replica's
/// request has created the backlog, and every write until the fork enters it. The fake
/// replica, the backlog and a real replica synced by the same fork see effects only.
#[test]
fn delayed_diskless_sync_sends_effects_only() {
    let (p, mut pc) = primary(Server::builder());
    writes(&mut pc, "before:");
    let mut a = waiting_full_sync(&p, &mut pc);
    assert_eq!(
        replica_states(&mut pc),
        ["wait_bgsave"],
        "still before the fork"
    );
    // The fork now, for the fake replica and a real one.
    set(&mut pc, "repl-diskless-sync-delay", "0");
    let r = p.start_replica();
    finish_full_sync(&mut a, "delayed diskless sync");
    writes(&mut pc, "after:");
    marker(&mut pc, "marker:a");
    a.read_until_key("marker:a");
    assert_effects("fake replica", &a.names());
    assert_applied("fake replica", &a, "after:");

    let b = backlog(&p, &mut pc, "delayed");
    assert_effects("backlog", &b.names());
    assert_applied("backlog", &b, "window:");
    assert_applied("backlog", &b, "after:");
    assert_replicas_identical("delayed diskless sync", &mut pc, &mut [r.con()]);
}

/// A replica that leaves before its fork leaves the backlog behind (for `repl-backlog-ttl`),
/// collecting every write: effects only. A real replica that joins later is identical.
#[test]
fn replica_leaving_before_its_fork_leaves_effects_only() {
    let (p, mut pc) = primary(Server::builder());
    writes(&mut pc, "before:");
    let a = waiting_full_sync(&p, &mut pc);
    drop(a);
    wait_until("the replica to leave", Duration::from_secs(60), || {
        replica_states(&mut pc).is_empty()
    });
    writes(&mut pc, "left:");
    let b = backlog(&p, &mut pc, "left");
    assert_effects("backlog", &b.names());
    assert_applied("backlog", &b, "window:");
    assert_applied("backlog", &b, "left:");
    drop(b);
    set(&mut pc, "repl-diskless-sync-delay", "0");
    let r = p.start_replica();
    writes(&mut pc, "joined:");
    assert_replicas_identical("replica after one left", &mut pc, &mut [r.con()]);
}

/// A legacy `SYNC` (no PSYNC, no capabilities: a snapshot on disk, then the stream) and
/// `redis-cli --rdb` (a snapshot only) get effects only, and so does the backlog they leave.
#[test]
fn sync_and_rdb_download_get_effects_only() {
    let (p, mut pc) = primary(Server::builder());
    writes(&mut pc, "before:");
    let mut a = FakeReplica::connect(p.port);
    a.send(&["SYNC"]);
    a.read_snapshot();
    writes(&mut pc, "sync:");
    marker(&mut pc, "marker:sync");
    a.read_until_key("marker:sync");
    assert_effects("SYNC", &a.names());
    assert_applied("SYNC", &a, "sync:");
    drop(a);

    let cli = cli();
    let rdb = p.dir.join("download.rdb");
    let out = std::process::Command::new(&cli)
        .args(["-h", "127.0.0.1", "-p", &p.port.to_string(), "--rdb"])
        .arg(&rdb)
        .output()
        .expect("run redis-cli --rdb");
    assert!(out.status.success(), "redis-cli --rdb: {out:?}");
    writes(&mut pc, "rdb:");
    let b = backlog(&p, &mut pc, "rdb");
    assert_effects("backlog", &b.names());
    assert_applied("backlog", &b, "sync:");
    assert_applied("backlog", &b, "rdb:");
}

/// `CONFIG SET appendonly yes` at runtime: the AOF (written during its first rewrite and
/// after) holds effects only, and loading it gives back every key as it was.
#[test]
fn aof_enabled_at_runtime_gets_effects_only() {
    let (p, mut pc) = primary(Server::builder());
    writes(&mut pc, "before:");
    set(&mut pc, "appendfsync", "always");
    set(&mut pc, "appendonly", "yes");
    writes(&mut pc, "rewrite:");
    wait_until("the first AOF rewrite", Duration::from_secs(60), || {
        info_field(&mut pc, "persistence", "aof_enabled").as_deref() == Some("1")
            && info_field(&mut pc, "persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
            && info_field(&mut pc, "persistence", "aof_rewrite_scheduled").as_deref() == Some("0")
    });
    writes(&mut pc, "aof:");
    let cmds = aof_commands(&p);
    let mut names = BTreeMap::new();
    let mut applied = BTreeSet::new();
    for c in &cmds {
        let n = String::from_utf8_lossy(&c[0]).to_uppercase();
        if n == "RL._APPLY" {
            // `key payload [key payload ...]`: every key of the effect.
            for k in c.iter().skip(1).step_by(2) {
                applied.insert(String::from_utf8_lossy(k).into_owned());
            }
        }
        *names.entry(n).or_insert(0usize) += 1;
    }
    assert_effects("AOF", &names);
    for k in [
        "aof:gcra:a",
        "aof:cell:a",
        "aof:multi:a",
        "aof:eval:b",
        "aof:all:b",
    ] {
        assert!(applied.contains(k), "AOF: no RL._APPLY of {k}");
    }
    let keys = scan_all(&mut pc);
    let want = durable_keys(&mut pc, &keys, CLOCK_FIELDS);
    ok(&mut pc, &args!("DEBUG", "LOADAOF"));
    assert_eq!(scan_all(&mut pc), keys, "keys after DEBUG LOADAOF");
    assert_eq!(durable_keys(&mut pc, &keys, CLOCK_FIELDS), want);
}

/// A replica of a replica receives the primary's stream as its replica proxies it: effects
/// only, and every server of the chain holds the same states.
#[test]
fn replica_chains_pass_effects_only() {
    let (p, mut pc) = primary(Server::builder());
    writes(&mut pc, "before:");
    let r1 = p.start_replica();
    let mut f = fake_psync(r1.port);
    finish_full_sync(&mut f, "chain");
    let r2 = r1.start_replica();
    writes(&mut pc, "chain:");
    marker(&mut pc, "marker:chain");
    f.read_until_key("marker:chain");
    assert_effects("replica of a replica", &f.names());
    assert_applied("replica of a replica", &f, "chain:");
    assert_replicas_identical("chain", &mut pc, &mut [r1.con(), r2.con()]);
}

/// Valkey 8+: dual-channel replication (the snapshot on a channel of its own, the stream
/// buffered meanwhile) with writes coming during a slowed-down snapshot.
#[test]
fn dual_channel_replication_gets_effects_only() {
    let probe = Server::start();
    let major = info_field(&mut probe.con(), "server", "valkey_version")
        .and_then(|v| v.split('.').next().and_then(|m| m.parse::<u32>().ok()));
    drop(probe);
    if major.is_none_or(|m| m < 8) {
        eprintln!("dual-channel replication: not a Valkey 8+ server, skipped");
        return;
    }
    let dual = || Server::builder().config("dual-channel-replication-enabled", "yes");
    let (p, mut pc) = primary(dual());
    writes(&mut pc, "before:");
    // A slow snapshot (20 ms per key): the writer's commands land while it is taken.
    set(&mut pc, "rdb-key-save-delay", "20000");
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let mut c = p.con();
        let stop = stop.clone();
        thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Relaxed) && n < 20 {
                // Each round on fresh keys from T0: every key keeps a TTL of minutes.
                clock_set(&mut c, T0);
                writes(&mut c, &format!("dual{n}:"));
                n += 1;
            }
            n
        })
    };
    let r = p.start_replica_with(dual());
    stop.store(true, Relaxed);
    let rounds = writer.join().expect("writer");
    eprintln!("dual-channel: {rounds} rounds of writes during the sync");
    let log = std::fs::read_to_string(p.log_path()).unwrap_or_default();
    assert!(
        log.to_lowercase().contains("dual channel"),
        "the sync did not use dual-channel replication:\n{}",
        p.log_tail()
    );
    set(&mut pc, "rdb-key-save-delay", "0");
    let b = backlog(&p, &mut pc, "dual");
    assert_effects("backlog", &b.names());
    assert_replicas_identical("dual-channel", &mut pc, &mut [r.con()]);
}

/// `master_repl_offset` of a server.
fn repl_offset(c: &mut Connection) -> i64 {
    info_field(c, "replication", "master_repl_offset")
        .and_then(|o| o.parse().ok())
        .unwrap()
}

/// Bytes the primary sends its replica per call of `calls` (each run once, in order).
fn replicated_per_call(pc: &mut Connection, calls: &[Vec<String>]) -> i64 {
    let before = repl_offset(pc);
    for c in calls {
        raw(pc, c);
    }
    (repl_offset(pc) - before) / calls.len() as i64
}

/// RL.LOG and RL.ACQUIRE keys replicate the operation that changed them, not their whole
/// state: the bytes sent per request are the same at limit 10 and at limit 10,000 (and
/// small), and a replica, and the AOF loaded again, hold exactly the primary's state.
#[test]
fn large_states_replicate_operations_of_constant_size() {
    let (p, mut pc) = primary(Server::builder().appendonly());
    let r = p.start_replica();
    let mut rc = r.con();
    sync_replica(&mut pc, &mut rc);
    let mut per_call = BTreeMap::new();
    for limit in [10i64, 10_000] {
        // Filled to 90% of the limit; then the steady state of a busy key.
        let lk = format!("log:{limit:05}");
        raw(
            &mut pc,
            &args!("RL.LOG", &lk, limit, 3_600_000, "COST", limit * 9 / 10),
        );
        let log_calls: Vec<Vec<String>> = (0..50)
            .flat_map(|_| {
                [
                    args!("RL.LOG", &lk, limit, 3_600_000),
                    args!("RL.LOG", &lk, limit, 3_600_000, "REFUND", 1),
                    args!("RL.LOG", &lk, limit, 3_600_000, "COST", 2, "PARTIAL"),
                    args!("RL.LOG", &lk, limit, 3_600_000, "REFUND", 2),
                ]
            })
            .collect();
        per_call.insert(("log", limit), replicated_per_call(&mut pc, &log_calls));
        let ak = format!("acq:{limit:05}");
        // One pipeline: one AOF write and fsync for all of them.
        let mut fill = redis::pipe();
        for _ in 0..limit * 9 / 10 {
            fill.cmd("RL.ACQUIRE").arg(&ak).arg(limit).arg(3_600_000);
        }
        let granted: Vec<Value> = fill.query(&mut pc).unwrap();
        assert_eq!(granted.len() as i64, limit * 9 / 10);
        let mut acq = 0;
        let mut rel = 0;
        let mut ren = 0;
        for _ in 0..50 {
            let before = repl_offset(&mut pc);
            let v = raw(&mut pc, &args!("RL.ACQUIRE", &ak, limit, 3_600_000));
            let Value::Array(a) = v else {
                panic!("RL.ACQUIRE: {v:?}")
            };
            let token = text(&a[5]);
            let mid = repl_offset(&mut pc);
            assert_eq!(
                int(&raw(&mut pc, &args!("RL.RENEW", &ak, &token, 7_200_000))),
                1
            );
            let renewed = repl_offset(&mut pc);
            assert_eq!(int(&raw(&mut pc, &args!("RL.RELEASE", &ak, &token))), 1);
            acq += mid - before;
            ren += renewed - mid;
            rel += repl_offset(&mut pc) - renewed;
        }
        per_call.insert(("acquire", limit), acq / 50);
        per_call.insert(("renew", limit), ren / 50);
        per_call.insert(("release", limit), rel / 50);
    }
    eprintln!("replicated bytes per call: {per_call:?}");
    for cmd in ["log", "acquire", "renew", "release"] {
        let (small, large) = (per_call[&(cmd, 10)], per_call[&(cmd, 10_000)]);
        assert_eq!(
            small, large,
            "{cmd}: bytes per call at limit 10 and 10,000: {per_call:?}"
        );
        assert!(small < 200, "{cmd}: {small} bytes per call: {per_call:?}");
    }
    sync_replica(&mut pc, &mut rc);
    let keys = scan_all(&mut pc);
    assert_eq!(keys.len(), 4);
    let want: Vec<_> = keys.iter().map(|k| digest(&mut pc, k)).collect();
    let got: Vec<_> = keys.iter().map(|k| digest(&mut rc, k)).collect();
    assert_eq!(got, want, "the replica's states differ from the primary's");
    assert_effects_only("operations", &mut rc);
    // The AOF (operations since the last rewrite) loaded again gives the same states.
    ok(&mut pc, &args!("DEBUG", "LOADAOF"));
    let again: Vec<_> = keys.iter().map(|k| digest(&mut pc, k)).collect();
    assert_eq!(again, want, "the AOF loaded again differs");
}

// -------------------------------- replicas hold the primary's state whatever their clock

type Workload = fn(&mut Connection, &str) -> BTreeMap<String, Vec<String>>;

/// A primary (on the test clock at T0) and two replicas on other test clocks: replica 1 a
/// day behind, following from the start; replica 2 a week ahead, joining by a full sync
/// after `workload(.., "a:")`. Then, 5 s later, `workload(.., "b:")` streamed to both.
struct SkewedReplicas {
    _servers: [Server; 3],
    pc: Connection,
    rc1: Connection,
    rc2: Connection,
    a: BTreeMap<String, Vec<String>>,
    b: BTreeMap<String, Vec<String>>,
}

fn skewed_replicas(p: Server, workload: Workload) -> SkewedReplicas {
    let mut pc = p.con();
    clock_set(&mut pc, T0);
    let r1 = p.start_replica();
    let mut rc1 = r1.con();
    clock_set(&mut rc1, T0 - DAY_MS);
    let a = workload(&mut pc, "a:");
    sync_replica(&mut pc, &mut rc1);
    let r2 = p.start_replica();
    let mut rc2 = r2.con();
    clock_set(&mut rc2, T0 + 7 * DAY_MS);
    clock_advance(&mut pc, 5_000);
    let b = workload(&mut pc, "b:");
    SkewedReplicas {
        _servers: [p, r1, r2],
        pc,
        rc1,
        rc2,
        a,
        b,
    }
}

impl SkewedReplicas {
    /// After both replicas caught up: every key of both workloads is on the primary, with
    /// meaningful digests, and identical (but for `CLOCK_FIELDS`) on both replicas.
    fn assert_identical(&mut self, algos: &[&str]) -> BTreeMap<String, Durable> {
        sync_replica(&mut self.pc, &mut self.rc1);
        sync_replica(&mut self.pc, &mut self.rc2);
        let want = durable_all(&mut self.pc, CLOCK_FIELDS);
        assert_eq!(want.len(), self.a.len() + self.b.len());
        assert_digests_meaningful(&want, algos);
        assert_same(
            "replica 1 (clock a day behind)",
            &want,
            &durable_all(&mut self.rc1, CLOCK_FIELDS),
        );
        assert_same(
            "replica 2 (clock a week ahead)",
            &want,
            &durable_all(&mut self.rc2, CLOCK_FIELDS),
        );
        want
    }
}

#[test]
fn replica_holds_the_primary_state_whatever_its_clock() {
    let mut t = skewed_replicas(Server::start(), gcra_tb_sliding_workload);
    let pc = &mut t.pc;
    // Rule changes and a clock jump back: states re-timed by their units (a refusal under a
    // new interval stores that), and requests decided at the keys' own time.
    rate(pc, &args!("RL.GCRA", "a:g7", 3, 1, 60000));
    rate(pc, &args!("RL.TOKENBUCKET", "a:t7", 3, 1, 60000));
    rate(pc, &args!("RL.SLIDING", "a:s7", 3, 60000));
    let back = clock_get(pc) - 3_600_000;
    clock_set(pc, back);
    for k in ["b:g1", "b:g6", "b:t1", "b:t6", "b:s1", "b:s6"] {
        let mut a = t.b[k].clone();
        a.extend(args!("COST", 1));
        rate(pc, &a);
    }
    // `tokens` and `ttl_ms` depend on the reading server's clocks; all else must match.
    let want = t.assert_identical(GCRA_TB_SLIDING);
    let (rc1, rc2) = (&mut t.rc1, &mut t.rc2);

    // The test clock is never replicated.
    assert_eq!(clock_get(rc1), T0 - DAY_MS);
    assert_eq!(clock_get(rc2), T0 + 7 * DAY_MS);

    // `tokens` is read on each server's own clock: a week ahead the buckets are full;
    // a day behind, the states lie ahead of its clock and read as spent (the key's own
    // time is later than the clock).
    for k in want.keys().filter(|k| k.contains(":t")) {
        let m2 = info(rc2, k).unwrap();
        assert_eq!(m2["tokens"], m2["capacity"], "{k} on replica 2: {m2:?}");
        let m1 = info(rc1, k).unwrap();
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
fn replica_holds_the_new_states_whatever_its_clock() {
    let p = Server::builder()
        .config("repl-ping-replica-period", 3600)
        .start();
    let mut t = skewed_replicas(p, fixed_log_queue_lease_workload);
    let want = t.assert_identical(FIXED_LOG_QUEUE_LEASE);
    let (pc, probes, more) = (&mut t.pc, &t.a, &t.b);

    // Refused, dry-run, stale RELEASE/RENEW and read-only calls propagate nothing.
    let offset = |c: &mut Connection| info_field(c, "replication", "master_repl_offset").unwrap();
    let o1 = offset(pc);
    for (k, a) in probes.iter().chain(more.iter()) {
        if !a.is_empty() {
            call(pc, a);
        }
        ok(pc, &args!("RL.INFO", k));
    }
    for i in 0..6 {
        let kf = format!("a:f{i}");
        let full = args!("RL.FIXED", &kf, 1, HOUR);
        assert_eq!(call(pc, &full).0[0], 0, "{full:?}");
        let ka = format!("a:a{i}");
        assert_eq!(lease_op(pc, &args!("RL.RELEASE", &ka, tok(1, 0))).0, 0);
        assert_eq!(lease_op(pc, &args!("RL.RENEW", &ka, tok(1, 0), 5)).0, 0);
    }
    for a in [
        args!("RL.FIXED", "new:f", 3, HOUR, "DRYRUN"),
        args!("RL.LOG", "new:l", 3, HOUR, "DRYRUN"),
        args!("RL.QUEUE", "new:q", 3, HOUR, "DRYRUN"),
        args!("RL.ACQUIRE", "new:a", 3, HOUR, "DRYRUN"),
    ] {
        assert_eq!(call(pc, &a).0[0], 1);
    }
    assert_eq!(lease_op(pc, &args!("RL.RELEASE", "new:a", tok(T0, 0))).0, 0);
    assert_eq!(
        offset(pc),
        o1,
        "refused / dry-run / no-op calls were propagated"
    );
    assert_eq!(scan_all(pc).len(), want.len());
    assert_same(
        "primary after no-op calls",
        &want,
        &durable_all(pc, CLOCK_FIELDS),
    );
}
