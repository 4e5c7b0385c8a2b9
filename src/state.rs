//! The value stored under a key, for any algorithm, and its one binary codec, used for RDB,
//! the AOF rewrite, replication (`RL._APPLY`), DEBUG DIGEST and RESTORE.
//!
//! Encoding version 1: byte 0 is the codec version, byte 1 the algorithm tag, then
//! little-endian `u64` fields:
//! - gcra (1), tokenbucket (2), queue (6): burst, count, period_ms, tat_ns, tat_frac
//!   (the TAT is `tat_ns + tat_frac / count` ns since the epoch)
//! - sliding (3), fixed (4): limit, window_ms, window_start_ms, previous_count, current_count
//! - log (5): limit, window_ms, n, then n timestamps (µs, ascending)
//! - concurrency (7): limit, max_lease_ms, last_token_ms, last_token_seq, horizon_us, n,
//!   then n leases of (expiry_us, token_ms, token_seq)
//! - blocked (8, a state under a `BLOCK` penalty): blocked_until_us, then the wrapped state's
//!   own tag and fields (any algorithm above but concurrency; never nested)
//!
//! Decoding validates every field; anything odd is refused, never trusted.

use crate::algo::{gcra, lease, log, window, MAX_SPAN_MS, MAX_TIME_MS, NS_PER_MS, US_PER_MS};

pub use crate::algo::table::Algo;

/// A value of an `RL.INFO` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfoValue {
    Str(&'static str),
    Int(u64),
    Signed(i64),
    Owned(String),
}

/// A GCRA-family state: the rule last applied and the theoretical arrival time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub params: gcra::Params,
    pub tat: gcra::Tat,
}

impl Bucket {
    /// The stored TAT with the rule it was written under.
    /// The codec's five fields: burst, count, period_ms, the TAT's ns and fraction.
    fn fields(&self) -> [u64; 5] {
        let p = &self.params;
        [p.burst, p.count, p.period_ms, self.tat.ns, self.tat.frac]
    }

    pub fn stored(&self) -> gcra::Stored<'_> {
        gcra::Stored {
            tat: &self.tat,
            rule: &self.params,
        }
    }
}

/// A window-counter state: the rule last applied and the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub params: window::Params,
    pub counters: window::Counters,
}

impl Window {
    /// The codec's five fields: limit, window_ms, the current window's start, the previous
    /// and current counts.
    fn fields(&self) -> [u64; 5] {
        let (p, c) = (&self.params, &self.counters);
        [p.limit, p.span_ms, c.start_ms, c.prev, c.cur]
    }
}

/// A sliding-log state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogState {
    pub params: window::Params,
    pub log: log::Log,
}

/// A concurrency state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseState {
    pub limit: u64,
    pub leases: lease::Leases,
}

/// A state under a `BLOCK` penalty: every request is refused until `until_us`; then the
/// wrapped state applies as before (it is not changed by the refusals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub until_us: u64,
    pub state: State,
}

/// The value stored under a key (48 bytes: the lease list lives behind a box; the log's
/// entries are in one heap block of their own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Gcra(Bucket),
    TokenBucket(Bucket),
    Queue(Bucket),
    Sliding(Window),
    Fixed(Window),
    Log(LogState),
    Concurrency(Box<LeaseState>),
    /// Any of the above but `Concurrency`, under a penalty (boxed: rare, and keeps the
    /// others small).
    Blocked(Box<Blocked>),
}

/// The tag of a state under a `BLOCK` penalty (see the module documentation).
const BLOCKED_TAG: u8 = 8;

/// Current codec version (also the RDB encoding version).
pub const ENCODING_VERSION: u8 = 1;
/// The compact encoding of a five-field state (the GCRA family and the windows, without a
/// BLOCK), used for effects only (`RL._APPLY` payloads: [`State::encode_effect`]): the
/// version, the tag, then the five fields as unsigned LEB128 varints. RDB, the AOF rewrite,
/// DUMP and DEBUG DIGEST keep [`ENCODING_VERSION`]; the decoder reads both.
pub const COMPACT_VERSION: u8 = 2;
/// Most entries a decoded log or lease list may hold (the configs' ceiling).
pub const MAX_ENTRIES: u64 = 1_000_000;

/// Why a payload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

/// An encoded state, on the stack for the fixed-size algorithms. The buffer keeps 8 bytes
/// in front of the encoding for an absolute expiry, so the replication payload
/// ([`Encoded::with_expiry`]) is built without a copy.
pub enum Encoded {
    Inline([u8; INLINE], usize),
    Heap(Vec<u8>),
}

/// `v` as an unsigned LEB128 varint (the shortest, as a loop of 7-bit groups writes it):
/// its first 8 bytes little-endian (zero past its length), the 2 after them, and its length
/// (1 to 10). The groups are spread one to a byte in three mask-and-shift steps, and the
/// continuation bits come from a table by the number of leading zeros.
#[inline]
fn leb128(v: u64) -> (u64, u16, usize) {
    // The low 56 bits: 28-bit halves 32 bits apart, then 14-bit quarters 16 apart, then
    // 7-bit groups one to a byte.
    let mut x = v & 0x00FF_FFFF_FFFF_FFFF;
    x = (x & 0x0FFF_FFFF) | ((x & 0x00FF_FFFF_F000_0000) << 4);
    x = (x & 0x0000_3FFF_0000_3FFF) | ((x & 0x0FFF_C000_0FFF_C000) << 2);
    x = (x & 0x007F_007F_007F_007F) | ((x & 0x3F80_3F80_3F80_3F80) << 1);
    // The top 8 bits: a group of 7, then the last bit.
    let h = (v >> 56) as u16;
    let hi = (h & 0x7f) | ((h & 0x80) << 1);
    let (len, more_lo, more_hi) = LEB128_BY_ZEROS[(v | 1).leading_zeros() as usize & 63];
    (x | more_lo, hi | more_hi, usize::from(len))
}

/// By the leading zeros of a nonzero `u64`: its LEB128 length, and the continuation bits of
/// its first 8 bytes and of the 2 after them (every byte but the last has one).
const LEB128_BY_ZEROS: [(u8, u64, u16); 64] = {
    let mut t = [(0u8, 0u64, 0u16); 64];
    let mut lz: usize = 0;
    while lz < 64 {
        let len = (64 - lz).div_ceil(7);
        let (mut lo, mut hi) = (0u64, 0u16);
        let mut i = 0;
        while i + 1 < len {
            if i < 8 {
                lo |= 0x80 << (8 * i);
            } else {
                hi |= 0x80 << (8 * (i - 8));
            }
            i += 1;
        }
        t[lz] = (len as u8, lo, hi);
        lz += 1;
    }
    t
};

/// The largest inline encoding: the expiry, version and tag, then 8 fields.
const INLINE: usize = 8 + 2 + 64;

impl Encoded {
    fn bytes(&self) -> &[u8] {
        match self {
            Encoded::Inline(b, n) => b.get(..*n).unwrap_or(&[]),
            Encoded::Heap(v) => v,
        }
    }

    /// The state's encoding (RDB, DEBUG DIGEST).
    pub fn as_slice(&self) -> &[u8] {
        self.bytes().get(8..).unwrap_or(&[])
    }

    /// The `RL._APPLY` payload: the absolute expiry (unix ms, little-endian `u64`; 0 = none)
    /// followed by the state's encoding.
    pub fn with_expiry(&mut self, unix_ms: u64) -> &[u8] {
        let head = unix_ms.to_le_bytes();
        match self {
            Encoded::Inline(b, _) => b[..8].copy_from_slice(&head),
            Encoded::Heap(v) => {
                if let Some(dst) = v.get_mut(..8) {
                    dst.copy_from_slice(&head);
                }
            }
        }
        self.bytes()
    }

    /// The encoding of a state of five fields (the GCRA family, the windows), written
    /// straight into the inline buffer: the hot path's encoding.
    #[inline]
    fn five(algo: Algo, fields: [u64; 5]) -> Encoded {
        let mut b = [0u8; INLINE];
        if let Some([version, tag]) = b.get_mut(8..10) {
            *version = ENCODING_VERSION;
            *tag = algo.tag();
        }
        if let Some(body) = b.get_mut(10..50) {
            for (dst, v) in body.chunks_exact_mut(8).zip(fields) {
                dst.copy_from_slice(&v.to_le_bytes());
            }
        }
        Encoded::Inline(b, 50)
    }

    /// The compact encoding ([`COMPACT_VERSION`]) of a five-field state: what a write of
    /// the hot path propagates (about half the bytes of [`Encoded::five`]).
    #[inline]
    fn five_compact(algo: Algo, fields: [u64; 5]) -> Encoded {
        let mut b = [0u8; INLINE];
        let mut n = 8;
        for byte in [COMPACT_VERSION, algo.tag()] {
            if let Some(d) = b.get_mut(n) {
                *d = byte;
            }
            n += 1;
        }
        for v in fields {
            // At most 10 bytes a field: 10 + 5 * 10 < INLINE.
            if v < 0x80 {
                if let Some(d) = b.get_mut(n) {
                    *d = v as u8;
                }
                n += 1;
                continue;
            }
            let (lo, hi, len) = leb128(v);
            if let Some(d) = b.get_mut(n..n + 8) {
                d.copy_from_slice(&lo.to_le_bytes());
            }
            if len > 8 {
                if let Some(d) = b.get_mut(n + 8..n + 10) {
                    d.copy_from_slice(&hi.to_le_bytes());
                }
            }
            n += len;
        }
        Encoded::Inline(b, n)
    }

    fn new(algo: Algo, fields: usize) -> Encoded {
        Encoded::tagged(algo.tag(), 8 * fields)
    }

    /// An encoding with tag `tag` and room for `body` more bytes.
    fn tagged(tag: u8, body: usize) -> Encoded {
        Encoded::with_header(ENCODING_VERSION, tag, body)
    }

    /// An encoding that starts with `version` and `tag` and has room for `body` more bytes
    /// (a state's, or a replayed operation's: `replay.rs`).
    pub(crate) fn with_header(version: u8, tag: u8, body: usize) -> Encoded {
        let len = 8 + 2 + body;
        let mut e = if len <= INLINE {
            Encoded::Inline([0; INLINE], 8)
        } else {
            let mut v = Vec::with_capacity(len);
            v.extend_from_slice(&[0; 8]);
            Encoded::Heap(v)
        };
        e.push_bytes(&[version, tag]);
        e
    }

    fn push_bytes(&mut self, b: &[u8]) {
        match self {
            Encoded::Inline(buf, n) => {
                if let Some(dst) = buf.get_mut(*n..*n + b.len()) {
                    dst.copy_from_slice(b);
                    *n += b.len();
                }
            }
            Encoded::Heap(v) => v.extend_from_slice(b),
        }
    }

    pub(crate) fn push(&mut self, v: u64) {
        self.push_bytes(&v.to_le_bytes());
    }
}

/// Splits an `RL._APPLY` payload into its absolute expiry (None for 0) and state.
pub fn split_payload(p: &[u8]) -> Result<(Option<u64>, State), DecodeError> {
    let (head, rest) = p.split_first_chunk::<8>().ok_or(DecodeError("truncated"))?;
    let at = u64::from_le_bytes(*head);
    Ok(((at != 0).then_some(at), State::decode(rest)?))
}

/// Reads `u64` fields off a payload.
pub(crate) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader(buf)
    }

    /// Nothing left to read.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        let (head, rest) = self
            .0
            .split_first_chunk::<8>()
            .ok_or(DecodeError("truncated"))?;
        self.0 = rest;
        Ok(u64::from_le_bytes(*head))
    }

    fn count(&mut self, per_item: usize) -> Result<u64, DecodeError> {
        let n = self.u64()?;
        if n > MAX_ENTRIES || self.0.len() as u64 != n * (per_item as u64) * 8 {
            return Err(DecodeError("bad entry count"));
        }
        Ok(n)
    }
}

const MAX_TIME_US: u64 = MAX_TIME_MS * 2 * US_PER_MS;

impl State {
    /// `RL.INFO`'s fields of this state at `now_us` (module clock), all but `ttl_ms`:
    /// `algorithm`, the rule's numbers under their argument names (the algorithm table's),
    /// the state's own fields, and `blocked_until_ms` while a BLOCK is in force.
    pub fn info(&self, now_us: u64) -> Vec<(&'static str, InfoValue)> {
        let algo = || ("algorithm", InfoValue::Str(self.algo().name()));
        // The rule's numbers under their argument names (the algorithm table's), then the
        // state's own fields.
        let rule = |values: &[u64]| -> Vec<(&'static str, InfoValue)> {
            let names = self.algo().spec().args.iter();
            let rule = names.zip(values).map(|(&n, &v)| (n, InfoValue::Int(v)));
            std::iter::once(algo()).chain(rule).collect()
        };
        let mut fields = match self.unblocked() {
            State::Gcra(b) => {
                let mut f = rule(&[b.params.burst, b.params.count, b.params.period_ms]);
                f.push(("tat_ns", InfoValue::Int(b.tat.ns)));
                f
            }
            State::TokenBucket(b) => {
                let mut f = rule(&[b.params.burst, b.params.count, b.params.period_ms]);
                let tokens = gcra::tokens(Some(b.stored()), &b.params, now_us);
                f.extend([
                    ("tokens", InfoValue::Int(tokens)),
                    ("tat_ns", InfoValue::Int(b.tat.ns)),
                ]);
                f
            }
            State::Queue(b) => {
                let mut f = rule(&[b.params.burst, b.params.period_ms]);
                f.push(("tat_ns", InfoValue::Int(b.tat.ns)));
                f
            }
            State::Sliding(w) | State::Fixed(w) => {
                let mut f = rule(&[w.params.limit, w.params.span_ms]);
                f.push(("window_start_ms", InfoValue::Int(w.counters.start_ms)));
                if self.algo() == Algo::Sliding {
                    f.push(("previous_count", InfoValue::Int(w.counters.prev)));
                    f.push(("current_count", InfoValue::Int(w.counters.cur)));
                } else {
                    f.push(("count", InfoValue::Int(w.counters.cur)));
                }
                f
            }
            State::Log(l) => {
                let mut f = rule(&[l.params.limit, l.params.span_ms]);
                let e = l.log.entries();
                f.extend([
                    ("entries", InfoValue::Int(e.len() as u64)),
                    ("oldest_us", InfoValue::Int(e.front().unwrap_or(0))),
                    ("newest_us", InfoValue::Int(e.back().unwrap_or(0))),
                ]);
                f
            }
            // Its lease argument is a maximum: RL.RENEW may ask for less.
            State::Concurrency(c) => vec![
                algo(),
                ("limit", InfoValue::Int(c.limit)),
                ("max_lease_ms", InfoValue::Int(c.leases.max_lease_ms)),
                ("leases", InfoValue::Int(c.leases.leases.len() as u64)),
                ("last_token", InfoValue::Owned(c.leases.last.to_string())),
                ("horizon_us", InfoValue::Int(c.leases.horizon_us)),
            ],
            // `unblocked` never returns a blocked state.
            State::Blocked(_) => vec![algo()],
        };
        // A BLOCK penalty in force: when it ends (unix ms, rounded up), before `ttl_ms`.
        let until_us = self.blocked_until_us();
        if until_us > now_us {
            let until_ms = until_us.div_ceil(crate::algo::US_PER_MS);
            fields.push(("blocked_until_ms", InfoValue::Int(until_ms)));
        }
        fields
    }

    /// The state's algorithm (a blocked state's is the wrapped one's). Not recursive (a
    /// block never wraps a block), so it inlines on the hot path.
    #[inline]
    pub fn algo(&self) -> Algo {
        match self.unblocked() {
            State::Gcra(_) => Algo::Gcra,
            State::TokenBucket(_) => Algo::TokenBucket,
            State::Queue(_) => Algo::Queue,
            State::Sliding(_) => Algo::Sliding,
            State::Fixed(_) => Algo::Fixed,
            State::Log(_) => Algo::Log,
            State::Concurrency(_) | State::Blocked(_) => Algo::Concurrency,
        }
    }

    /// The end of the state's `BLOCK` penalty (µs), or 0 if it has none.
    #[inline]
    pub fn blocked_until_us(&self) -> u64 {
        match self {
            State::Blocked(b) => b.until_us,
            _ => 0,
        }
    }

    /// The state without its penalty, if it has one.
    #[inline]
    pub fn unblocked(&self) -> &State {
        match self {
            State::Blocked(b) => &b.state,
            s => s,
        }
    }

    /// The encoded form.
    pub fn encode(&self) -> Encoded {
        let State::Blocked(b) = self else {
            return self.encode_plain();
        };
        let inner = b.state.encode_plain();
        // The wrapped state's own tag and fields, after its codec version.
        let body = inner.as_slice().get(1..).unwrap_or(&[]);
        let mut e = Encoded::tagged(BLOCKED_TAG, 8 + body.len());
        e.push(b.until_us);
        e.push_bytes(body);
        e
    }

    /// The five fields of a GCRA-family or window state (None for the others and a blocked
    /// one), in codec order.
    #[inline]
    fn five_fields(&self) -> Option<[u64; 5]> {
        match self {
            State::Gcra(b) | State::TokenBucket(b) | State::Queue(b) => Some(b.fields()),
            State::Sliding(w) | State::Fixed(w) => Some(w.fields()),
            _ => None,
        }
    }

    /// What a write of this state propagates: the compact encoding for a five-field state
    /// ([`COMPACT_VERSION`]), the codec's otherwise.
    #[inline]
    pub fn encode_effect(&self) -> Encoded {
        match self.five_fields() {
            Some(f) => Encoded::five_compact(self.algo(), f),
            None => self.encode(),
        }
    }

    /// The encoded form of a state that is not blocked (a blocked one encodes as nothing:
    /// [`State::encode`] handles it).
    fn encode_plain(&self) -> Encoded {
        match self {
            State::Gcra(b) | State::TokenBucket(b) | State::Queue(b) => {
                Encoded::five(self.algo(), b.fields())
            }
            State::Sliding(w) | State::Fixed(w) => Encoded::five(self.algo(), w.fields()),
            State::Log(l) => {
                let entries = l.log.entries();
                let n = entries.len();
                let mut e = Encoded::new(self.algo(), 3 + n);
                for f in [l.params.limit, l.params.span_ms, n as u64] {
                    e.push(f);
                }
                for t in entries.iter() {
                    e.push(t);
                }
                e
            }
            State::Blocked(_) => Encoded::tagged(BLOCKED_TAG, 0),
            State::Concurrency(c) => {
                let s = &c.leases;
                let n = s.leases.len();
                let mut e = Encoded::new(self.algo(), 6 + 3 * n);
                for f in [
                    c.limit,
                    s.max_lease_ms,
                    s.last.ms,
                    s.last.seq,
                    s.horizon_us,
                    n as u64,
                ] {
                    e.push(f);
                }
                // Token order: deterministic, whatever the store's form.
                for l in s.leases.iter() {
                    for f in [l.expiry_us, l.token.ms, l.token.seq] {
                        e.push(f);
                    }
                }
                e
            }
        }
    }

    /// Parses and validates an encoded state.
    pub fn decode(buf: &[u8]) -> Result<State, DecodeError> {
        let [version, tag, rest @ ..] = buf else {
            return Err(DecodeError("truncated"));
        };
        if *version == COMPACT_VERSION {
            return State::decode_compact(*tag, rest);
        }
        if *version != ENCODING_VERSION {
            return Err(DecodeError("unknown encoding version"));
        }
        if *tag == BLOCKED_TAG {
            let (until, inner) = rest
                .split_first_chunk::<8>()
                .ok_or(DecodeError("truncated"))?;
            let until_us = u64::from_le_bytes(*until);
            let [tag, rest @ ..] = inner else {
                return Err(DecodeError("truncated"));
            };
            if until_us > MAX_TIME_US || *tag == BLOCKED_TAG || *tag == Algo::Concurrency.tag() {
                return Err(DecodeError("bad block"));
            }
            let state = State::decode_body(*tag, rest)?;
            return Ok(State::Blocked(Box::new(Blocked { until_us, state })));
        }
        State::decode_body(*tag, rest)
    }

    /// Parses a compact encoding's body ([`COMPACT_VERSION`]): five varints, validated as
    /// the same fields in the codec's own form.
    fn decode_compact(tag: u8, mut rest: &[u8]) -> Result<State, DecodeError> {
        let five = matches!(
            Algo::of_tag(tag),
            Some(Algo::Gcra | Algo::TokenBucket | Algo::Queue | Algo::Sliding | Algo::Fixed)
        );
        if !five {
            return Err(DecodeError("no compact encoding for this algorithm"));
        }
        let mut body = [0u8; 40];
        for dst in body.chunks_exact_mut(8) {
            let mut v: u64 = 0;
            let mut shift = 0u32;
            loop {
                let (&b, tail) = rest.split_first().ok_or(DecodeError("truncated"))?;
                rest = tail;
                let part = u64::from(b & 0x7f);
                if shift > 63 || (shift == 63 && part > 1) {
                    return Err(DecodeError("bad varint"));
                }
                v |= part << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
            dst.copy_from_slice(&v.to_le_bytes());
        }
        if !rest.is_empty() {
            return Err(DecodeError("trailing bytes"));
        }
        State::decode_body(tag, &body)
    }

    /// Parses and validates the fields of a state of algorithm tag `tag`.
    fn decode_body(tag: u8, rest: &[u8]) -> Result<State, DecodeError> {
        let algo = Algo::of_tag(tag).ok_or(DecodeError("unknown algorithm"))?;
        let mut r = Reader(rest);
        // The furthest a TAT can lie: the latest module time plus the longest span.
        let max_ns = (MAX_TIME_MS + MAX_SPAN_MS) * NS_PER_MS;
        let state = match algo {
            Algo::Gcra | Algo::TokenBucket | Algo::Queue => {
                let names = if algo == Algo::TokenBucket {
                    gcra::BUCKET_NAMES
                } else {
                    gcra::GCRA_NAMES
                };
                let params = gcra::Params::new(r.u64()?, r.u64()?, r.u64()?, names)
                    .map_err(|_| DecodeError("bad gcra parameters"))?;
                let (ns, frac) = (r.u64()?, r.u64()?);
                if ns > max_ns || frac >= params.count {
                    return Err(DecodeError("bad gcra arrival time"));
                }
                let b = Bucket {
                    params,
                    tat: gcra::Tat { ns, frac },
                };
                match algo {
                    Algo::Gcra => State::Gcra(b),
                    Algo::TokenBucket => State::TokenBucket(b),
                    _ => State::Queue(b),
                }
            }
            Algo::Sliding | Algo::Fixed => {
                let params = window::Params::new(r.u64()?, r.u64()?)
                    .map_err(|_| DecodeError("bad window parameters"))?;
                let counters = window::Counters {
                    start_ms: r.u64()?,
                    prev: r.u64()?,
                    cur: r.u64()?,
                };
                if counters.start_ms > MAX_TIME_MS {
                    return Err(DecodeError("bad window start"));
                }
                let w = Window { params, counters };
                if algo == Algo::Sliding {
                    State::Sliding(w)
                } else {
                    State::Fixed(w)
                }
            }
            Algo::Log => {
                let params = window::Params::new(r.u64()?, r.u64()?)
                    .map_err(|_| DecodeError("bad log parameters"))?;
                let n = r.count(1)?;
                let mut entries = Vec::with_capacity(n as usize);
                let mut prev = 0;
                for _ in 0..n {
                    let t = r.u64()?;
                    if t < prev || t > MAX_TIME_US {
                        return Err(DecodeError("bad log entry"));
                    }
                    prev = t;
                    entries.push(t);
                }
                let log = log::Log::from_sorted(&entries).ok_or(DecodeError("bad log entry"))?;
                State::Log(LogState { params, log })
            }
            Algo::Concurrency => {
                let limit = r.u64()?;
                let max_lease_ms = r.u64()?;
                lease::Params::new(limit, max_lease_ms)
                    .map_err(|_| DecodeError("bad lease parameters"))?;
                let last = lease::Token {
                    ms: r.u64()?,
                    seq: r.u64()?,
                };
                let horizon_us = r.u64()?;
                if horizon_us > lease::MAX_EXPIRY_US || last.ms > lease::MAX_TOKEN_MS {
                    return Err(DecodeError("bad lease horizon or token"));
                }
                let n = r.count(3)?;
                let mut leases = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let expiry_us = r.u64()?;
                    let token = lease::Token {
                        ms: r.u64()?,
                        seq: r.u64()?,
                    };
                    if expiry_us > lease::MAX_EXPIRY_US || token > last {
                        return Err(DecodeError("bad lease"));
                    }
                    leases.push(lease::Lease { expiry_us, token });
                }
                // Any order (earlier encoders wrote the leases as they were held).
                let leases =
                    lease::LeaseSet::from_leases(leases).ok_or(DecodeError("bad entry count"))?;
                State::Concurrency(Box::new(LeaseState {
                    limit,
                    leases: lease::Leases {
                        last,
                        horizon_us,
                        max_lease_ms,
                        leases,
                    },
                }))
            }
        };
        if !r.0.is_empty() {
            return Err(DecodeError("trailing bytes"));
        }
        Ok(state)
    }

    /// Bytes this value holds on the heap and inline (for MEMORY USAGE).
    pub fn mem_usage(&self) -> usize {
        std::mem::size_of::<State>()
            + match self {
                State::Log(l) => l.log.entries().heap_bytes(),
                State::Concurrency(c) => {
                    std::mem::size_of::<LeaseState>() + c.leases.leases.heap_bytes()
                }
                State::Blocked(b) => std::mem::size_of::<u64>() + b.state.mem_usage(),
                _ => 0,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bucket() -> Bucket {
        Bucket {
            params: gcra::Params::new(10, 3, 1000, gcra::GCRA_NAMES).unwrap(),
            tat: gcra::Tat {
                ns: 1_700_000_000_000_000_000,
                frac: 2,
            },
        }
    }

    /// The byte loop [`leb128`] replaces: the reference encoding.
    fn leb128_loop(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let more = v >= 0x80;
            out.push((v as u8 & 0x7f) | if more { 0x80 } else { 0 });
            v >>= 7;
            if !more {
                return out;
            }
        }
    }

    /// [`leb128`] and [`Encoded::five_compact`] write what the byte loop writes.
    fn check_leb128(v: u64) {
        let (lo, hi, len) = leb128(v);
        let mut bytes = lo.to_le_bytes().to_vec();
        bytes.extend_from_slice(&hi.to_le_bytes());
        assert_eq!(bytes[..len], leb128_loop(v)[..], "{v}");
        assert!(bytes[len..].iter().all(|&b| b == 0), "{v}");
        let fields = [v, 1, v >> 3, 0, v.wrapping_add(1)];
        let mut want = vec![COMPACT_VERSION, Algo::Gcra.tag()];
        for f in fields {
            want.extend(leb128_loop(f));
        }
        assert_eq!(
            Encoded::five_compact(Algo::Gcra, fields).as_slice(),
            &want[..],
            "{v}"
        );
    }

    #[test]
    fn leb128_matches_the_byte_loop_at_every_length_edge() {
        for k in 0..64 {
            let p = 1u64 << k;
            for v in [p - 1, p, p + 1, p.wrapping_mul(3), !0 >> k, !(p - 1)] {
                check_leb128(v);
            }
        }
        check_leb128(0);
        check_leb128(u64::MAX);
    }

    pub fn samples() -> Vec<State> {
        let w = Window {
            params: window::Params::new(100, 60_000).unwrap(),
            counters: window::Counters {
                start_ms: 1_700_000_040_000,
                prev: 7,
                cur: 9,
            },
        };
        let log = log::Log::from_sorted(&[
            1_700_000_040_000_000,
            1_700_000_040_000_000,
            1_700_000_041_000_000,
        ])
        .unwrap();
        let leases = lease::Leases {
            last: lease::Token {
                ms: 1_700_000_040_001,
                seq: 3,
            },
            horizon_us: 1_700_000_050_000_000,
            max_lease_ms: 10_000,
            leases: lease::LeaseSet::from_leases(vec![lease::Lease {
                expiry_us: 1_700_000_050_000_000,
                token: lease::Token {
                    ms: 1_700_000_040_000,
                    seq: 0,
                },
            }])
            .unwrap(),
        };
        vec![
            State::Gcra(bucket()),
            State::TokenBucket(bucket()),
            State::Queue(bucket()),
            State::Sliding(w),
            State::Fixed(w),
            State::Log(LogState {
                params: w.params,
                log,
            }),
            State::Concurrency(Box::new(LeaseState { limit: 3, leases })),
            State::Blocked(Box::new(Blocked {
                until_us: 1_700_000_940_000_000,
                state: State::Gcra(bucket()),
            })),
            State::Blocked(Box::new(Blocked {
                until_us: 1_700_000_940_000_000,
                state: State::Fixed(w),
            })),
        ]
    }

    #[test]
    fn state_is_small() {
        assert!(
            std::mem::size_of::<State>() <= 48,
            "{}",
            std::mem::size_of::<State>()
        );
    }

    #[test]
    fn round_trip_every_algorithm() {
        for s in samples() {
            assert_eq!(State::decode(s.encode().as_slice()), Ok(s));
        }
    }

    #[test]
    fn log_encodes_absolute_timestamps_however_stored() {
        let params = window::Params::new(10, 3 * 3_600_000).unwrap();
        let t0 = 1_700_000_040_000_000u64;
        // Narrow (32-bit offsets), and wide (spanning more than u32::MAX µs).
        for entries in [
            vec![t0, t0, t0 + 4_000_000_000],
            vec![t0, t0 + 5_000_000_000, t0 + 9_000_000_000],
        ] {
            let s = State::Log(LogState {
                params,
                log: log::Log::from_sorted(&entries).unwrap(),
            });
            let mut want = vec![ENCODING_VERSION, 5];
            for f in [10, 3 * 3_600_000, 3].into_iter().chain(entries) {
                want.extend_from_slice(&u64::to_le_bytes(f));
            }
            assert_eq!(s.encode().as_slice(), want);
            assert_eq!(State::decode(&want), Ok(s));
        }
    }

    #[test]
    fn blocks_do_not_nest_and_never_wrap_leases() {
        for s in samples() {
            let body = s.encode().as_slice().to_vec();
            let mut v = vec![ENCODING_VERSION, BLOCKED_TAG];
            v.extend_from_slice(&1_700_000_940_000_000u64.to_le_bytes());
            v.extend_from_slice(&body[1..]);
            let ok = !matches!(s, State::Blocked(_) | State::Concurrency(_));
            assert_eq!(State::decode(&v).is_ok(), ok, "{s:?}");
        }
    }

    #[test]
    fn apply_payload_carries_the_expiry() {
        for s in samples() {
            let mut e = s.encode();
            let p = e.with_expiry(1_800_000_000_000).to_vec();
            assert_eq!(split_payload(&p), Ok((Some(1_800_000_000_000), s.clone())));
            let p = e.with_expiry(0).to_vec();
            assert_eq!(split_payload(&p), Ok((None, s)));
        }
        assert!(split_payload(&[0; 7]).is_err());
    }

    #[test]
    fn leases_decode_in_any_order_and_encode_in_token_order() {
        // (expiry_us, token_ms, token_seq), as an earlier encoder may have held them.
        let held = [(9, 5, 2), (7, 5, 0), (8, 4, 9)];
        let payload = |leases: &[(u64, u64, u64)]| {
            let mut v = vec![ENCODING_VERSION, 7];
            for f in [3, 10, 5, 2, 20_000, leases.len() as u64] {
                v.extend_from_slice(&f.to_le_bytes());
            }
            for &(e, ms, seq) in leases {
                for f in [e * 1000, ms, seq] {
                    v.extend_from_slice(&f.to_le_bytes());
                }
            }
            v
        };
        let s = State::decode(&payload(&held)).unwrap();
        let sorted = payload(&[(8, 4, 9), (7, 5, 0), (9, 5, 2)]);
        assert_eq!(s.encode().as_slice(), sorted);
        assert_eq!(State::decode(&sorted), Ok(s));
    }

    #[test]
    fn many_leases_round_trip() {
        let p = lease::Params::new(1_000, 60_000).unwrap();
        let mut leases = lease::Leases::default();
        for i in 0..300 {
            leases.acquire(&p, 1_700_000_040_000_000 + i * 700, true);
        }
        let s = State::Concurrency(Box::new(LeaseState {
            limit: 1_000,
            leases,
        }));
        assert_eq!(State::decode(s.encode().as_slice()), Ok(s.clone()));
        assert!(s.mem_usage() > 300 * 44);
    }

    #[test]
    fn refuses_bad_payloads() {
        for s in samples() {
            let good = s.encode().as_slice().to_vec();
            for cut in 0..good.len() {
                assert!(State::decode(&good[..cut]).is_err(), "{s:?} cut at {cut}");
            }
            let mut v = good.clone();
            v.push(0);
            assert!(State::decode(&v).is_err());
            let mut v = good.clone();
            v[0] = 9;
            assert!(State::decode(&v).is_err());
            let mut v = good.clone();
            v[1] = 99;
            assert!(State::decode(&v).is_err());
            let mut v = good.clone();
            // limit/burst 0 (after the block's end for a blocked state)
            let at = if v[1] == BLOCKED_TAG { 11 } else { 2 };
            v[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
            assert!(State::decode(&v).is_err());
        }
    }

    #[test]
    fn compact_effects_round_trip_in_at_most_44_bytes() {
        for s in samples() {
            let mut e = s.encode_effect();
            assert_eq!(State::decode(e.as_slice()), Ok(s.clone()), "{s:?}");
            let compact = e.as_slice().first() == Some(&COMPACT_VERSION);
            assert_eq!(compact, s.five_fields().is_some(), "{s:?}");
            if compact {
                let n = e.with_expiry(1_900_000_000_000).len();
                assert!(n <= 44, "{s:?}: {n} bytes");
            }
        }
        // Overlong or truncated varints, trailing bytes, other algorithms: refused.
        let mut v = vec![COMPACT_VERSION, Algo::Gcra.tag()];
        v.extend([0xff; 11]);
        assert!(State::decode(&v).is_err());
        assert!(State::decode(&[COMPACT_VERSION, Algo::Gcra.tag(), 1, 1, 1, 1]).is_err());
        assert!(State::decode(&[COMPACT_VERSION, Algo::Gcra.tag(), 1, 1, 1, 1, 0, 0]).is_err());
        assert!(State::decode(&[COMPACT_VERSION, Algo::Log.tag(), 1, 1, 0]).is_err());
    }

    proptest! {
        #[test]
        fn leb128_matches_the_byte_loop(v in any::<u64>()) {
            check_leb128(v);
        }

        #[test]
        fn compact_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..60)) {
            let mut v = vec![COMPACT_VERSION];
            v.extend(bytes);
            if let Ok(s) = State::decode(&v) {
                prop_assert_eq!(State::decode(s.encode_effect().as_slice()), Ok(s));
            }
        }

        #[test]
        fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(s) = State::decode(&bytes) {
                prop_assert_eq!(State::decode(s.encode().as_slice()), Ok(s));
            }
        }

        #[test]
        fn decode_of_mutated_payload_never_panics(i in 0usize..100, b in any::<u8>()) {
            for s in samples() {
                let mut v = s.encode().as_slice().to_vec();
                if let Some(x) = v.get_mut(i) {
                    *x = b;
                }
                let _ = State::decode(&v);
            }
        }
    }
}
