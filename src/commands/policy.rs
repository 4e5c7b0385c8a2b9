//! Policies (`policy.rs`): `RL.POLICY SET|ROLLOUT|ROLLBACK|GET|DEL|LIST|HISTORY|STATS` for
//! operators, `RL.ALLOW key policy [options]` for callers (and `POLICY name` in RL.ALL,
//! `all.rs`), and `RL._POLICY name [encoding]`, the effect that carries a change to replicas
//! and the AOF.
//!
//! The node's policies live in [`REGISTRY`]. A change is propagated as the policy's whole
//! new definition (never the operator's command: a version's time is the primary's), and
//! persisted in RDB by the data type's auxiliary callbacks (`datatype.rs`).

use super::rate::staggered;
use super::{reply_outcome, request_in, Decided};
use crate::args::positive;
use crate::clock;
use crate::error::{Error, APPLY_INTERNAL};
use crate::options::{leading_options, options, Opt, OptSet};
pub use crate::policy::registry;
use crate::policy::{
    glob, valid_name, Policy, PolicyError, PolicyRule, Registry, Version, TOP_SHOWN,
};
use crate::rm::{self, Ctx, OwnedStr, RStr};
use crate::rule::{Ask, Outcome, Request, Rule};
use crate::state::Algo;
use crate::txn::{Other, Txn};
use redis_module::raw;
use std::ffi::CStr;

/// The internal command that carries a policy's change (`propagate`'s `APPLY` for keys).
pub const LOAD: &CStr = c"RL._POLICY";

// Errors.
const NO_CURRENT: &CStr = c"ERR ROLLOUT needs a current version: set the policy without it first";
const NO_CANDIDATE: &CStr = c"ERR the policy has no candidate version to roll out";
const NO_EARLIER: &CStr = c"ERR the policy has no candidate and no earlier version";
const BAD_NAME: &CStr = c"ERR policy name must be 1 to 128 bytes of A-Z a-z 0-9 _ - . :";
const PERCENT: &CStr = c"ERR percent must be between 1 and 100";
const NEEDS_PREAMBLE: &CStr = c"ERR policies are persisted in the RDB preamble of the AOF: set aof-use-rdb-preamble yes while appendonly is yes";
const LOAD_PAYLOAD: &CStr = c"ERR RL._POLICY payload is not a valid policy";
const ALL_CONCURRENCY: &CStr = c"ERR RL.ALL takes no CONCURRENCY policy";

/// `ERR no such policy 'name'`.
pub fn no_such(name: &[u8]) -> Error {
    Error::text(format!(
        "ERR no such policy '{}'",
        String::from_utf8_lossy(name)
    ))
}

impl From<PolicyError> for Error {
    fn from(e: PolicyError) -> Error {
        Error::Static(match e {
            PolicyError::NoCurrent => NO_CURRENT,
            PolicyError::NoCandidate => NO_CANDIDATE,
            PolicyError::NoEarlier => NO_EARLIER,
        })
    }
}

fn name_of(arg: &RStr) -> Result<&[u8], Error> {
    let n = rm::bytes(arg);
    if valid_name(n) {
        Ok(n)
    } else {
        Err(BAD_NAME.into())
    }
}

fn percent(arg: &RStr) -> Result<u8, Error> {
    match crate::args::int(arg)? {
        p @ 1..=100 => Ok(p as u8),
        _ => Err(PERCENT.into()),
    }
}

/// The module time in whole ms, for a version's `set_ms`.
fn now_ms() -> u64 {
    clock::now_us() / crate::algo::US_PER_MS
}

/// Refuses a change the node could not persist: with the AOF on and no RDB preamble, an
/// AOF rewrite would drop the policies.
fn persistable(ctx: Ctx) -> Result<(), Error> {
    let aof = rm::context_flags(ctx) & raw::REDISMODULE_CTX_FLAGS_AOF != 0;
    if aof && rm::config_get(ctx, c"aof-use-rdb-preamble").as_deref() == Some(b"no") {
        return Err(NEEDS_PREAMBLE.into());
    }
    Ok(())
}

/// Propagates the policy `name`'s definition (None: deleted) to replicas and the AOF.
/// Also wakes the waiters: they are decided again under the policy as it is now.
fn propagate(ctx: Ctx, name: &RStr, p: Option<&Policy>) {
    match p {
        Some(p) => rm::replicate_pairs(ctx, LOAD, &[(name, &p.encode())]),
        None => rm::replicate_key(ctx, LOAD, name),
    }
    crate::wait::rules_changed(ctx);
}

/// Parses `ALGO numbers... [STAGGER] [BLOCK ms]` at the front of `a`: the rule, and how
/// many arguments it took.
fn parse_rule(a: &[RStr]) -> Result<(PolicyRule, Rule, usize), Error> {
    let word = rm::bytes(a.first().ok_or(Error::Static(crate::error::SYNTAX))?);
    let algo = crate::algo::table::ALL
        .into_iter()
        .find(|al| word.eq_ignore_ascii_case(al.name().as_bytes()))
        .ok_or_else(Error::policy_rules)?;
    let parsed = match super::rate::parse_rule(algo, a.get(1..).unwrap_or(&[])) {
        Err(Error::Arity) => return Err(crate::error::SYNTAX.into()),
        other => other?,
    };
    let mut numbers = [0u64; 3];
    for (slot, arg) in numbers.iter_mut().zip(a.iter().skip(1).take(parsed.used)) {
        *slot = positive(arg, "number")?;
    }
    let takes = algo
        .spec()
        .options
        .and(OptSet::of(&[Opt::Stagger, Opt::Block]));
    let rest = a.get(1 + parsed.used..).unwrap_or(&[]);
    let (opts, used) = leading_options(rest, parsed.rule.limit(), parsed.limit_name, takes)?;
    let (rule, compiled) = PolicyRule::new(algo, numbers, opts.stagger, opts.block_ms)?;
    Ok((rule, compiled, 1 + parsed.used + used))
}

/// `RL.POLICY SET name rule [SHADOW] [ROLLOUT percent]`: the new version's number.
pub fn set(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let [_, _, name_arg, rest @ ..] = args else {
        return Err(Error::Arity);
    };
    let name = name_of(name_arg)?;
    let (rule, compiled, used) = parse_rule(rest)?;
    let (mut shadow, mut rollout) = (false, None);
    let mut tail = rest.get(used..).unwrap_or(&[]);
    while let Some((w, more)) = tail.split_first() {
        let w = rm::bytes(w);
        if w.eq_ignore_ascii_case(b"SHADOW") && !shadow {
            shadow = true;
            tail = more;
        } else if w.eq_ignore_ascii_case(b"ROLLOUT") && rollout.is_none() {
            let p = more.first().ok_or(Error::Static(crate::error::SYNTAX))?;
            rollout = Some(percent(p)?);
            tail = more.get(1..).unwrap_or(&[]);
        } else {
            return Err(crate::error::SYNTAX.into());
        }
    }
    persistable(ctx)?;
    let now = now_ms();
    let mut reg = registry();
    let number = match reg.get_mut(name) {
        Some(p) => p.set(rule, compiled, shadow, rollout, now),
        None if rollout.is_some_and(|p| p < 100) => return Err(PolicyError::NoCurrent.into()),
        None => {
            reg.insert(name.into(), Policy::new(rule, compiled, shadow, now));
            1
        }
    };
    propagate(ctx, name_arg, reg.get(name));
    rm::reply_u64(ctx, number);
    Ok(None)
}

/// Runs `change` on policy `name` (args[2]), propagates the result, replies its number.
fn change(
    ctx: Ctx,
    args: &[RStr],
    change: impl FnOnce(&mut Policy) -> Result<u64, PolicyError>,
) -> Result<Decided, Error> {
    let name_arg = args.get(2).ok_or(Error::Arity)?;
    let name = rm::bytes(name_arg);
    persistable(ctx)?;
    let mut reg = registry();
    let p = reg.get_mut(name).ok_or_else(|| no_such(name))?;
    let number = change(p)?;
    propagate(ctx, name_arg, Some(p));
    rm::reply_u64(ctx, number);
    Ok(None)
}

/// `RL.POLICY ROLLOUT name percent`: the candidate's number.
pub fn rollout(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let [_, _, _, p] = args else {
        return Err(Error::Arity);
    };
    let p = percent(p)?;
    change(ctx, args, |pol| pol.rollout(p))
}

/// `RL.POLICY ROLLBACK name`: the current version's number.
pub fn rollback(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    if args.len() != 3 {
        return Err(Error::Arity);
    }
    let now = now_ms();
    change(ctx, args, |pol| pol.rollback(now))
}

/// `RL.POLICY DEL name`: 1 if it existed.
pub fn del(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let [_, _, name_arg] = args else {
        return Err(Error::Arity);
    };
    let removed = registry().remove(rm::bytes(name_arg)).is_some();
    if removed {
        propagate(ctx, name_arg, None);
    }
    rm::reply_i64(ctx, i64::from(removed));
    Ok(None)
}

/// A reply field's value.
enum V<'a> {
    Int(u64),
    Str(&'a [u8]),
}

fn reply_fields(ctx: Ctx, fields: &[(&str, V)]) {
    rm::reply_map(ctx, fields.len());
    for (k, v) in fields {
        rm::reply_bulk(ctx, k.as_bytes());
        match v {
            V::Int(n) => rm::reply_u64(ctx, *n),
            V::Str(s) => rm::reply_bulk(ctx, s),
        }
    }
}

/// `RL.POLICY GET name`: nil, or `name version rule mode digest candidate_version
/// candidate_rule candidate_mode rollout`.
pub fn get(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let [_, _, name_arg] = args else {
        return Err(Error::Arity);
    };
    let name = rm::bytes(name_arg);
    let reg = registry();
    let Some(p) = reg.get(name) else {
        rm::reply_null(ctx);
        return Ok(None);
    };
    let c = p.candidate.as_ref();
    let rule = p.current.rule.text();
    let c_rule = c.map(|c| c.version.rule.text()).unwrap_or_default();
    let digest = p.digest();
    reply_fields(
        ctx,
        &[
            ("name", V::Str(name)),
            ("version", V::Int(p.current.number)),
            ("rule", V::Str(rule.as_bytes())),
            ("mode", V::Str(p.current.mode().as_bytes())),
            ("digest", V::Str(digest.as_bytes())),
            (
                "candidate_version",
                V::Int(c.map_or(0, |c| c.version.number)),
            ),
            ("candidate_rule", V::Str(c_rule.as_bytes())),
            (
                "candidate_mode",
                V::Str(c.map_or("", |c| c.version.mode()).as_bytes()),
            ),
            ("rollout", V::Int(c.map_or(0, |c| u64::from(c.percent)))),
        ],
    );
    Ok(None)
}

/// `RL.POLICY LIST [pattern]`: one entry per policy, by name: `name version digest mode
/// candidate_version rollout`.
pub fn list(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let pattern = match args {
        [_, _] => None,
        [_, _, p] => Some(rm::bytes(p)),
        _ => return Err(Error::Arity),
    };
    let reg = registry();
    let mut names: Vec<&[u8]> = reg
        .keys()
        .map(|k| &k[..])
        .filter(|n| pattern.is_none_or(|p| glob(p, n)))
        .collect();
    names.sort_unstable();
    rm::reply_array(ctx, names.len());
    for n in names {
        let Some(p) = reg.get(n) else {
            rm::reply_null(ctx);
            continue;
        };
        let c = p.candidate.as_ref();
        let digest = p.digest();
        reply_fields(
            ctx,
            &[
                ("name", V::Str(n)),
                ("version", V::Int(p.current.number)),
                ("digest", V::Str(digest.as_bytes())),
                ("mode", V::Str(p.current.mode().as_bytes())),
                (
                    "candidate_version",
                    V::Int(c.map_or(0, |c| c.version.number)),
                ),
                ("rollout", V::Int(c.map_or(0, |c| u64::from(c.percent)))),
            ],
        );
    }
    Ok(None)
}

/// `RL.POLICY HISTORY name`: newest first (a candidate first), each `version rule mode
/// set_ms status` with status `candidate`, `current` or `previous`.
pub fn history(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let [_, _, name_arg] = args else {
        return Err(Error::Arity);
    };
    let name = rm::bytes(name_arg);
    let reg = registry();
    let p = reg.get(name).ok_or_else(|| no_such(name))?;
    let mut rows: Vec<(&Version, &str)> = Vec::new();
    if let Some(c) = &p.candidate {
        rows.push((&c.version, "candidate"));
    }
    for (i, v) in p.history.iter().enumerate() {
        rows.push((v, if i == 0 { "current" } else { "previous" }));
    }
    rm::reply_array(ctx, rows.len());
    for (v, status) in rows {
        let rule = v.rule.text();
        reply_fields(
            ctx,
            &[
                ("version", V::Int(v.number)),
                ("rule", V::Str(rule.as_bytes())),
                ("mode", V::Str(v.mode().as_bytes())),
                ("set_ms", V::Int(v.set_ms)),
                ("status", V::Str(status.as_bytes())),
            ],
        );
    }
    Ok(None)
}

/// `RL.POLICY STATS name [RESET]`: `requests admitted refused shadow_refusals units_spent
/// top_refused top_error_bound`, `top_refused` an array of `key count` pairs, most refused
/// first. With RESET, the statistics up to now, then zero.
pub fn stats(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let (name_arg, reset) = match args {
        [_, _, n] => (n, false),
        [_, _, n, r] if rm::bytes(r).eq_ignore_ascii_case(b"RESET") => (n, true),
        [_, _, _, _] => return Err(crate::error::SYNTAX.into()),
        _ => return Err(Error::Arity),
    };
    let name = rm::bytes(name_arg);
    let mut reg = registry();
    let p = reg.get_mut(name).ok_or_else(|| no_such(name))?;
    let s = &p.stats;
    let top = s.top.top(TOP_SHOWN);
    rm::reply_map(ctx, 7);
    for (k, v) in [
        ("requests", s.requests),
        ("admitted", s.admitted),
        ("refused", s.refused),
        ("shadow_refusals", s.shadow_refusals),
        ("units_spent", s.units_spent),
    ] {
        rm::reply_bulk(ctx, k.as_bytes());
        rm::reply_u64(ctx, v);
    }
    rm::reply_bulk(ctx, b"top_refused");
    rm::reply_array(ctx, top.len());
    for (key, n) in &top {
        rm::reply_array(ctx, 2);
        rm::reply_bulk(ctx, key);
        rm::reply_u64(ctx, *n);
    }
    rm::reply_bulk(ctx, b"top_error_bound");
    rm::reply_u64(ctx, s.top.error_bound());
    if reset {
        p.stats.reset();
    }
    Ok(None)
}

/// What a request of a policy decides under, copied out of the registry.
#[derive(Clone, Copy)]
pub struct Resolved {
    pub rule: Rule,
    pub shadow: bool,
    pub block_ms: u64,
    pub limit_name: &'static str,
    pub algo: Algo,
}

/// The version of policy `name` that applies to `key`, with the stagger applied.
pub fn resolve(reg: &Registry, name: &[u8], key: &RStr) -> Result<Resolved, Error> {
    let p = reg.get(name).ok_or_else(|| no_such(name))?;
    Ok(Resolved::of(p, key))
}

impl Resolved {
    /// The version of `p` that applies to `key`, with the stagger applied.
    #[inline]
    pub fn of(p: &Policy, key: &RStr) -> Resolved {
        let v = p.version_for(rm::bytes(key));
        let rule = if v.rule.stagger {
            staggered(v.compiled, key)
        } else {
            v.compiled
        };
        Resolved {
            rule,
            shadow: v.shadow,
            block_ms: v.rule.block_ms,
            limit_name: v.rule.algo.spec().args.first().copied().unwrap_or("limit"),
            algo: v.rule.algo,
        }
    }

    /// The request the caller's options make, with the policy's `BLOCK` on a spend.
    pub fn request(&self, opts: crate::options::Opts) -> Request {
        self.with_block(opts.request())
    }

    /// `req` under this version: the policy's `BLOCK` on a spend.
    fn with_block(&self, mut req: Request) -> Request {
        if matches!(req.ask, Ask::Spend(c) if c > 0) {
            req.block_ms = self.block_ms;
        }
        req
    }

    /// A waiter's `req`, parsed under an earlier version, under this one: its `BLOCK`, and
    /// checked against its limit (a cost the new limit can never admit is an error).
    pub fn again(&self, req: Request) -> Result<Request, Error> {
        let req = self.with_block(req);
        crate::options::check(&req, self.rule.limit(), self.limit_name)?;
        Ok(req)
    }

    /// See [`shadow`].
    pub fn shadow(&self, req: &Request, out: &mut Outcome) -> bool {
        shadow(self.shadow, req, out)
    }
}

/// A shadow version (`is_shadow`) never refuses: a spend it refused is admitted (the reply
/// says what it decided otherwise). Returns whether it was a shadow refusal.
pub fn shadow(is_shadow: bool, req: &Request, out: &mut Outcome) -> bool {
    let spend = matches!(req.ask, Ask::Spend(c) if c > 0);
    if is_shadow && spend && !out.decision.allowed {
        out.decision.allowed = true;
        out.decision.retry_after_ms = 0;
        return true;
    }
    false
}

/// Counts a decided request in policy `name`'s statistics (committed spends only).
pub fn count_stats(
    reg: &mut Registry,
    name: &[u8],
    key: &RStr,
    req: &Request,
    out: &Outcome,
    shadow_refusal: bool,
) {
    if let Some(p) = reg.get_mut(name) {
        count(p, key, req, out, shadow_refusal);
    }
}

/// Counts a decided request in `p`'s statistics (committed spends only).
#[inline]
fn count(p: &mut Policy, key: &RStr, req: &Request, out: &Outcome, shadow_refusal: bool) {
    let Ask::Spend(cost) = req.ask else { return };
    if cost == 0 || !req.commit {
        return;
    }
    let units = out.granted.unwrap_or(cost);
    let admitted = out.decision.allowed && !shadow_refusal;
    p.stats
        .count(rm::bytes(key), admitted, shadow_refusal, units);
}

/// The options RL.ALLOW takes for a version of `algo`: its command's, but the rule-level
/// STAGGER and BLOCK, which the policy sets.
#[inline]
fn allow_options(algo: Algo) -> OptSet {
    algo.spec()
        .options
        .without(OptSet::of(&[Opt::Stagger, Opt::Block]))
}

/// `RL.ALLOW key policy [COST n | REFUND n] [DRYRUN] [PARTIAL] [RESERVE r]`: the policy's
/// algorithm on `key`, under the version that applies to the key; its algorithm's reply.
pub fn allow(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let [_, key, name_arg, rest @ ..] = args else {
        return Err(Error::Arity);
    };
    let name = rm::bytes(name_arg);
    let mut reg = registry();
    // One lookup: the policy decides, then counts.
    let p = reg.get_mut(name).ok_or_else(|| no_such(name))?;
    let r = Resolved::of(p, key);
    let opts = options(rest, r.rule.limit(), r.limit_name, allow_options(r.algo))?;
    let req = r.request(opts);
    let now = clock::now_us();
    let mut txn = Txn::open(ctx, key, req.commit, now);
    let behind = crate::wait::behind_waiters(ctx, key, &req);
    let mut out = request_in(&mut txn, &r.rule, &behind, Other::Restart)?;
    drop(txn);
    let shadow = r.shadow(&req, &mut out);
    if opts.wait_ms.is_none() {
        count(p, key, &req, &out, shadow);
    }
    drop(reg);
    if let Some(wait_ms) = opts.wait_ms {
        let job = || -> Option<Box<dyn crate::wait::Job>> {
            Some(Box::new(AllowJob {
                key: [(OwnedStr::new(rm::bytes(key))?, req.cost())],
                name: name.to_vec(),
                opts,
            }))
        };
        if super::wait_or_reply(ctx, wait_ms, &req, &mut out, now, job) {
            // Counted when it is answered (`AllowJob::answered`).
            return Ok(None);
        }
        count_stats(&mut registry(), name, key, &req, &out, shadow);
    }
    reply_outcome(ctx, &out);
    Ok(super::count(&req, &out))
}

/// A blocked `RL.ALLOW`: decided again under the version of the policy that applies at
/// that instant (an operator's change wakes it: `wait::rules_changed`); a deleted policy
/// answers it with the error a call would get.
struct AllowJob {
    key: [(OwnedStr, u64); 1],
    name: Vec<u8>,
    opts: crate::options::Opts,
}

impl crate::wait::Job for AllowJob {
    fn keys(&self) -> &[(OwnedStr, u64)] {
        &self.key
    }

    fn decide(
        &self,
        ctx: Ctx,
        commit: bool,
        ahead: &[u64],
        now: u64,
    ) -> Result<crate::wait::Verdict, Error> {
        let [(key, _)] = &self.key;
        let r = resolve(&registry(), &self.name, key)?;
        let mut req = r.again(self.opts.request())?;
        req.commit = commit;
        req.reserve = req
            .reserve
            .saturating_add(ahead.first().copied().unwrap_or(0));
        let mut txn = Txn::open(ctx, key, commit, now);
        let mut out = request_in(&mut txn, &r.rule, &req, Other::Restart)?;
        drop(txn);
        let shadow = r.shadow(&req, &mut out);
        Ok(Box::new(AllowVerdict {
            out,
            req: Request {
                commit: true,
                ..req
            },
            shadow,
        }))
    }

    fn answered(&self, v: &dyn crate::wait::Answered) {
        let [(key, _)] = &self.key;
        if let Some(v) = v.as_any().downcast_ref::<AllowVerdict>() {
            count_stats(&mut registry(), &self.name, key, &v.req, &v.out, v.shadow);
        }
    }
}

/// A woken `RL.ALLOW`'s decision, with what its policy's statistics count.
struct AllowVerdict {
    out: Outcome,
    /// Its request, as called (committing).
    req: Request,
    shadow: bool,
}

impl crate::wait::Answered for AllowVerdict {
    fn allowed(&self) -> bool {
        self.out.allowed()
    }
    fn retry_after_ms(&self) -> u64 {
        self.out.retry_after_ms()
    }
    fn refuse(&mut self) {
        self.out.refuse();
    }
    fn reply(&self, ctx: Ctx, waited_ms: u64) {
        self.out.reply(ctx, waited_ms);
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// [`resolve`] for an RL.ALL rule (which takes no CONCURRENCY policy).
pub fn resolve_for_all(reg: &Registry, name: &[u8], key: &RStr) -> Result<Resolved, Error> {
    let r = resolve(reg, name, key)?;
    if r.algo == Algo::Concurrency {
        return Err(ALL_CONCURRENCY.into());
    }
    Ok(r)
}

/// RL.ALL's `POLICY name [COST n] [RESERVE r]` rule for `key`, at the front of `a` (after
/// the word POLICY): the resolved version, its request, and how many arguments it took.
pub fn all_rule(a: &[RStr], key: &RStr) -> Result<(Resolved, Request, usize), Error> {
    let name = rm::bytes(a.first().ok_or(Error::Static(crate::error::SYNTAX))?);
    let r = resolve_for_all(&registry(), name, key)?;
    let takes = r
        .algo
        .spec()
        .options
        .and(OptSet::of(&[Opt::Cost, Opt::Reserve]));
    let rest = a.get(1..).unwrap_or(&[]);
    let (opts, used) = leading_options(rest, r.rule.limit(), r.limit_name, takes)?;
    Ok((r, r.request(opts), 1 + used))
}

/// `RL._POLICY name [encoding]`: sets policy `name` to the encoded definition, or deletes
/// it; from the primary link or the AOF only. Passed on verbatim.
pub fn load(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let flags = rm::context_flags(ctx);
    if flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) == 0 {
        return Err(APPLY_INTERNAL.into());
    }
    let mut reg = registry();
    match args {
        [_, name] => {
            reg.remove(rm::bytes(name));
        }
        [_, name, payload] => {
            let name = name_of(name)?;
            let mut p =
                Policy::decode(rm::bytes(payload)).map_err(|_| Error::from(LOAD_PAYLOAD))?;
            // The node's own statistics carry on.
            if let Some(old) = reg.remove(name) {
                p.stats = old.stats;
            }
            reg.insert(name.into(), p);
        }
        _ => return Err(Error::Arity),
    }
    drop(reg);
    rm::replicate_verbatim(ctx);
    rm::reply_simple(ctx, c"OK");
    Ok(None)
}
