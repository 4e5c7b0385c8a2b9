//! A real cluster of primaries on 127.0.0.1, created with `redis-cli --cluster create`, every
//! node its own process and directory with the module (and the test clock) loaded.
//!
//! `RL_CLI` names the redis-cli binary.

use super::{cli, error_text, info_field, text, wait_until, Server};
use redis::{Connection, ConnectionLike, Value};
use std::process::Command;
use std::time::Duration;

/// `Ok` when `redis-cli --cluster` can be used, else why not.
pub fn cluster_cli_available() -> Result<(), String> {
    match Command::new(cli()).args(["--cluster", "help"]).output() {
        Err(e) => Err(format!("{} cannot be run: {e}", cli())),
        Ok(o) => {
            let all = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            if all.contains("Cluster Manager Commands") && all.contains("create") {
                Ok(())
            } else {
                Err(format!("{} has no --cluster create: {all}", cli()))
            }
        }
    }
}

/// The hash slot of a key (CRC16-XMODEM of the key or of its `{hash tag}`, mod 16384).
pub fn key_slot(key: &str) -> u16 {
    let b = key.as_bytes();
    let mut k = b;
    if let Some(open) = b.iter().position(|&c| c == b'{') {
        if let Some(len) = b[open + 1..].iter().position(|&c| c == b'}') {
            if len > 0 {
                k = &b[open + 1..open + 1 + len];
            }
        }
    }
    let mut crc: u16 = 0;
    for &x in k {
        crc ^= u16::from(x) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

pub struct Cluster {
    pub nodes: Vec<Server>,
    pub ids: Vec<String>,
}

fn cmd(c: &mut Connection, a: &[&str]) -> Value {
    let mut x = redis::cmd(a[0]);
    for s in &a[1..] {
        x.arg(*s);
    }
    c.req_command(&x).unwrap_or_else(|e| panic!("{a:?}: {e}"))
}

impl Cluster {
    /// `n` primaries, all 16384 slots assigned, every node agreeing on the map.
    pub fn start(n: usize) -> Cluster {
        let nodes: Vec<Server> = (0..n)
            .map(|_| Server::builder().cluster().start())
            .collect();
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(nodes.iter().map(Server::addr));
        args.push("--cluster-yes".into());
        let out = Command::new(cli())
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("{} {args:?}: {e}", cli()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("All 16384 slots covered"),
            "{} {args:?} failed:\n{stdout}\n{}",
            cli(),
            String::from_utf8_lossy(&out.stderr)
        );
        let ids = nodes
            .iter()
            .map(|nd| text(&cmd(&mut nd.con(), &["CLUSTER", "MYID"])))
            .collect();
        let c = Cluster { nodes, ids };
        c.wait_stable();
        c
    }

    /// Until every node says cluster_state:ok and they all agree on every slot's owner.
    pub fn wait_stable(&self) {
        wait_until("the cluster to settle", Duration::from_secs(30), || {
            let ok = self
                .nodes
                .iter()
                .all(|nd| info_cluster(&mut nd.con(), "cluster_state").as_deref() == Some("ok"));
            if !ok {
                return false;
            }
            let maps: Vec<Vec<usize>> = (0..self.nodes.len())
                .map(|i| self.slot_map_seen_by(i))
                .collect();
            maps.iter()
                .all(|m| m == &maps[0] && m.iter().all(|&o| o != usize::MAX))
        });
    }

    /// Until every node agrees that node `owner` owns `slot`.
    pub fn wait_owner(&self, slot: u16, owner: usize) {
        wait_until(
            &format!("the nodes to agree that slot {slot} moved"),
            Duration::from_secs(30),
            || (0..self.nodes.len()).all(|i| self.slot_map_seen_by(i)[slot as usize] == owner),
        );
    }

    /// Slot -> index of the owning node, as node `i` sees it (usize::MAX: unassigned).
    pub fn slot_map_seen_by(&self, i: usize) -> Vec<usize> {
        let mut map = vec![usize::MAX; 16384];
        let v = cmd(&mut self.nodes[i].con(), &["CLUSTER", "SLOTS"]);
        let Value::Array(ranges) = v else {
            panic!("CLUSTER SLOTS: {v:?}")
        };
        for r in ranges {
            let Value::Array(parts) = r else { continue };
            let (from, to) = (int_of(&parts[0]), int_of(&parts[1]));
            let Value::Array(primary) = &parts[2] else {
                continue;
            };
            let port = int_of(&primary[1]) as u16;
            let owner = self
                .nodes
                .iter()
                .position(|nd| nd.port == port)
                .unwrap_or(usize::MAX);
            for s in from..=to {
                map[s as usize] = owner;
            }
        }
        map
    }

    /// The index of the node that owns `slot`, as node 0 sees it.
    pub fn owner(&self, slot: u16) -> usize {
        self.slot_map_seen_by(0)[slot as usize]
    }

    pub fn owner_of_key(&self, key: &str) -> usize {
        self.owner(key_slot(key))
    }

    /// A cluster-aware client (slots learned from the cluster, MOVED / ASK followed).
    pub fn client(&self) -> redis::cluster::ClusterConnection {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|nd| format!("redis://127.0.0.1:{}/", nd.port))
            .collect();
        redis::cluster::ClusterClientBuilder::new(urls)
            .response_timeout(Duration::from_secs(30))
            .build()
            .expect("cluster client")
            .get_connection()
            .expect("cluster connection")
    }

    /// The same test-clock time on every node (the clock is per server).
    pub fn clock_set_all(&self, ms: i64) {
        for nd in &self.nodes {
            let v = cmd(&mut nd.con(), &["RL.CLOCK", "SET", &ms.to_string()]);
            assert!(error_text(&v).is_none(), "RL.CLOCK SET: {v:?}");
        }
    }

    /// `INFO errorstats` count of one error prefix (e.g. MOVED) on node `i`.
    pub fn error_count(&self, i: usize, prefix: &str) -> i64 {
        let v = info_field(
            &mut self.nodes[i].con(),
            "errorstats",
            &format!("errorstat_{prefix}"),
        );
        v.and_then(|s| {
            s.strip_prefix("count=")
                .and_then(|n| n.split(',').next().map(String::from))
        })
        .map_or(0, |n| n.parse().unwrap())
    }
}

pub fn info_cluster(c: &mut Connection, field: &str) -> Option<String> {
    let v = cmd(c, &["CLUSTER", "INFO"]);
    text(&v).lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|r| r.strip_prefix(':'))
            .map(|r| r.trim().to_string())
    })
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => text(other).parse().unwrap(),
    }
}
