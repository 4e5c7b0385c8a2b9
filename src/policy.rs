//! Policies: named rules stored in the server, which callers reference (`RL.ALLOW key name`,
//! `POLICY name` in RL.ALL) instead of repeating a rule's numbers, and which operators
//! change safely (`RL.POLICY`): versions, a candidate rolled out to a share of keys, shadow
//! mode, rollback, and per-policy statistics with the keys refused most.
//!
//! Pure: no Redis types. The command layer (`commands/policy.rs`) holds the registry, and
//! persists and replicates a policy as its encoding ([`Policy::encode`]): node
//! configuration, like functions; the statistics stay on the node.

use crate::algo::codec::{DecodeError, Reader};
use crate::algo::table::Algo;
use crate::algo::{ParamError, MAX_SPAN_MS};
use crate::options::Opt;
use crate::rule::Rule;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// Longest policy name, bytes.
pub const MAX_NAME: usize = 128;
/// Versions `RL.POLICY HISTORY` keeps (the current one included).
pub const HISTORY: usize = 10;
/// Counters of the heavy-hitters sketch of refused keys (Space-Saving): any key refused
/// more than `refusals / TOP_SLOTS` times since the reset is in it, and a count it shows is
/// at most that much above the true count.
pub const TOP_SLOTS: usize = 64;
/// Keys `RL.POLICY STATS` shows.
pub const TOP_SHOWN: usize = 10;
/// Bytes of a key the sketch keeps (longer keys are shown cut to this; they are told apart
/// by a hash of the whole key).
pub const TOP_KEY_BYTES: usize = 256;

/// The codec version of a policy's encoding.
const CODEC: u64 = 1;

/// A name is 1 to [`MAX_NAME`] bytes of `A-Z a-z 0-9 _ - . :`.
pub fn valid_name(name: &[u8]) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// FNV-1a, 64 bits: a fixed hash, the same on every node, build and restart (the rollout
/// share and the digest must not move).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The rollout bucket of a key, 0..100: the key is on a candidate rolled out to `p` per
/// cent iff its bucket is below `p`.
pub fn bucket(key: &[u8]) -> u8 {
    // A final mix, so the low digits depend on every byte.
    let mut h = fnv1a(key);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    (h % 100) as u8
}

/// A policy's rule: the algorithm, its numbers (in its table row's order; unused ones 0),
/// and the rule-level options `STAGGER` and `BLOCK ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyRule {
    pub algo: Algo,
    pub numbers: [u64; 3],
    pub stagger: bool,
    pub block_ms: u64,
}

impl PolicyRule {
    /// Validates a rule as a rate command validates its numbers and options.
    pub fn new(
        algo: Algo,
        numbers: [u64; 3],
        stagger: bool,
        block_ms: u64,
    ) -> Result<(PolicyRule, Rule), ParamError> {
        let rule = Rule::new(algo, numbers)?;
        let opts = algo.spec().options;
        if (stagger && !opts.has(Opt::Stagger)) || (block_ms > 0 && !opts.has(Opt::Block)) {
            return Err(ParamError::Syntax);
        }
        if block_ms > MAX_SPAN_MS {
            return Err(ParamError::SpanTooLarge("block_ms"));
        }
        let p = PolicyRule {
            algo,
            numbers,
            stagger,
            block_ms,
        };
        Ok((p, rule))
    }

    /// The rule as RL.ALL and `RL.POLICY SET` write it: `GCRA 10 1 1000 BLOCK 500`.
    pub fn text(&self) -> String {
        let mut s = self.algo.name().to_ascii_uppercase();
        let n = self.algo.spec().args.len();
        for v in self.numbers.iter().take(n) {
            let _ = write!(s, " {v}");
        }
        if self.stagger {
            s.push_str(" STAGGER");
        }
        if self.block_ms > 0 {
            let _ = write!(s, " BLOCK {}", self.block_ms);
        }
        s
    }
}

/// One version of a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// 1, 2, ...: every change of the policy makes a new one.
    pub number: u64,
    pub rule: PolicyRule,
    /// The rule, built (what a request decides under).
    pub compiled: Rule,
    /// Decides and spends, but never refuses.
    pub shadow: bool,
    /// When it was set, unix ms (module clock).
    pub set_ms: u64,
}

impl Version {
    pub fn mode(&self) -> &'static str {
        if self.shadow {
            "shadow"
        } else {
            "enforce"
        }
    }
}

/// A candidate version rolled out to a share of keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub version: Version,
    /// 1..99: the per cent of keys (by [`bucket`]) it applies to.
    pub percent: u8,
}

/// Why an operator's change was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyError {
    /// `ROLLOUT` for a policy with no current version.
    NoCurrent,
    /// `RL.POLICY ROLLOUT` without a candidate.
    NoCandidate,
    /// `RL.POLICY ROLLBACK` with no candidate and no earlier version.
    NoEarlier,
}

/// A policy: its current version, a candidate if one is being rolled out, the versions it
/// had, and its statistics.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The version every key not on the candidate decides under.
    pub current: Version,
    pub candidate: Option<Candidate>,
    /// The versions that were current, newest first (the current one first), at most
    /// [`HISTORY`].
    pub history: VecDeque<Version>,
    /// The number the next version gets.
    pub next: u64,
    pub stats: Stats,
}

impl Policy {
    /// A new policy whose first version is `rule`.
    pub fn new(rule: PolicyRule, compiled: Rule, shadow: bool, now_ms: u64) -> Policy {
        let v = Version {
            number: 1,
            rule,
            compiled,
            shadow,
            set_ms: now_ms,
        };
        Policy {
            current: v.clone(),
            candidate: None,
            history: VecDeque::from([v]),
            next: 2,
            stats: Stats::default(),
        }
    }

    fn version(&mut self, rule: PolicyRule, compiled: Rule, shadow: bool, now_ms: u64) -> Version {
        let number = self.next;
        self.next += 1;
        Version {
            number,
            rule,
            compiled,
            shadow,
            set_ms: now_ms,
        }
    }

    fn make_current(&mut self, v: Version) {
        self.history.push_front(v.clone());
        self.history.truncate(HISTORY);
        self.current = v;
    }

    /// `RL.POLICY SET` on an existing policy: a new version, current at once (dropping a
    /// candidate), or a candidate for `rollout` per cent of keys (replacing a candidate; at
    /// 100, current at once). Returns the new version's number.
    pub fn set(
        &mut self,
        rule: PolicyRule,
        compiled: Rule,
        shadow: bool,
        rollout: Option<u8>,
        now_ms: u64,
    ) -> u64 {
        let v = self.version(rule, compiled, shadow, now_ms);
        let number = v.number;
        match rollout {
            Some(p) if p < 100 => {
                self.candidate = Some(Candidate {
                    version: v,
                    percent: p,
                })
            }
            _ => {
                self.candidate = None;
                self.make_current(v);
            }
        }
        number
    }

    /// `RL.POLICY ROLLOUT name percent`: moves the candidate's share; at 100 it becomes
    /// current. Returns the candidate's version number.
    pub fn rollout(&mut self, percent: u8) -> Result<u64, PolicyError> {
        let c = self.candidate.as_mut().ok_or(PolicyError::NoCandidate)?;
        let number = c.version.number;
        if percent >= 100 {
            if let Some(c) = self.candidate.take() {
                self.make_current(c.version);
            }
        } else {
            c.percent = percent;
        }
        Ok(number)
    }

    /// `RL.POLICY ROLLBACK`: drops the candidate, or without one makes the version before
    /// the current one current again, as a new version. Returns the current version's
    /// number.
    pub fn rollback(&mut self, now_ms: u64) -> Result<u64, PolicyError> {
        if self.candidate.take().is_some() {
            return Ok(self.current.number);
        }
        let earlier = self.history.get(1).cloned().ok_or(PolicyError::NoEarlier)?;
        let v = self.version(earlier.rule, earlier.compiled, earlier.shadow, now_ms);
        let number = v.number;
        self.make_current(v);
        Ok(number)
    }

    /// The version a request on `key` decides under.
    #[inline]
    pub fn version_for(&self, key: &[u8]) -> &Version {
        match &self.candidate {
            Some(c) if bucket(key) < c.percent => &c.version,
            _ => &self.current,
        }
    }

    /// A digest of the policy's definition (current version, its rule and mode, and the
    /// candidate with its share): two nodes that show the same digest hold the same policy.
    pub fn digest(&self) -> String {
        let mut s = format!(
            "{} {} {}",
            self.current.number,
            self.current.rule.text(),
            self.current.mode()
        );
        if let Some(c) = &self.candidate {
            let v = &c.version;
            let _ = write!(
                s,
                " | {} {} {} {}",
                v.number,
                v.rule.text(),
                v.mode(),
                c.percent
            );
        }
        format!("{:016x}", fnv1a(s.as_bytes()))
    }

    /// The encoding that persists and replicates the policy's definition (not its
    /// statistics): little-endian `u64`s: codec version, next version, the candidate's
    /// share (0: none), the number of versions in the history, the candidate's version if
    /// any, then the history's, newest first. A version: number, set_ms, shadow, algorithm
    /// tag, its three numbers, stagger, block_ms.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 * (4 + 9 * (self.history.len() + 1)));
        let mut push = |v: u64| out.extend_from_slice(&v.to_le_bytes());
        push(CODEC);
        push(self.next);
        push(self.candidate.as_ref().map_or(0, |c| u64::from(c.percent)));
        push(self.history.len() as u64);
        let versions = self
            .candidate
            .iter()
            .map(|c| &c.version)
            .chain(self.history.iter());
        for v in versions {
            let r = &v.rule;
            for f in [
                v.number,
                v.set_ms,
                u64::from(v.shadow),
                u64::from(r.algo.tag()),
                r.numbers[0],
                r.numbers[1],
                r.numbers[2],
                u64::from(r.stagger),
                r.block_ms,
            ] {
                push(f);
            }
        }
        out
    }

    /// Parses and validates an encoding ([`Policy::encode`]); the statistics start empty.
    pub fn decode(buf: &[u8]) -> Result<Policy, DecodeError> {
        let bad = DecodeError("bad policy");
        let r = &mut Reader::new(buf);
        if r.u64()? != CODEC {
            return Err(DecodeError("unknown policy encoding"));
        }
        let next = r.u64()?;
        let percent = r.u64()?;
        let n = r.u64()?;
        if percent >= 100 || n == 0 || n > HISTORY as u64 {
            return Err(bad);
        }
        let candidate = if percent > 0 {
            Some(Candidate {
                version: read_version(r)?,
                percent: percent as u8,
            })
        } else {
            None
        };
        let mut history = VecDeque::with_capacity(n as usize);
        for _ in 0..n {
            history.push_back(read_version(r)?);
        }
        if !r.is_empty() {
            return Err(DecodeError("trailing bytes"));
        }
        // Numbers: the history strictly decreasing, the candidate above it, all below next.
        let numbers: Vec<u64> = candidate
            .iter()
            .map(|c| c.version.number)
            .chain(history.iter().map(|v| v.number))
            .collect();
        let decreasing = numbers.windows(2).all(|w| w[0] > w[1]);
        if !decreasing || numbers.first().is_none_or(|&top| top >= next) {
            return Err(bad);
        }
        let current = history.front().cloned().ok_or(bad)?;
        Ok(Policy {
            current,
            candidate,
            history,
            next,
            stats: Stats::default(),
        })
    }
}

fn read_version(r: &mut Reader) -> Result<Version, DecodeError> {
    let bad = DecodeError("bad policy version");
    let (number, set_ms, shadow) = (r.u64()?, r.u64()?, r.u64()?);
    let tag = u8::try_from(r.u64()?).map_err(|_| bad)?;
    let algo = Algo::of_tag(tag).ok_or(bad)?;
    let numbers = [r.u64()?, r.u64()?, r.u64()?];
    let (stagger, block_ms) = (r.u64()?, r.u64()?);
    if number == 0 || shadow > 1 || stagger > 1 || set_ms > crate::algo::MAX_TIME_MS {
        return Err(bad);
    }
    // Unused numbers are 0; used ones are what the parser accepts.
    let used = algo.spec().args.len();
    if numbers.iter().skip(used).any(|&v| v != 0) || numbers.iter().take(used).any(|&v| v == 0) {
        return Err(bad);
    }
    let (rule, compiled) =
        PolicyRule::new(algo, numbers, stagger == 1, block_ms).map_err(|_| bad)?;
    Ok(Version {
        number,
        rule,
        compiled,
        shadow: shadow == 1,
        set_ms,
    })
}

/// A policy's statistics since its last reset.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Requests decided (committed spends: not peeks, refunds or dry runs).
    pub requests: u64,
    pub admitted: u64,
    /// Refused by an enforced version.
    pub refused: u64,
    /// Would have been refused by a shadow version (admitted).
    pub shadow_refusals: u64,
    /// Units spent by the admitted requests.
    pub units_spent: u64,
    /// The keys refused most (both kinds of refusal).
    pub top: TopKeys,
}

impl Stats {
    /// Counts a committed spend on `key`: admitted (`units` spent), refused, or a shadow
    /// refusal. No allocation once the sketch's counters exist.
    #[inline]
    pub fn count(&mut self, key: &[u8], admitted: bool, shadow_refusal: bool, units: u64) {
        self.requests += 1;
        if shadow_refusal {
            self.shadow_refusals += 1;
            self.top.add(key);
        } else if admitted {
            self.admitted += 1;
            self.units_spent = self.units_spent.saturating_add(units);
        } else {
            self.refused += 1;
            self.top.add(key);
        }
    }

    /// Back to zero; the sketch keeps its memory.
    pub fn reset(&mut self) {
        let top = std::mem::take(&mut self.top);
        *self = Stats {
            top: top.cleared(),
            ..Stats::default()
        };
    }
}

/// The keys refused most: Space-Saving with [`TOP_SLOTS`] counters (Metwally et al.): a
/// key not counted takes over the smallest counter and adds one to it. Every key refused
/// more than `total / TOP_SLOTS` times holds a counter, and a counter overestimates its
/// key's count by at most its `err`, itself at most `total / TOP_SLOTS`.
///
/// Built for the refused path a flood takes, O(1) a refusal: a key's counter is found
/// through a small open-addressing index of its hash, and the smallest counter by a cursor
/// over the counters at the lowest count (counts only grow, so the cursor passes each
/// counter once per level). A key's bytes are kept only for the reply, in room allocated
/// once per counter.
#[derive(Debug, Clone)]
pub struct TopKeys {
    /// The hash of each counter's key (meaningful where its count is above 0).
    hashes: [u64; TOP_SLOTS],
    /// Each counter's count; 0: free.
    counts: [u64; TOP_SLOTS],
    /// How much of each count may belong to the keys it replaced.
    errs: [u64; TOP_SLOTS],
    /// Each counter's key, cut to [`TOP_KEY_BYTES`] (allocated when first used).
    keys: Vec<Vec<u8>>,
    /// Linear probing by hash: a counter's index + 1, 0 for none.
    index: [u8; INDEX],
    /// No count is below it.
    level: u64,
    /// Counters before it are above `level`.
    cursor: usize,
    /// Refusals counted since the reset.
    total: u64,
}

/// Entries of the index (a power of two, four per counter: short probes).
const INDEX: usize = 4 * TOP_SLOTS;

impl Default for TopKeys {
    fn default() -> TopKeys {
        TopKeys {
            hashes: [0; TOP_SLOTS],
            counts: [0; TOP_SLOTS],
            errs: [0; TOP_SLOTS],
            keys: Vec::new(),
            index: [0; INDEX],
            level: 0,
            cursor: 0,
            total: 0,
        }
    }
}

impl TopKeys {
    /// The index position of counter `slot` (which holds a key), or of the key with `hash`
    /// and bytes `cut`: `(position, Some(counter))` when found, else the free position
    /// that ends the probe.
    fn probe(&self, hash: u64, want: impl Fn(usize) -> bool) -> (usize, Option<usize>) {
        let mut i = hash as usize & (INDEX - 1);
        for _ in 0..INDEX {
            match self.index.get(i) {
                Some(&e) if e > 0 => {
                    let slot = usize::from(e - 1);
                    if want(slot) {
                        return (i, Some(slot));
                    }
                }
                _ => return (i, None),
            }
            i = (i + 1) & (INDEX - 1);
        }
        (i, None)
    }

    /// Removes counter `slot`'s entry (backward-shift deletion keeps every probe whole).
    fn unindex(&mut self, slot: usize) {
        let hash = self.hashes.get(slot).copied().unwrap_or(0);
        let (mut hole, found) = self.probe(hash, |s| s == slot);
        if found.is_none() {
            return;
        }
        let mut j = hole;
        loop {
            j = (j + 1) & (INDEX - 1);
            let e = self.index.get(j).copied().unwrap_or(0);
            if e == 0 {
                break;
            }
            let home =
                self.hashes.get(usize::from(e - 1)).copied().unwrap_or(0) as usize & (INDEX - 1);
            // The entry at j may move to the hole if its home is not cyclically in (hole, j].
            let between = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !between {
                if let Some(d) = self.index.get_mut(hole) {
                    *d = e;
                }
                hole = j;
            }
        }
        if let Some(d) = self.index.get_mut(hole) {
            *d = 0;
        }
    }

    /// A counter with the smallest count.
    #[inline]
    fn smallest(&mut self) -> usize {
        loop {
            while let Some(&c) = self.counts.get(self.cursor) {
                if c == self.level {
                    return self.cursor;
                }
                self.cursor += 1;
            }
            self.next_level();
        }
    }

    /// Every counter is above the level: the next level is the smallest count (once per
    /// level; apart, so the compiler does not compute it on every call).
    #[cold]
    #[inline(never)]
    fn next_level(&mut self) {
        self.level = self.counts.iter().copied().min().unwrap_or(0);
        self.cursor = 0;
    }

    pub fn add(&mut self, key: &[u8]) {
        self.total += 1;
        let hash = fnv1a(key);
        let cut = key.get(..TOP_KEY_BYTES).unwrap_or(key);
        let (_, found) = self.probe(hash, |s| {
            self.hashes.get(s) == Some(&hash) && self.keys.get(s).is_some_and(|k| k[..] == *cut)
        });
        if let Some(c) = found.and_then(|s| self.counts.get_mut(s)) {
            *c += 1;
            return;
        }
        let slot = self.smallest();
        if self.counts.get(slot).is_some_and(|&c| c > 0) {
            self.unindex(slot);
        }
        while self.keys.len() <= slot {
            self.keys.push(Vec::with_capacity(TOP_KEY_BYTES));
        }
        let (Some(c), Some(e), Some(h), Some(k)) = (
            self.counts.get_mut(slot),
            self.errs.get_mut(slot),
            self.hashes.get_mut(slot),
            self.keys.get_mut(slot),
        ) else {
            return;
        };
        *e = *c;
        *c += 1;
        *h = hash;
        k.clear();
        k.extend_from_slice(cut);
        let (free, _) = self.probe(hash, |_| false);
        if let (Some(d), Ok(v)) = (self.index.get_mut(free), u8::try_from(slot + 1)) {
            *d = v;
        }
    }

    /// The `n` keys with the highest counts, highest first (ties by key): each with its
    /// count, an upper bound of its refusals (at most [`TopKeys::error_bound`] above them).
    pub fn top(&self, n: usize) -> Vec<(&[u8], u64)> {
        let mut v: Vec<(&[u8], u64)> = self
            .counts
            .iter()
            .zip(&self.keys)
            .filter(|(&c, _)| c > 0)
            .map(|(&c, k)| (&k[..], c))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        v.truncate(n);
        v
    }

    /// Refusals counted since the reset.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The most any count shown may exceed the key's true count: `total / TOP_SLOTS` at
    /// most (0 while no counter was taken over).
    pub fn error_bound(&self) -> u64 {
        let live = self.errs.iter().zip(&self.counts).filter(|(_, &c)| c > 0);
        live.map(|(&e, _)| e).max().unwrap_or(0)
    }

    /// Heap bytes held (the arrays are inline).
    pub fn heap_bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<Vec<u8>>()
            + self.keys.iter().map(|k| k.capacity()).sum::<usize>()
    }

    fn cleared(mut self) -> TopKeys {
        self.counts = [0; TOP_SLOTS];
        self.errs = [0; TOP_SLOTS];
        self.index = [0; INDEX];
        self.level = 0;
        self.cursor = 0;
        self.total = 0;
        self
    }
}

/// A fast hasher for policy names (trusted operator input, short).
#[derive(Default)]
pub struct NameHasher(u64);

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 =
                (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
}

/// Every policy of the node, by name.
pub type Registry = HashMap<Box<[u8]>, Policy, BuildHasherDefault<NameHasher>>;

/// Every policy of this node (commands run on the main thread: the lock is never
/// contended; one a panic left poisoned is used as it is).
static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| Mutex::new(Registry::default()));

/// The node's policies, locked.
pub fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every policy of the node as one payload (RDB, beside the keys): the count, then each
/// policy's name and encoding, each behind its length (little-endian `u64`s), by name; None
/// when there is none.
pub fn save_all() -> Option<Vec<u8>> {
    let reg = registry();
    if reg.is_empty() {
        return None;
    }
    let mut all: Vec<(&[u8], Vec<u8>)> = reg.iter().map(|(k, p)| (&k[..], p.encode())).collect();
    all.sort_unstable();
    let mut out = Vec::new();
    out.extend_from_slice(&(all.len() as u64).to_le_bytes());
    for (name, enc) in all {
        for part in [name, &enc[..]] {
            out.extend_from_slice(&(part.len() as u64).to_le_bytes());
            out.extend_from_slice(part);
        }
    }
    Some(out)
}

/// Replaces the node's policies by those of a [`save_all`] payload (empty: none); false,
/// and nothing changed, if it is not one.
pub fn load_all(bytes: &[u8]) -> bool {
    fn part<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
        let (len, rest) = b.split_first_chunk::<8>()?;
        let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
        let (p, rest) = (rest.get(..len)?, rest.get(len..)?);
        *b = rest;
        Some(p)
    }
    let parse = || -> Option<Registry> {
        let mut fresh = Registry::default();
        if bytes.is_empty() {
            return Some(fresh);
        }
        let (n, mut b) = bytes.split_first_chunk::<8>()?;
        for _ in 0..u64::from_le_bytes(*n) {
            let name = part(&mut b)?;
            let p = Policy::decode(part(&mut b)?).ok()?;
            if !valid_name(name) || fresh.insert(name.into(), p).is_some() {
                return None;
            }
        }
        b.is_empty().then_some(fresh)
    };
    match parse() {
        Some(fresh) => {
            *registry() = fresh;
            true
        }
        None => false,
    }
}

/// Forgets every policy (a whole dataset is about to be loaded: RDB, AOF, a full sync).
pub fn clear() {
    registry().clear();
}

/// Glob-style matching as `KEYS` and `RL.POLICY LIST pattern` do: `*`, `?`, `[abc]`,
/// `[^a-z]`, and `\` escaping the next byte.
pub fn glob(pattern: &[u8], s: &[u8]) -> bool {
    match pattern.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob(rest, s.get(i..).unwrap_or(&[]))),
        Some((b'?', rest)) => s.split_first().is_some_and(|(_, t)| glob(rest, t)),
        Some((b'[', rest)) => {
            let Some((&c, t)) = s.split_first() else {
                return false;
            };
            let (negate, mut p) = match rest.split_first() {
                Some((b'^', r)) => (true, r),
                _ => (false, rest),
            };
            let mut hit = false;
            loop {
                match p {
                    [] => return false,
                    [b']', r @ ..] => {
                        p = r;
                        break;
                    }
                    [b'\\', e, r @ ..] => {
                        hit |= *e == c;
                        p = r;
                    }
                    [a, b'-', z, r @ ..] if *z != b']' => {
                        let (lo, hi) = if a <= z { (*a, *z) } else { (*z, *a) };
                        hit |= (lo..=hi).contains(&c);
                        p = r;
                    }
                    [a, r @ ..] => {
                        hit |= *a == c;
                        p = r;
                    }
                }
            }
            hit != negate && glob(p, t)
        }
        Some((b'\\', rest)) if !rest.is_empty() => {
            s.first() == rest.first() && glob(&rest[1..], &s[1..])
        }
        Some((&c, rest)) => s.first() == Some(&c) && glob(rest, s.get(1..).unwrap_or(&[])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gcra(burst: u64) -> (PolicyRule, Rule) {
        PolicyRule::new(Algo::Gcra, [burst, 1, 1000], false, 0).unwrap()
    }

    #[test]
    fn names() {
        assert!(valid_name(b"api:v1.read-all_2"));
        assert!(!valid_name(b""));
        assert!(!valid_name(b"a b"));
        assert!(!valid_name(&[b'a'; 129]));
        assert!(valid_name(&[b'a'; 128]));
    }

    #[test]
    fn rules_validate_as_the_commands_do() {
        assert!(PolicyRule::new(Algo::Gcra, [0, 1, 1000], false, 0).is_err());
        assert_eq!(
            PolicyRule::new(Algo::Gcra, [1, 1, 1000], true, 0).err(),
            Some(ParamError::Syntax)
        );
        assert!(PolicyRule::new(Algo::Sliding, [5, 1000, 0], true, 10).is_ok());
        assert_eq!(
            PolicyRule::new(Algo::Concurrency, [5, 1000, 0], false, 10).err(),
            Some(ParamError::Syntax)
        );
        let (r, _) = PolicyRule::new(Algo::Fixed, [5, 1000, 0], true, 250).unwrap();
        assert_eq!(r.text(), "FIXED 5 1000 STAGGER BLOCK 250");
    }

    #[test]
    fn versions_rollout_and_rollback() {
        let (r1, c1) = gcra(10);
        let mut p = Policy::new(r1, c1, false, 1);
        let (r2, c2) = gcra(5);
        assert_eq!(p.set(r2, c2, true, Some(10), 2), 2);
        assert_eq!(p.current.number, 1);
        let on: usize = (0..100_000u32)
            .filter(|i| p.version_for(format!("user:{i}").as_bytes()).number == 2)
            .count();
        assert!((9_000..=11_000).contains(&on), "{on}");
        // A key never flips back: the share only grows.
        let k = (0..1000u32)
            .map(|i| format!("k{i}"))
            .find(|k| p.version_for(k.as_bytes()).number == 2)
            .unwrap();
        assert_eq!(p.rollout(50), Ok(2));
        assert_eq!(p.version_for(k.as_bytes()).number, 2);
        assert_eq!(p.rollout(100), Ok(2));
        assert_eq!(p.current.number, 2);
        assert!(p.current.shadow);
        assert_eq!(p.rollout(50), Err(PolicyError::NoCandidate));
        // Back to the rule of version 1, as version 3.
        assert_eq!(p.rollback(3), Ok(3));
        assert_eq!(p.current.rule, r1);
        assert_eq!(p.history.len(), 3);
        let (r4, c4) = gcra(7);
        p.set(r4, c4, false, Some(20), 4);
        assert_eq!(p.rollback(5), Ok(3));
        assert!(p.candidate.is_none());
        let fresh = Policy::new(r1, c1, false, 1);
        let mut one = fresh.clone();
        assert_eq!(one.rollback(2), Err(PolicyError::NoEarlier));
        for i in 0..20 {
            one.set(r1, c1, false, None, i);
        }
        assert_eq!(one.history.len(), HISTORY);
    }

    #[test]
    fn encoding_round_trips_and_refuses_bad_input() {
        let (r1, c1) = gcra(10);
        let mut p = Policy::new(r1, c1, false, 1_700_000_000_000);
        let (r2, c2) = PolicyRule::new(Algo::Sliding, [5, 60_000, 0], true, 100).unwrap();
        p.set(r2, c2, true, Some(30), 1_700_000_000_001);
        let e = p.encode();
        let q = Policy::decode(&e).unwrap();
        assert_eq!(q.encode(), e);
        assert_eq!(q.digest(), p.digest());
        assert_eq!(q.candidate, p.candidate);
        for cut in 0..e.len() {
            assert!(Policy::decode(&e[..cut]).is_err());
        }
        for i in 0..e.len() {
            let mut m = e.clone();
            m[i] ^= 0x41;
            if let Ok(d) = Policy::decode(&m) {
                // Whatever decodes encodes back to itself.
                assert_eq!(Policy::decode(&d.encode()).unwrap().encode(), d.encode());
            }
        }
    }

    #[test]
    fn digest_changes_with_the_definition() {
        let (r1, c1) = gcra(10);
        let p = Policy::new(r1, c1, false, 1);
        let mut q = p.clone();
        assert_eq!(p.digest(), q.digest());
        q.set(r1, c1, true, None, 2);
        assert_ne!(p.digest(), q.digest());
        assert_eq!(p.digest().len(), 16);
    }

    #[test]
    fn top_keys_against_an_exact_count() {
        let mut t = TopKeys::default();
        let mut exact: HashMap<Vec<u8>, u64> = HashMap::new();
        // Ten heavy keys among 5,000 light ones.
        let mut seq = Vec::new();
        for i in 0..10u64 {
            for _ in 0..(500 + 50 * i) {
                seq.push(format!("heavy:{i}"));
            }
        }
        for i in 0..5_000u64 {
            seq.push(format!("light:{i}"));
        }
        // A fixed shuffle.
        let mut x: u64 = 7;
        for i in (1..seq.len()).rev() {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seq.swap(i, (x >> 33) as usize % (i + 1));
        }
        for k in &seq {
            t.add(k.as_bytes());
            *exact.entry(k.clone().into_bytes()).or_default() += 1;
        }
        let bound = t.total() / TOP_SLOTS as u64;
        assert!(t.error_bound() <= bound);
        let top = t.top(TOP_SHOWN);
        assert_eq!(top.len(), 10);
        for (k, count) in &top {
            let truth = exact[*k];
            assert!(
                *count >= truth && *count - truth <= bound,
                "{count} {truth}"
            );
            assert!(k.starts_with(b"heavy:"));
        }
        let mut s = Stats {
            top: t,
            ..Stats::default()
        };
        s.reset();
        assert_eq!(s.top.total(), 0);
        assert!(s.top.top(10).is_empty());
    }

    #[test]
    fn the_node_payload_round_trips() {
        let (r1, c1) = gcra(10);
        clear();
        assert_eq!(save_all(), None);
        registry().insert((*b"a").into(), Policy::new(r1, c1, false, 1));
        registry().insert((*b"b:c").into(), Policy::new(r1, c1, true, 2));
        let all = save_all().unwrap();
        assert!(load_all(&all));
        assert_eq!(save_all(), Some(all.clone()));
        for cut in 1..all.len() {
            assert!(!load_all(&all[..cut]));
        }
        assert_eq!(registry().len(), 2, "a refused payload changes nothing");
        assert!(load_all(&[]));
        assert!(registry().is_empty());
    }

    /// The sketch against a plain Space-Saving (scans for everything), on streams with
    /// hash collisions forced by few distinct keys and many.
    #[test]
    fn top_keys_match_a_plain_space_saving() {
        use proptest::prelude::*;
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(&proptest::collection::vec(0u16..300, 0..3000), |stream| {
                let mut t = TopKeys::default();
                // key -> (count, err); the plain one's counters.
                let mut plain: Vec<(Vec<u8>, u64, u64)> = Vec::new();
                for (n, k) in stream.iter().enumerate() {
                    if n % 997 == 996 {
                        t = t.cleared();
                        plain.clear();
                    }
                    let key = format!("k{k}").into_bytes();
                    t.add(&key);
                    if let Some(e) = plain.iter_mut().find(|e| e.0 == key) {
                        e.1 += 1;
                    } else if plain.len() < TOP_SLOTS {
                        plain.push((key, 1, 0));
                    } else {
                        let m = plain.iter().map(|e| e.1).min().unwrap();
                        let e = plain.iter_mut().find(|e| e.1 == m).unwrap();
                        *e = (key, m + 1, m);
                    }
                }
                // The same counters: both take the first smallest one (the cursor passed
                // only counters above the lowest count).
                for (slot, e) in plain.iter().enumerate() {
                    prop_assert_eq!(&t.keys[slot], &e.0);
                    prop_assert_eq!((t.counts[slot], t.errs[slot]), (e.1, e.2));
                }
                prop_assert_eq!(t.counts.iter().filter(|&&c| c > 0).count(), plain.len());
                // Every counted key is found again through the index.
                for (slot, k) in t.keys.iter().enumerate() {
                    if t.counts[slot] > 0 {
                        let h = fnv1a(k);
                        let (_, f) = t.probe(h, |s| s == slot);
                        prop_assert_eq!(f, Some(slot));
                    }
                }
                Ok(())
            })
            .unwrap();
    }

    /// Instructions of the refused path's sketch update, under callgrind (not a test):
    /// `valgrind --tool=callgrind <test binary> sketch_cost --ignored`.
    #[test]
    #[ignore]
    fn sketch_cost() {
        let keys: Vec<Vec<u8>> = (0..1000).map(|i| format!("r:{i}").into_bytes()).collect();
        let mut t = TopKeys::default();
        for i in 0..200_000 {
            t.add(std::hint::black_box(&keys[i % 1000]));
        }
        assert_eq!(t.total(), 200_000);
    }

    #[test]
    fn globs() {
        assert!(glob(b"*", b"anything"));
        assert!(glob(b"api:*", b"api:v1"));
        assert!(!glob(b"api:*", b"web:v1"));
        assert!(glob(b"a?c", b"abc"));
        assert!(glob(b"[a-c]x", b"bx"));
        assert!(!glob(b"[^a-c]x", b"bx"));
        assert!(glob(b"\\*", b"*"));
        assert!(!glob(b"\\*", b"a"));
    }
}
