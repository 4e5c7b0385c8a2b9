//! Compact storage for the sliding log's timestamps: an ascending sequence of µs, kept in a
//! ring buffer in one heap block, 4 bytes per entry while the entries span at most
//! `u32::MAX` µs (about 71.6 min), 8 bytes per entry beyond.
//!
//! Block layout (`u32` words):
//!
//! ```text
//! [mode, base_lo, base_hi, ring ...]
//! ```
//!
//! - narrow (mode 0): each ring slot is one word, the entry's offset from `base`;
//! - wide (mode 1): each ring slot is two words, the entry itself (low word first);
//!   `base` is unused.
//!
//! The first entries of an empty store take exactly the room they need (a key may never
//! need more); the block then doubles when full. A narrow store whose next entry lies more
//! than `u32::MAX` µs past `base` is rebased on its oldest entry (O(n)) when the entries
//! would then still leave [`HEADROOM`] µs to grow into, and otherwise turns wide; a wide
//! store turns narrow again, on its next push, once its span leaves that headroom. A rebase
//! or a return to narrow leaves [`HEADROOM`] µs before the offsets overflow again, so under
//! a clock that moves forward these O(n) rewrites come at most about twice per
//! [`HEADROOM`] µs (a clock jumping back and forth by more than 71 min can cause one per
//! push).
//!
//! Nothing here panics: when a block cannot be allocated (or for more than `u32::MAX`
//! entries) a push appends nothing (it still clamps) and reports `false`.

/// Words before the ring: mode, base low, base high.
const HEADER: usize = 3;
const NARROW: u32 = 0;
const WIDE: u32 = 1;
/// Room (µs) a rebase or a return to narrow must leave before the next offset overflow.
const HEADROOM: u64 = 1 << 28;
/// Largest span (newest - oldest, µs) a store is rebased or narrowed at.
const NARROW_SPAN: u64 = u32::MAX as u64 - HEADROOM;

/// Ascending µs timestamps (see the module documentation).
#[derive(Clone, Default)]
pub struct Stamps {
    /// Ring slot of the oldest entry.
    head: u32,
    /// Number of entries.
    len: u32,
    /// `[mode, base_lo, base_hi, ring ...]`, or empty before the first entry.
    buf: Box<[u32]>,
}

impl Stamps {
    /// A store holding `values` (which must be ascending), in exactly the room they need:
    /// narrow when their span fits an offset. None if they are not ascending or the block
    /// cannot be allocated.
    pub fn from_sorted(values: &[u64]) -> Option<Stamps> {
        if values.windows(2).any(|w| w.first() > w.get(1)) {
            return None;
        }
        let mut s = Stamps::default();
        let (Some(&first), Some(&last)) = (values.first(), values.last()) else {
            return Some(s);
        };
        let wide = last - first > u64::from(u32::MAX);
        s.buf = block(wide, first, values.len())?;
        s.len = u32::try_from(values.len()).ok()?;
        for (i, &v) in values.iter().enumerate() {
            if !s.set(i, v) {
                return None;
            }
        }
        Some(s)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th oldest entry.
    pub fn get(&self, i: usize) -> Option<u64> {
        let slot = self.slot(i)?;
        if self.is_wide() {
            let at = HEADER + 2 * slot;
            let lo = *self.buf.get(at)?;
            let hi = *self.buf.get(at + 1)?;
            Some(u64::from(lo) | (u64::from(hi) << 32))
        } else {
            let off = *self.buf.get(HEADER + slot)?;
            Some(self.base().saturating_add(u64::from(off)))
        }
    }

    /// The oldest entry.
    pub fn front(&self) -> Option<u64> {
        self.get(0)
    }

    /// The newest entry.
    pub fn back(&self) -> Option<u64> {
        self.get(self.len().checked_sub(1)?)
    }

    /// The entries, oldest first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or(0))
    }

    /// The number of leading entries for which `pred` holds (`pred` must hold for a prefix
    /// of the entries and fail for the rest), by binary search.
    pub fn partition_point(&self, mut pred: impl FnMut(u64) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid).is_some_and(&mut pred) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Bytes of the heap block (for MEMORY USAGE).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.buf)
    }

    /// Drops the `k` oldest entries (all of them if there are fewer).
    pub(crate) fn drain_front(&mut self, k: usize) {
        let k = k.min(self.len());
        let cap = self.cap();
        if k == 0 || cap == 0 {
            return;
        }
        let head = (self.head as usize + k) % cap;
        self.head = u32::try_from(head).unwrap_or(0);
        self.len = u32::try_from(self.len() - k).unwrap_or(0);
        if self.len == 0 {
            self.head = 0;
        }
    }

    /// Drops the `k` newest entries (all of them if there are fewer).
    pub(crate) fn truncate_back(&mut self, k: usize) {
        let k = k.min(self.len());
        self.len = u32::try_from(self.len() - k).unwrap_or(0);
        if self.len == 0 {
            self.head = 0;
        }
    }

    /// Stamps every entry later than `now` (a clock that went back) `now`; true if any was.
    pub(crate) fn clamp(&mut self, now: u64) -> bool {
        if self.back().is_none_or(|b| b <= now) {
            return false;
        }
        if !self.is_wide() && now < self.base() {
            // Every entry is at or after the base, so all of them become `now`.
            self.set_base(now);
            for i in 0..self.len() {
                self.set(i, now);
            }
            return true;
        }
        for i in (0..self.len()).rev() {
            if self.get(i).is_none_or(|e| e <= now) {
                break;
            }
            self.set(i, now);
        }
        true
    }

    /// Appends `n` entries stamped `now` (entries later than `now` are first clamped to it,
    /// so the store stays ascending). False, with nothing appended, if the room for them
    /// cannot be had.
    pub(crate) fn push(&mut self, now: u64, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        self.clamp(now);
        let Some(need) = self
            .len()
            .checked_add(n)
            .filter(|&m| m <= u32::MAX as usize)
        else {
            return false;
        };
        match self.front() {
            None => {
                // Empty: start over narrow on `now`, in the block there is if it is big
                // enough, else in exactly the room these entries need.
                self.head = 0;
                if self.buf.len() >= HEADER + n {
                    if let Some(mode) = self.buf.first_mut() {
                        *mode = NARROW;
                    }
                    self.set_base(now);
                } else {
                    let Some(buf) = block(false, now, n) else {
                        return false;
                    };
                    self.buf = buf;
                }
            }
            Some(front) => {
                let span = now.saturating_sub(front);
                if self.is_wide() {
                    if span <= NARROW_SPAN && !self.rebuild(false, front, self.cap().max(need)) {
                        return false;
                    }
                } else if now.saturating_sub(self.base()) > u64::from(u32::MAX) {
                    let ok = if span <= NARROW_SPAN {
                        self.rebase(front)
                    } else {
                        self.rebuild(true, 0, self.cap().max(need))
                    };
                    if !ok {
                        return false;
                    }
                }
                if need > self.cap() {
                    let width = if self.is_wide() { 2 } else { 1 };
                    let grown = self.buf.len().saturating_mul(2).saturating_sub(HEADER) / width;
                    if !self.rebuild(self.is_wide(), self.base(), grown.max(need)) {
                        return false;
                    }
                }
            }
        }
        let first = self.len();
        self.len = u32::try_from(need).unwrap_or(self.len);
        for i in first..need {
            self.set(i, now);
        }
        true
    }

    fn is_wide(&self) -> bool {
        self.buf.first() == Some(&WIDE)
    }

    fn base(&self) -> u64 {
        let lo = self.buf.get(1).copied().unwrap_or(0);
        let hi = self.buf.get(2).copied().unwrap_or(0);
        u64::from(lo) | (u64::from(hi) << 32)
    }

    fn set_base(&mut self, base: u64) {
        if let Some(h) = self.buf.get_mut(1..HEADER) {
            h.copy_from_slice(&[base as u32, (base >> 32) as u32]);
        }
    }

    /// Entries the ring holds.
    fn cap(&self) -> usize {
        let words = self.buf.len().saturating_sub(HEADER);
        if self.is_wide() {
            words / 2
        } else {
            words
        }
    }

    /// The ring slot of the `i`-th oldest entry.
    fn slot(&self, i: usize) -> Option<usize> {
        if i >= self.len() {
            return None;
        }
        let cap = self.cap();
        let at = (self.head as usize).checked_add(i)?;
        Some(if at >= cap { at - cap } else { at })
    }

    /// Writes the `i`-th oldest entry (`i < len`); false if it does not fit the mode.
    fn set(&mut self, i: usize, v: u64) -> bool {
        let Some(slot) = self.slot(i) else {
            return false;
        };
        if self.is_wide() {
            let at = HEADER + 2 * slot;
            match self.buf.get_mut(at..at + 2) {
                Some(w) => w.copy_from_slice(&[v as u32, (v >> 32) as u32]),
                None => return false,
            }
        } else {
            let Some(off) = v
                .checked_sub(self.base())
                .and_then(|d| u32::try_from(d).ok())
            else {
                return false;
            };
            match self.buf.get_mut(HEADER + slot) {
                Some(w) => *w = off,
                None => return false,
            }
        }
        true
    }

    /// Moves a narrow store's base up to `base` (at most its oldest entry), in place.
    fn rebase(&mut self, base: u64) -> bool {
        let Some(delta) = base
            .checked_sub(self.base())
            .and_then(|d| u32::try_from(d).ok())
        else {
            return false;
        };
        if self.front().is_none_or(|f| f < base) {
            return false;
        }
        for i in 0..self.len() {
            if let Some(w) = self.slot(i).and_then(|s| self.buf.get_mut(HEADER + s)) {
                *w = w.saturating_sub(delta);
            }
        }
        self.set_base(base);
        true
    }

    /// Copies the entries into a new block of the given mode, base and capacity (at least
    /// `len`), oldest first; false, with nothing changed, if that fails.
    fn rebuild(&mut self, wide: bool, base: u64, cap: usize) -> bool {
        let Some(buf) = block(wide, base, cap.max(self.len())) else {
            return false;
        };
        let mut next = Stamps {
            head: 0,
            len: self.len,
            buf,
        };
        for (i, v) in self.iter().enumerate() {
            if !next.set(i, v) {
                return false;
            }
        }
        *self = next;
        true
    }
}

/// A zeroed block of the given mode and base for `cap` entries, or None if too large.
fn block(wide: bool, base: u64, cap: usize) -> Option<Box<[u32]>> {
    let words = cap
        .checked_mul(if wide { 2 } else { 1 })?
        .checked_add(HEADER)?;
    let mut v: Vec<u32> = Vec::new();
    v.try_reserve_exact(words).ok()?;
    v.extend_from_slice(&[
        if wide { WIDE } else { NARROW },
        base as u32,
        (base >> 32) as u32,
    ]);
    v.resize(words, 0);
    Some(v.into_boxed_slice())
}

impl PartialEq for Stamps {
    /// Equal when they hold the same entries, however stored.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Stamps {}

impl std::fmt::Debug for Stamps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    const T0: u64 = 1_700_000_040_000_000;
    const MIN_US: u64 = 60_000_000;

    fn values(s: &Stamps) -> Vec<u64> {
        s.iter().collect()
    }

    #[test]
    fn first_entries_take_exact_room_then_double() {
        let mut s = Stamps::default();
        assert_eq!(s.heap_bytes(), 0);
        assert!(s.push(T0, 1));
        assert_eq!(s.heap_bytes(), 16);
        let mut sizes = vec![];
        for i in 1..100 {
            assert!(s.push(T0 + i, 1));
            if sizes.last() != Some(&s.heap_bytes()) {
                sizes.push(s.heap_bytes());
            }
        }
        assert_eq!(sizes, [32, 64, 128, 256, 512]);
        assert_eq!(values(&s), (0..100).map(|i| T0 + i).collect::<Vec<_>>());
        assert!(!s.is_wide());
    }

    #[test]
    fn wide_beyond_an_offset_then_narrow_again() {
        let mut s = Stamps::default();
        s.push(T0, 2);
        s.push(T0 + 100 * MIN_US, 1); // 100 min: no offset from T0 holds it
        assert!(s.is_wide());
        assert_eq!(values(&s), [T0, T0, T0 + 100 * MIN_US]);
        assert_eq!(s.heap_bytes(), 4 * (HEADER + 2 * 3));
        s.push(T0 + 101 * MIN_US, 3);
        assert!(s.is_wide());
        assert_eq!(s.len(), 6);
        // The oldest leave: the span fits again, and the next push narrows.
        s.drain_front(2);
        assert!(s.is_wide());
        s.push(T0 + 102 * MIN_US, 1);
        assert!(!s.is_wide());
        assert_eq!(s.base(), T0 + 100 * MIN_US);
        assert_eq!(
            values(&s),
            [100, 101, 101, 101, 102].map(|m| T0 + m * MIN_US)
        );
        // A span of more than NARROW_SPAN but less than 2^32 µs stays wide.
        let mut s = Stamps::from_sorted(&[T0]).unwrap();
        s.push(T0 + 90 * MIN_US, 1);
        assert!(s.is_wide());
        s.drain_front(1);
        s.push(T0 + 90 * MIN_US + NARROW_SPAN + 1, 1);
        assert!(s.is_wide());
        s.push(T0 + 90 * MIN_US + NARROW_SPAN, 1); // clamped: the store stays ascending
        assert_eq!(
            values(&s),
            [
                T0 + 90 * MIN_US,
                T0 + 90 * MIN_US + NARROW_SPAN,
                T0 + 90 * MIN_US + NARROW_SPAN
            ]
        );
    }

    #[test]
    fn rebases_when_the_span_still_fits() {
        let mut s = Stamps::default();
        s.push(T0, 1);
        s.push(T0 + 50 * MIN_US, 2);
        let bytes = s.heap_bytes();
        s.drain_front(1);
        s.push(T0 + 75 * MIN_US, 1); // 75 min past the base, 25 min past the oldest
        assert!(!s.is_wide());
        assert_eq!(s.base(), T0 + 50 * MIN_US);
        assert_eq!(values(&s), [50, 50, 75].map(|m| T0 + m * MIN_US));
        assert_eq!(s.heap_bytes(), bytes);
        // Offsets are exact up to u32::MAX past the base.
        s.push(T0 + 50 * MIN_US + u64::from(u32::MAX), 1);
        assert!(!s.is_wide());
        assert_eq!(s.base(), T0 + 50 * MIN_US);
        assert_eq!(s.back(), Some(T0 + 50 * MIN_US + u64::from(u32::MAX)));
    }

    #[test]
    fn clock_going_back_clamps_to_now() {
        let mut s = Stamps::default();
        s.push(T0, 2);
        s.push(T0 + 5_000, 2);
        assert!(!s.clamp(T0 + 5_000));
        assert!(s.clamp(T0 + 1_000));
        assert_eq!(values(&s), [T0, T0, T0 + 1_000, T0 + 1_000]);
        // Before the base: every entry becomes now.
        assert!(s.clamp(T0 - 7));
        assert_eq!(values(&s), [T0 - 7; 4]);
        assert!(!s.is_wide());
        s.push(T0 - 10, 1);
        assert_eq!(values(&s), [T0 - 10; 5]);
        // Wide.
        let mut s = Stamps::from_sorted(&[T0, T0 + 100 * MIN_US]).unwrap();
        assert!(s.is_wide());
        assert!(s.clamp(T0 + 1));
        assert_eq!(values(&s), [T0, T0 + 1]);
        assert!(s.clamp(0));
        assert_eq!(values(&s), [0, 0]);
    }

    #[test]
    fn wraps_around_the_ring() {
        let mut s = Stamps::default();
        s.push(T0, 5);
        let bytes = s.heap_bytes();
        for i in 1..20 {
            s.drain_front(2);
            s.push(T0 + i, 2);
            assert_eq!(s.heap_bytes(), bytes);
        }
        assert_eq!(values(&s), [T0 + 17, T0 + 18, T0 + 18, T0 + 19, T0 + 19]);
        assert_eq!(s.len(), 5);
        assert_eq!(s.partition_point(|e| e < T0 + 19), 3);
    }

    #[test]
    fn from_sorted_refuses_unordered() {
        assert!(Stamps::from_sorted(&[2, 1]).is_none());
        assert_eq!(Stamps::from_sorted(&[]).unwrap(), Stamps::default());
        let s = Stamps::from_sorted(&[0, u64::MAX]).unwrap();
        assert_eq!(values(&s), [0, u64::MAX]);
        let s = Stamps::from_sorted(&[u64::MAX - 3, u64::MAX]).unwrap();
        assert!(!s.is_wide());
        assert_eq!(values(&s), [u64::MAX - 3, u64::MAX]);
    }

    /// One step of the model check: drop `drop` oldest, clamp, or push `n` at a time step.
    #[derive(Debug, Clone)]
    enum Op {
        Push(i64, usize),
        Drain(usize),
        Clamp(i64),
    }

    fn step() -> impl Strategy<Value = i64> {
        prop_oneof![
            0i64..1_000,
            0i64..4_000_000_000,
            4_000_000_000i64..9_000_000_000,
            -5_000_000_000i64..5_000_000_000,
            Just(u32::MAX as i64),
            Just(u32::MAX as i64 + 1),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_plain_deque(
            ops in prop::collection::vec(prop_oneof![
                (step(), 1usize..6).prop_map(|(d, n)| Op::Push(d, n)),
                (0usize..8).prop_map(Op::Drain),
                step().prop_map(Op::Clamp),
            ], 1..120),
        ) {
            let mut s = Stamps::default();
            let mut m: VecDeque<u64> = VecDeque::new();
            let mut now = T0 as i64;
            for op in ops {
                match op {
                    Op::Push(d, n) => {
                        now += d;
                        let t = now as u64;
                        for e in m.iter_mut() {
                            *e = (*e).min(t);
                        }
                        m.extend(std::iter::repeat_n(t, n));
                        prop_assert!(s.push(t, n));
                    }
                    Op::Drain(k) => {
                        m.drain(..k.min(m.len()));
                        s.drain_front(k);
                    }
                    Op::Clamp(d) => {
                        let t = (now + d) as u64;
                        let changed = m.iter().any(|&e| e > t);
                        for e in m.iter_mut() {
                            *e = (*e).min(t);
                        }
                        prop_assert_eq!(s.clamp(t), changed);
                    }
                }
                prop_assert_eq!(s.len(), m.len());
                prop_assert_eq!(values(&s), m.iter().copied().collect::<Vec<_>>());
                prop_assert_eq!(s.front(), m.front().copied());
                prop_assert_eq!(s.back(), m.back().copied());
                let span = m.back().zip(m.front()).map_or(0, |(b, f)| b - f);
                if s.heap_bytes() == 0 {
                    prop_assert!(m.is_empty());
                } else if s.is_wide() {
                    prop_assert_eq!(s.heap_bytes(), 4 * (HEADER + 2 * s.cap()));
                } else {
                    // Narrow: every entry is an offset of at most u32::MAX from the base.
                    prop_assert!(span <= u64::from(u32::MAX));
                    prop_assert!(m.front().is_none_or(|&f| f >= s.base()));
                    prop_assert!(m.back().is_none_or(|&b| b - s.base() <= u64::from(u32::MAX)));
                    prop_assert_eq!(s.heap_bytes(), 4 * (HEADER + s.cap()));
                }
                let cut = m.get(m.len() / 2).copied().unwrap_or(0);
                prop_assert_eq!(s.partition_point(|e| e < cut), m.partition_point(|&e| e < cut));
            }
            prop_assert_eq!(Stamps::from_sorted(&values(&s)).unwrap(), s);
        }
    }
}
