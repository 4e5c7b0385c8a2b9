//! What every algorithm implements, in its own file: the one trait the rule and state
//! enums dispatch to.

use super::codec::{DecodeError, Encoded, InfoValue, Reader};
use super::request::Extra;
use super::table::Algo;
use super::{Decision, ParamError};

/// One algorithm (or a family of them sharing their arithmetic: the GCRA family, the window
/// counters), as its stored state: everything the module does with a state of it lives in
/// its file, behind this trait. The rule and state enums (`rule.rs`, `state.rs`) only
/// dispatch to it; the options (`PARTIAL`, `RESERVE`, `BLOCK`, `REFUND`) are built on
/// [`Algorithm::spend`] and [`Algorithm::refund`] once, for every algorithm (`rule.rs`).
pub trait Algorithm: Sized {
    /// A request's rule: its validated numbers (and which member of the family).
    type Rule: Copy;

    /// The state grows with the rule's limit (a log's entries, leases): a write propagates
    /// as the operation that made it (`replay.rs`), not as the whole state, and `RL.ALL`
    /// decides it in place rather than on a copy. False: the state is as small as an
    /// operation, and its effect is the state itself.
    const GROWS: bool = false;

    /// The rule of `algo` (a member of this family) from its numbers, in the order of its
    /// table row's `args` (unused ones 0).
    fn rule(algo: Algo, numbers: [u64; 3]) -> Result<Self::Rule, ParamError>;

    /// The algorithm a rule is.
    fn algo(rule: &Self::Rule) -> Algo;

    /// The most cost-1 requests a fresh key admits at once (the reply's `limit`).
    fn limit(rule: &Self::Rule) -> u64;

    /// The state of a key that does not exist.
    fn fresh(rule: &Self::Rule) -> Self;

    /// A request of `cost` (0: a peek, never stored) at `now_us`: the decision, the
    /// command's extra reply field, and whether the state was written. When admitted and
    /// `commit`, updates the state in place under `rule`; a refusal or a dry run changes
    /// nothing (but a GCRA-family state re-timed under another emission interval, which a
    /// committed refusal stores).
    fn spend(&mut self, rule: &Self::Rule, cost: u64, now_us: u64, commit: bool) -> Spent;

    /// `REFUND n` in place: whether the state changed.
    fn refund(&mut self, rule: &Self::Rule, n: u64, now_us: u64) -> bool;

    /// `RL.INFO`'s fields after `algorithm`: the rule's numbers under their argument names
    /// ([`rule_info`]), then the state's own fields at `now_us`.
    fn info(&self, algo: Algo, now_us: u64) -> Vec<(&'static str, InfoValue)>;

    /// The codec's encoding (version 1: `state.rs` documents every layout) under `algo`'s
    /// tag.
    fn encode(&self, algo: Algo) -> Encoded;

    /// Parses and validates the fields of a state of `algo` (the caller refuses trailing
    /// bytes).
    fn decode(algo: Algo, r: &mut Reader) -> Result<Self, DecodeError>;

    /// The five `u64` fields of a state whose effects use the compact encoding, in codec
    /// order (None: the effect is the codec's encoding or a replayed operation).
    #[inline]
    fn five_fields(&self) -> Option<[u64; 5]> {
        None
    }

    /// Heap bytes the state holds (MEMORY USAGE).
    fn heap_bytes(&self) -> usize {
        0
    }
}

/// What [`Algorithm::spend`] decided: the reply's fields, the command's extra field, and
/// whether the state was written.
pub type Spent = (Decision, Extra, bool);

/// The rule's numbers under their argument names (the algorithm table's), for `RL.INFO`.
pub fn rule_info(algo: Algo, values: &[u64]) -> Vec<(&'static str, InfoValue)> {
    let names = algo.spec().args.iter();
    names
        .zip(values)
        .map(|(&n, &v)| (n, InfoValue::Int(v)))
        .collect()
}
