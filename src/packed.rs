//! The packed forms of a state (pure: no Redis types): a word, or a pair of words, that a
//! key's value pointer stands for instead of a `Box<State>`, and the interned-rule tables
//! they index.
//!
//! A key's value is either a `Box<State>` pointer (aligned: low bit 0) or, for the GCRA family
//! (gcra, tokenbucket, queue) and the window counters (sliding, fixed), the state itself
//! packed into the pointer-sized word with the low bit set, so such a key allocates nothing
//! beyond what any Redis key costs:
//!
//! ```text
//! bit 0: 1 (inline) | bits 1-3: algorithm | bits 4-10: rule index | bits 11-63: payload
//! algorithm: 0 gcra, 1 tokenbucket, 2 queue, 3 sliding, 4 fixed (5-7 unused)
//! payload, GCRA family: the TAT in µs (< 2^53)
//! payload, sliding (high to low): start_ms / window_ms in 53 - 2b bits | prev in b bits |
//!          cur in b bits, where b is the bit width of the rule's limit (7 for 100)
//! payload, fixed: start_ms / window_ms in 53 - b bits | cur in b bits (its prev is always 0)
//! ```
//!
//! The rule's numbers live in two small tables of interned rules (GCRA-family and window
//! rules, at most 128 each, in memory only; RDB, AOF and replication always carry the full
//! encoding, and every callback unpacks). A state is packed only when that is exact: a TAT
//! that is a whole number of µs below 2^53; a window start on a window boundary, counts
//! that fit in b bits and a window index that fits in what they leave (a fixed window only
//! with `prev` 0, as the algorithm always leaves it);
//! and a rule with a slot in its table. A GCRA-family state whose TAT is not a whole µs (a
//! rate such as 3 per second) and a window off the boundaries (STAGGER) are packed instead
//! into a pair of words in a 16-byte box (`pack_pair`; the value pointer then has bit 1
//! set): 16 bytes per key rather than a 48-byte `State`. Anything else is boxed and behaves
//! the same.

use crate::algo::{gcra, window};
use crate::state::{Bucket, State, Window};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Most rules each interned table holds (the packed word's rule index has 7 bits).
const MAX_RULES: usize = 128;

/// An append-only table of interned rules, read on every command: reads are lock-free (a
/// slot, once filled, never changes), and only inserting a new rule takes the mutex.
struct Rules<P> {
    slots: [OnceLock<P>; MAX_RULES],
    /// Filled slots: every slot below `len` is set (stored after the slot, with Release).
    len: AtomicUsize,
    /// The index last interned or found, checked first (most stores repeat the last rule).
    last: AtomicUsize,
    insert: Mutex<()>,
}

impl<P: Copy + PartialEq> Rules<P> {
    const fn new() -> Self {
        Rules {
            slots: [const { OnceLock::new() }; MAX_RULES],
            len: AtomicUsize::new(0),
            last: AtomicUsize::new(0),
            insert: Mutex::new(()),
        }
    }

    /// The rule at index `i`, if that slot is filled.
    fn get(&self, i: usize) -> Option<P> {
        self.slots.get(i)?.get().copied()
    }

    /// The index of `p` among the first `n` slots, from `from` on.
    fn find(&self, p: &P, from: usize, n: usize) -> Option<usize> {
        let slots = self.slots.get(from..n.min(MAX_RULES))?;
        let i = slots.iter().position(|q| q.get() == Some(p))?;
        from.checked_add(i)
    }

    /// The index of `p`, adding it if new; None when the table is full (or poisoned).
    fn intern(&self, p: &P) -> Option<usize> {
        let last = self.last.load(Ordering::Relaxed);
        if self.get(last).as_ref() == Some(p) {
            return Some(last);
        }
        let n = self.len.load(Ordering::Acquire);
        let i = match self.find(p, 0, n) {
            Some(i) => i,
            None => {
                if n >= MAX_RULES {
                    return None;
                }
                let _guard = self.insert.lock().ok()?;
                // Another thread may have added rules (maybe this one) since `n` was read.
                let now = self.len.load(Ordering::Acquire);
                match self.find(p, n, now) {
                    Some(i) => i,
                    None => {
                        self.slots.get(now)?.set(*p).ok()?;
                        self.len.store(now.checked_add(1)?, Ordering::Release);
                        now
                    }
                }
            }
        };
        self.last.store(i, Ordering::Relaxed);
        Some(i)
    }
}

/// Interned GCRA-family rules (gcra, tokenbucket, queue).
static BUCKET_RULES: Rules<gcra::Params> = Rules::new();
/// Interned window-counter rules (sliding, fixed).
static WINDOW_RULES: Rules<window::Params> = Rules::new();

/// Bits of the packed word: the algorithm tag at bit 1, the rule index, the payload.
const TAG_SHIFT: u32 = 1;
const TAG_MASK: u64 = 0b111;
const RULE_SHIFT: u32 = 4;
const PAYLOAD_SHIFT: u32 = 11;
const PAYLOAD_BITS: u32 = 64 - PAYLOAD_SHIFT;

const TAG_GCRA: u64 = 0;
const TAG_TOKENBUCKET: u64 = 1;
const TAG_QUEUE: u64 = 2;
const TAG_SLIDING: u64 = 3;
const TAG_FIXED: u64 = 4;

/// `v` fits in `bits` bits.
fn fits(v: u64, bits: u32) -> bool {
    v.checked_shr(bits).is_none_or(|high| high == 0)
}

/// The low `bits` bits of `v` (all of it for `bits >= 64`).
fn low(v: u64, bits: u32) -> u64 {
    v & 1u64
        .checked_shl(bits)
        .map_or(u64::MAX, |b| b.wrapping_sub(1))
}

/// Bits per count for a window rule: the bit width of its limit.
fn count_bits(p: &window::Params) -> u32 {
    u64::BITS - p.limit.leading_zeros()
}

/// GCRA payload: the TAT in µs, if it is a whole number of them below 2^53.
#[inline]
fn bucket_payload(b: &Bucket) -> Option<u64> {
    if b.tat.frac != 0 || !b.tat.ns.is_multiple_of(1000) {
        return None;
    }
    let us = b.tat.ns / 1000;
    fits(us, PAYLOAD_BITS).then_some(us)
}

/// How many counts a packed window keeps: the fixed window's `prev` is always 0 (it is
/// packed only then), so it keeps `cur` alone and its window index gets b more bits.
fn count_fields(fixed: bool) -> u32 {
    if fixed {
        1
    } else {
        2
    }
}

/// Window payload, high to low: the window index (`start_ms / window_ms`) in the bits left,
/// then (sliding only) `prev` in b bits, then `cur` in b bits, b = [`count_bits`]. None if
/// the start is not on a window boundary, a fixed window's `prev` is not 0, or anything does
/// not fit.
fn window_payload(w: &Window, fixed: bool) -> Option<u64> {
    let (p, c) = (&w.params, &w.counters);
    let b = count_bits(p);
    let counts_bits = b.checked_mul(count_fields(fixed))?;
    let index_bits = PAYLOAD_BITS.checked_sub(counts_bits)?;
    if c.start_ms.checked_rem(p.span_ms)? != 0 || (fixed && c.prev != 0) {
        return None;
    }
    let index = c.start_ms.checked_div(p.span_ms)?;
    if !(fits(c.prev, b) && fits(c.cur, b) && fits(index, index_bits)) {
        return None;
    }
    let counts = if fixed {
        c.cur
    } else {
        c.prev.checked_shl(b)? | c.cur
    };
    Some(index.checked_shl(counts_bits)? | counts)
}

/// The packed word for `s`, if it can be packed exactly.
#[inline]
pub fn pack(s: &State) -> Option<usize> {
    if usize::BITS < 64 {
        return None;
    }
    let (tag, payload, rule) = match s {
        State::Gcra(b) | State::TokenBucket(b) | State::Queue(b) => {
            let tag = match s {
                State::Gcra(_) => TAG_GCRA,
                State::TokenBucket(_) => TAG_TOKENBUCKET,
                _ => TAG_QUEUE,
            };
            // Payload first: a state that cannot be packed does not take a rule slot.
            let payload = bucket_payload(b)?;
            (tag, payload, BUCKET_RULES.intern(&b.params)?)
        }
        State::Sliding(w) | State::Fixed(w) => {
            let tag = match s {
                State::Sliding(_) => TAG_SLIDING,
                _ => TAG_FIXED,
            };
            let payload = window_payload(w, tag == TAG_FIXED)?;
            (tag, payload, WINDOW_RULES.intern(&w.params)?)
        }
        // The others (and any new algorithm) stay boxed.
        _ => return None,
    };
    usize::try_from(word(tag, rule, payload)?).ok()
}

/// A packed word: `payload` (53 bits), the rule index, the algorithm tag, low bit 1.
#[inline]
fn word(tag: u64, rule: usize, payload: u64) -> Option<u64> {
    let rule = u64::try_from(rule).ok().filter(|&r| fits(r, 7))?;
    if !fits(payload, PAYLOAD_BITS) {
        return None;
    }
    Some(payload << PAYLOAD_SHIFT | rule << RULE_SHIFT | tag << TAG_SHIFT | 1)
}

/// The tag, rule index and payload of a packed word.
#[inline]
fn fields(w: u64) -> Option<(u64, usize, u64)> {
    let rule = usize::try_from(low(w >> RULE_SHIFT, 7)).ok()?;
    Some(((w >> TAG_SHIFT) & TAG_MASK, rule, w >> PAYLOAD_SHIFT))
}

/// A state that does not pack into the word, packed into two (a 16-byte box instead of the
/// 48 bytes of a `State`): `[extra, word]`, the word laid out as a packed one's. GCRA
/// family: extra = `tat_ns`, payload = `tat_frac` (a rate whose interval is not a whole µs,
/// 3 per second); windows: extra = `start_ms`, payload = `prev` and `cur` in b bits each (a
/// STAGGER offset, or a window index too large for the word).
pub fn pack_pair(s: &State) -> Option<[u64; 2]> {
    let (tag, extra, payload, rule) = match s {
        State::Gcra(b) | State::TokenBucket(b) | State::Queue(b) => {
            let tag = match s {
                State::Gcra(_) => TAG_GCRA,
                State::TokenBucket(_) => TAG_TOKENBUCKET,
                _ => TAG_QUEUE,
            };
            if b.tat.frac >= b.params.count || !fits(b.tat.frac, PAYLOAD_BITS) {
                return None;
            }
            (tag, b.tat.ns, b.tat.frac, BUCKET_RULES.intern(&b.params)?)
        }
        State::Sliding(w) | State::Fixed(w) => {
            let tag = match s {
                State::Sliding(_) => TAG_SLIDING,
                _ => TAG_FIXED,
            };
            let (p, c) = (&w.params, &w.counters);
            let b = count_bits(p);
            if 2 * b > PAYLOAD_BITS || !fits(c.prev, b) || !fits(c.cur, b) {
                return None;
            }
            let counts = c.prev << b | c.cur;
            (tag, c.start_ms, counts, WINDOW_RULES.intern(p)?)
        }
        // The others (and any new algorithm) stay boxed.
        _ => return None,
    };
    Some([extra, word(tag, rule, payload)?])
}

/// The state a pair of words stands for (None for a pair no `pack_pair` could have made).
pub fn unpack_pair(pair: [u64; 2]) -> Option<State> {
    let [extra, w] = pair;
    let (tag, rule, payload) = fields(w)?;
    match tag {
        TAG_GCRA | TAG_TOKENBUCKET | TAG_QUEUE => {
            let params = BUCKET_RULES.get(rule)?;
            if payload >= params.count {
                return None;
            }
            let tat = gcra::Tat {
                ns: extra,
                frac: payload,
            };
            let b = Bucket { params, tat };
            Some(bucket_state(tag, b))
        }
        TAG_SLIDING | TAG_FIXED => {
            let params = WINDOW_RULES.get(rule)?;
            let b = count_bits(&params);
            let counters = window::Counters {
                start_ms: extra,
                prev: low(payload.checked_shr(b)?, b),
                cur: low(payload, b),
            };
            let w = Window { params, counters };
            Some(window_state(tag, w))
        }
        _ => None,
    }
}

/// The state of GCRA-family tag `tag` holding `b`.
fn bucket_state(tag: u64, b: Bucket) -> State {
    match tag {
        TAG_GCRA => State::Gcra(b),
        TAG_TOKENBUCKET => State::TokenBucket(b),
        _ => State::Queue(b),
    }
}

/// The state of window tag `tag` holding `w`.
fn window_state(tag: u64, w: Window) -> State {
    if tag == TAG_SLIDING {
        State::Sliding(w)
    } else {
        State::Fixed(w)
    }
}

/// The state a packed word stands for (None for a word no `pack` could have produced).
#[inline]
pub fn unpack(w: usize) -> Option<State> {
    let (tag, rule, payload) = fields(u64::try_from(w).ok()?)?;
    match tag {
        TAG_GCRA | TAG_TOKENBUCKET | TAG_QUEUE => {
            let b = Bucket {
                params: BUCKET_RULES.get(rule)?,
                tat: gcra::Tat {
                    ns: payload.checked_mul(1000)?,
                    frac: 0,
                },
            };
            Some(bucket_state(tag, b))
        }
        TAG_SLIDING | TAG_FIXED => {
            let params = WINDOW_RULES.get(rule)?;
            let fixed = tag == TAG_FIXED;
            let b = count_bits(&params);
            let counts_bits = b.checked_mul(count_fields(fixed))?;
            if counts_bits > PAYLOAD_BITS {
                return None;
            }
            let counters = window::Counters {
                start_ms: payload
                    .checked_shr(counts_bits)?
                    .checked_mul(params.span_ms)?,
                prev: if fixed {
                    0
                } else {
                    low(payload.checked_shr(b)?, b)
                },
                cur: low(payload, b),
            };
            let w = Window { params, counters };
            Some(window_state(tag, w))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bucket(ns: u64, frac: u64) -> Bucket {
        Bucket {
            params: gcra::Params::new(10, 4, 1000, gcra::GCRA_NAMES).unwrap(),
            tat: gcra::Tat { ns, frac },
        }
    }

    fn win(limit: u64, window_ms: u64, start_ms: u64, prev: u64, cur: u64) -> Window {
        Window {
            params: window::Params::new(limit, window_ms).unwrap(),
            counters: window::Counters {
                start_ms,
                prev,
                cur,
            },
        }
    }

    /// Packs `s`, checks the word and that it unpacks to `s`; the word.
    fn roundtrip(s: &State) -> usize {
        let w = pack(s).unwrap_or_else(|| panic!("{s:?} packs"));
        assert_eq!(w & 1, 1);
        assert_eq!(unpack(w).as_ref(), Some(s));
        w
    }

    #[test]
    fn gcra_family_packs_into_the_value_word() {
        for s in [
            State::Gcra(bucket(1_700_000_040_250_000_000, 0)),
            State::TokenBucket(bucket(1_700_000_040_250_000_000, 0)),
            State::Queue(bucket(0, 0)),
            // The largest TAT that fits: 2^53 - 1 µs.
            State::Gcra(bucket(((1 << 53) - 1) * 1000, 0)),
        ] {
            roundtrip(&s);
        }
        // Not a whole µs, a fraction of a ns, or 2^53 µs: boxed.
        for (ns, frac) in [
            (1_700_000_040_250_000_001, 0),
            (1_700_000_040_250_000_000, 1),
            ((1 << 53) * 1000, 0),
        ] {
            assert_eq!(pack(&State::Gcra(bucket(ns, frac))), None);
        }
        // Boxed pointers are aligned: never taken for packed words.
        assert!(pack(&State::Gcra(bucket(1, 0))).is_none());
    }

    #[test]
    fn windows_pack_into_the_value_word() {
        // 100 per hour, an hour-aligned start: 7-bit counts, 39 bits of window index.
        let hour = 3_600_000;
        let start = 1_796_011_200_000;
        for (prev, cur) in [(0, 0), (0, 1), (37, 100), (100, 100), (127, 127)] {
            let w = win(100, hour, start, prev, cur);
            let a = roundtrip(&State::Sliding(w));
            let b = roundtrip(&State::Fixed(win(100, hour, start, 0, cur)));
            assert_ne!(a, b, "the algorithm is in the word");
        }
        // A fresh state (start 0) and a one-ms window.
        roundtrip(&State::Sliding(win(5, 1000, 0, 0, 0)));
        roundtrip(&State::Fixed(win(1, 1, 1_796_011_200_123, 0, 1)));
        assert!(pack(&State::Sliding(win(100, hour, start, 1, 2))).is_some());
    }

    #[test]
    fn windows_that_do_not_fit_stay_boxed() {
        let hour = 3_600_000;
        let start = 1_796_011_200_000;
        // Counts above the limit's bit width (100 < 128: 7 bits).
        assert_eq!(pack(&State::Sliding(win(100, hour, start, 128, 0))), None);
        assert_eq!(pack(&State::Fixed(win(100, hour, start, 0, 128))), None);
        // A limit of exactly 2^k uses k + 1 bits: 2^(k+1) - 1 fits, 2^(k+1) does not.
        roundtrip(&State::Sliding(win(64, hour, start, 127, 127)));
        assert_eq!(pack(&State::Sliding(win(64, hour, start, 128, 0))), None);
        // A start that is not on a window boundary.
        assert_eq!(pack(&State::Sliding(win(100, hour, start + 1, 1, 1))), None);
        // Window index too large for what the counts leave: limit 2^20 - 1 (20-bit counts)
        // leaves 13 bits to a sliding window, index < 8192, and 33 bits to a fixed one.
        let limit = (1 << 20) - 1;
        roundtrip(&State::Sliding(win(limit, 1000, 8191 * 1000, limit, limit)));
        assert_eq!(
            pack(&State::Sliding(win(limit, 1000, 8192 * 1000, 0, 1))),
            None
        );
        roundtrip(&State::Fixed(win(
            limit,
            1000,
            ((1 << 33) - 1) * 1000,
            0,
            limit,
        )));
        assert_eq!(
            pack(&State::Fixed(win(limit, 1000, (1 << 33) * 1000, 0, 1))),
            None
        );
        // The benchmark's 1,000,000 per minute, now: a fixed window packs, a sliding one not.
        let minute = 60_000;
        let now = 1_796_011_200_000;
        roundtrip(&State::Fixed(win(1_000_000, minute, now, 0, 5)));
        assert_eq!(
            pack(&State::Sliding(win(1_000_000, minute, now, 0, 5))),
            None
        );
        // A fixed window's prev is always 0; a state with another one (a crafted payload)
        // stays boxed rather than lose it.
        assert_eq!(pack(&State::Fixed(win(100, hour, start, 1, 1))), None);
        // Counts too wide for the payload at all: 27-bit counts take 54 bits > 53 (sliding),
        // 54-bit ones 54 bits (fixed).
        assert_eq!(pack(&State::Sliding(win(1 << 26, hour, 0, 0, 0))), None);
        assert_eq!(pack(&State::Fixed(win(1 << 53, hour, 0, 0, 0))), None);
        // 26-bit counts leave 1 bit of window index: 0 and 1 fit, 2 does not.
        roundtrip(&State::Sliding(win((1 << 26) - 1, hour, hour, 1, 2)));
        assert_eq!(
            pack(&State::Sliding(win((1 << 26) - 1, hour, 2 * hour, 1, 2))),
            None
        );
        assert!(pack(&State::Sliding(win(100, hour, start + 1, 1, 1))).is_none());
    }

    #[test]
    fn words_no_pack_produces_unpack_to_nothing() {
        // Tags 5-7 are unused; rule slots that were never filled are unknown.
        for tag in 5..8usize {
            assert_eq!(unpack((tag << 1) | 1), None);
        }
        assert_eq!(unpack((127 << 4) | (3 << 1) | 1), None);
        assert_eq!(unpack((127 << 4) | 1), None);
    }

    #[test]
    fn rule_table_interns_up_to_its_size() {
        let t: Rules<window::Params> = Rules::new();
        let p = |i: u64| window::Params::new(i + 1, 1000).unwrap();
        for i in 0..MAX_RULES as u64 {
            assert_eq!(t.intern(&p(i)), Some(i as usize));
            assert_eq!(t.intern(&p(i)), Some(i as usize), "the last one again");
        }
        // Full: a new rule gets no slot, known ones still do (first, last, any).
        assert_eq!(t.intern(&p(MAX_RULES as u64)), None);
        for i in [0, 127, 64, 0] {
            assert_eq!(t.intern(&p(i)), Some(i as usize));
            assert_eq!(t.get(i as usize), Some(p(i)));
        }
        assert_eq!(t.get(MAX_RULES), None);
        assert_eq!(t.len.load(Ordering::Relaxed), MAX_RULES);
    }

    #[test]
    fn rule_table_is_consistent_across_threads() {
        static T: Rules<window::Params> = Rules::new();
        let p = |i: u64| window::Params::new(i % 40 + 1, 60_000).unwrap();
        let got: Vec<Vec<usize>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4u64)
                .map(|k| {
                    s.spawn(move || (0..200).map(|i| T.intern(&p(i * 7 + k)).unwrap()).collect())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(T.len.load(Ordering::Relaxed), 40);
        for (k, idx) in got.iter().enumerate() {
            for (i, &at) in idx.iter().enumerate() {
                assert_eq!(T.get(at), Some(p(i as u64 * 7 + k as u64)));
            }
        }
    }

    fn any_state() -> impl Strategy<Value = State> {
        // Few distinct rules, so the process-wide tables never fill up: the tests here intern
        // at most 30 + 52 + 6 window rules (< MAX_RULES, slot 127 stays empty).
        let limits = prop::sample::select(vec![
            1u64,
            2,
            3,
            100,
            127,
            128,
            65_535,
            (1 << 26) - 1,
            1 << 26,
            u64::MAX,
        ]);
        let windows = prop::sample::select(vec![1u64, 7, 3_600_000]);
        let count = prop_oneof![0u64..200, any::<u64>(), (0u32..64).prop_map(|b| 1u64 << b)];
        let index = prop_oneof![0u64..1 << 20, 0u64..1 << 45];
        let window = (limits, windows, index, any::<bool>(), count.clone(), count).prop_map(
            |(limit, window_ms, index, aligned, prev, cur)| {
                let start_ms = (index.saturating_mul(window_ms))
                    .saturating_add(u64::from(!aligned && window_ms > 1));
                win(limit, window_ms, start_ms, prev, cur)
            },
        );
        let rules = prop::sample::select(vec![
            (10u64, 1u64, 3_600_000u64),
            (10, 4, 1000),
            (3, 3, 1000),
        ]);
        let tat = prop_oneof![any::<u64>(), (0u64..1 << 53).prop_map(|us| us * 1000)];
        let bucket = (rules, tat, prop_oneof![Just(0u64), 0u64..3]).prop_map(
            |((burst, count, period_ms), ns, frac)| Bucket {
                params: gcra::Params::new(burst, count, period_ms, gcra::GCRA_NAMES).unwrap(),
                tat: gcra::Tat { ns, frac },
            },
        );
        prop_oneof![
            window.clone().prop_map(State::Sliding),
            window.prop_map(State::Fixed),
            bucket.clone().prop_map(State::Gcra),
            bucket.clone().prop_map(State::TokenBucket),
            bucket.prop_map(State::Queue),
        ]
    }

    proptest! {
        /// Packing is exact or refused.
        #[test]
        fn pack_is_exact_or_refused(s in any_state()) {
            if let Some(w) = pack(&s) {
                prop_assert_eq!(w & 1, 1);
                prop_assert_eq!(unpack(w), Some(s));
            }
        }

        /// Packing into a pair is exact or refused; every state of the GCRA family whose
        /// fraction fits and every window whose counts fit its limit's width take a pair
        /// when they do not take the word.
        #[test]
        fn pair_is_exact_or_refused(s in any_state()) {
            let pair = pack_pair(&s);
            if let Some(p) = pair {
                prop_assert_eq!(unpack_pair(p), Some(s.clone()));
            }
            let fits_pair = match &s {
                State::Sliding(w) | State::Fixed(w) => {
                    let b = count_bits(&w.params);
                    2 * b <= PAYLOAD_BITS && fits(w.counters.prev, b) && fits(w.counters.cur, b)
                }
                State::Gcra(b) | State::TokenBucket(b) | State::Queue(b) => {
                    b.tat.frac < b.params.count
                }
                _ => false,
            };
            prop_assert_eq!(pair.is_some(), fits_pair, "{:?}", s);
        }

        /// Window states a command writes (aligned, counts within a limit < 2^k, a window
        /// index within what the counts leave) are always packed.
        #[test]
        fn ordinary_windows_pack(
            k in 1u32..=26, window_ms in prop::sample::select(vec![1u64, 60_000]),
            index_frac in 0.0f64..1.0, prev_frac in 0.0f64..=1.0, cur_frac in 0.0f64..=1.0,
            fixed in any::<bool>(),
        ) {
            let limit = (1u64 << k) - 1;
            // Up to the largest start a state may have (MAX_TIME_MS).
            let fields = if fixed { 1 } else { 2 };
            let most = (1u64 << (53 - fields * k)).min(crate::algo::MAX_TIME_MS / window_ms + 1);
            let index = (most as f64 * index_frac) as u64;
            // The algorithm always leaves a fixed window's prev at 0.
            let prev = if fixed { 0 } else { (limit as f64 * prev_frac) as u64 };
            let w = win(limit, window_ms, index * window_ms, prev, (limit as f64 * cur_frac) as u64);
            let s = if fixed { State::Fixed(w) } else { State::Sliding(w) };
            let p = pack(&s);
            prop_assert!(p.is_some(), "{:?}", s);
            prop_assert_eq!(p.and_then(unpack), Some(s));
        }
    }
}
