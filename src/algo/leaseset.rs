//! The leases of one key as a store indexed by token and ordered by expiry, so that every
//! question RL.ACQUIRE, RL.RELEASE and RL.RENEW ask costs O(log n), never O(n).
//!
//! Two forms, like Redis's sorted sets (listpack, then skiplist):
//! - small (at most [`SMALL_MAX`] leases, every token's seq below 2^19): one vector of
//!   16-byte entries `[expiry_us, ms << 19 | seq]` in expiry order (then token), as the
//!   large form's tree: live count, earliest and latest live expiry are a binary search or
//!   an end of the vector, and a purge drops a prefix; so a grant on a full key, which
//!   purges one lease and appends one, costs the same at 10 leases as at 100. Finding a
//!   token (RELEASE, RENEW) is a binary search when expiry and token orders agree (every
//!   lease of the same length), else a scan: at most [`SMALL_MAX`] entries, a bounded
//!   constant. [`LeaseSet::iter`] still yields token order (a sort of at most
//!   [`SMALL_MAX`] entries: encodings, not the hot path).
//! - large: an arena of treap nodes keyed by `(expiry_us, token, node)` with subtree
//!   sizes (an order-statistic tree: live count, earliest and latest live expiry are one
//!   walk from the root, whatever the number of expired leases not yet purged), and the
//!   node indexes in token order (`by_token`, binary searched). A lease removed from the
//!   tree leaves its node in `by_token` as a tombstone (it keeps its token, so the order
//!   holds); tombstones are compacted once they outnumber the leases, so each costs
//!   amortised O(1). Node priorities are a hash of the token (deterministic; tokens are
//!   clock times, not chosen by clients), so the tree's depth is O(log n) expected.
//!
//! Bounds per call, n leases held:
//! - reads (live count, earliest/latest live expiry, find by token): small O(1) (at most
//!   [`SMALL_MAX`]), large O(log n): no read is O(expired but unpurged leases), so a
//!   refused or dry-run RL.ACQUIRE, which writes nothing, costs the same as any other.
//! - insert, remove, change of expiry: O(log n) (small: a move of at most [`SMALL_MAX`]
//!   entries); the change of form either way costs O(SMALL_MAX log SMALL_MAX) once per
//!   at least `SMALL_MAX - SMALL_MIN` operations.
//! - purge of the k leases expired: O(log n + k), each lease purged once: amortised O(1)
//!   per insert.
//!
//! Memory: small 16 bytes per lease, in a block grown one allocator size class at a time
//! (10 leases: 160 bytes); large 44 bytes per lease (a 40-byte node and a 4-byte index),
//! plus room the vectors keep for growth and tombstones.
//!
//! Tokens are unique in every state the algorithm writes; a decoded state with repeated
//! tokens is kept as it is (the node index breaks ties) and never makes a call panic.

use super::token::{Held, Lease, Token};

/// Most leases the small form holds (Redis: `zset-max-listpack-entries` 128).
pub const SMALL_MAX: usize = 128;
/// A large store down to this many leases goes back to the small form.
const SMALL_MIN: usize = 32;
/// Bits of a token's seq in a small entry (its ms takes the other 45: `MAX_TOKEN_MS`
/// < 2^45).
const SEQ_BITS: u32 = 19;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// No node.
const NIL: u32 = u32::MAX;

/// The packed token of a small entry, if it fits.
#[inline]
fn pack_token(t: Token) -> Option<u64> {
    (t.seq <= SEQ_MASK && t.ms >> (64 - SEQ_BITS) == 0).then_some((t.ms << SEQ_BITS) | t.seq)
}

#[inline]
fn unpack(e: &[u64; 2]) -> Lease {
    let [expiry_us, t] = *e;
    Lease {
        expiry_us,
        token: Token {
            ms: t >> SEQ_BITS,
            seq: t & SEQ_MASK,
        },
    }
}

/// A small store's capacity for `n` entries: the next allocator size class (jemalloc's
/// classes are 4 per doubling above 64 bytes), so the block grows by about a quarter at a
/// time (amortised O(1) per insert) and keeps no room it would not get anyway.
fn small_capacity(n: usize) -> usize {
    if n <= 8 {
        return n.max(1);
    }
    let step = (n - 1).next_power_of_two() / 8;
    n.div_ceil(step) * step
}

/// The leases of one key (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct LeaseSet(Repr);

#[derive(Debug, Clone)]
enum Repr {
    /// Entries `[expiry_us, packed token]` in expiry order, then token order.
    Small(Vec<[u64; 2]>),
    Large(Box<Large>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Small(Vec::new())
    }
}

impl PartialEq for LeaseSet {
    /// The same leases, whatever the form.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for LeaseSet {}

/// The leases in token order.
pub struct Iter<'a>(IterRepr<'a>);

enum IterRepr<'a> {
    Small(std::vec::IntoIter<[u64; 2]>),
    Large(&'a Large, std::slice::Iter<'a, u32>),
}

impl Iterator for Iter<'_> {
    type Item = Lease;

    fn next(&mut self) -> Option<Lease> {
        match &mut self.0 {
            IterRepr::Small(it) => it.next().as_ref().map(unpack),
            IterRepr::Large(l, it) => it.find_map(|&i| l.live_node(i).map(Node::lease)),
        }
    }
}

impl LeaseSet {
    /// A store holding `leases` (any order; decoded states); `None` only if the room for
    /// them cannot be reserved.
    pub fn from_leases(mut leases: Vec<Lease>) -> Option<LeaseSet> {
        leases.sort_by_key(|l| l.token);
        let small: Option<Vec<[u64; 2]>> = if leases.len() <= SMALL_MAX {
            leases
                .iter()
                .map(|l| pack_token(l.token).map(|t| [l.expiry_us, t]))
                .collect()
        } else {
            None
        };
        if let Some(mut v) = small {
            v.sort_unstable();
            return Some(LeaseSet(Repr::Small(v)));
        }
        let mut large = Large::default();
        large.nodes.try_reserve_exact(leases.len()).ok()?;
        large.by_token.try_reserve_exact(leases.len()).ok()?;
        for l in leases {
            large.insert(l);
        }
        Some(LeaseSet(Repr::Large(Box::new(large))))
    }

    /// Leases held, including expired ones not yet purged.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Small(v) => v.len(),
            Repr::Large(l) => l.size(l.root) as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The leases in token order.
    pub fn iter(&self) -> Iter<'_> {
        match &self.0 {
            Repr::Small(v) => {
                let mut by_token = v.clone();
                by_token.sort_unstable_by_key(|e| (e[1], e[0]));
                Iter(IterRepr::Small(by_token.into_iter()))
            }
            Repr::Large(l) => Iter(IterRepr::Large(l, l.by_token.iter())),
        }
    }

    /// A large store down to [`SMALL_MIN`] leases goes back to the small form (when its
    /// tokens fit).
    fn maybe_shrink(&mut self) {
        let l = match &mut self.0 {
            Repr::Small(v) => {
                // Room for at most twice the entries held (amortised: halving takes as many
                // removals as the entries left).
                if v.len() < v.capacity() / 2 {
                    v.shrink_to(small_capacity(v.len()));
                }
                return;
            }
            Repr::Large(l) => l,
        };
        if l.size(l.root) as usize > SMALL_MIN {
            return;
        }
        let small: Option<Vec<[u64; 2]>> = l
            .by_token
            .iter()
            .filter_map(|&i| l.live_node(i))
            .map(|n| pack_token(n.token).map(|t| [n.expiry_us, t]))
            .collect();
        if let Some(mut v) = small {
            v.sort_unstable();
            self.0 = Repr::Small(v);
        }
    }

    /// Whether the store is in its large form (tests).
    #[cfg(test)]
    pub fn is_large(&self) -> bool {
        matches!(self.0, Repr::Large(_))
    }

    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            Repr::Small(v) => v.capacity() * std::mem::size_of::<[u64; 2]>(),
            Repr::Large(l) => {
                std::mem::size_of::<Large>()
                    + l.nodes.capacity() * std::mem::size_of::<Node>()
                    + l.by_token.capacity() * std::mem::size_of::<u32>()
            }
        }
    }
}

impl Held for LeaseSet {
    fn count_live(&self, at_us: u64) -> u64 {
        match &self.0 {
            Repr::Small(v) => (v.len() - small_expired(v, at_us)) as u64,
            Repr::Large(l) => l.count_after(at_us),
        }
    }

    fn first_live(&self, at_us: u64) -> Option<u64> {
        match &self.0 {
            Repr::Small(v) => v.get(small_expired(v, at_us)).map(|e| e[0]),
            Repr::Large(l) => l.first_after(at_us),
        }
    }

    fn last_expiry(&self) -> Option<u64> {
        match &self.0 {
            Repr::Small(v) => v.last().map(|e| e[0]),
            Repr::Large(l) => l.last(),
        }
    }

    fn live_expiry(&self, token: Token, at_us: u64) -> Option<u64> {
        let e = match &self.0 {
            Repr::Small(v) => small_find(v, token).and_then(|i| v.get(i)).map(|e| e[0]),
            Repr::Large(l) => l
                .find(token)
                .and_then(|i| l.live_node(i))
                .map(|n| n.expiry_us),
        }?;
        (e > at_us).then_some(e)
    }

    fn insert(&mut self, lease: Lease) {
        if let Repr::Small(v) = &mut self.0 {
            if let (Some(t), true) = (pack_token(lease.token), v.len() < SMALL_MAX) {
                let entry = [lease.expiry_us, t];
                let at = v.partition_point(|e| *e <= entry);
                if v.len() == v.capacity() {
                    v.reserve_exact(small_capacity(v.len() + 1) - v.len());
                }
                v.insert(at, entry);
                return;
            }
            let mut large = Large::default();
            for l in v.iter().map(unpack) {
                large.insert(l);
            }
            self.0 = Repr::Large(Box::new(large));
        }
        if let Repr::Large(l) = &mut self.0 {
            l.insert(lease);
        }
    }

    fn remove(&mut self, token: Token) -> bool {
        let removed = match &mut self.0 {
            Repr::Small(v) => match small_find(v, token) {
                Some(i) => {
                    v.remove(i);
                    true
                }
                None => false,
            },
            Repr::Large(l) => l.remove(token),
        };
        self.maybe_shrink();
        removed
    }

    fn set_expiry(&mut self, token: Token, expiry_us: u64) -> bool {
        match &mut self.0 {
            Repr::Small(v) => match small_find(v, token) {
                Some(i) => {
                    // Moved to its place in expiry order (within the vector: no allocation).
                    let entry = [expiry_us, v[i][1]];
                    let to = v.partition_point(|e| *e < entry);
                    if to > i {
                        v[i..to].rotate_left(1);
                        v[to - 1] = entry;
                    } else {
                        v[to..=i].rotate_right(1);
                        v[to] = entry;
                    }
                    true
                }
                None => false,
            },
            Repr::Large(l) => l.set_expiry(token, expiry_us),
        }
    }

    fn purge(&mut self, at_us: u64) {
        match &mut self.0 {
            Repr::Small(v) => {
                let k = small_expired(v, at_us);
                v.drain(..k);
            }
            Repr::Large(l) => l.purge(at_us),
        }
        self.maybe_shrink();
    }
}

/// How many small entries expired at `at_us` (they lead the vector).
#[inline]
fn small_expired(v: &[[u64; 2]], at_us: u64) -> usize {
    v.partition_point(|e| e[0] <= at_us)
}

/// The index of the small entry with `token`: a binary search by token (right whenever
/// the tokens are in order too, as when every lease has the same length), else a scan.
fn small_find(v: &[[u64; 2]], token: Token) -> Option<usize> {
    let t = pack_token(token)?;
    match v.binary_search_by_key(&t, |e| e[1]) {
        Ok(i) => Some(i),
        Err(_) => v.iter().position(|e| e[1] == t),
    }
}

/// A lease in the large store's tree; `size` 0 once out of it (a tombstone or free).
#[derive(Debug, Clone)]
struct Node {
    expiry_us: u64,
    token: Token,
    l: u32,
    r: u32,
    size: u32,
    prio: u32,
}

impl Node {
    fn lease(&self) -> Lease {
        Lease {
            expiry_us: self.expiry_us,
            token: self.token,
        }
    }
}

/// The tree's order: expiry, then token, then node index (unique even for repeated
/// tokens).
type Key = (u64, Token, u32);

/// A treap priority: the token hashed with keys drawn at random once per process. Only the
/// tree's shape depends on it, never a reply or a stored byte; a key of the process's own
/// makes the shape unpredictable, so not even a crafted RESTORE payload (which chooses
/// every token and expiry) can line the priorities up with the expiries and make the
/// tree a deep path.
fn prio(t: Token) -> u32 {
    use std::hash::BuildHasher;
    static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
    KEYS.get_or_init(std::hash::RandomState::new)
        .hash_one((t.ms, t.seq)) as u32
}

/// The large form (see the module documentation).
#[derive(Debug, Clone)]
struct Large {
    nodes: Vec<Node>,
    /// Node indexes in token order: the tree's leases and tombstones.
    by_token: Vec<u32>,
    root: u32,
    /// Free nodes, chained through `l`.
    free: u32,
    /// Tombstones in `by_token`.
    dead: usize,
}

impl Default for Large {
    fn default() -> Self {
        Large {
            nodes: Vec::new(),
            by_token: Vec::new(),
            root: NIL,
            free: NIL,
            dead: 0,
        }
    }
}

impl Large {
    #[inline]
    fn node(&self, t: u32) -> Option<&Node> {
        self.nodes.get(t as usize)
    }

    #[inline]
    fn live_node(&self, t: u32) -> Option<&Node> {
        self.node(t).filter(|n| n.size > 0)
    }

    #[inline]
    fn size(&self, t: u32) -> u32 {
        self.node(t).map_or(0, |n| n.size)
    }

    fn key(&self, t: u32) -> Option<Key> {
        self.node(t).map(|n| (n.expiry_us, n.token, t))
    }

    /// Sets `t`'s children and recomputes its size.
    fn link(&mut self, t: u32, l: u32, r: u32) {
        let size = 1 + self.size(l) + self.size(r);
        if let Some(n) = self.nodes.get_mut(t as usize) {
            (n.l, n.r, n.size) = (l, r, size);
        }
    }

    /// `t`'s left child (`left`) or its right one.
    fn child(&self, t: u32, left: bool) -> u32 {
        self.node(t).map_or(NIL, |n| if left { n.l } else { n.r })
    }

    /// Replaces `t`'s left child (`left`) or its right one by `c`; returns `t`.
    fn set_child(&mut self, t: u32, left: bool, c: u32) -> u32 {
        let (l, r) = (self.child(t, true), self.child(t, false));
        if left {
            self.link(t, c, r);
        } else {
            self.link(t, l, c);
        }
        t
    }

    /// Splits the subtree `t` into the keys below `key` and the others.
    fn split(&mut self, t: u32, key: Key) -> (u32, u32) {
        let (Some(k), Some(n)) = (self.key(t), self.node(t)) else {
            return (NIL, NIL);
        };
        let (l, r) = (n.l, n.r);
        if k < key {
            let (a, b) = self.split(r, key);
            self.link(t, l, a);
            (t, b)
        } else {
            let (a, b) = self.split(l, key);
            self.link(t, b, r);
            (a, t)
        }
    }

    /// Joins two subtrees, every key of `a` below every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        let (Some(x), Some(y)) = (self.node(a), self.node(b)) else {
            return if self.node(a).is_some() { a } else { b };
        };
        let (xl, xr, xp, yl, yr, yp) = (x.l, x.r, x.prio, y.l, y.r, y.prio);
        if xp > yp {
            let m = self.merge(xr, b);
            self.link(a, xl, m);
            a
        } else {
            let m = self.merge(a, yl);
            self.link(b, m, yr);
            b
        }
    }

    /// Puts node `x` (unlinked) into the subtree `t`; returns the new subtree.
    fn insert_at(&mut self, t: u32, x: u32) -> u32 {
        let (Some(xn), Some(kx)) = (self.node(x), self.key(x)) else {
            return t;
        };
        let (Some(n), Some(kt)) = (self.node(t), self.key(t)) else {
            self.link(x, NIL, NIL);
            return x;
        };
        if xn.prio > n.prio {
            let (a, b) = self.split(t, kx);
            self.link(x, a, b);
            return x;
        }
        // Into the subtree on x's side.
        let left = kx < kt;
        let c = self.insert_at(self.child(t, left), x);
        self.set_child(t, left, c)
    }

    /// Takes the node with `key` out of the subtree `t` (its size becomes 0); returns the
    /// new subtree.
    fn remove_at(&mut self, t: u32, key: Key) -> u32 {
        let Some(k) = self.key(t) else {
            return NIL;
        };
        if key != k {
            // From the subtree on the key's side.
            let left = key < k;
            let c = self.remove_at(self.child(t, left), key);
            return self.set_child(t, left, c);
        }
        let m = self.merge(self.child(t, true), self.child(t, false));
        if let Some(n) = self.nodes.get_mut(t as usize) {
            (n.l, n.r, n.size) = (NIL, NIL, 0);
        }
        m
    }

    /// Leases expiring after `at_us`: one walk from the root.
    fn count_after(&self, at_us: u64) -> u64 {
        let (mut t, mut c) = (self.root, 0u64);
        while let Some(n) = self.node(t) {
            if n.expiry_us > at_us {
                c += 1 + u64::from(self.size(n.r));
                t = n.l;
            } else {
                t = n.r;
            }
        }
        c
    }

    /// The earliest expiry after `at_us`.
    fn first_after(&self, at_us: u64) -> Option<u64> {
        let (mut t, mut best) = (self.root, None);
        while let Some(n) = self.node(t) {
            if n.expiry_us > at_us {
                best = Some(n.expiry_us);
                t = n.l;
            } else {
                t = n.r;
            }
        }
        best
    }

    /// The earliest expiry (`left`) or the latest: the end of the leftmost or rightmost path.
    fn edge(&self, left: bool) -> Option<u64> {
        let (mut t, mut best) = (self.root, None);
        while let Some(n) = self.node(t) {
            best = Some(n.expiry_us);
            t = if left { n.l } else { n.r };
        }
        best
    }

    fn first(&self) -> Option<u64> {
        self.edge(true)
    }

    fn last(&self) -> Option<u64> {
        self.edge(false)
    }

    /// The live node with `token` (the first, for repeated tokens of a decoded state).
    fn find(&self, token: Token) -> Option<u32> {
        let key = |i: &u32| self.node(*i).map_or(Token::default(), |n| n.token);
        let from = self.by_token.partition_point(|i| key(i) < token);
        self.by_token
            .get(from..)?
            .iter()
            .take_while(|i| key(i) == token)
            .find(|&&i| self.live_node(i).is_some())
            .copied()
    }

    fn insert(&mut self, lease: Lease) {
        let node = Node {
            expiry_us: lease.expiry_us,
            token: lease.token,
            l: NIL,
            r: NIL,
            size: 1,
            prio: prio(lease.token),
        };
        let x = if let Some(f) = self.nodes.get_mut(self.free as usize) {
            let x = self.free;
            self.free = f.l;
            *f = node;
            x
        } else {
            // More than 2^32 - 1 nodes cannot be held (a state has at most a million).
            let Ok(x) = u32::try_from(self.nodes.len()) else {
                return;
            };
            if x == NIL {
                return;
            }
            self.nodes.push(node);
            x
        };
        let key = |i: &u32| self.node(*i).map_or(Token::default(), |n| n.token);
        let at = self.by_token.partition_point(|i| key(i) <= lease.token);
        if at == self.by_token.len() {
            self.by_token.push(x);
        } else {
            self.by_token.insert(at, x);
        }
        self.root = self.insert_at(self.root, x);
    }

    fn remove(&mut self, token: Token) -> bool {
        let Some(key) = self.find(token).and_then(|i| self.key(i)) else {
            return false;
        };
        self.root = self.remove_at(self.root, key);
        self.dead += 1;
        self.compact();
        true
    }

    fn set_expiry(&mut self, token: Token, expiry_us: u64) -> bool {
        let Some(i) = self.find(token) else {
            return false;
        };
        let Some(key) = self.key(i) else {
            return false;
        };
        self.root = self.remove_at(self.root, key);
        if let Some(n) = self.nodes.get_mut(i as usize) {
            n.expiry_us = expiry_us;
        }
        self.root = self.insert_at(self.root, i);
        true
    }

    fn purge(&mut self, at_us: u64) {
        if self.first().is_none_or(|e| e > at_us) {
            return;
        }
        let (gone, kept) = self.split(self.root, (at_us.saturating_add(1), Token::default(), 0));
        self.root = kept;
        // The expired subtree's nodes become tombstones: a walk that rotates each left
        // child up until there is none, then drops the node (O(k), no stack).
        let mut t = gone;
        while let Some(&Node { l, r, .. }) = self.node(t) {
            if let Some(&Node { r: lr, .. }) = self.node(l) {
                if let Some(n) = self.nodes.get_mut(t as usize) {
                    n.l = lr;
                }
                if let Some(n) = self.nodes.get_mut(l as usize) {
                    n.r = t;
                }
                t = l;
            } else {
                if let Some(n) = self.nodes.get_mut(t as usize) {
                    (n.l, n.r, n.size) = (NIL, NIL, 0);
                }
                self.dead += 1;
                t = r;
            }
        }
        self.compact();
    }

    /// Drops the tombstones from `by_token` once they outnumber the leases, freeing their
    /// nodes: O(n) once per at least n/2 removals.
    fn compact(&mut self) {
        if self.dead < 16 || self.dead * 2 < self.by_token.len() {
            return;
        }
        let mut by_token = std::mem::take(&mut self.by_token);
        by_token.retain(|&i| match self.nodes.get_mut(i as usize) {
            Some(n) if n.size == 0 => {
                n.l = self.free;
                self.free = i;
                false
            }
            _ => true,
        });
        self.by_token = by_token;
        self.dead = 0;
    }
}
