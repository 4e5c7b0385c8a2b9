//! `RL.ALL numkeys key [key ...] rule [rule ...] [DRYRUN] [WAIT ms]`: several limits checked
//! and spent atomically, all or nothing.
//!
//! One rule per key, in the same order: `ALGO args... [COST n] [RESERVE r] [STAGGER]` with
//! ALGO one of `GCRA burst
//! count period_ms`, `TOKENBUCKET capacity refill_tokens refill_period_ms`, `SLIDING limit
//! window_ms`, `FIXED limit window_ms`, `LOG limit window_ms`, `QUEUE capacity interval_ms`.
//! `COST 0` peeks (never refuses, spends nothing); `STAGGER` is for FIXED and SLIDING.
//! The keys come first behind their count, as for EVAL, so Redis Cluster routes the call and
//! answers CROSSSLOT when they live in different slots.
//!
//! Reply: `allowed`, the 1-based index of the first rule that refused (0 when admitted), then
//! each rule's own reply (the standard five fields; six with `delay_ms` for QUEUE). When
//! refused, each rule's reply says what it alone would have decided, and nothing is spent.
//! With `WAIT ms`, a refused call blocks its client behind the earlier waiters of each of its
//! keys until every rule admits (`wait.rs`), and the reply ends with `waited_ms`.

use super::policy;
use super::rate::{parse_rule, staggered};
use super::{effect_of_request, reply_outcome, request, Decided};
use crate::args::positive;
use crate::clock;
use crate::error::{Error, ALL_DUPLICATE, ALL_NUMKEYS, INTERNAL, SYNTAX};
use crate::options::{leading_options, options, Opt, OptSet, ALL_RULE_OPTIONS, OPTIONS};
use crate::propagate::Batch;
use crate::rm::{self, Ctx, OwnedStr, RStr};
use crate::rule::{Ask, Outcome, Request, Rule};
use crate::state::{Algo, State};
use crate::txn::{Expiry, Other, Txn, Written};
use crate::wait::Verdict;

/// Keys of a call held on the stack ([`Few`]); a call with more takes the heap.
const INLINE: usize = 4;

/// A short list in call order: on the stack for up to [`INLINE`] items (the common call,
/// no allocation), else in a vector sized once.
struct Few<T> {
    inline: [Option<T>; INLINE],
    len: usize,
    heap: Vec<T>,
}

impl<T> Few<T> {
    fn new() -> Few<T> {
        Few {
            inline: std::array::from_fn(|_| None),
            len: 0,
            heap: Vec::new(),
        }
    }

    /// Room for `n` items, before the first is pushed: on the heap if they do not fit.
    fn reserve(&mut self, n: usize) {
        if n > INLINE {
            self.heap.reserve_exact(n);
        }
    }

    fn push(&mut self, x: T) {
        match self.inline.get_mut(self.len) {
            Some(slot) if self.heap.capacity() == 0 => {
                *slot = Some(x);
                self.len += 1;
            }
            _ => self.heap.push(x),
        }
    }

    fn len(&self) -> usize {
        self.len + self.heap.len()
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.inline.iter().flatten().chain(self.heap.iter())
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.inline.iter_mut().flatten().chain(self.heap.iter_mut())
    }
}

/// One parsed rule with its key and request.
struct Item<'a> {
    key: &'a RStr,
    rule: Rule,
    req: Request,
    /// A `POLICY name` rule: the policy's name and whether its version is a shadow one.
    policy: Option<(&'a [u8], bool)>,
}

/// A word of the rate commands' options.
fn is_option(word: &[u8]) -> bool {
    OPTIONS
        .iter()
        .any(|o| word.eq_ignore_ascii_case(o.word.as_bytes()))
}

/// Parses one rule for `key` at the front of `args` (its algorithm's name, its numbers, its
/// options: `COST n` (0 peeks), `RESERVE r`, and `STAGGER` for FIXED and SLIDING); returns
/// it and how many arguments it took.
fn parse_item<'a>(key: &'a RStr, args: &'a [RStr]) -> Result<(Item<'a>, usize), Error> {
    let word = rm::bytes(args.first().ok_or_else(Error::all_rules)?);
    if word.eq_ignore_ascii_case(b"POLICY") {
        let rest = args.get(1..).unwrap_or(&[]);
        let (r, req, used) = policy::all_rule(rest, key)?;
        let name = rest.first().map_or(&[][..], |n| rm::bytes(n));
        let item = Item {
            key,
            rule: r.rule,
            req,
            policy: Some((name, r.shadow)),
        };
        return Ok((item, 1 + used));
    }
    let Some(algo) = Algo::of_rule_name(word) else {
        // An option the previous rule does not take (PARTIAL, BLOCK, ...) is misplaced, not
        // a missing rule.
        return Err(if is_option(word) {
            Error::Static(SYNTAX)
        } else {
            Error::all_rules()
        });
    };
    let nums = args.get(1..).unwrap_or(&[]);
    let parsed = match parse_rule(algo, nums) {
        // Too few numbers for the rule: the call's arity is fine, the rule is not.
        Err(Error::Arity) => return Err(Error::Static(SYNTAX)),
        other => other?,
    };
    let takes = algo.spec().options.and(ALL_RULE_OPTIONS);
    let rest = nums.get(parsed.used..).unwrap_or(&[]);
    let (opts, used) = leading_options(rest, parsed.rule.limit(), parsed.limit_name, takes)?;
    let rule = if opts.stagger {
        staggered(parsed.rule, key)
    } else {
        parsed.rule
    };
    let item = Item {
        key,
        rule,
        req: opts.request(),
        policy: None,
    };
    Ok((item, 1 + parsed.used + used))
}

/// Parses the whole call: its items (into `items`), and whether it is a DRYRUN and its
/// `WAIT` (in either order, after the rules).
fn parse<'a>(args: &'a [RStr], items: &mut Few<Item<'a>>) -> Result<(bool, Option<u64>), Error> {
    let [_, numkeys, rest @ ..] = args else {
        return Err(Error::Arity);
    };
    let n = positive(numkeys, "numkeys")? as usize;
    if n > rest.len() {
        return Err(ALL_NUMKEYS.into());
    }
    let (keys, mut tail) = rest.split_at(n);
    for (i, k) in keys.iter().enumerate() {
        if keys[..i].iter().any(|o| rm::bytes(o) == rm::bytes(k)) {
            return Err(ALL_DUPLICATE.into());
        }
    }
    items.reserve(n);
    for key in keys {
        let (item, used) = parse_item(key, tail)?;
        tail = tail.get(used..).unwrap_or(&[]);
        items.push(item);
    }
    if tail.is_empty() {
        return Ok((false, None));
    }
    let call = options(
        tail,
        u64::MAX,
        "limit",
        OptSet::of(&[Opt::DryRun, Opt::Wait]),
    )?;
    Ok((call.dryrun, call.wait_ms))
}

/// Answers a key-position request (`getkeys-api`): the keys are arguments 2..2+numkeys.
fn key_positions(ctx: Ctx, args: &[RStr]) {
    let n = args
        .get(1)
        .and_then(|a| crate::args::int(a).ok())
        .unwrap_or(0);
    let n = usize::try_from(n)
        .unwrap_or(0)
        .min(args.len().saturating_sub(2));
    for pos in 2..2 + n {
        rm::key_at_pos(ctx, pos);
    }
}

/// One key of a call, decided.
struct Step<'a> {
    txn: Txn<'a>,
    out: Outcome,
    /// Decided on a copy of the key's state (committing): the copy when it is to be
    /// stored, None when the request writes nothing.
    copy: Option<Option<State>>,
}

/// Whether a rule's request is decided on a copy of its state: a state of fixed size (a
/// log's or leases' may hold 10^6 entries: those are decided dry, then spent in place).
fn on_copy(rule: &Rule) -> bool {
    !rule.grows()
}

/// Decides `it` on its key: committing on a copy of the state (stored later if every rule
/// admits) when [`on_copy`] and not a dry run, else without writing. The reply fields are
/// the same either way: only storing differs.
fn decide<'a>(it: &Item<'a>, mut txn: Txn<'a>, dryrun: bool) -> Result<Step<'a>, Error> {
    if dryrun || !on_copy(&it.rule) {
        let dry = Request {
            commit: false,
            ..it.req
        };
        let out = request(&mut txn, &it.rule, &dry)?;
        return Ok(Step {
            txn,
            out,
            copy: None,
        });
    }
    let now = txn.now_us();
    let (rule, req) = (&it.rule, &it.req);
    let decided = txn.decide(
        rule.algo(),
        Other::Refuse,
        || Some(rule.fresh()),
        |s| {
            let mut copy = s.clone();
            let out = rule.request(&mut copy, req, now);
            let copy = out.wrote.then_some(copy);
            ((out, copy), None)
        },
    )?;
    let (out, copy) = decided.ok_or(Error::Static(INTERNAL))?;
    Ok(Step {
        txn,
        out,
        copy: Some(copy),
    })
}

/// Spends `st` (every rule admitted): stores its copy, or runs its request in place; the
/// effect joins the call's `batch`.
fn spend<'a>(it: &Item<'a>, st: &mut Step<'a>, batch: &mut Batch<'a>) -> Result<(), Error> {
    let now = st.txn.now_us();
    let (rule, req) = (&it.rule, &it.req);
    match st.copy.take() {
        Some(Some(s)) => {
            let written = Written {
                effect: effect_of_request(rule, req, now, &s),
                expiry: Expiry::After(st.out.decision.reset_after_ms),
            };
            st.txn.store_in(s, written, Some(batch))
        }
        Some(None) => Ok(()),
        None => {
            let out = st.txn.decide_in(
                rule.algo(),
                Other::Refuse,
                || Some(rule.fresh()),
                |s| {
                    let out = rule.request(s, req, now);
                    let written = out.wrote.then(|| Written {
                        effect: effect_of_request(rule, req, now, s),
                        expiry: Expiry::After(out.decision.reset_after_ms),
                    });
                    (out, written)
                },
                Some(batch),
            )?;
            st.out = out.ok_or(Error::Static(INTERNAL))?;
            Ok(())
        }
    }
}

/// Applies a shadow policy's version to its rule's outcome; whether it was a shadow
/// refusal.
fn shadow(it: &Item, out: &mut Outcome) -> bool {
    policy::shadow(matches!(it.policy, Some((_, true))), &it.req, out)
}

/// Counts the policy rules of a call in their statistics: each one's decision when the call
/// spent, and each one's own refusal when it did not (a policy that would have admitted
/// a call another rule refused spent nothing and refused nothing: not counted).
fn count_policies(items: &Few<Item>, steps: &Few<Step>, shadowed: &Few<bool>, spent: bool) {
    let mut reg = policy::registry();
    for ((it, st), &sh) in items.iter().zip(steps.iter()).zip(shadowed.iter()) {
        let Some((name, _)) = it.policy else { continue };
        let own_refusal = sh || !st.out.decision.allowed;
        if spent || own_refusal {
            policy::count_stats(&mut reg, name, it.key, &it.req, &st.out, sh);
        }
    }
}

/// The call's items decided at `now`: every rule decides once (nothing written yet: a rule
/// of a fixed-size state on a copy kept to be stored, the others dry); if all admit and it
/// is not a dry run, each spends, in one atomic step, and the call's effects go out as one
/// `RL._APPLY` (every key of the call is in one slot). Returns each rule's step and the
/// index of the first that refused, and whether each rule was a shadow refusal (counted by
/// [`count_call`] once the call is answered).
fn decide_call<'a>(
    ctx: Ctx,
    items: &Few<Item<'a>>,
    dryrun: bool,
    now: u64,
) -> Result<Decision<'a>, Error> {
    let mut steps = Few::new();
    steps.reserve(items.len());
    for it in items.iter() {
        let txn = Txn::open(ctx, it.key, !dryrun, now);
        steps.push(decide(it, txn, dryrun)?);
    }
    // A shadow policy's version never refuses the call.
    let mut shadowed = Few::new();
    shadowed.reserve(items.len());
    for (it, st) in items.iter().zip(steps.iter_mut()) {
        shadowed.push(shadow(it, &mut st.out));
    }
    let refused_by = steps.iter().position(|st| !st.out.decision.allowed);
    if refused_by.is_none() && !dryrun {
        let mut batch = Batch::new(ctx);
        let res = items
            .iter()
            .zip(steps.iter_mut())
            .try_for_each(|(it, st)| spend(it, st, &mut batch));
        batch.flush();
        res?;
        // A log's rule decided again in place: its shadow refusal stays an admission.
        for (it, st) in items.iter().zip(steps.iter_mut()) {
            shadow(it, &mut st.out);
        }
    }
    Ok(Decision {
        steps,
        refused_by,
        shadowed,
    })
}

/// A call decided.
struct Decision<'a> {
    steps: Few<Step<'a>>,
    refused_by: Option<usize>,
    shadowed: Few<bool>,
}

/// Counts an answered call in the statistics: its policies' (a spend) and its events.
fn count_call(items: &Few<Item>, d: &Decision, dryrun: bool) {
    if !dryrun && items.iter().any(|it| it.policy.is_some()) {
        count_policies(items, &d.steps, &d.shadowed, d.refused_by.is_none());
    }
    for st in d.steps.iter() {
        crate::stats::events(st.out.events);
    }
}

/// The call's reply: `allowed`, `refused_by`, each rule's reply, then `waited_ms` (with
/// `WAIT`).
fn reply_call<'o>(
    ctx: Ctx,
    n: usize,
    outs: impl Iterator<Item = &'o Outcome>,
    refused_by: Option<usize>,
    waited_ms: Option<u64>,
) {
    rm::reply_array(ctx, 2 + n + usize::from(waited_ms.is_some()));
    rm::reply_i64(ctx, i64::from(refused_by.is_none()));
    rm::reply_u64(ctx, refused_by.map_or(0, |i| i as u64 + 1));
    for out in outs {
        reply_outcome(ctx, out);
    }
    if let Some(w) = waited_ms {
        rm::reply_u64(ctx, w);
    }
}

pub fn all(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    if rm::is_keys_position_request(ctx) {
        key_positions(ctx, args);
        return Ok(None);
    }
    let mut items = Few::new();
    let (dryrun, wait_ms) = parse(args, &mut items)?;
    let now = clock::now_us();
    // The requests as called (a waiter keeps its own reserve).
    let original: Vec<Request> = if wait_ms.is_some() {
        items.iter().map(|it| it.req).collect()
    } else {
        Vec::new()
    };
    if crate::wait::any() {
        // Behind the waiters of each key, if it has any.
        for it in items.iter_mut() {
            it.req = crate::wait::behind_waiters(ctx, it.key, &it.req);
        }
    }
    let d = decide_call(ctx, &items, dryrun, now)?;
    let (steps, refused_by) = (&d.steps, d.refused_by);
    let spends = items
        .iter()
        .any(|it| matches!(it.req.ask, Ask::Spend(c) if c > 0));
    if let (Some(_), Some(wait_ms)) = (refused_by, wait_ms) {
        if !dryrun && spends && wait_ms > 0 && crate::wait::can_block(ctx) {
            let retry_ms = steps
                .iter()
                .filter(|st| !st.out.decision.allowed)
                .map(|st| st.out.decision.retry_after_ms)
                .max()
                .unwrap_or(0);
            // Each key's waiters reserve the units of the rules as called (not the reserve
            // added above for the waiters already there).
            let job = AllJob::new(&items, &original);
            if let Some(job) = job {
                if crate::wait::enqueue(ctx, Box::new(job), wait_ms, now, retry_ms) {
                    // Blocked: answered, and counted, when admitted or out of time.
                    return Ok(None);
                }
            }
        }
    }
    count_call(&items, &d, dryrun);
    reply_call(
        ctx,
        steps.len(),
        steps.iter().map(|st| &st.out),
        refused_by,
        wait_ms.map(|_| 0),
    );
    Ok(Some(refused_by.is_none()))
}

/// A policy rule's policy: its name, and whether its version is a shadow one.
type PolicyOf = (Vec<u8>, bool);

/// A blocked RL.ALL call: its keys (with the units each rule spends) and rules, decided
/// again when it is woken.
struct AllJob {
    keys: Vec<(OwnedStr, u64)>,
    /// Each key's rule and request (committing, with its own reserve) and its policy.
    rules: Vec<(Rule, Request, Option<PolicyOf>)>,
}

impl AllJob {
    fn new(items: &Few<Item>, reqs: &[Request]) -> Option<AllJob> {
        let mut keys = Vec::with_capacity(items.len());
        let mut rules = Vec::with_capacity(items.len());
        for (it, req) in items.iter().zip(reqs) {
            keys.push((OwnedStr::new(rm::bytes(it.key))?, req.cost()));
            let policy = it.policy.map(|(name, shadow)| (name.to_vec(), shadow));
            rules.push((it.rule, *req, policy));
        }
        Some(AllJob { keys, rules })
    }
}

impl crate::wait::Job for AllJob {
    fn keys(&self) -> &[(OwnedStr, u64)] {
        &self.keys
    }

    fn decide(&self, ctx: Ctx, commit: bool, ahead: &[u64], now: u64) -> Result<Verdict, Error> {
        let mut items = Few::new();
        items.reserve(self.keys.len());
        // A policy's rule as it is now (an operator's change wakes the waiters).
        let reg = crate::policy::registry();
        for (i, ((key, _), (rule, req, policy))) in self.keys.iter().zip(&self.rules).enumerate() {
            let extra = ahead.get(i).copied().unwrap_or(0);
            let mut req = Request {
                commit,
                reserve: req.reserve.saturating_add(extra),
                ..*req
            };
            let (rule, policy) = match policy {
                Some((name, _)) => {
                    let r = policy::resolve_for_all(&reg, name, key)?;
                    req = r.again(req)?;
                    (r.rule, Some((&name[..], r.shadow)))
                }
                None => (*rule, None),
            };
            items.push(Item {
                key,
                rule,
                req,
                policy,
            });
        }
        drop(reg);
        let d = decide_call(ctx, &items, !commit, now)?;
        Ok(Box::new(AllVerdict {
            outs: d.steps.iter().map(|st| st.out).collect(),
            refused_by: d.refused_by,
            shadowed: d.shadowed.iter().copied().collect(),
            reqs: items
                .iter()
                .map(|it| Request {
                    commit: true,
                    ..it.req
                })
                .collect(),
        }))
    }

    /// Counted as a call is, once, as it is answered.
    fn answered(&self, v: &dyn crate::wait::Answered) {
        let Some(v) = v.as_any().downcast_ref::<AllVerdict>() else {
            return;
        };
        let spent = v.refused_by.is_none();
        let mut reg = crate::policy::registry();
        let each = self.keys.iter().zip(&self.rules).zip(&v.outs);
        for (i, (((key, _), (_, _, policy)), out)) in each.enumerate() {
            crate::stats::events(out.events);
            let (Some((name, _)), Some(req)) = (policy, v.reqs.get(i)) else {
                continue;
            };
            let sh = v.shadowed.get(i).copied().unwrap_or(false);
            if spent || sh || !out.decision.allowed {
                policy::count_stats(&mut reg, name, key, req, out, sh);
            }
        }
    }
}

/// A woken RL.ALL call's decision, with what its statistics count.
struct AllVerdict {
    outs: Vec<Outcome>,
    refused_by: Option<usize>,
    shadowed: Vec<bool>,
    /// Each rule's request as decided (committing, for the counts).
    reqs: Vec<Request>,
}

impl crate::wait::Answered for AllVerdict {
    fn allowed(&self) -> bool {
        self.refused_by.is_none()
    }

    /// When every refusing rule admits (as far as the rules alone know).
    fn retry_after_ms(&self) -> u64 {
        self.outs
            .iter()
            .filter(|o| !o.decision.allowed)
            .map(|o| o.decision.retry_after_ms)
            .max()
            .unwrap_or(0)
    }

    fn refuse(&mut self) {
        if self.refused_by.is_none() {
            // Out of time behind earlier waiters although its own rules had room: refused
            // by its first rule.
            if let Some(o) = self.outs.first_mut() {
                o.decision.allowed = false;
            }
            self.refused_by = Some(0);
        }
    }

    fn reply(&self, ctx: Ctx, waited_ms: u64) {
        reply_call(
            ctx,
            self.outs.len(),
            self.outs.iter(),
            self.refused_by,
            Some(waited_ms),
        );
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
