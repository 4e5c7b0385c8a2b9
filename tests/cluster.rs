//! Redis Cluster on real servers: three primaries on 127.0.0.1 made with
//! `redis-cli --cluster create`, the module on every node. A cluster-aware client runs every
//! command on keys spread over all slots; nodes answer MOVED / ASK / CROSSSLOT for the
//! module's commands as for built-in ones (key specs); a slot holding keys of every
//! algorithm moves (CLUSTER SETSLOT + MIGRATE, and on Valkey atomic slot migration with
//! CLUSTER MIGRATESLOTS) with state and TTL intact.
//!
//! Skipped, with the reason printed, only when `redis-cli --cluster` is not available.

use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::workload;

use common::cluster::{cluster_cli_available, key_slot, Cluster};
use common::*;
use redis::Connection;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use workload::*;

const SKIP_TTL: &[&str] = &["ttl_ms"];

fn skip_reason() -> Option<String> {
    cluster_cli_available().err()
}

macro_rules! cluster_or_skip {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!("SKIPPED: redis-cli --cluster is not available: {why}");
            return;
        }
    };
}

/// Every command of the module, with a fresh key of its own, and what its first reply
/// must start with.
fn first_calls(key: &str) -> Vec<(Vec<String>, Vec<&'static str>)> {
    vec![
        (
            args!("RL.GCRA", key, 10, 1, 60_000),
            vec!["1", "10", "9", "0"],
        ),
        (
            args!("RL.TOKENBUCKET", key, 8, 1, 60_000),
            vec!["1", "8", "7", "0"],
        ),
        (
            args!("RL.SLIDING", key, 7, 60_000),
            vec!["1", "7", "6", "0"],
        ),
        (args!("RL.FIXED", key, 6, 60_000), vec!["1", "6", "5", "0"]),
        (args!("RL.LOG", key, 5, 60_000), vec!["1", "5", "4", "0"]),
        (args!("RL.QUEUE", key, 4, 60_000), vec!["1", "4", "3", "0"]),
        (
            args!("RL.ACQUIRE", key, 3, 60_000),
            vec!["1", "3", "2", "0"],
        ),
        (
            args!("CL.THROTTLE", key, 4, 1, 60),
            vec!["0", "5", "4", "-1"],
        ),
    ]
}

#[test]
fn every_command_on_keys_over_all_slots() {
    cluster_or_skip!();
    let cl = Cluster::start(3);
    cl.clock_set_all(T0);
    let mut cc = cl.client();
    let mut slots = BTreeSet::new();
    let mut per_node = [0usize; 3];
    let mut keys = Vec::new();
    for i in 0..80 {
        for (n, (call, want)) in first_calls("").into_iter().enumerate() {
            let key = format!("rl:{}:user:{i}", call[0].to_lowercase());
            let mut a = call.clone();
            a[1] = key.clone();
            let got = flat(&run(&mut cc, &a));
            assert_eq!(&got[..want.len()], &want[..], "{a:?}");
            let inf = parse_info(&run(&mut cc, &args!("RL.INFO", key))).unwrap();
            assert!(inf.contains_key("algorithm"), "{key}: {inf:?}");
            if n == 6 {
                // A second lease, so the key outlives the release of the first.
                assert_eq!(flat(&run(&mut cc, &a))[0], "1");
                let token = got[5].clone();
                let renew = args!("RL.RENEW", key, token, 90_000);
                assert_eq!(flat(&run(&mut cc, &renew)), ["1"]);
                let release = args!("RL.RELEASE", key, token);
                assert_eq!(flat(&run(&mut cc, &release)), ["1"]);
            }
            slots.insert(key_slot(&key));
            per_node[cl.owner_of_key(&key)] += 1;
            keys.push(key);
        }
    }
    eprintln!(
        "{} keys in {} slots, per node {per_node:?}",
        keys.len(),
        slots.len()
    );
    assert!(slots.len() > 500, "{} slots", slots.len());
    assert!(per_node.iter().all(|&n| n > 100), "{per_node:?}");

    // Every key lives on the node that owns its slot, with its TTL; other nodes redirect.
    let mut cons: Vec<Connection> = cl.nodes.iter().map(|n| n.con()).collect();
    for k in &keys {
        let owner = cl.owner_of_key(k);
        assert!(exists(&mut cons[owner], k), "{k} not on its owner");
        assert!(pttl(&mut cons[owner], k) > 0, "{k} has no TTL");
        let other = (owner + 1) % 3;
        let e = err(&mut cons[other], &args!("EXISTS", k));
        assert!(e.starts_with("MOVED"), "{e}");
    }

    // A plain connection to a node that does not own the key gets MOVED <slot> <owner>,
    // for every command of the module, exactly as for built-in commands; RL.CLOCK has no
    // key and runs anywhere.
    let key = "rl:moved:probe";
    let slot = key_slot(key);
    let owner = cl.owner(slot);
    let other = (owner + 1) % 3;
    let moved = format!("MOVED {slot} 127.0.0.1:{}", cl.nodes[owner].port);
    let mut every: Vec<Vec<String>> = first_calls(key).into_iter().map(|(a, _)| a).collect();
    every.extend([
        args!("RL.INFO", key),
        args!("RL.RELEASE", key, "1-0"),
        args!("RL.RENEW", key, "1-0", 1000),
        args!("RL._APPLY", key, "x"),
        args!("GET", key),
    ]);
    for a in &every {
        assert_eq!(err(&mut cons[other], a), moved, "{a:?} on a non-owner");
        // COMMAND GETKEYS names the key, with options too.
        let mut with_opts = a.clone();
        if a[0].starts_with("RL.")
            && !["RL.INFO", "RL.RELEASE", "RL.RENEW", "RL._APPLY"].contains(&a[0].as_str())
        {
            with_opts.push("DRYRUN".into());
        }
        let mut g = args!("COMMAND", "GETKEYS");
        g.extend(with_opts.iter().cloned());
        assert_eq!(flat(&ok(&mut cons[other], &g)), [key], "{g:?}");
    }
    assert!(int(&ok(&mut cons[other], &args!("RL.CLOCK", "GET"))) > 0);
    let e = err(
        &mut cons[other],
        &args!("COMMAND", "GETKEYS", "RL.CLOCK", "GET"),
    );
    assert!(e.contains("no key arguments"), "{e}");
    assert!(cl.error_count(other, "MOVED") >= every.len() as i64);

    // CROSSSLOT: one transaction or script over keys of different slots is refused, as
    // for built-in commands; with one hash tag the keys share a slot and it works.
    let (a, b) = two_keys_on_one_node_in_different_slots(&cl);
    let n = cl.owner_of_key(&a);
    let c = &mut cons[n];
    assert_eq!(text(&raw(c, &args!("MULTI"))), "OK");
    assert_eq!(text(&raw(c, &args!("RL.GCRA", a, 5, 1, 1000))), "QUEUED");
    assert_eq!(text(&raw(c, &args!("RL.GCRA", b, 5, 1, 1000))), "QUEUED");
    let e = error_text(&raw(c, &args!("EXEC"))).unwrap();
    assert!(e.starts_with("CROSSSLOT"), "{e}");
    assert!(
        !exists(c, &a) && !exists(c, &b),
        "a refused transaction wrote"
    );
    let script = "return {redis.call('RL.GCRA', KEYS[1], 5, 1, 1000), \
                  redis.call('RL.FIXED', KEYS[2], 100, 60000)}";
    let e = error_text(&raw(c, &args!("EVAL", script, 2, a, b))).unwrap();
    assert!(e.starts_with("CROSSSLOT"), "{e}");

    // The README's pattern: a user's limit and its organisation's limit, one hash tag,
    // checked in one script, routed by the cluster client.
    let (user, org) = ("rl:{org:7}:user:42", "rl:{org:7}:all");
    assert_eq!(key_slot(user), key_slot(org));
    let both = "local u = redis.call('RL.GCRA', KEYS[1], 5, 1, 1000, 'DRYRUN') \
                local o = redis.call('RL.FIXED', KEYS[2], 100, 60000, 'DRYRUN') \
                if u[1] == 1 and o[1] == 1 then \
                  u = redis.call('RL.GCRA', KEYS[1], 5, 1, 1000) \
                  o = redis.call('RL.FIXED', KEYS[2], 100, 60000) \
                end \
                return {u[1], o[1], u[3], o[3]}";
    for i in 0..6 {
        let v = flat(&run(&mut cc, &args!("EVAL", both, 2, user, org)));
        if i < 5 {
            assert_eq!(v, args!(1, 1, 4 - i, 99 - i));
        } else {
            assert_eq!(
                v[..2],
                ["0", "1"],
                "the user's limit refuses, the org's is not spent"
            );
        }
    }
    // Likewise a MULTI/EXEC over both keys, straight to the owner.
    let tx = multi(
        &mut cons[cl.owner_of_key(user)],
        &[
            args!("RL.GCRA", user, 5, 1, 1000, "DRYRUN"),
            args!("RL.FIXED", org, 100, 60000, "DRYRUN"),
        ],
    );
    assert_eq!(flat(&tx[0])[0], "0");
    assert_eq!(flat(&tx[1])[..3], ["1", "100", "94"]);
    assert_eq!(
        parse_info(&run(&mut cc, &args!("RL.INFO", org))).unwrap()["count"],
        "5"
    );
}

/// RL.ALL takes several keys (`RL.ALL numkeys key [key ...] rule ...`): a node must
/// redirect it by its keys and refuse keys of different slots, as for EVAL or MSET.
#[test]
fn rl_all_is_routed_by_its_keys() {
    cluster_or_skip!();
    let cl = Cluster::start(3);
    let mut cons: Vec<Connection> = cl.nodes.iter().map(|n| n.con()).collect();
    let (user, org) = ("rl:{org:7}:user:42", "rl:{org:7}");
    let all = args!("RL.ALL", 2, user, org, "GCRA", 10, 1, 1000, "FIXED", 5, 1000);
    let slot = key_slot(user);
    let owner = cl.owner(slot);
    let mut g = args!("COMMAND", "GETKEYS");
    g.extend(all.iter().cloned());
    assert_eq!(flat(&ok(&mut cons[0], &g)), [user, org]);

    // From a node that does not own the slot: MOVED, and nothing written there.
    let other = (owner + 1) % 3;
    let v = raw(&mut cons[other], &all);
    assert_eq!(
        error_text(&v),
        Some(format!("MOVED {slot} 127.0.0.1:{}", cl.nodes[owner].port)),
        "RL.ALL sent to a node that does not own {user}: {v:?}"
    );
    assert_eq!(
        int(&ok(&mut cons[other], &args!("DBSIZE"))),
        0,
        "RL.ALL wrote keys on a node that does not own their slot"
    );

    // Keys of two slots on one node: CROSSSLOT (also through the cluster client).
    let (a, b) = two_keys_on_one_node_in_different_slots(&cl);
    let n = cl.owner_of_key(&a);
    let cross = args!("RL.ALL", 2, a, b, "GCRA", 5, 1, 1000, "FIXED", 5, 1000);
    let e = error_text(&raw(&mut cons[n], &cross)).unwrap_or_default();
    assert!(e.starts_with("CROSSSLOT"), "RL.ALL over two slots: {e:?}");
    let mut cc = cl.client();
    let e = try_run(&mut cc, &cross).err().unwrap_or_default();
    assert!(
        e.contains("CROSSSLOT"),
        "RL.ALL over two slots, cluster client: {e:?}"
    );

    // Through the cluster client, over tags all over the slots: every key on its owner.
    for i in 0..60 {
        let (u, o) = (format!("rl:{{org:{i}}}:user:1"), format!("rl:{{org:{i}}}"));
        let a = args!("RL.ALL", 2, u, o, "GCRA", 10, 1, 60_000, "SLIDING", 100, 60_000);
        assert_eq!(flat(&run(&mut cc, &a))[..2], ["1", "0"], "{a:?}");
        for k in [&u, &o] {
            let owner = cl.owner_of_key(k);
            assert!(
                exists(&mut cons[owner], k),
                "{k} not on the node owning its slot"
            );
        }
    }
}

fn two_keys_on_one_node_in_different_slots(cl: &Cluster) -> (String, String) {
    let a = "rl:cross:a".to_string();
    let n = cl.owner_of_key(&a);
    for i in 0.. {
        let b = format!("rl:cross:b{i}");
        if cl.owner_of_key(&b) == n && key_slot(&b) != key_slot(&a) {
            return (a, b);
        }
    }
    unreachable!()
}

/// A hash tag whose slot is owned by node `n`.
fn tag_on_node(cl: &Cluster, n: usize, base: &str) -> String {
    (0..)
        .map(|i| format!("{{{base}{i}}}"))
        .find(|t| cl.owner_of_key(t) == n)
        .unwrap()
}

fn count_in_slot(c: &mut Connection, slot: u16) -> i64 {
    int(&ok(c, &args!("CLUSTER", "COUNTKEYSINSLOT", slot)))
}

#[test]
fn slot_moved_with_setslot_and_migrate_keeps_state_and_ttl() {
    cluster_or_skip!();
    let cl = Cluster::start(3);
    let (src, dst) = (0usize, 1usize);
    let tag = tag_on_node(&cl, src, "mv");
    let slot = key_slot(&tag);
    let mut sc = cl.nodes[src].con();
    let mut dc = cl.nodes[dst].con();
    cl.clock_set_all(T0);
    let probes = every_algorithm(&mut sc, &format!("{tag}:"));
    let now = clock_get(&mut sc);
    cl.clock_set_all(now);
    let keys: Vec<String> = probes.keys().cloned().collect();
    let want = durable_keys(&mut sc, &keys, SKIP_TTL);
    assert_every_algorithm("slot move", &want);
    let dry = dry_replies(&mut sc, &probes);
    // A cluster client that learned the map before the move.
    let mut cc = cl.client();
    assert_eq!(dry_replies(&mut cc, &probes), dry);
    assert_eq!(count_in_slot(&mut sc, slot), keys.len() as i64);

    let t = Instant::now();
    let dst_id = cl.ids[dst].clone();
    let src_id = cl.ids[src].clone();
    ok(
        &mut dc,
        &args!("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id),
    );
    ok(
        &mut sc,
        &args!("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id),
    );
    let in_slot = flat(&ok(&mut sc, &args!("CLUSTER", "GETKEYSINSLOT", slot, 1000)));
    let mut sorted = in_slot.clone();
    sorted.sort();
    assert_eq!(sorted, keys);
    let (first, second) = in_slot.split_at(in_slot.len() / 2);
    let mut m = args!(
        "MIGRATE",
        "127.0.0.1",
        cl.nodes[dst].port,
        "",
        0,
        5000,
        "KEYS"
    );
    m.extend(first.iter().cloned());
    assert_eq!(text(&ok(&mut sc, &m)), "OK");

    // Mid-migration: the source answers ASK for keys already moved (key specs again), and
    // still serves the others; the target serves a moved key after ASKING only.
    let ask = format!("ASK {slot} 127.0.0.1:{}", cl.nodes[dst].port);
    assert_eq!(err(&mut sc, &args!("RL.INFO", first[0])), ask);
    let p = probes[&first[0]]
        .clone()
        .unwrap_or_else(|| args!("RL.INFO", first[0]));
    assert_eq!(err(&mut sc, &p), ask, "{p:?}");
    ok(&mut sc, &args!("RL.INFO", second[0]));
    let e = err(&mut dc, &args!("RL.INFO", first[0]));
    assert!(e.starts_with("MOVED"), "{e}");
    ok(&mut dc, &args!("ASKING"));
    assert!(parse_info(&ok(&mut dc, &args!("RL.INFO", first[0]))).is_some());

    let mut m = args!(
        "MIGRATE",
        "127.0.0.1",
        cl.nodes[dst].port,
        "",
        0,
        5000,
        "KEYS"
    );
    m.extend(second.iter().cloned());
    assert_eq!(text(&ok(&mut sc, &m)), "OK");
    for i in [dst, src, 2] {
        ok(
            &mut cl.nodes[i].con(),
            &args!("CLUSTER", "SETSLOT", slot, "NODE", dst_id),
        );
    }
    cl.wait_owner(slot, dst);
    // MIGRATE sends the TTL as a relative time.
    let slack = t.elapsed().as_millis() as i64 + 2;
    assert_eq!(count_in_slot(&mut sc, slot), 0);
    assert_eq!(count_in_slot(&mut dc, slot), keys.len() as i64);

    let got = durable_keys(&mut dc, &keys, SKIP_TTL);
    assert_same_durable("after CLUSTER SETSLOT + MIGRATE", &want, &got, slack);
    // The stale client is redirected (MOVED) and follows; every limit carries on.
    let moved_before = cl.error_count(src, "MOVED");
    assert_eq!(dry_replies(&mut cc, &probes), dry, "after the slot moved");
    assert!(
        cl.error_count(src, "MOVED") > moved_before,
        "no MOVED was followed"
    );
    for (k, p) in &probes {
        if let Some(a) = p {
            assert_eq!(flat(&run(&mut cc, a)), dry[k], "{a:?} after the move");
        }
    }
}

#[test]
fn valkey_atomic_slot_migration_keeps_state_and_ttl() {
    cluster_or_skip!();
    let probe = Server::start();
    if !ServerVersion::of(&mut probe.con()).atomic_slot_migration() {
        eprintln!("SKIPPED: CLUSTER MIGRATESLOTS (atomic slot migration) is Valkey 9+ only");
        return;
    }
    drop(probe);
    let cl = Cluster::start(3);
    let (src, dst) = (2usize, 0usize);
    let tag = tag_on_node(&cl, src, "asm");
    let slot = key_slot(&tag);
    let mut sc = cl.nodes[src].con();
    let mut dc = cl.nodes[dst].con();
    cl.clock_set_all(T0);
    let mut probes = every_algorithm(&mut sc, &format!("{tag}:"));
    let mut cc = cl.client();

    // Hold the migration after its snapshot, in the incremental phase, so that writes made
    // meanwhile travel as replicated effects (RL._APPLY) to the target.
    ok(
        &mut sc,
        &args!("DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", 1),
    );
    let v = ok(
        &mut sc,
        &args!(
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            slot,
            slot,
            "NODE",
            cl.ids[dst]
        ),
    );
    assert_eq!(text(&v), "OK");
    wait_migration(&mut sc, |s| s == "waiting-to-pause");
    // Writes during the incremental phase: existing keys and new ones.
    for p in probes.clone().values().flatten() {
        run(&mut sc, p);
    }
    probes.extend(every_algorithm(&mut sc, &format!("{tag}:late:")));
    let now = clock_get(&mut sc);
    cl.clock_set_all(now);
    let keys: Vec<String> = probes.keys().cloned().collect();
    let want = durable_keys(&mut sc, &keys, SKIP_TTL);
    assert_every_algorithm("atomic slot migration", &want);
    let dry = dry_replies(&mut sc, &probes);

    ok(
        &mut sc,
        &args!("DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", 0),
    );
    wait_migration(&mut sc, |s| s == "success");
    cl.wait_owner(slot, dst);
    assert_eq!(count_in_slot(&mut sc, slot), 0);
    assert_eq!(count_in_slot(&mut dc, slot), keys.len() as i64);
    let got = durable_keys(&mut dc, &keys, SKIP_TTL);
    // Effects carry absolute expiries: PEXPIRETIME is exactly the source's.
    assert_same_durable("after CLUSTER MIGRATESLOTS", &want, &got, 0);
    assert_eq!(
        dry_replies(&mut cc, &probes),
        dry,
        "after atomic slot migration"
    );
}

/// Polls CLUSTER GETSLOTMIGRATIONS on the source until the latest job's state passes.
fn wait_migration(c: &mut Connection, done: impl Fn(&str) -> bool) {
    wait_until(
        "the slot migration to pass its state",
        Duration::from_secs(30),
        || {
            let v = ok(c, &args!("CLUSTER", "GETSLOTMIGRATIONS"));
            let jobs: Vec<BTreeMap<String, String>> = match &v {
                redis::Value::Array(jobs) => jobs
                    .iter()
                    .map(|j| parse_info(j).unwrap_or_default())
                    .collect(),
                other => panic!("CLUSTER GETSLOTMIGRATIONS: {other:?}"),
            };
            let state = jobs
                .last()
                .and_then(|j| j.get("state").cloned())
                .unwrap_or_default();
            assert!(
                state != "failed" && state != "cancelled",
                "slot migration failed: {jobs:?}"
            );
            done(&state)
        },
    );
}

/// The contract's "When the slot leaves the node, waiters are answered as Redis answers its
/// own blocked clients there": a key that migrates out of its slot (MIGRATE) while clients
/// wait on it sends them where it went (`-ASK`), and nothing is spent on the old node.
#[test]
fn waiters_of_a_key_that_migrates_are_sent_where_it_went() {
    cluster_or_skip!();
    let cl = Cluster::start(3);
    let (src, dst) = (0usize, 1usize);
    let tag = tag_on_node(&cl, src, "wq");
    let key = format!("{tag}:vendor");
    let slot = key_slot(&key);
    let mut sc = cl.nodes[src].con();
    let mut dc = cl.nodes[dst].con();
    cl.clock_set_all(T0);
    assert_eq!(
        int(&ok(&mut sc, &args!("RL.GCRA", &key, 1, 1, 60_000))
            .as_sequence()
            .unwrap()[0]),
        1
    );
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let mut w = cl.nodes[src].con();
            let a = args!("RL.GCRA", &key, 1, 1, 60_000, "WAIT", 30_000);
            std::thread::spawn(move || raw(&mut w, &a))
        })
        .collect();
    wait_until("2 waiters", Duration::from_secs(20), || {
        info_i64(&mut sc, "ratelimit", "ratelimit_waiting_clients") == 2
    });
    let (dst_id, src_id) = (cl.ids[dst].clone(), cl.ids[src].clone());
    ok(
        &mut dc,
        &args!("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id),
    );
    ok(
        &mut sc,
        &args!("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id),
    );
    let m = args!("MIGRATE", "127.0.0.1", cl.nodes[dst].port, &key, 0, 5000);
    assert_eq!(text(&ok(&mut sc, &m)), "OK");
    let ask = format!("ASK {slot} 127.0.0.1:{}", cl.nodes[dst].port);
    for w in waiters {
        let v = w.join().unwrap();
        assert_eq!(error_text(&v).unwrap_or_default(), ask, "{v:?}");
    }
    assert_eq!(
        info_i64(&mut sc, "ratelimit", "ratelimit_waiting_clients"),
        0
    );
    // Nothing was spent or created on the old node; the key's state is whole on the new one.
    assert_eq!(count_in_slot(&mut sc, slot), 0);
    ok(&mut dc, &args!("ASKING"));
    let r = flat(&ok(
        &mut dc,
        &args!("RL.GCRA", &key, 1, 1, 60_000, "DRYRUN"),
    ));
    assert_eq!(r[0], "0", "the migrated state still refuses: {r:?}");
}

/// Valkey's atomic slot migration moves a slot without MIGRATE: once the slot belongs to the
/// target, the source's waiters on its keys are sent there (`-MOVED`) the next time their
/// queue is looked at (here: the module clock moves), and spend nothing.
#[test]
fn valkey_atomic_slot_migration_sends_waiters_to_the_new_owner() {
    cluster_or_skip!();
    let probe = Server::start();
    if !ServerVersion::of(&mut probe.con()).atomic_slot_migration() {
        eprintln!("SKIPPED: CLUSTER MIGRATESLOTS (atomic slot migration) is Valkey 9+ only");
        return;
    }
    drop(probe);
    let cl = Cluster::start(3);
    let (src, dst) = (2usize, 0usize);
    let tag = tag_on_node(&cl, src, "asmw");
    let key = format!("{tag}:vendor");
    let slot = key_slot(&key);
    let mut sc = cl.nodes[src].con();
    cl.clock_set_all(T0);
    ok(&mut sc, &args!("RL.GCRA", &key, 1, 1, 60_000));
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let mut w = cl.nodes[src].con();
            let a = args!("RL.GCRA", &key, 1, 1, 60_000, "WAIT", 30_000);
            std::thread::spawn(move || raw(&mut w, &a))
        })
        .collect();
    wait_until("2 waiters", Duration::from_secs(20), || {
        info_i64(&mut sc, "ratelimit", "ratelimit_waiting_clients") == 2
    });
    let v = ok(
        &mut sc,
        &args!(
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            slot,
            slot,
            "NODE",
            cl.ids[dst]
        ),
    );
    assert_eq!(text(&v), "OK");
    wait_migration(&mut sc, |s| s == "success");
    cl.wait_owner(slot, dst);
    // Looked at again (a clock move processes every queue): sent to the new owner.
    ok(&mut sc, &args!("RL.CLOCK", "ADVANCE", 1));
    let moved = format!("MOVED {slot} 127.0.0.1:{}", cl.nodes[dst].port);
    for w in waiters {
        let v = w.join().unwrap();
        assert_eq!(error_text(&v).unwrap_or_default(), moved, "{v:?}");
    }
    assert_eq!(
        info_i64(&mut sc, "ratelimit", "ratelimit_waiting_clients"),
        0
    );
    assert_eq!(count_in_slot(&mut sc, slot), 0);
}
