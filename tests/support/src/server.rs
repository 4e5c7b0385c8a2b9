//! The one server launcher of the tests and of `examples/compare.rs`: a real `redis-server`
//! (or `valkey-server`) with the freshly built module, on a free 127.0.0.1 port, in its own
//! directory. A builder chooses the module's arguments (the test clock by default), config
//! lines (`appendonly`, `appendfsync`, ...), replication (`REPLICAOF` + waiting for the link
//! and the offset) and cluster mode (its own bus port). A started server can be killed
//! (SIGKILL) and restarted on the same directory, port and arguments. Killed and its
//! directory removed on drop. Waits are for conditions (`wait_until`), never fixed sleeps.
//!
//! Env: `RL_SERVER` (server binary, default `redis-server`), `RL_MODULE` (module path,
//! default `<crate>/target/release/libredis_ratelimit.so`).
//!
//! Part of the `rl-testkit` crate (re-exported at its root), which the tests and
//! `examples/compare.rs` use.

use redis::{Connection, ConnectionLike, Value};
use std::fs::{self, File};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// How long a server may take to answer PING (after loading its RDB / AOF).
const START_TIMEOUT: Duration = Duration::from_secs(30);

pub fn module_path() -> PathBuf {
    match std::env::var_os("RL_MODULE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(crate::ROOT).join("target/release/libredis_ratelimit.so"),
    }
}

pub fn server_bin() -> String {
    env_or("RL_SERVER", "redis-server")
}

/// The redis-cli binary (`RL_CLI`, default `redis-cli`).
pub fn cli() -> String {
    env_or("RL_CLI", "redis-cli")
}

fn env_or(name: &str, default: &str) -> String {
    match std::env::var(name) {
        Ok(s) if !s.is_empty() => s,
        _ => default.to_string(),
    }
}

/// Polls `cond` every few ms until it holds; fails the test with `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Any scalar reply as text (integers in decimal); nil as "(nil)".
pub fn text(v: &Value) -> String {
    match v {
        Value::Nil => "(nil)".into(),
        Value::Int(n) => n.to_string(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Double(d) => d.to_string(),
        Value::VerbatimString { text, .. } => text.clone(),
        other => format!("{other:?}"),
    }
}

/// One field of `INFO <section>`.
pub fn info_field(con: &mut Connection, section: &str, field: &str) -> Option<String> {
    let v = con
        .req_command(redis::cmd("INFO").arg(section))
        .unwrap_or_else(|e| panic!("INFO {section}: {e}"));
    text(&v).lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|r| r.strip_prefix(':'))
            .map(|r| r.trim().to_string())
    })
}

/// An integer field of `INFO <section>`.
pub fn info_i64(con: &mut Connection, section: &str, field: &str) -> i64 {
    info_field(con, section, field)
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .parse()
        .unwrap_or_else(|_| panic!("INFO {section}: {field} is not an integer"))
}

fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let path = entry.path();
        let t = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().ok()?.modified().ok()
        };
        if let Some(t) = t {
            if newest.is_none_or(|n| t > n) {
                newest = Some(t);
            }
        }
    }
    newest
}

fn check_module(so: &Path) {
    if !so.exists() {
        panic!(
            "module not found at {}: run `cargo build --release` first (or set RL_MODULE)",
            so.display()
        );
    }
    if std::env::var_os("RL_MODULE").is_none() {
        let src = Path::new(crate::ROOT).join("src");
        if let (Some(s), Ok(m)) = (newest_mtime(&src), so.metadata().and_then(|m| m.modified())) {
            if s > m {
                eprintln!(
                    "WARNING: {} is older than src/: run `cargo build --release` first",
                    so.display()
                );
            }
        }
    }
}

/// A free 127.0.0.1 port whose `+ 10000` is a valid port too (some tools assume the
/// default cluster bus offset).
pub fn free_port() -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let p = l.local_addr().expect("local address").port();
        if p < 55_000 {
            return p;
        }
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What a server is started with. `Server::builder()`, then `.start()`.
#[derive(Clone, Debug)]
pub struct Builder {
    test_clock: bool,
    module_args: Vec<String>,
    config: Vec<String>,
    replica_of: Option<u16>,
    cluster: bool,
}

impl Default for Builder {
    /// The module with the test clock (`test-clock yes`), no persistence, standalone.
    fn default() -> Self {
        Builder {
            test_clock: true,
            module_args: Vec::new(),
            config: Vec::new(),
            replica_of: None,
            cluster: false,
        }
    }
}

impl Builder {
    /// Load the module without the test clock (`RL.CLOCK` disabled).
    pub fn real_clock(mut self) -> Self {
        self.test_clock = false;
        self
    }

    /// A module argument pair (`--loadmodule <so> ... name value`).
    pub fn module_arg(mut self, name: &str, value: impl ToString) -> Self {
        self.module_args.push(name.to_string());
        self.module_args.push(value.to_string());
        self
    }

    /// A config line, `--name value` (a later one for the same name wins).
    pub fn config(mut self, name: &str, value: impl ToString) -> Self {
        self.config.push(format!("--{name}"));
        self.config.push(value.to_string());
        self
    }

    /// `appendonly yes` (every write is in the file before its reply: `appendfsync
    /// always` is on for every server).
    pub fn appendonly(self) -> Self {
        self.config("appendonly", "yes")
    }

    /// Start as a replica of 127.0.0.1:`port` (`start` returns at once; see
    /// `Server::start_replica` for one that waits for the sync).
    pub fn replica_of(mut self, port: u16) -> Self {
        self.replica_of = Some(port);
        self
    }

    /// A cluster node: `cluster-enabled yes`, its own `nodes.conf` and bus port.
    pub fn cluster(mut self) -> Self {
        self.cluster = true;
        self
    }

    pub fn start(self) -> Server {
        let so = module_path();
        check_module(&so);
        let mut last = String::new();
        for _ in 0..8 {
            let port = free_port();
            let bus_port = self.cluster.then(|| loop {
                let b = free_port();
                if b != port {
                    break b;
                }
            });
            let dir = std::env::temp_dir().join(format!(
                "rl-it-{}-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::SeqCst),
                port
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).expect("create the server's directory");
            let dir = dir.canonicalize().expect("canonical server directory");
            let mut args = self.config.clone();
            if let Some(p) = self.replica_of {
                args.extend(["--replicaof".into(), "127.0.0.1".into(), p.to_string()]);
            }
            if let Some(b) = bus_port {
                args.extend(
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-port",
                        &b.to_string(),
                        "--cluster-node-timeout",
                        "5000",
                    ]
                    .map(String::from),
                );
            }
            // Module last, so its args cannot be mistaken for another option's.
            args.push("--loadmodule".into());
            args.push(so.to_string_lossy().into_owned());
            if self.test_clock {
                args.extend(["test-clock".into(), "yes".into()]);
            }
            args.extend(self.module_args.iter().cloned());
            let mut server = Server {
                child: None,
                port,
                bus_port,
                dir,
                args,
            };
            match server.spawn_and_wait() {
                Ok(()) => return server,
                Err(e) => {
                    last = e;
                    if last.contains("Address already in use") || last.contains("not ours") {
                        continue; // port race with another test: try another port
                    }
                    panic!("{} did not start:\n{last}", server_bin());
                }
            }
        }
        panic!(
            "{} did not start after several ports:\n{last}",
            server_bin()
        );
    }
}

/// A server child process (see the module's doc).
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    /// The cluster bus port, when started with `Builder::cluster`.
    pub bus_port: Option<u16>,
    pub dir: PathBuf,
    /// Everything after the fixed arguments of `spawn_and_wait`, kept for `restart`.
    args: Vec<String>,
}

impl Server {
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A server with the module and the test clock.
    pub fn start() -> Server {
        Builder::default().start()
    }

    /// The server's log (`--logfile`).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let stderr = File::options()
            .create(true)
            .append(true)
            .open(self.dir.join("stderr.log"))
            .map_err(|e| format!("stderr.log: {e}"))?;
        let mut cmd = Command::new(server_bin());
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.log_path())
            .args(["--enable-debug-command", "yes"])
            // Full syncs start at once (the default waits 5 s for more replicas).
            .args(["--repl-diskless-sync-delay", "0"])
            // Every write reaches the AOF file before its reply: a test that reads the AOF
            // (or kills the server) right after a write never races a background fsync
            // (under `everysec` the server postpones the write for up to 2 s).
            .args(["--appendfsync", "always"])
            .args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr));
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", server_bin()))?;
        self.child = Some(child);
        self.wait_ready()
    }

    /// Until PING answers PONG (not LOADING) on our port, from our server.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return Err(format!(
                        "server exited ({status}); log:\n{}\nstderr:\n{}",
                        tail(&self.log_path(), 30),
                        tail(&self.dir.join("stderr.log"), 30)
                    ));
                }
            }
            if let Ok(client) = redis::Client::open(self.url()) {
                if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_secs(1)) {
                    let _ = con.set_read_timeout(Some(Duration::from_secs(5)));
                    if let Ok(Value::SimpleString(s)) = con.req_command(&redis::cmd("PING")) {
                        if s == "PONG" {
                            // Make sure the server answering is ours, not another test's.
                            let dir = con.req_command(redis::cmd("CONFIG").arg("GET").arg("dir"));
                            let ours = matches!(&dir, Ok(Value::Array(v)) if v.len() == 2
                                && text(&v[1]) == self.dir.to_string_lossy());
                            if ours {
                                return Ok(());
                            }
                            self.kill();
                            return Err("another server answered on that port, not ours".into());
                        }
                    }
                }
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!(
                    "server not ready in time; log:\n{}",
                    tail(&self.log_path(), 30)
                ));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A new connection to this server (RESP2), with a read timeout.
    pub fn con(&self) -> Connection {
        let client = redis::Client::open(self.url()).expect("client URL");
        let con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to the server");
        con.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("set a read timeout");
        con
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// SIGKILL: a crash. Whatever the server had not written to its files is lost.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start again on the same directory, port and arguments; the time it took until the
    /// server answered PING (after loading its RDB / AOF).
    pub fn restart(&mut self) -> Duration {
        self.kill();
        let t = Instant::now();
        self.spawn_and_wait()
            .unwrap_or_else(|e| panic!("restart on :{} failed: {e}", self.port));
        t.elapsed()
    }

    /// Start a replica of this server (module + test clock loaded) and wait until its
    /// link is up and it has caught up.
    pub fn start_replica(&self) -> Server {
        self.start_replica_with(Builder::default())
    }

    pub fn start_replica_with(&self, b: Builder) -> Server {
        let replica = b.replica_of(self.port).start();
        let mut rc = replica.con();
        wait_until(
            &format!(
                "the replica's link to come up; replica log:\n{}",
                replica.log_tail()
            ),
            Duration::from_secs(20),
            || info_field(&mut rc, "replication", "master_link_status").as_deref() == Some("up"),
        );
        sync_replica(&mut self.con(), &mut rc);
        replica
    }

    pub fn log_tail(&self) -> String {
        tail(&self.log_path(), 40)
    }

    /// Every file name in the server's directory and its `appendonlydir`.
    pub fn files(&self) -> Vec<String> {
        let mut out = Vec::new();
        for d in [self.dir.clone(), self.dir.join("appendonlydir")] {
            if let Ok(rd) = fs::read_dir(&d) {
                for e in rd.flatten() {
                    out.push(e.file_name().to_string_lossy().into_owned());
                }
            }
        }
        out.sort();
        out
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "--- server :{} log tail ({}) ---\n{}",
                self.port,
                self.dir.display(),
                self.log_tail()
            );
        }
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Wait until the replica has applied everything the primary has produced so far (the
/// "primary" may itself be a replica, of which `replica` is one in a chain: no WAIT there).
pub fn sync_replica(primary: &mut Connection, replica: &mut Connection) {
    if info_field(primary, "replication", "role").as_deref() == Some("master") {
        let acked: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(10000)
            .query(primary)
            .expect("WAIT");
        assert!(acked >= 1, "WAIT: the replica did not acknowledge");
    }
    let target = info_i64(primary, "replication", "master_repl_offset");
    wait_until("the replica to catch up", Duration::from_secs(20), || {
        info_i64(replica, "replication", "master_repl_offset") >= target
    });
}

// ---------------------------------------------------------------- server version

/// The server under test and what it supports, read from `INFO server` (never from the
/// binary's name): tests gate on features by version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerVersion {
    pub valkey: bool,
    /// (major, minor, patch) of Redis, or of Valkey when `valkey`.
    pub version: (u32, u32, u32),
}

impl ServerVersion {
    pub fn of(con: &mut Connection) -> ServerVersion {
        let valkey = info_field(con, "server", "valkey_version");
        let v = valkey
            .clone()
            .or_else(|| info_field(con, "server", "redis_version"))
            .expect("INFO server has no version");
        let mut it = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
        ServerVersion {
            valkey: valkey.is_some(),
            version: (
                it.next().unwrap_or(0),
                it.next().unwrap_or(0),
                it.next().unwrap_or(0),
            ),
        }
    }

    fn at_least(&self, redis: (u32, u32), valkey: (u32, u32)) -> bool {
        let (ma, mi, _) = self.version;
        (ma, mi) >= if self.valkey { valkey } else { redis }
    }

    /// Module commands can carry the server's ACL categories (`SetCommandACLCategories`:
    /// Redis 7.2+, every Valkey).
    pub fn module_acl_categories(&self) -> bool {
        self.at_least((7, 2), (7, 2))
    }

    /// A module can create its own ACL category (`AddACLCategory`: Redis 7.4+, Valkey 8+).
    pub fn module_acl_category(&self) -> bool {
        self.at_least((7, 4), (8, 0))
    }

    /// `ACL CAT <module category>` lists the module's commands (Redis 8.0+, Valkey 8.1+;
    /// earlier servers that have module categories list nothing).
    pub fn acl_cat_lists_module_commands(&self) -> bool {
        self.at_least((8, 0), (8, 1))
    }

    /// Atomic slot migration, `CLUSTER MIGRATESLOTS` (Valkey 9.0+).
    pub fn atomic_slot_migration(&self) -> bool {
        self.valkey && self.at_least((u32::MAX, 0), (9, 0))
    }

    /// `RedisModule_CachedMicroseconds` (Redis 7.2+, every Valkey).
    pub fn cached_microseconds(&self) -> bool {
        self.at_least((7, 2), (7, 2))
    }
}
