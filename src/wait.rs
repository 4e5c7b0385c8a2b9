//! `WAIT ms`: a request that would be refused blocks its client in the server (as `BLPOP`
//! does) until it is admitted or `ms` pass on the module clock.
//!
//! Waiters queue per key (database and name), in arrival order. While a key has waiters,
//! every request on it is decided as if their costs were reserved ([`reserved`]), so nobody
//! overtakes them. A key's queue is processed ([`process`]) from a timer: at the instant its
//! first waiter becomes admissible or a waiter's time runs out, and at once after anything
//! that may free room on the key (a write by another request, its deletion or expiry, a
//! move of the test clock). Processing admits waiters from the front while their requests
//! are admitted, each through the one key transaction (the write, its expiry and its effect
//! happen then, at the instant of admission), answers those whose time ran out with the
//! refused reply of that instant, and wakes nobody else. With the test clock, time-based
//! timers are not used: only events and `RL.CLOCK` moves process queues.
//!
//! Nothing about waiting is stored or replicated: waiters are connections.

use crate::clock;
use crate::decide::request_in;
use crate::error::Error;
use crate::reply::reply_outcome;
use crate::rm::{self, BlockedClient, Ctx, OwnedStr, RStr};
use crate::rule::{Ask, Outcome, Request, Rule};
use crate::txn::{Other, Txn};
use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_int, CString};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// `ratelimit.max-waiters-per-key` and `ratelimit.max-waiters`.
pub static MAX_PER_KEY: AtomicI64 = AtomicI64::new(1000);
pub static MAX_TOTAL: AtomicI64 = AtomicI64::new(100_000);

/// Clients waiting now, and the counters `INFO ratelimit` shows.
static WAITING: AtomicU64 = AtomicU64::new(0);
pub static STARTED: AtomicU64 = AtomicU64::new(0);
pub static ADMITTED: AtomicU64 = AtomicU64::new(0);
pub static TIMED_OUT: AtomicU64 = AtomicU64::new(0);
pub static OVER_BOUNDS: AtomicU64 = AtomicU64::new(0);

/// Set while queues are processed: the writes of admitted waiters do not schedule more.
static PROCESSING: AtomicBool = AtomicBool::new(false);

/// Clients waiting now.
pub fn waiting() -> u64 {
    WAITING.load(Relaxed)
}

/// Whether any client waits (one load: the check every request makes).
#[inline]
pub fn any() -> bool {
    WAITING.load(Relaxed) != 0
}

/// The most a timer's lateness is forgiven: the decision is taken as of the instant it was
/// due (see [`process`]).
const MAX_LATE_US: u64 = 5_000;

/// A key: its database and name.
type QKey = (c_int, Vec<u8>);

/// A waiter's request, decided again each time it is woken: one key's (a rate command,
/// `RL.ACQUIRE`, `RL.ALLOW`) or several keys' at once (`RL.ALL`, in `commands/all.rs`).
pub trait Job: Send + 'static {
    /// Its keys (in the database it was called in), each with the units it holds back
    /// there from later requests.
    fn keys(&self) -> &[(OwnedStr, u64)];
    /// Its request decided at `now_us` with `ahead[i]` units of earlier waiters reserved on
    /// key `i`: committing (the write, its expiry and its effect happen now) when `commit`.
    fn decide(&self, ctx: Ctx, commit: bool, ahead: &[u64], now_us: u64) -> Result<Verdict, Error>;
    /// Its final decision, as it is answered (admitted, or refused when its time ran out or
    /// it was unblocked): a request that waited is counted once, then.
    fn answered(&self, _verdict: &dyn Answered) {}
}

/// A woken waiter's decision: whether it admits, when it would, and its reply.
pub trait Answered: Send + 'static {
    fn allowed(&self) -> bool;
    /// How long until it would be admitted (refused).
    fn retry_after_ms(&self) -> u64;
    /// Turns it into a refusal (a waiter whose time ran out is refused, whatever it says).
    fn refuse(&mut self);
    /// Replies with `waited_ms`.
    fn reply(&self, ctx: Ctx, waited_ms: u64);
    /// For its job's [`Job::answered`].
    fn as_any(&self) -> &dyn Any;
}

pub type Verdict = Box<dyn Answered>;

impl Answered for Outcome {
    fn allowed(&self) -> bool {
        self.decision.allowed
    }
    fn retry_after_ms(&self) -> u64 {
        self.decision.retry_after_ms
    }
    fn refuse(&mut self) {
        self.decision.allowed = false;
    }
    fn reply(&self, ctx: Ctx, waited_ms: u64) {
        reply_waited(ctx, self, waited_ms);
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One key's request (a rate command, `RL.ACQUIRE`).
struct One {
    key: [(OwnedStr, u64); 1],
    rule: Rule,
    /// Committing; its reserve is the caller's own.
    req: Request,
}

impl Job for One {
    fn keys(&self) -> &[(OwnedStr, u64)] {
        &self.key
    }

    fn decide(&self, ctx: Ctx, commit: bool, ahead: &[u64], now: u64) -> Result<Verdict, Error> {
        let [(name, _)] = &self.key;
        let ahead = ahead.first().copied().unwrap_or(0);
        let req = Request {
            commit,
            reserve: self.req.reserve.saturating_add(ahead),
            ..self.req
        };
        let mut txn = Txn::open(ctx, name, commit, now);
        Ok(Box::new(request_in(
            &mut txn,
            &self.rule,
            &req,
            Other::Refuse,
        )?))
    }
}

/// One blocked client.
pub struct Waiter {
    bc: BlockedClient,
    db: c_int,
    job: Box<dyn Job>,
    started_us: u64,
}

impl Waiter {
    fn qkeys(&self) -> impl Iterator<Item = QKey> + '_ {
        self.job
            .keys()
            .iter()
            .map(|(k, _)| (self.db, rm::bytes(k).to_vec()))
    }
}

/// A waiter in a key's queue: its id, the units it holds back on that key and when its
/// time runs out (kept here, so a key's reserve and timeouts need no lookup).
#[derive(Clone, Copy)]
struct Slot {
    id: u64,
    units: u64,
    deadline_us: u64,
}

#[derive(Default)]
struct Queue {
    id: u64,
    /// Its waiters, in arrival order.
    waiters: VecDeque<Slot>,
    /// The units they hold back, in all.
    units: u64,
    /// The pending timer and the module time it was set for.
    timer: Option<(u64, u64)>,
}

#[derive(Default)]
struct Queues {
    by_key: HashMap<QKey, Queue>,
    by_id: HashMap<u64, QKey>,
    waiters: HashMap<u64, Waiter>,
    by_client: HashMap<BlockedClient, u64>,
    next_id: u64,
    /// The timer that processes every queue (a clock move), if one is pending.
    all_timer: Option<u64>,
}

impl Queues {
    /// The units the waiters of `k` hold back, those before waiter `upto` only when given.
    fn units(&self, k: &QKey, upto: Option<u64>) -> u64 {
        let Some(queue) = self.by_key.get(k) else {
            return 0;
        };
        match upto {
            None => queue.units,
            Some(id) => queue
                .waiters
                .iter()
                .take_while(|s| s.id != id)
                .map(|s| s.units)
                .sum(),
        }
    }

    /// The units reserved before waiter `id` on each of its keys.
    fn ahead_of(&self, id: u64) -> Vec<u64> {
        self.waiters.get(&id).map_or_else(Vec::new, |w| {
            w.qkeys().map(|k| self.units(&k, Some(id))).collect()
        })
    }

    /// Whether waiter `id` is first on every one of its keys.
    fn first_everywhere(&self, id: u64) -> bool {
        self.waiters
            .get(&id)
            .is_some_and(|w| w.qkeys().all(|k| front(self.by_key.get(&k)) == Some(id)))
    }

    /// Takes waiter `id` out of every queue; returns it and the other keys it was first on
    /// (their next waiters may fit now).
    fn remove(&mut self, id: u64) -> Option<(Waiter, Vec<QKey>)> {
        let w = self.waiters.remove(&id)?;
        self.by_client.remove(&w.bc);
        WAITING.fetch_sub(1, Relaxed);
        let mut freed = Vec::new();
        for k in w.qkeys() {
            if let Some(queue) = self.by_key.get_mut(&k) {
                if queue.waiters.front().map(|s| s.id) == Some(id) {
                    freed.push(k.clone());
                }
                queue.waiters.retain(|s| s.id != id);
                queue.units = queue.waiters.iter().map(|s| s.units).sum();
            }
        }
        Some((w, freed))
    }
}

/// The first waiter of a queue.
fn front(queue: Option<&Queue>) -> Option<u64> {
    queue.and_then(|q| q.waiters.front()).map(|s| s.id)
}

static QUEUES: LazyLock<Mutex<Queues>> = LazyLock::new(|| Mutex::new(Queues::default()));

fn queues() -> MutexGuard<'static, Queues> {
    QUEUES.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a waiter is answered with (the reply callback's value).
enum Answer {
    Decided(Verdict, u64),
    Error(CString),
}

/// The units the waiters of `key` hold back (0 without waiters).
pub fn reserved(ctx: Ctx, key: &RStr) -> u64 {
    let k = (rm::selected_db(ctx), rm::bytes(key).to_vec());
    queues().units(&k, None)
}

/// `req` with the units of the key's waiters reserved (a spend; anything else as it is).
pub fn behind_waiters(ctx: Ctx, key: &RStr, req: &Request) -> Request {
    if !any() || !matches!(req.ask, Ask::Spend(c) if c > 0) {
        return *req;
    }
    let r = reserved(ctx, key);
    Request {
        reserve: req.reserve.saturating_add(r),
        ..*req
    }
}

/// Whether the calling client can block (not in MULTI, a script, the primary's stream or
/// AOF loading).
pub fn can_block(ctx: Ctx) -> bool {
    use redis_module::raw;
    let deny = raw::REDISMODULE_CTX_FLAGS_MULTI
        | raw::REDISMODULE_CTX_FLAGS_LUA
        | raw::REDISMODULE_CTX_FLAGS_REPLICATED
        | raw::REDISMODULE_CTX_FLAGS_LOADING
        | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING;
    rm::context_flags(ctx) & deny == 0
}

/// The job of one key's request (a rate command, `RL.ACQUIRE`): decided again under the
/// same rule.
pub fn one(key: &RStr, rule: &Rule, req: &Request) -> Option<Box<dyn Job>> {
    let name = OwnedStr::new(rm::bytes(key))?;
    Some(Box::new(One {
        key: [(name, req.cost())],
        rule: *rule,
        req: Request {
            commit: true,
            ..*req
        },
    }))
}

/// Blocks the calling client until `job` is admitted or `wait_ms` pass (from `now_us`);
/// it was refused now, admissible in `retry_after_ms` as far as its rules know. It waits
/// behind the earlier waiters of each of its keys. False when it cannot wait (the bounds,
/// or the server refuses to block it): the caller answers at once.
pub fn enqueue(
    ctx: Ctx,
    job: Box<dyn Job>,
    wait_ms: u64,
    now_us: u64,
    retry_after_ms: u64,
) -> bool {
    let db = rm::selected_db(ctx);
    let mut q = queues();
    let max_key = usize::try_from(MAX_PER_KEY.load(Relaxed)).unwrap_or(0);
    let max_all = u64::try_from(MAX_TOTAL.load(Relaxed)).unwrap_or(0);
    // Its keys, each with the units it holds back there.
    let keys: Vec<(QKey, u64)> = job
        .keys()
        .iter()
        .map(|(k, units)| ((db, rm::bytes(k).to_vec()), *units))
        .collect();
    let full = keys
        .iter()
        .any(|(k, _)| q.by_key.get(k).map_or(0, |q| q.waiters.len()) >= max_key);
    if full || WAITING.load(Relaxed) >= max_all {
        OVER_BOUNDS.fetch_add(1, Relaxed);
        return false;
    }
    watch_keys(ctx);
    let Some(bc) = rm::block_client(ctx) else {
        return false;
    };
    q.next_id += 1;
    let id = q.next_id;
    let w = Waiter {
        bc,
        db,
        job,
        started_us: now_us,
    };
    let deadline_us = now_us.saturating_add(wait_ms.saturating_mul(1000));
    q.waiters.insert(id, w);
    q.by_client.insert(bc, id);
    WAITING.fetch_add(1, Relaxed);
    STARTED.fetch_add(1, Relaxed);
    for (k, units) in keys {
        let next_id = q.next_id + 1;
        let queue = q.by_key.entry(k.clone()).or_insert_with(|| Queue {
            id: next_id,
            ..Queue::default()
        });
        let first = queue.waiters.is_empty();
        queue.waiters.push_back(Slot {
            id,
            units,
            deadline_us,
        });
        queue.units = queue.units.saturating_add(units);
        if queue.id == next_id {
            q.next_id = next_id;
            q.by_id.insert(next_id, k.clone());
        }
        // The first waiter decides the key's next instant; later ones wait behind it (but
        // a shorter WAIT needs its own timeout).
        let at = if first {
            now_us
                .saturating_add(retry_after_ms.saturating_mul(1000))
                .min(deadline(&q, &k))
        } else {
            deadline(&q, &k)
        };
        schedule(ctx, &mut q, &k, at, now_us);
    }
    true
}

/// The earliest deadline of `k`'s waiters.
fn deadline(q: &Queues, k: &QKey) -> u64 {
    q.by_key
        .get(k)
        .and_then(|queue| queue.waiters.iter().map(|s| s.deadline_us).min())
        .unwrap_or(u64::MAX)
}

/// Processes `k`'s queue at module time `at_us` (now: at once), unless a timer of it fires
/// sooner. With the test clock only "at once" is scheduled.
fn schedule(ctx: Ctx, q: &mut Queues, k: &QKey, at_us: u64, now_us: u64) {
    let at_us = at_us.max(now_us);
    if at_us > now_us && clock::source() == "test" {
        return;
    }
    let Some(queue) = q.by_key.get_mut(k) else {
        return;
    };
    match queue.timer {
        // One already fires no later.
        Some((_, t_at)) if t_at <= at_us => return,
        Some((t, _)) => rm::stop_timer(ctx, t),
        None => {}
    }
    let delay_ms = at_us.saturating_sub(now_us).div_ceil(1000);
    queue.timer = Some((rm::create_timer(ctx, delay_ms, queue.id), at_us));
}

/// A write by a request (not a waiter's), or the key's deletion, expiry or eviction (from a
/// keyspace event, which may not write: hence a timer): the key's waiters may fit now.
pub fn touched(ctx: Ctx, key: &RStr) {
    if !any() || PROCESSING.load(Relaxed) {
        return;
    }
    let k = (rm::selected_db(ctx), rm::bytes(key).to_vec());
    let mut q = queues();
    if q.by_key.contains_key(&k) {
        let now = clock::now_us();
        schedule(ctx, &mut q, &k, now, now);
    }
}

/// The module clock moved (`RL.CLOCK`): every queue is processed at once.
pub fn clock_moved(ctx: Ctx) {
    process_all(ctx);
}

/// An operator changed or deleted a policy (`RL.POLICY`): its waiters are decided again
/// under the version that applies now (one that loosens admits them at once).
pub fn rules_changed(ctx: Ctx) {
    process_all(ctx);
}

/// Every queue processed at once (from a timer: the caller may be in the middle of a
/// command).
fn process_all(ctx: Ctx) {
    if !any() {
        return;
    }
    let mut q = queues();
    if q.all_timer.is_none() {
        q.all_timer = Some(rm::create_timer(ctx, 0, 0));
    }
}

/// The timer function (`rm::set_timer_fn`): value 0 processes every queue, else the queue
/// of that id.
pub fn on_timer(ctx: Ctx, id: u64) {
    let keys: Vec<(QKey, Option<u64>)> = {
        let mut q = queues();
        if id == 0 {
            q.all_timer = None;
            let mut keys: Vec<(QKey, Option<u64>)> = q
                .by_key
                .iter()
                .map(|(k, queue)| (k.clone(), Some(queue.id)))
                .collect();
            // Oldest queues first: the same order on every run.
            keys.sort_unstable_by_key(|(_, id)| *id);
            keys.into_iter().map(|(k, _)| (k, None)).collect()
        } else {
            let Some(k) = q.by_id.get(&id).cloned() else {
                return;
            };
            let at = q
                .by_key
                .get_mut(&k)
                .and_then(|queue| queue.timer.take())
                .map(|(_, at)| at);
            vec![(k, at)]
        }
    };
    PROCESSING.store(true, Relaxed);
    for (k, at) in keys {
        process(ctx, &k, at);
    }
    PROCESSING.store(false, Relaxed);
}

/// Answers `w` (unblocking it).
fn answer(w: Waiter, a: Result<Verdict, Error>, now: u64) {
    if let Ok(v) = &a {
        w.job.answered(v.as_ref());
    }
    let waited_ms = now.saturating_sub(w.started_us).div_ceil(1000);
    let value = match a {
        Ok(v) => Answer::Decided(v, waited_ms),
        Err(e) => Answer::Error(e.as_cstr().to_owned()),
    };
    rm::unblock(w.bc, value);
}

/// Decides waiter `id` (taken out of the lock: deciding writes, and a write calls back
/// into this file), committing when `commit`, with `ahead` units reserved per key.
fn decide_waiter(
    ctx: Ctx,
    id: u64,
    commit: bool,
    ahead: &[u64],
    now: u64,
) -> Option<Result<Verdict, Error>> {
    // The job is borrowed from the registry without holding its lock across the decision:
    // it is moved out and put back.
    let (db, job) = {
        let mut q = queues();
        let w = q.waiters.get_mut(&id)?;
        let job = std::mem::replace(&mut w.job, Box::new(NoJob));
        (w.db, job)
    };
    rm::select_db(ctx, db);
    let out = job.decide(ctx, commit, ahead, now);
    if let Some(w) = queues().waiters.get_mut(&id) {
        w.job = job;
    }
    Some(out)
}

/// A placeholder while a waiter's job is being decided.
struct NoJob;

impl Job for NoJob {
    fn keys(&self) -> &[(OwnedStr, u64)] {
        &[]
    }
    fn decide(&self, _: Ctx, _: bool, _: &[u64], _: u64) -> Result<Verdict, Error> {
        Err(Error::Static(crate::error::INTERNAL))
    }
}

/// Admits `k`'s waiters from the front while they fit, answers those whose time ran out,
/// and schedules the next instant.
/// `due`: the instant the timer was set for. A timer fires up to a millisecond or two after
/// it (the server's timers count whole ms): the waiter it was set for is admitted as of that
/// instant, so a rule with no burst to spare keeps its exact rate instead of losing the
/// timer's lateness at every step; the next timer counts from the real clock, so lateness
/// does not add up either.
fn process(ctx: Ctx, k: &QKey, due: Option<u64>) {
    if rm::context_flags(ctx) & redis_module::raw::REDISMODULE_CTX_FLAGS_CLUSTER != 0
        && redirect_if_moved(ctx, k)
    {
        return;
    }
    let real_now = clock::now_us();
    let now = match due {
        Some(at) if at <= real_now && real_now - at <= MAX_LATE_US => at,
        _ => real_now,
    };
    loop {
        // A waiter whose time ran out: the refused reply of this instant (the first one
        // may be admitted at its last instant).
        let expired = {
            let q = queues();
            let Some(queue) = q.by_key.get(k) else {
                return;
            };
            queue
                .waiters
                .iter()
                .find(|s| s.deadline_us <= now)
                .map(|s| (s.id, q.ahead_of(s.id), q.first_everywhere(s.id)))
        };
        if let Some((id, ahead, first)) = expired {
            let Some(mut out) = decide_waiter(ctx, id, first, &ahead, now) else {
                continue;
            };
            if let Ok(o) = &mut out {
                if o.allowed() && first {
                    ADMITTED.fetch_add(1, Relaxed);
                } else {
                    o.refuse();
                    TIMED_OUT.fetch_add(1, Relaxed);
                }
            }
            finish(ctx, k, id, out, now, real_now);
            continue;
        }
        let head = {
            let q = queues();
            let Some(id) = front(q.by_key.get(k)) else {
                break;
            };
            (id, q.first_everywhere(id))
        };
        let (id, first) = head;
        if !first {
            // It waits behind another key's waiters: that key's turn wakes it. Its time
            // still runs out here.
            let mut q = queues();
            let at = deadline(&q, k);
            schedule(ctx, &mut q, k, at, real_now);
            return;
        }
        let Some(out) = decide_waiter(ctx, id, true, &[], now) else {
            continue;
        };
        match out {
            Ok(v) if !v.allowed() => {
                let mut q = queues();
                let at = now.saturating_add(v.retry_after_ms().saturating_mul(1000));
                let at = at.min(deadline(&q, k));
                schedule(ctx, &mut q, k, at.max(now + 1), real_now);
                return;
            }
            other => {
                if other.is_ok() {
                    ADMITTED.fetch_add(1, Relaxed);
                }
                finish(ctx, k, id, other, now, real_now);
            }
        }
    }
    // Nobody left: forget the queue.
    let mut q = queues();
    if let Some(queue) = q.by_key.remove(k) {
        q.by_id.remove(&queue.id);
        if let Some((t, _)) = queue.timer {
            rm::stop_timer(ctx, t);
        }
    }
}

/// Answers waiter `id`, decided at `now` while processing `k`, and takes it out of every
/// queue; the other keys it was first on are processed at once (their next waiters may fit).
fn finish(ctx: Ctx, k: &QKey, id: u64, out: Result<Verdict, Error>, now: u64, real_now: u64) {
    let taken = {
        let mut q = queues();
        let taken = q.remove(id);
        if let Some((_, freed)) = &taken {
            for f in freed.iter().filter(|f| *f != k) {
                schedule(ctx, &mut q, f, real_now, real_now);
            }
        }
        taken
    };
    if let Some((w, _)) = taken {
        answer(w, out, now);
    }
}

/// On a cluster node: when `k`'s slot is no longer served here (the key migrated out of
/// its slot, the slot moved, the cluster is down), its waiters are answered as Redis
/// answers its own blocked clients then (`-ASK`, `-MOVED`, `-CLUSTERDOWN`), spending
/// nothing. True when they were.
fn redirect_if_moved(ctx: Ctx, k: &QKey) -> bool {
    rm::select_db(ctx, k.0);
    let Some(name) = OwnedStr::new(&k.1) else {
        return false;
    };
    let error = match rm::key_served(ctx, &name) {
        rm::Served::Here => return false,
        rm::Served::Down => "CLUSTERDOWN The cluster is down".to_string(),
        rm::Served::Elsewhere => {
            let slot = crate::algo::slot::key_slot(&k.1);
            let nodes = rm::cluster_nodes(ctx).unwrap_or_default();
            redirect(&String::from_utf8_lossy(&nodes), slot)
        }
    };
    let gone: Vec<Waiter> = {
        let mut q = queues();
        let ids: Vec<u64> = q
            .by_key
            .get(k)
            .map(|queue| queue.waiters.iter().map(|s| s.id).collect())
            .unwrap_or_default();
        ids.into_iter()
            .filter_map(|id| q.remove(id).map(|(w, _)| w))
            .collect()
    };
    let text =
        CString::new(error).unwrap_or_else(|_| c"CLUSTERDOWN Hash slot not served".to_owned());
    for w in gone {
        TIMED_OUT.fetch_add(1, Relaxed);
        rm::unblock(w.bc, Answer::Error(text.clone()));
    }
    true
}

/// The redirection for `slot`, not served here, from `CLUSTER NODES`: `ASK` to the node it
/// is migrating to (the key already moved), else `MOVED` to its owner, else the
/// `CLUSTERDOWN` of an unassigned slot.
fn redirect(nodes: &str, slot: u16) -> String {
    let lines: Vec<Vec<&str>> = nodes
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|f: &Vec<&str>| f.len() >= 8)
        .collect();
    let addr = |id: &str| {
        lines
            .iter()
            .find(|f| f.first() == Some(&id))
            .and_then(|f| f.get(1))
            .map(|a| a.split(['@', ',']).next().unwrap_or(a).to_string())
    };
    let myself = lines.iter().find(|f| {
        f.get(2)
            .is_some_and(|flags| flags.split(',').any(|x| x == "myself"))
    });
    let migrating_to = myself.and_then(|f| {
        f.iter().skip(8).find_map(|t| {
            let t = t.strip_prefix('[')?.strip_suffix(']')?;
            let (s, to) = t.split_once("->-")?;
            (s.parse::<u16>().ok()? == slot).then_some(to)
        })
    });
    if let Some(a) = migrating_to.and_then(addr) {
        return format!("ASK {slot} {a}");
    }
    let owns = |t: &&str| {
        if t.starts_with('[') {
            return false;
        }
        let (from, to) = t.split_once('-').unwrap_or((t, t));
        matches!((from.parse::<u16>(), to.parse::<u16>()), (Ok(a), Ok(b)) if a <= slot && slot <= b)
    };
    let owner = lines.iter().find(|f| f.iter().skip(8).any(&owns));
    match owner.and_then(|f| f.first()).and_then(|id| addr(id)) {
        Some(a) => format!("MOVED {slot} {a}"),
        None => "CLUSTERDOWN Hash slot not served".to_string(),
    }
}

/// Removes the waiter of `bc` from its queues (it is answered by the caller), with the
/// units reserved before it on each of its keys.
fn take(bc: BlockedClient) -> Option<(Waiter, Vec<u64>)> {
    let mut q = queues();
    let id = *q.by_client.get(&bc)?;
    let ahead = q.ahead_of(id);
    let (w, _) = q.remove(id)?;
    Some((w, ahead))
}

/// The reply of a waiter unblocked by [`answer`].
fn on_reply(ctx: Ctx, value: Option<&(dyn Any + 'static)>) -> c_int {
    match value.and_then(|v| v.downcast_ref::<Answer>()) {
        Some(Answer::Decided(v, waited)) => v.reply(ctx, *waited),
        Some(Answer::Error(e)) => rm::reply_error(ctx, e),
        None => rm::reply_error(ctx, crate::error::INTERNAL),
    }
    rm::OK
}

/// A decided request's reply, with `waited_ms` last.
pub fn reply_waited(ctx: Ctx, out: &Outcome, waited_ms: u64) {
    let out = Outcome {
        waited: Some(waited_ms),
        ..*out
    };
    reply_outcome(ctx, &out);
}

/// `CLIENT UNBLOCK` (or a server timeout): the refused reply of this instant; the client
/// leaves the queue and spends nothing.
fn on_timeout(ctx: Ctx, bc: BlockedClient) -> c_int {
    let now = clock::now_us();
    match take(bc) {
        Some((w, ahead)) => {
            TIMED_OUT.fetch_add(1, Relaxed);
            rm::select_db(ctx, w.db);
            match w.job.decide(ctx, false, &ahead, now) {
                Ok(mut v) => {
                    v.refuse();
                    w.job.answered(v.as_ref());
                    let waited = now.saturating_sub(w.started_us).div_ceil(1000);
                    v.reply(ctx, waited);
                }
                Err(e) => rm::reply_error(ctx, e.as_cstr()),
            }
        }
        None => rm::reply_error(ctx, crate::error::INTERNAL),
    }
    // The handle is freed once the module unblocks it.
    rm::release_blocked(bc);
    rm::OK
}

/// A waiting client went away (disconnected, killed, `CLIENT UNBLOCK ... ERROR`): it leaves
/// the queue and spends nothing.
fn on_disconnect(bc: BlockedClient) {
    if take(bc).is_some() {
        TIMED_OUT.fetch_add(1, Relaxed);
    }
    rm::release_blocked(bc);
}

/// The server turned replica: its waiters are answered as Redis answers its own blocked
/// clients then.
fn on_role_change(_ctx: Ctx, became_replica: bool) {
    if !became_replica {
        return;
    }
    let all: Vec<Waiter> = {
        let mut q = queues();
        q.by_client.clear();
        q.by_id.clear();
        q.by_key.clear();
        q.waiters.drain().map(|(_, w)| w).collect()
    };
    for w in all {
        WAITING.fetch_sub(1, Relaxed);
        rm::unblock(
            w.bc,
            Answer::Error(c"UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)".to_owned()),
        );
    }
}

static HANDLERS: rm::BlockHandlers = rm::BlockHandlers {
    reply: on_reply,
    timeout: on_timeout,
    disconnected: on_disconnect,
};

/// Installs the callbacks (at load).
pub fn init(ctx: Ctx) -> bool {
    rm::set_block_handlers(&HANDLERS);
    rm::set_timer_fn(on_timer);
    rm::on_role_change(ctx, on_role_change)
}

/// Writes, deletions, expiries and evictions are watched from the first wait on (the server
/// visits a keyspace subscriber on every notification, and every write would call the
/// hook: a node that never waits pays for neither).
static WATCHING: AtomicBool = AtomicBool::new(false);

fn watch_keys(ctx: Ctx) {
    if WATCHING.swap(true, Relaxed) {
        return;
    }
    crate::txn::on_write(touched);
    if !rm::on_key_gone(ctx, touched) {
        WATCHING.store(false, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::redirect;

    const NODES: &str = "\
07c3 127.0.0.1:30004@40004 myself,master - 0 0 1 connected 0-5460 [93->-e7d1]
e7d1 127.0.0.1:30005@40005,host-b master - 0 1 2 connected 5461-10922
292f 127.0.0.1:30006@40006 master - 0 1 3 connected 10923-16382
";

    #[test]
    fn ask_while_migrating_moved_once_moved_down_when_unassigned() {
        assert_eq!(redirect(NODES, 93), "ASK 93 127.0.0.1:30005");
        assert_eq!(redirect(NODES, 6000), "MOVED 6000 127.0.0.1:30005");
        assert_eq!(redirect(NODES, 16382), "MOVED 16382 127.0.0.1:30006");
        assert_eq!(redirect(NODES, 16383), "CLUSTERDOWN Hash slot not served");
        assert_eq!(redirect("", 5), "CLUSTERDOWN Hash slot not served");
    }
}
