//! Persistence on real servers (Redis 7.0 and Valkey 9, whichever `RL_SERVER` names): every
//! algorithm's state survives SAVE / BGSAVE + restart, AOF (with and without the RDB
//! preamble) + restart + BGREWRITEAOF + restart, DUMP / RESTORE, COPY, RENAME, MIGRATE; a
//! checked-in fixture of encoding version 1 restores forever; corrupted and truncated
//! payloads are refused with an error, never a crash.
//!
//! The fixture `tests/fixtures/dump-v1.txt` is written by the ignored test
//! `generate_dump_fixture_v1` (see there) and must never be regenerated once a newer
//! encoding exists: it is what proves that old files still load.

use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::dump;
use rl_testkit::rate;
use rl_testkit::workload;

use common::*;
use dump::{hex, parse, unhex, with_footer, ModulePayload};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rate::*;
use redis::{Connection, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use workload::*;

const SKIP_TTL: &[&str] = &["ttl_ms"];

fn keys_of(p: &Probes) -> Vec<String> {
    p.keys().cloned().collect()
}

/// PTTL of every key, all read at one instant (one MULTI).
fn dbsize(c: &mut Connection) -> i64 {
    int(&ok(c, &args!("DBSIZE")))
}

fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

fn dump_key(c: &mut Connection, key: &str) -> Vec<u8> {
    bytes(&ok(c, &args!("DUMP", key)))
}

/// RESTORE with a binary payload; the raw reply.
fn restore(c: &mut Connection, key: &str, ttl: i64, payload: &[u8], extra: &[&str]) -> Value {
    let mut a: Vec<Vec<u8>> = vec![
        b"RESTORE".to_vec(),
        key.as_bytes().to_vec(),
        ttl.to_string().into_bytes(),
        payload.to_vec(),
    ];
    a.extend(extra.iter().map(|s| s.as_bytes().to_vec()));
    raw_bytes(c, &a)
}

/// Every key's PTTL `after` is its PTTL `before` (more than `min_ms`), less at most
/// `elapsed_ms`: the real time between the two readings.
fn assert_ttls_kept(
    label: &str,
    keys: &[String],
    before: &[i64],
    after: &[i64],
    elapsed_ms: i64,
    min_ms: i64,
) {
    for (i, k) in keys.iter().enumerate() {
        let (b, a) = (before[i], after[i]);
        assert!(b > min_ms, "{label}: {k}: PTTL {b} before");
        assert!(
            a <= b && a >= b - elapsed_ms,
            "{label}: {k}: PTTL {b} before, {a} after, {elapsed_ms} ms apart"
        );
    }
}

/// DEBUG RELOAD, which keeps every key's TTL (see `assert_ttls_kept`).
fn debug_reload_keeping_ttls(c: &mut Connection, keys: &[String]) {
    let started = std::time::Instant::now();
    let before = pttls(c, keys);
    assert_eq!(text(&ok(c, &args!("DEBUG", "RELOAD"))), "OK");
    let after = pttls(c, keys);
    // Short of the first readings by at most the real time between them.
    let gap = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX) + 2;
    assert_ttls_kept("DEBUG RELOAD", keys, &before, &after, gap, 0);
}

// ------------------------------------------------------------------------ RDB

fn rdb_restart(mode: &str) {
    let mut n = Server::start();
    let mut c = n.con();
    clock_set(&mut c, T0);
    let probes = every_algorithm(&mut c, "");
    let keys = keys_of(&probes);
    let now = clock_get(&mut c);
    let want = durable_keys(&mut c, &keys, SKIP_TTL);
    assert_every_algorithm(mode, &want);
    let dry = dry_replies(&mut c, &probes);
    // The clock starts before the first PTTL is read: every key's drop is then bounded.
    let t = Instant::now();
    let before = pttls(&mut c, &keys);
    match mode {
        "SAVE" => assert_eq!(text(&ok(&mut c, &args!("SAVE"))), "OK"),
        "BGSAVE" => {
            let saves = info_i64(&mut c, "persistence", "rdb_changes_since_last_save");
            assert!(saves > 0);
            ok(&mut c, &args!("BGSAVE"));
            wait_until("BGSAVE", Duration::from_secs(30), || {
                info_i64(&mut c, "persistence", "rdb_bgsave_in_progress") == 0
                    && info_i64(&mut c, "persistence", "rdb_changes_since_last_save") == 0
            });
            assert_eq!(
                info_field(&mut c, "persistence", "rdb_last_bgsave_status").unwrap(),
                "ok"
            );
        }
        _ => unreachable!(),
    }
    assert!(n.dir.join("dump.rdb").exists(), "{mode} wrote no dump.rdb");
    let took = n.restart();
    let mut c = n.con();
    let after = pttls(&mut c, &keys);
    let elapsed = t.elapsed().as_millis() as i64 + 1;
    eprintln!("{mode}: restart took {took:?}");
    assert_eq!(dbsize(&mut c), keys.len() as i64);
    clock_set(&mut c, now);
    let got = durable_keys(&mut c, &keys, SKIP_TTL);
    assert_same_durable(&format!("after {mode} + restart"), &want, &got, 0);
    assert_ttls_kept(mode, &keys, &before, &after, elapsed, 60_000);
    assert_eq!(
        dry_replies(&mut c, &probes),
        dry,
        "after {mode} + restart the algorithms do not carry on where they were"
    );
}

#[test]
fn save_and_restart_keeps_every_state_and_ttl() {
    rdb_restart("SAVE");
}

#[test]
fn bgsave_and_restart_keeps_every_state_and_ttl() {
    rdb_restart("BGSAVE");
}

// ------------------------------------------------------------------------ AOF

/// The commands of a RESP file (an AOF without RDB preamble).
fn resp_commands(data: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line(data: &[u8], pos: &mut usize) -> String {
        let rel = data[*pos..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("unterminated line in the AOF");
        let l = String::from_utf8_lossy(&data[*pos..*pos + rel]).into_owned();
        *pos += rel + 2;
        l
    }
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < data.len() {
        let n: usize = line(data, &mut pos)
            .strip_prefix('*')
            .expect("AOF: not a RESP array")
            .parse()
            .unwrap();
        let mut cmd = Vec::new();
        for _ in 0..n {
            let len: usize = line(data, &mut pos)
                .strip_prefix('$')
                .expect("AOF: not a bulk string")
                .parse()
                .unwrap();
            cmd.push(data[pos..pos + len].to_vec());
            pos += len + 2;
        }
        out.push(cmd);
    }
    out
}

fn aof_cycle(preamble: bool) {
    let label = if preamble {
        "AOF with RDB preamble"
    } else {
        "AOF without RDB preamble"
    };
    let mut n = Server::builder()
        .appendonly()
        .config("aof-use-rdb-preamble", if preamble { "yes" } else { "no" })
        .start();
    let mut c = n.con();
    clock_set(&mut c, T0);
    let mut probes = every_algorithm(&mut c, "a:");
    let now = clock_get(&mut c);
    let want = durable_keys(&mut c, &keys_of(&probes), SKIP_TTL);
    assert_every_algorithm(label, &want);
    let dry = dry_replies(&mut c, &probes);

    // 1. A crash, a restart from the AOF (effects replayed: RL._APPLY with PXAT).
    let took = n.restart();
    eprintln!("{label}: restart took {took:?}");
    let mut c = n.con();
    clock_set(&mut c, now);
    let got = durable_keys(&mut c, &keys_of(&probes), SKIP_TTL);
    assert_same_durable(&format!("{label}: after restart"), &want, &got, 0);
    assert_eq!(dry_replies(&mut c, &probes), dry, "{label}: after restart");

    // 2. Rewrite: the base file holds the states (RL._APPLY + PEXPIREAT, or an RDB).
    bgrewriteaof(&mut c);
    let files = n.files();
    let base: Vec<&String> = files.iter().filter(|f| f.contains(".base.")).collect();
    assert_eq!(base.len(), 1, "{label}: base files {files:?}");
    if preamble {
        assert!(base[0].ends_with(".base.rdb"), "{label}: {files:?}");
    } else {
        assert!(base[0].ends_with(".base.aof"), "{label}: {files:?}");
        let data = std::fs::read(n.dir.join("appendonlydir").join(base[0])).unwrap();
        let cmds = resp_commands(&data);
        let names: Vec<String> = cmds
            .iter()
            .map(|c| String::from_utf8_lossy(&c[0]).to_uppercase())
            .collect();
        let applies = names.iter().filter(|n| *n == "RL._APPLY").count();
        let expires = names.iter().filter(|n| *n == "PEXPIREAT").count();
        assert_eq!(applies, want.len(), "{label}: base AOF commands {names:?}");
        assert_eq!(expires, want.len(), "{label}: base AOF commands {names:?}");
        assert!(
            names
                .iter()
                .all(|n| n == "RL._APPLY" || n == "PEXPIREAT" || n == "SELECT"),
            "{label}: base AOF commands {names:?}"
        );
    }
    // More writes after the rewrite go to the new increment file.
    clock_set(&mut c, now);
    probes.extend(every_algorithm(&mut c, "b:"));
    let now = clock_get(&mut c);
    let want = durable_keys(&mut c, &keys_of(&probes), SKIP_TTL);
    let dry = dry_replies(&mut c, &probes);

    // 3. Restart from base + increment.
    n.restart();
    let mut c = n.con();
    clock_set(&mut c, now);
    let got = durable_keys(&mut c, &keys_of(&probes), SKIP_TTL);
    assert_same_durable(&format!("{label}: after rewrite + restart"), &want, &got, 0);
    assert_eq!(dbsize(&mut c), want.len() as i64);

    // 4. Rewrite again (the states that came from the AOF) and restart once more.
    bgrewriteaof(&mut c);
    n.restart();
    let mut c = n.con();
    clock_set(&mut c, now);
    let got = durable_keys(&mut c, &keys_of(&probes), SKIP_TTL);
    assert_same_durable(
        &format!("{label}: after 2nd rewrite + restart"),
        &want,
        &got,
        0,
    );
    assert_eq!(dry_replies(&mut c, &probes), dry, "{label}: at the end");
}

#[test]
fn aof_with_rdb_preamble_restart_rewrite_restart() {
    aof_cycle(true);
}

#[test]
fn aof_without_rdb_preamble_restart_rewrite_restart() {
    aof_cycle(false);
}

// ---------------------------------------------------- DUMP, COPY, RENAME, OBJECT, MEMORY

#[test]
fn dump_restore_copy_rename_object_memory_usage() {
    let (_n, mut c) = Server::at_clock(T0);
    let probes = every_algorithm(&mut c, "s:");
    let keys = keys_of(&probes);
    let want = durable_keys(&mut c, &keys, SKIP_TTL);
    assert_every_algorithm("DUMP", &want);
    let mut copies = BTreeMap::new();
    for k in &keys {
        let w = &want[k];
        // DUMP: a module value of type "ratelimit", encoding version 1.
        let payload = dump_key(&mut c, k);
        let mp = parse(&payload).unwrap_or_else(|e| panic!("DUMP {k}: {e}"));
        assert_eq!(mp.type_name(), "ratelimit", "{k}");
        assert_eq!(mp.encoding_version(), 1, "{k}");

        // RESTORE with the absolute expiry: the very same value and expiry.
        let r = format!("{k}:restored");
        let v = restore(&mut c, &r, w.pexpiretime, &payload, &["ABSTTL"]);
        assert_eq!(text(&v), "OK", "RESTORE {r}");
        assert_eq!(&durable(&mut c, &r, SKIP_TTL), w, "RESTORE {r}");
        // Onto an existing key: BUSYKEY, unless REPLACE.
        let e = error_text(&restore(&mut c, &r, 0, &payload, &[])).unwrap();
        assert!(e.starts_with("BUSYKEY"), "RESTORE onto {r}: {e}");
        let v = restore(&mut c, &r, w.pexpiretime, &payload, &["ABSTTL", "REPLACE"]);
        assert_eq!(text(&v), "OK");
        assert_eq!(&durable(&mut c, &r, SKIP_TTL), w, "RESTORE REPLACE {r}");

        // COPY keeps value and expiry; RENAME moves both.
        let cp = format!("{k}:copy");
        assert_eq!(int(&ok(&mut c, &args!("COPY", k, cp))), 1);
        assert_eq!(&durable(&mut c, &cp, SKIP_TTL), w, "COPY {k}");
        let mv = format!("{k}:moved");
        ok(&mut c, &args!("RENAME", cp, mv));
        assert!(!exists(&mut c, &cp));
        assert_eq!(&durable(&mut c, &mv, SKIP_TTL), w, "RENAME {k}");
        copies.insert(k.clone(), mv);

        // OBJECT and MEMORY USAGE.
        assert_eq!(text(&ok(&mut c, &args!("OBJECT", "ENCODING", k))), "raw");
        assert!(int(&ok(&mut c, &args!("OBJECT", "IDLETIME", k))) >= 0);
        assert!(int(&ok(&mut c, &args!("OBJECT", "REFCOUNT", k))) >= 1);
        let mem = int(&ok(&mut c, &args!("MEMORY", "USAGE", k)));
        assert!(mem > 0, "MEMORY USAGE {k} = {mem}");
    }
    // MEMORY USAGE counts the log's entries (1900 of 4 bytes: they span less than 71 min).
    let big = int(&ok(&mut c, &args!("MEMORY", "USAGE", "s:log:big")));
    let small = int(&ok(&mut c, &args!("MEMORY", "USAGE", "s:gcra:a")));
    assert!(big >= 1900 * 4, "MEMORY USAGE of a 1900-entry log: {big}");
    assert!(small < 1000, "MEMORY USAGE of a gcra state: {small}");

    // Copies are deep: writing the original leaves the copy as it was.
    for (k, p) in &probes {
        let Some(a) = p else { continue };
        let r = ok(&mut c, a);
        if int(&flat_first(&r)) == 1 {
            assert_ne!(durable(&mut c, k, SKIP_TTL).info, want[k].info, "{k}");
        }
        assert_eq!(
            &durable(&mut c, &copies[k], SKIP_TTL),
            &want[k],
            "{} changed when {k} was written",
            copies[k]
        );
    }

    // OBJECT FREQ under an LFU policy.
    ok(
        &mut c,
        &args!("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"),
    );
    rate(&mut c, &args!("RL.GCRA", "s:lfu", 10, 1, 600_000));
    for _ in 0..20 {
        ok(&mut c, &args!("RL.INFO", "s:lfu"));
    }
    assert!(int(&ok(&mut c, &args!("OBJECT", "FREQ", "s:lfu"))) >= 1);
    ping(&mut c);
}

fn flat_first(v: &Value) -> Value {
    match v {
        Value::Array(items) => items[0].clone(),
        other => other.clone(),
    }
}

#[test]
fn migrate_between_two_servers() {
    let a = Server::start();
    let b = Server::start();
    let mut ca = a.con();
    let mut cb = b.con();
    clock_set(&mut ca, T0);
    let probes = every_algorithm(&mut ca, "m:");
    let keys = keys_of(&probes);
    let now = clock_get(&mut ca);
    clock_set(&mut cb, now);
    let want = durable_keys(&mut ca, &keys, SKIP_TTL);
    let dry = dry_replies(&mut ca, &probes);
    let (copied, moved): (Vec<String>, Vec<String>) =
        keys.iter().cloned().partition(|k| k.len() % 2 == 0);
    assert!(!copied.is_empty() && !moved.is_empty());

    let t = Instant::now();
    let mut m = args!("MIGRATE", "127.0.0.1", b.port, "", 0, 5000, "COPY", "KEYS");
    m.extend(copied.iter().cloned());
    assert_eq!(text(&ok(&mut ca, &m)), "OK");
    let mut m = args!("MIGRATE", "127.0.0.1", b.port, "", 0, 5000, "KEYS");
    m.extend(moved.iter().cloned());
    assert_eq!(text(&ok(&mut ca, &m)), "OK");
    // MIGRATE carries the TTL as a relative time: the absolute expiry may move by the
    // time the transfer took.
    let slack = t.elapsed().as_millis() as i64 + 2;

    let got = durable_keys(&mut cb, &keys, SKIP_TTL);
    assert_same_durable("MIGRATE", &want, &got, slack);
    for k in &copied {
        assert!(exists(&mut ca, k), "MIGRATE COPY removed {k}");
    }
    for k in &moved {
        assert!(!exists(&mut ca, k), "MIGRATE left {k} on the source");
    }
    assert_eq!(dry_replies(&mut cb, &probes), dry, "after MIGRATE");

    // Single-key form, REPLACE onto the existing copy.
    let k = &copied[0];
    let v = ok(
        &mut ca,
        &args!("MIGRATE", "127.0.0.1", b.port, k, 0, 5000, "REPLACE"),
    );
    assert_eq!(text(&v), "OK");
    assert!(!exists(&mut ca, k));
    assert_eq!(durable(&mut cb, k, SKIP_TTL).info, want[k].info);

    // DUMP + RESTORE ABSTTL of the whole dataset into a third server: DEBUG DIGEST (values
    // and expiries of every key) is the same.
    let c3 = Server::start();
    let mut cc = c3.con();
    for k in &keys {
        let p = dump_key(&mut cb, k);
        let at = pexpiretime(&mut cb, k);
        assert_eq!(text(&restore(&mut cc, k, at, &p, &["ABSTTL"])), "OK");
    }
    let d = |c: &mut Connection| text(&ok(c, &args!("DEBUG", "DIGEST")));
    let db = d(&mut cb);
    assert!(db.chars().any(|ch| ch != '0'));
    assert_eq!(d(&mut cc), db, "DEBUG DIGEST after DUMP/RESTORE ABSTTL");
}

// ------------------------------------------------------------------ fixture (v1)

const FIXTURE: &str = "tests/fixtures/dump-v1.txt";

struct FixtureEntry {
    key: String,
    dump: Vec<u8>,
    info: BTreeMap<String, String>,
    probe: Option<Vec<String>>,
    dry: Option<Vec<String>>,
}

struct Fixture {
    clock_ms: i64,
    entries: Vec<FixtureEntry>,
}

fn parse_fixture(text: &str) -> Fixture {
    let mut clock_ms = None;
    let mut entries: Vec<FixtureEntry> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (tag, rest) = line.split_once(' ').unwrap_or((line, ""));
        let words: Vec<String> = rest.split(' ').map(String::from).collect();
        let last = entries.last_mut();
        match (tag, last) {
            ("clock_ms", _) => clock_ms = Some(rest.parse().unwrap()),
            ("key", _) => entries.push(FixtureEntry {
                key: rest.to_string(),
                dump: Vec::new(),
                info: BTreeMap::new(),
                probe: None,
                dry: None,
            }),
            ("dump", Some(e)) => e.dump = unhex(rest),
            ("info", Some(e)) => {
                assert_eq!(words.len(), 2, "{FIXTURE}:{}: {line}", n + 1);
                e.info.insert(words[0].clone(), words[1].clone());
            }
            ("probe", Some(e)) => e.probe = Some(words),
            ("dry", Some(e)) => e.dry = Some(words),
            _ => panic!("{FIXTURE}:{}: cannot parse {line:?}", n + 1),
        }
    }
    Fixture {
        clock_ms: clock_ms.expect("fixture without clock_ms"),
        entries,
    }
}

fn fixture_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)
}

/// Writes `tests/fixtures/dump-v1.txt`: DUMP payloads of every algorithm's state made by
/// encoding version 1 on Redis 7.0 (RDB version 10, which Valkey also restores), with the
/// RL.INFO fields and DRYRUN replies they must give at the recorded clock.
///
/// Only with `RL_WRITE_FIXTURE=1`, and only while the module's encoding is version 1:
///     RL_WRITE_FIXTURE=1 cargo test --release --test persistence -- --ignored generate_dump_fixture_v1
/// Without it, it only checks that the current code still produces exactly the checked-in
/// payloads (true as long as the encoding is version 1).
#[test]
#[ignore]
fn generate_dump_fixture_v1() {
    let n = Server::start();
    let mut c = n.con();
    assert!(
        !ServerVersion::of(&mut c).valkey,
        "make the fixture on Redis 7.0 (RDB version 10), which both servers restore"
    );
    clock_set(&mut c, T0);
    let probes = every_algorithm(&mut c, "");
    let clock_ms = clock_get(&mut c);
    let mut out = String::new();
    out.push_str(
        "# DUMP payloads of `ratelimit` values, encoding version 1, made by Redis 7.0 (RDB 10).\n\
         # Written by `generate_dump_fixture_v1` (tests/persistence.rs); read by\n\
         # `dump_fixture_v1_restores_with_exact_state` on every server, forever: never regenerate\n\
         # it once the encoding is newer than 1. Per key: the DUMP payload (hex), its RL.INFO\n\
         # fields (without ttl_ms) and the DRYRUN reply of a request, both at clock_ms.\n",
    );
    out.push_str(&format!("clock_ms {clock_ms}\n"));
    for (k, p) in &probes {
        let payload = dump_key(&mut c, k);
        assert_eq!(parse(&payload).unwrap().encoding_version(), 1);
        out.push_str(&format!("\nkey {k}\ndump {}\n", hex(&payload)));
        let info = strip(info(&mut c, k).unwrap(), SKIP_TTL);
        for (f, v) in &info {
            out.push_str(&format!("info {f} {v}\n"));
        }
        if let Some(a) = p {
            let mut d = a.clone();
            d.push("DRYRUN".into());
            out.push_str(&format!("probe {}\n", a.join(" ")));
            out.push_str(&format!("dry {}\n", flat(&ok(&mut c, &d)).join(" ")));
        }
    }
    let path = fixture_path();
    if std::env::var("RL_WRITE_FIXTURE").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &out).unwrap();
        eprintln!("wrote {}", path.display());
    } else {
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            old == out,
            "the current code does not reproduce {FIXTURE} byte for byte (fine after an \
             encoding change; then leave the file as it is)"
        );
    }
}

#[test]
fn dump_fixture_v1_restores_with_exact_state() {
    let fx = parse_fixture(&std::fs::read_to_string(fixture_path()).unwrap());
    assert!(
        fx.entries.len() >= 10,
        "fixture has {} entries",
        fx.entries.len()
    );
    let n = Server::start();
    let mut c = n.con();
    clock_set(&mut c, fx.clock_ms);
    let mut algos = std::collections::BTreeSet::new();
    for e in &fx.entries {
        // The fixture is what it claims: encoding version 1, made with RDB version 10.
        let mp = parse(&e.dump).unwrap_or_else(|m| panic!("fixture {}: {m}", e.key));
        assert_eq!(mp.type_name(), "ratelimit");
        assert_eq!(mp.encoding_version(), 1, "{}", e.key);
        assert_eq!(mp.buffer[0], 1, "{}: codec version byte", e.key);
        assert_eq!(mp.rdb_version, 10, "{}", e.key);

        let v = restore(&mut c, &e.key, 3_600_000, &e.dump, &[]);
        assert_eq!(text(&v), "OK", "RESTORE of the v1 fixture {}", e.key);
        let got = info(&mut c, &e.key).unwrap();
        let ttl = info_int(&got, "ttl_ms");
        assert!(ttl > 0 && ttl <= 3_600_000, "{}: ttl_ms {ttl}", e.key);
        assert_eq!(
            strip(got, SKIP_TTL),
            e.info,
            "RL.INFO of the v1 fixture {}",
            e.key
        );
        algos.insert(e.info["algorithm"].clone());
        if let (Some(p), Some(want)) = (&e.probe, &e.dry) {
            let mut d = p.clone();
            d.push("DRYRUN".into());
            assert_eq!(&flat(&ok(&mut c, &d)), want, "{d:?} on the v1 fixture");
        }
    }
    assert_eq!(algos.len(), 7, "fixture algorithms: {algos:?}");
    // Loaded from version 1, saved by the current encoding, loaded again: unchanged.
    let before: BTreeMap<String, BTreeMap<String, String>> = fx
        .entries
        .iter()
        .map(|e| {
            (
                e.key.clone(),
                strip(info(&mut c, &e.key).unwrap(), SKIP_TTL),
            )
        })
        .collect();
    assert_eq!(text(&ok(&mut c, &args!("DEBUG", "RELOAD"))), "OK");
    for e in &fx.entries {
        assert_eq!(
            strip(info(&mut c, &e.key).unwrap(), SKIP_TTL),
            before[&e.key],
            "{} after DEBUG RELOAD",
            e.key
        );
    }
}

// ------------------------------------------------------------ corrupted payloads

/// A RESTORE that must be refused; the server must stay up and the key absent.
fn refused(c: &mut Connection, payload: &[u8], what: &str) -> String {
    let v = restore(c, "victim", 600_000, payload, &["REPLACE"]);
    let e = error_text(&v).unwrap_or_else(|| {
        panic!(
            "RESTORE of {what} was accepted: {v:?} (RL.INFO {:?})",
            info(c, "victim")
        )
    });
    assert!(!exists(c, "victim"), "{what}: key created");
    e
}

/// A RESTORE that may be refused ("Bad data format") or accepted; if accepted, the value
/// must answer RL.INFO and requests like any state (a request may be WRONGTYPE if the bytes
/// now name another algorithm). True if refused.
fn refused_or_usable(
    c: &mut Connection,
    payload: &[u8],
    probe: Option<&[String]>,
    what: &str,
) -> bool {
    let v = restore(c, "victim", 600_000, payload, &["REPLACE"]);
    if let Some(e) = error_text(&v) {
        assert!(
            e.contains("Bad data format") || e.contains("checksum"),
            "{what}: {e}"
        );
        assert!(!exists(c, "victim"), "{what}: key created");
        return true;
    }
    ok(c, &args!("RL.INFO", "victim"));
    if let Some(a) = probe {
        let mut a = a.to_vec();
        a[1] = "victim".into();
        a.push("DRYRUN".into());
        raw(c, &a);
        a.pop();
        raw(c, &a);
    }
    ok(c, &args!("DEL", "victim"));
    false
}

/// A module payload whose buffer the module must refuse: Redis's own checks pass (good
/// CRC), so the error is the module's decoder saying no ("Bad data format").
fn module_refuses(c: &mut Connection, mp: &ModulePayload, what: &str) {
    let e = refused(c, &mp.build(), what);
    assert!(
        e.contains("Bad data format"),
        "{what}: expected the module to refuse the value, got {e:?}"
    );
}

/// The first five fields of any rate reply (also 6-field ones).
fn rate_any(c: &mut Connection, a: &[String]) -> Vec<i64> {
    match ok(c, a) {
        Value::Array(items) => items.iter().take(5).map(int).collect(),
        other => panic!("{a:?}: {other:?}"),
    }
}

fn set_u64(buf: &mut [u8], field: usize, v: u64) {
    buf[2 + 8 * field..10 + 8 * field].copy_from_slice(&v.to_le_bytes());
}

fn get_u64(buf: &[u8], field: usize) -> u64 {
    u64::from_le_bytes(buf[2 + 8 * field..10 + 8 * field].try_into().unwrap())
}

/// Cut positions: all of them for small payloads, else the first and last 64 and a sample.
fn cuts(len: usize, rng: &mut StdRng) -> Vec<usize> {
    if len <= 400 {
        return (0..len).collect();
    }
    let mut v: Vec<usize> = (0..64).chain(len - 64..len).collect();
    v.extend((0..200).map(|_| rng.gen_range(0..len)));
    v
}

#[test]
fn corrupted_or_truncated_restore_payloads_are_refused() {
    let seed: u64 = std::env::var("RL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("corrupted payloads: seed {seed} (RL_SEED={seed} to replay)");
    let mut rng = StdRng::seed_from_u64(seed);
    let (n, mut c) = Server::at_clock(T0);
    let probes = every_algorithm(&mut c, "x:");
    let keys = keys_of(&probes);
    let want = durable_keys(&mut c, &keys, SKIP_TTL);
    let (mut accepted, mut refusals) = (0, 0);
    for k in &keys {
        let payload = dump_key(&mut c, k);
        let mp = parse(&payload).unwrap();
        let buf = mp.buffer.clone();
        let tag = buf[1];

        // Our rebuilt (uncompressed) payload is a faithful one: same value.
        let v = restore(&mut c, "victim", 600_000, &mp.build(), &["REPLACE"]);
        assert_eq!(text(&v), "OK", "rebuilt payload of {k}");
        assert_eq!(
            durable(&mut c, "victim", &["ttl_ms"]).info,
            want[k].info,
            "rebuilt payload of {k}"
        );
        ok(&mut c, &args!("DEL", "victim"));

        // Plain truncation: the server's CRC check refuses it.
        for cut in cuts(payload.len(), &mut rng) {
            refused(&mut c, &payload[..cut], &format!("{k} cut at {cut}"));
        }
        // Truncation inside the value, CRC recomputed: the module's reads fail
        // (HANDLE_IO_ERRORS) or its decoder refuses. (The server reads the footer as data
        // when the body is short, so now and then a cut still yields a well-formed value,
        // e.g. a counter that took the footer's bytes: that one must then simply work.)
        // Both the server's own, possibly LZF-compressed, body and our plain one.
        for body in [payload[..payload.len() - 10].to_vec(), mp.body()] {
            for cut in cuts(body.len(), &mut rng) {
                let p = with_footer(&body[..cut], mp.rdb_version);
                if !refused_or_usable(&mut c, &p, probes[k].as_deref(), &format!("{k}: cut {cut}"))
                {
                    accepted += 1;
                }
            }
        }
        // The module's buffer truncated (well-formed RDB string): the decoder refuses.
        for cut in cuts(buf.len(), &mut rng) {
            let mut m = mp.clone();
            m.buffer.truncate(cut);
            module_refuses(&mut c, &m, &format!("{k}: buffer cut at {cut}"));
        }
        // Targeted corruptions the decoder must refuse.
        let mut bad: Vec<(String, Vec<u8>)> = Vec::new();
        let mut with = |what: &str, f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = buf.clone();
            f(&mut b);
            bad.push((what.to_string(), b));
        };
        for v in [0u8, 2, 255] {
            with(&format!("codec version {v}"), &|b| b[0] = v);
        }
        for t in [0u8, 8, 255] {
            with(&format!("algorithm tag {t}"), &|b| b[1] = t);
        }
        with("a trailing byte", &|b| b.push(0));
        with("8 trailing bytes", &|b| b.extend([0; 8]));
        match tag {
            1 | 2 | 6 => {
                let count = get_u64(&buf, 1);
                with("burst 0", &|b| set_u64(b, 0, 0));
                with("count 0", &|b| set_u64(b, 1, 0));
                with("period 0", &|b| set_u64(b, 2, 0));
                with("period too long", &|b| set_u64(b, 2, u64::MAX));
                with("overflowing burst", &|b| set_u64(b, 0, u64::MAX));
                with("fraction >= count", &|b| set_u64(b, 4, count));
            }
            3 | 4 => {
                with("limit 0", &|b| set_u64(b, 0, 0));
                with("window 0", &|b| set_u64(b, 1, 0));
                with("window too long", &|b| set_u64(b, 1, u64::MAX));
                with("window start beyond time", &|b| set_u64(b, 2, u64::MAX));
            }
            5 => {
                let n = get_u64(&buf, 2);
                with("limit 0", &|b| set_u64(b, 0, 0));
                with("window 0", &|b| set_u64(b, 1, 0));
                with("one entry more than stored", &|b| set_u64(b, 2, n + 1));
                with("one entry less than stored", &|b| set_u64(b, 2, n - 1));
                with("2^64-1 entries", &|b| set_u64(b, 2, u64::MAX));
                with("an entry beyond time", &|b| set_u64(b, 3, u64::MAX));
                assert!(n >= 2, "{k}: fewer than 2 log entries");
                with("entries out of order", &|b| {
                    let last = get_u64(b, 2 + n as usize);
                    set_u64(b, 3, last + 1)
                });
            }
            7 => {
                let n = get_u64(&buf, 5);
                let last_ms = get_u64(&buf, 2);
                assert!(n >= 1, "{k}: no lease stored");
                with("limit 0", &|b| set_u64(b, 0, 0));
                with("max lease 0", &|b| set_u64(b, 1, 0));
                with("horizon beyond time", &|b| set_u64(b, 4, u64::MAX));
                with("one lease more than stored", &|b| set_u64(b, 5, n + 1));
                with("2^64-1 leases", &|b| set_u64(b, 5, u64::MAX));
                with("a lease expiring beyond time", &|b| set_u64(b, 6, u64::MAX));
                with("a lease token after the last token", &|b| {
                    set_u64(b, 7, last_ms + 1)
                });
            }
            t => panic!("{k}: unknown algorithm tag {t}"),
        }
        for (what, b) in bad {
            let mut m = mp.clone();
            m.buffer = b;
            module_refuses(&mut c, &m, &format!("{k}: {what}"));
            refusals += 1;
        }
        // Values the decoder may take (they lie far in the future, which every algorithm
        // reads as fully spent now) but which must then work like any other state. (A TAT
        // of 2^64-1 ns passes today: the decoder's bound `MAX_TIME_MS * 10^6 * 2` saturates
        // to u64::MAX.)
        if matches!(tag, 1 | 2 | 6) {
            let mut m = mp.clone();
            set_u64(&mut m.buffer, 3, u64::MAX);
            let v = restore(&mut c, "victim", 600_000, &m.build(), &["REPLACE"]);
            if error_text(&v).is_none() {
                let a = probes[k].clone().unwrap_or_else(|| {
                    args!(
                        "RL.GCRA",
                        "x",
                        get_u64(&buf, 0),
                        get_u64(&buf, 1),
                        get_u64(&buf, 2)
                    )
                });
                let mut a = a.clone();
                a[1] = "victim".into();
                if tag == 6 {
                    a[0] = "RL.QUEUE".into();
                    a.truncate(4);
                }
                let r = rate_any(&mut c, &a);
                assert_eq!(r[0], 0, "{a:?} on a TAT of 2^64-1 ns was admitted: {r:?}");
                ok(&mut c, &args!("DEL", "victim"));
            }
        }
        // Encoding versions the module does not know (in the type id).
        for ver in [0u64, 2, 1023] {
            let mut m = mp.clone();
            m.type_id = (m.type_id & !1023) | ver;
            let e = refused(&mut c, &m.build(), &format!("{k}: encoding version {ver}"));
            assert!(e.contains("Bad data format"), "{k}: encver {ver}: {e}");
        }
        // Random byte flips: refused, or a value the module fully validated (it must then
        // answer RL.INFO and requests like any other state).
        for _ in 0..150 {
            let mut m = mp.clone();
            for _ in 0..rng.gen_range(1..=3) {
                let i = rng.gen_range(0..m.buffer.len());
                m.buffer[i] ^= 1 << rng.gen_range(0..8);
            }
            if refused_or_usable(&mut c, &m.build(), probes[k].as_deref(), k) {
                refusals += 1;
            } else {
                accepted += 1;
            }
        }
        ping(&mut c);
    }
    eprintln!("corrupted payloads: {refusals} refused by the module, {accepted} flips valid");
    // Nothing else was touched, and the server is the same process.
    assert_eq!(durable_keys(&mut c, &keys, SKIP_TTL), want);
    ping(&mut c);
    let log = std::fs::read_to_string(n.log_path()).unwrap_or_default();
    assert!(
        !log.contains("crashed") && !log.contains("Guru Meditation"),
        "server log:\n{}",
        n.log_tail()
    );
}

// -------------------------------------------------------- DEBUG RELOAD and DEBUG LOADAOF

#[test]
fn debug_reload_keeps_every_state_and_ttl() {
    let (_s, mut c) = Server::at_clock(T0);
    let keys = gcra_tb_sliding_workload(&mut c, "");
    let names: Vec<String> = keys.keys().cloned().collect();
    let now = clock_get(&mut c);
    // Only ttl_ms reads the real clock; the module clock is frozen, so `tokens` stays.
    let before = durable_all(&mut c, &["ttl_ms"]);
    assert_eq!(before.len(), keys.len());
    assert_digests_meaningful(&before, GCRA_TB_SLIDING);
    let dry_before: Vec<[i64; 5]> = keys
        .values()
        .map(|a| {
            let mut d = a.clone();
            d.push("DRYRUN".into());
            rate(&mut c, &d)
        })
        .collect();
    debug_reload_keeping_ttls(&mut c, &names);
    assert_eq!(clock_get(&mut c), now, "DEBUG RELOAD moved the test clock");
    let after = durable_all(&mut c, &["ttl_ms"]);
    assert_same("after DEBUG RELOAD", &before, &after);
    // And the algorithms carry on exactly where they were.
    for (i, a) in keys.values().enumerate() {
        assert_eq!(rate(&mut c, a), dry_before[i], "{a:?} after DEBUG RELOAD");
    }
}

#[test]
fn aof_reload_and_rewrite_restore_the_same_state() {
    let s = Server::builder()
        .appendonly()
        .config("aof-use-rdb-preamble", "no")
        .start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    gcra_tb_sliding_workload(&mut c, "");
    let skip = ["tokens", "ttl_ms"];
    let want = durable_all(&mut c, &skip);
    assert_digests_meaningful(&want, GCRA_TB_SLIDING);
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

#[test]
fn debug_reload_keeps_the_new_states() {
    let (_srv, mut c) = Server::at_clock(T0);
    let probes = fixed_log_queue_lease_workload(&mut c, "");
    let before = durable_all(&mut c, CLOCK_FIELDS);
    assert_eq!(before.len(), probes.len());
    assert_digests_meaningful(&before, FIXED_LOG_QUEUE_LEASE);
    let names: Vec<String> = probes.keys().cloned().collect();
    let dry_before: Vec<([i64; 5], Vec<Value>)> = probes
        .values()
        .filter(|a| !a.is_empty())
        .map(|a| call(&mut c, a))
        .collect();
    debug_reload_keeping_ttls(&mut c, &names);
    assert_same(
        "after DEBUG RELOAD",
        &before,
        &durable_all(&mut c, CLOCK_FIELDS),
    );
    let dry_after: Vec<([i64; 5], Vec<Value>)> = probes
        .values()
        .filter(|a| !a.is_empty())
        .map(|a| call(&mut c, a))
        .collect();
    assert_eq!(
        dry_before, dry_after,
        "the algorithms answer differently after DEBUG RELOAD"
    );
    // And they carry on: the leases are still there to RELEASE.
    let m = info_of(&mut c, "a5");
    let last = m["last_token"].clone();
    assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "a5", last)).0, 1);
}

/// Issue 24's repro: a lease state whose last token lies far ahead, accepted by RESTORE,
/// then one RL.ACQUIRE (whose lease expires beyond the old decoder's time bound): the
/// server still reloads, with every key. Whatever the decoder accepts stays storable
/// after any operation (the `ops` property tests say it for every algorithm).
#[test]
fn a_restored_state_stays_loadable_after_an_operation() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, 1_900_000_000_000);
    ok(&mut c, &args!("SET", "other", "1"));
    let payload = unhex(concat!(
        "0781adab5e9629a2b4010532010700000000000000803d420f0000000000003fe59c30120000ffffffff",
        "0000000005000000000000000000000000000000000a000bd709207d974ae0"
    ));
    assert_eq!(text(&restore(&mut c, "lk", 3_600_000, &payload, &[])), "OK");
    let r = ok(&mut c, &args!("RL.ACQUIRE", "lk", 5, 60_000));
    assert!(
        matches!(&r, Value::Array(v) if v.first() == Some(&Value::Int(1))),
        "{r:?}"
    );
    assert_eq!(text(&ok(&mut c, &args!("DEBUG", "RELOAD"))), "OK");
    assert_eq!(dbsize(&mut c), 2, "every key survives the reload");
    let m = info(&mut c, "lk").expect("the lease key");
    assert_eq!(info_int(&m, "leases"), 1);
}
