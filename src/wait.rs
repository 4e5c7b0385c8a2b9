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

/// One blocked request.
pub struct Waiter {
    bc: BlockedClient,
    key: OwnedStr,
    db: c_int,
    rule: Rule,
    /// Committing; its reserve is the caller's own.
    req: Request,
    /// How a key of another algorithm is met (`RL.ALLOW`: started afresh).
    restart: bool,
    started_us: u64,
    deadline_us: u64,
}

impl Waiter {
    /// The units it holds back from later requests.
    fn units(&self) -> u64 {
        self.req.cost()
    }
}

#[derive(Default)]
struct Queue {
    id: u64,
    waiters: VecDeque<Waiter>,
    /// The pending timer and the module time it was set for.
    timer: Option<(u64, u64)>,
}

#[derive(Default)]
struct Queues {
    by_key: HashMap<QKey, Queue>,
    by_id: HashMap<u64, QKey>,
    by_client: HashMap<BlockedClient, QKey>,
    next_id: u64,
    /// The timer that processes every queue (a clock move), if one is pending.
    all_timer: Option<u64>,
}

static QUEUES: LazyLock<Mutex<Queues>> = LazyLock::new(|| Mutex::new(Queues::default()));

fn queues() -> MutexGuard<'static, Queues> {
    QUEUES.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a waiter is answered with (the reply callback's value).
enum Answer {
    Decided(Outcome, u64),
    Error(CString),
}

/// The units the waiters of `key` hold back (0 without waiters).
pub fn reserved(ctx: Ctx, key: &RStr) -> u64 {
    let q = queues();
    let k = (rm::selected_db(ctx), rm::bytes(key).to_vec());
    q.by_key
        .get(&k)
        .map_or(0, |q| q.waiters.iter().map(Waiter::units).sum())
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

/// A request to wait with: its rule and request (`restart`: a key of another algorithm
/// starts afresh, as for RL.ALLOW), for at most `wait_ms`.
pub struct Wait<'a> {
    pub rule: &'a Rule,
    pub req: &'a Request,
    pub restart: bool,
    pub wait_ms: u64,
}

/// Blocks the calling client on `key` until its request is admitted or its time runs out
/// (from `now_us`); `refused` is the decision it got now. False when it cannot wait (the
/// bounds, or the server refuses to block it): the caller answers at once.
pub fn enqueue(ctx: Ctx, key: &RStr, wait: &Wait, now_us: u64, refused: &Outcome) -> bool {
    let Wait {
        rule,
        req,
        restart,
        wait_ms,
    } = *wait;
    let db = rm::selected_db(ctx);
    let k = (db, rm::bytes(key).to_vec());
    let mut q = queues();
    let per_key = q.by_key.get(&k).map_or(0, |q| q.waiters.len());
    let max_key = usize::try_from(MAX_PER_KEY.load(Relaxed)).unwrap_or(0);
    let max_all = u64::try_from(MAX_TOTAL.load(Relaxed)).unwrap_or(0);
    if per_key >= max_key || WAITING.load(Relaxed) >= max_all {
        OVER_BOUNDS.fetch_add(1, Relaxed);
        return false;
    }
    let Some(name) = OwnedStr::new(rm::bytes(key)) else {
        return false;
    };
    watch_keys(ctx);
    let Some(bc) = rm::block_client(ctx) else {
        return false;
    };
    let w = Waiter {
        bc,
        key: name,
        db,
        rule: *rule,
        req: Request {
            commit: true,
            ..*req
        },
        restart,
        started_us: now_us,
        deadline_us: now_us.saturating_add(wait_ms.saturating_mul(1000)),
    };
    let next_id = q.next_id + 1;
    let queue = q.by_key.entry(k.clone()).or_insert_with(|| Queue {
        id: next_id,
        ..Queue::default()
    });
    let first = queue.waiters.is_empty();
    queue.waiters.push_back(w);
    let id = queue.id;
    if queue.id == next_id {
        q.next_id = next_id;
        q.by_id.insert(id, k.clone());
    }
    q.by_client.insert(bc, k.clone());
    WAITING.fetch_add(1, Relaxed);
    STARTED.fetch_add(1, Relaxed);
    // The first waiter decides the key's next instant; later ones wait behind it (but a
    // shorter WAIT needs its own timeout).
    let retry_us = refused.decision.retry_after_ms.saturating_mul(1000);
    let at = if first {
        now_us.saturating_add(retry_us).min(deadline(&q, &k))
    } else {
        deadline(&q, &k)
    };
    schedule(ctx, &mut q, &k, at, now_us);
    true
}

/// The earliest deadline of `k`'s waiters.
fn deadline(q: &Queues, k: &QKey) -> u64 {
    q.by_key
        .get(k)
        .and_then(|q| q.waiters.iter().map(|w| w.deadline_us).min())
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
            q.by_key.keys().map(|k| (k.clone(), None)).collect()
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

/// Decides `w`'s request at `now`: committing (and writing) when `commit`, else dry, with
/// `ahead` units reserved for the waiters before it.
fn decide(ctx: Ctx, w: &Waiter, commit: bool, ahead: u64, now: u64) -> Result<Outcome, Error> {
    rm::select_db(ctx, w.db);
    let req = Request {
        commit,
        reserve: w.req.reserve.saturating_add(ahead),
        ..w.req
    };
    let mut txn = Txn::open(ctx, &w.key, commit, now);
    let other = if w.restart {
        Other::Restart
    } else {
        Other::Refuse
    };
    request_in(&mut txn, &w.rule, &req, other)
}

/// Answers `w` (unblocking it) and forgets it.
fn answer(q: &mut Queues, w: Waiter, a: Result<Outcome, Error>, now: u64) {
    q.by_client.remove(&w.bc);
    WAITING.fetch_sub(1, Relaxed);
    let waited_ms = now.saturating_sub(w.started_us).div_ceil(1000);
    let value = match a {
        Ok(out) => Answer::Decided(out, waited_ms),
        Err(e) => Answer::Error(e.as_cstr().to_owned()),
    };
    rm::unblock(w.bc, value);
}

/// Admits `k`'s waiters from the front while they fit, answers those whose time ran out,
/// and schedules the next instant.
/// `due`: the instant the timer was set for. A timer fires up to a millisecond or two after
/// it (the server's timers count whole ms): the waiter it was set for is admitted as of that
/// instant, so a rule with no burst to spare keeps its exact rate instead of losing the
/// timer's lateness at every step.
fn process(ctx: Ctx, k: &QKey, due: Option<u64>) {
    let real_now = clock::now_us();
    let now = match due {
        Some(at) if at <= real_now && real_now - at <= MAX_LATE_US => at,
        _ => real_now,
    };
    loop {
        // A waiter whose time ran out: the refused reply of this instant (the first one
        // may be admitted at its last instant).
        let expired = {
            let mut q = queues();
            let Some(queue) = q.by_key.get_mut(k) else {
                return;
            };
            let pos = queue.waiters.iter().position(|w| w.deadline_us <= now);
            pos.and_then(|p| {
                let ahead: u64 = queue.waiters.iter().take(p).map(Waiter::units).sum();
                queue.waiters.remove(p).map(|w| (w, ahead))
            })
        };
        if let Some((w, ahead)) = expired {
            let mut out = decide(ctx, &w, ahead == 0, ahead, now);
            if let Ok(o) = &mut out {
                if o.decision.allowed && ahead == 0 {
                    ADMITTED.fetch_add(1, Relaxed);
                } else {
                    o.decision.allowed = false;
                    TIMED_OUT.fetch_add(1, Relaxed);
                }
            }
            let mut q = queues();
            answer(&mut q, w, out, now);
            continue;
        }
        let head = {
            let mut q = queues();
            q.by_key
                .get_mut(k)
                .and_then(|queue| queue.waiters.pop_front())
        };
        let Some(w) = head else {
            break;
        };
        match decide(ctx, &w, true, 0, now) {
            Ok(out) if !out.decision.allowed => {
                let mut q = queues();
                let at = now.saturating_add(out.decision.retry_after_ms.saturating_mul(1000));
                if let Some(queue) = q.by_key.get_mut(k) {
                    queue.waiters.push_front(w);
                }
                let at = at.min(deadline(&q, k));
                schedule(ctx, &mut q, k, at.max(now + 1), now);
                return;
            }
            other => {
                if other.is_ok() {
                    ADMITTED.fetch_add(1, Relaxed);
                }
                let mut q = queues();
                answer(&mut q, w, other, now);
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

/// Removes the waiter of `bc` from its queue (it is answered by the caller).
fn take(bc: BlockedClient) -> Option<(Waiter, u64)> {
    let mut q = queues();
    let k = q.by_client.remove(&bc)?;
    let queue = q.by_key.get_mut(&k)?;
    let pos = queue.waiters.iter().position(|w| w.bc == bc)?;
    let ahead = queue.waiters.iter().take(pos).map(Waiter::units).sum();
    let w = queue.waiters.remove(pos)?;
    WAITING.fetch_sub(1, Relaxed);
    Some((w, ahead))
}

/// The reply of a waiter unblocked by [`answer`].
fn on_reply(ctx: Ctx, value: Option<&(dyn Any + 'static)>) -> c_int {
    match value.and_then(|v| v.downcast_ref::<Answer>()) {
        Some(Answer::Decided(out, waited)) => reply_waited(ctx, out, *waited),
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
            match decide(ctx, &w, false, ahead, now) {
                Ok(mut out) => {
                    out.decision.allowed = false;
                    let waited = now.saturating_sub(w.started_us).div_ceil(1000);
                    reply_waited(ctx, &out, waited);
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
        q.by_key
            .drain()
            .flat_map(|(_, queue)| queue.waiters)
            .collect()
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
