//! The one binary codec's building blocks, shared by every algorithm's encoding (each
//! algorithm writes and reads its own fields: `Algorithm::encode`/`decode`) and by the
//! replayed operations (`replay.rs`); and the values of an `RL.INFO` field. Pure: no Redis
//! types.

use super::{MAX_TIME_MS, US_PER_MS};

/// A value of an `RL.INFO` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfoValue {
    Str(&'static str),
    Int(u64),
    Signed(i64),
    Owned(String),
}

/// Current codec version (also the RDB encoding version).
pub const ENCODING_VERSION: u8 = 1;
/// The compact encoding of a five-field state (the GCRA family and the windows, without a
/// BLOCK), used for effects only (`RL._APPLY` payloads: `State::encode_effect`): the
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
    pub fn five(tag: u8, fields: [u64; 5]) -> Encoded {
        let mut b = [0u8; INLINE];
        if let Some([version, t]) = b.get_mut(8..10) {
            *version = ENCODING_VERSION;
            *t = tag;
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
    pub fn five_compact(tag: u8, fields: [u64; 5]) -> Encoded {
        let mut b = [0u8; INLINE];
        let mut n = 8;
        for byte in [COMPACT_VERSION, tag] {
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

    /// An encoding with tag `tag` and room for `fields` more `u64` fields.
    pub fn new(tag: u8, fields: usize) -> Encoded {
        Encoded::tagged(tag, 8 * fields)
    }

    /// An encoding with tag `tag` and room for `body` more bytes.
    pub fn tagged(tag: u8, body: usize) -> Encoded {
        Encoded::with_header(ENCODING_VERSION, tag, body)
    }

    /// An encoding that starts with `version` and `tag` and has room for `body` more bytes
    /// (a state's, or a replayed operation's: `replay.rs`).
    pub fn with_header(version: u8, tag: u8, body: usize) -> Encoded {
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

    pub fn push_bytes(&mut self, b: &[u8]) {
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

    pub fn push(&mut self, v: u64) {
        self.push_bytes(&v.to_le_bytes());
    }
}

/// Reads `u64` fields off a payload.
pub struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader(buf)
    }

    /// Nothing left to read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let (head, rest) = self
            .0
            .split_first_chunk::<8>()
            .ok_or(DecodeError("truncated"))?;
        self.0 = rest;
        Ok(u64::from_le_bytes(*head))
    }

    /// A count of entries of `per_item` fields each that fill the rest of the payload.
    pub fn count(&mut self, per_item: usize) -> Result<u64, DecodeError> {
        let n = self.u64()?;
        if n > MAX_ENTRIES || self.0.len() as u64 != n * (per_item as u64) * 8 {
            return Err(DecodeError("bad entry count"));
        }
        Ok(n)
    }
}

/// The latest instant a decoded state may hold, µs (a lease's token time can run to twice
/// the latest module time).
pub const MAX_TIME_US: u64 = MAX_TIME_MS * 2 * US_PER_MS;

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut want = vec![COMPACT_VERSION, 1];
        for f in fields {
            want.extend(leb128_loop(f));
        }
        assert_eq!(
            Encoded::five_compact(1, fields).as_slice(),
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

    proptest::proptest! {
        #[test]
        fn leb128_matches_the_byte_loop(v in proptest::prelude::any::<u64>()) {
            check_leb128(v);
        }
    }
}
