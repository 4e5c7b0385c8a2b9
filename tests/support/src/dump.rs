//! `DUMP` payloads of module values, taken apart and put back together, so a test can change
//! bytes *inside* the module's own encoding and still pass the server's checks (RDB version
//! and CRC64 footer): what is refused then is refused by the module's decoder.
//!
//! Layout of a DUMP payload of a module value (RDB_TYPE_MODULE_2, Redis 7.0 and Valkey 9):
//!
//! ```text
//! 0x07                      RDB_TYPE_MODULE_2
//! 0x81 <8 bytes, BE>        module type id: 54-bit name signature << 10 | encoding version
//! 0x05 <rdb string>         RDB_MODULE_OPCODE_STRING + the buffer of RedisModule_SaveStringBuffer
//!                           (plain: <length> <bytes>; or LZF: 0xC3 <clen> <len> <data>)
//! 0x00                      RDB_MODULE_OPCODE_EOF
//! <2 bytes, LE>             RDB version of the server that made it (Redis 7.0: 10, Valkey 9: 80)
//! <8 bytes, LE>             CRC64 (Jones, reflected) of everything before it
//! ```

/// CRC64 as Redis computes it (crc64-jones, reflected, init 0, no final xor).
pub fn crc64(data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5; // 0xad93d23594c935a9 reflected
    let mut crc = 0u64;
    for &b in data {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    crc
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// Appends the 10-byte footer (RDB version, CRC64) to a payload body.
pub fn with_footer(body: &[u8], rdb_version: u16) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&rdb_version.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// A DUMP payload of a module value, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModulePayload {
    /// The 64-bit module type id (name signature and encoding version).
    pub type_id: u64,
    /// The buffer the module saved (decompressed).
    pub buffer: Vec<u8>,
    pub rdb_version: u16,
}

const CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl ModulePayload {
    /// The type name encoded in the id (9 characters).
    pub fn type_name(&self) -> String {
        let sig = self.type_id >> 10;
        (0..9)
            .map(|j| CHARSET[((sig >> (6 * (8 - j))) & 63) as usize] as char)
            .collect()
    }

    pub fn encoding_version(&self) -> u64 {
        self.type_id & 1023
    }

    /// The payload again, the buffer written as a plain (uncompressed) RDB string, with a
    /// correct footer.
    pub fn build(&self) -> Vec<u8> {
        with_footer(&self.body(), self.rdb_version)
    }

    /// The payload without its footer.
    pub fn body(&self) -> Vec<u8> {
        let mut b = vec![7u8, 0x81];
        b.extend_from_slice(&self.type_id.to_be_bytes());
        b.push(5); // RDB_MODULE_OPCODE_STRING
        write_len(&mut b, self.buffer.len() as u64);
        b.extend_from_slice(&self.buffer);
        b.push(0); // RDB_MODULE_OPCODE_EOF
        b
    }
}

fn write_len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push((n & 0xff) as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

struct Rd<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Rd<'_> {
    fn byte(&mut self) -> Result<u8, String> {
        let x = *self.b.get(self.pos).ok_or("truncated")?;
        self.pos += 1;
        Ok(x)
    }

    fn bytes(&mut self, n: usize) -> Result<&[u8], String> {
        let s = self
            .b
            .get(self.pos..self.pos + n)
            .ok_or("truncated".to_string())?;
        self.pos += n;
        Ok(s)
    }

    /// An RDB length; `Err` for an encoded (special) value, with its type in `special`.
    fn len(&mut self) -> Result<(u64, bool), String> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => (u64::from(first & 63), false),
            1 => (u64::from(first & 63) << 8 | u64::from(self.byte()?), false),
            2 => match first {
                0x80 => {
                    let b = self.bytes(4)?;
                    (u64::from(u32::from_be_bytes(b.try_into().unwrap())), false)
                }
                0x81 => {
                    let b = self.bytes(8)?;
                    (u64::from_be_bytes(b.try_into().unwrap()), false)
                }
                _ => return Err(format!("bad length byte {first:#x}")),
            },
            _ => (u64::from(first & 63), true),
        })
    }

    fn string(&mut self) -> Result<Vec<u8>, String> {
        let (n, special) = self.len()?;
        if !special {
            return Ok(self.bytes(n as usize)?.to_vec());
        }
        match n {
            3 => {
                let (clen, _) = self.len()?;
                let (ulen, _) = self.len()?;
                let c = self.bytes(clen as usize)?;
                let out = lzf_decompress(c, ulen as usize)?;
                Ok(out)
            }
            0 => Ok(format!("{}", self.byte()? as i8).into_bytes()),
            1 => {
                let b = self.bytes(2)?;
                Ok(format!("{}", i16::from_le_bytes(b.try_into().unwrap())).into_bytes())
            }
            2 => {
                let b = self.bytes(4)?;
                Ok(format!("{}", i32::from_le_bytes(b.try_into().unwrap())).into_bytes())
            }
            _ => Err(format!("unknown string encoding {n}")),
        }
    }
}

/// LZF decompression (liblzf's format, as Redis writes compressed strings).
pub fn lzf_decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, String> {
    let mut out: Vec<u8> = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(i..i + n).ok_or("lzf: literal past the end")?;
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i).ok_or("lzf: truncated")? as usize;
                i += 1;
            }
            let low = *input.get(i).ok_or("lzf: truncated")? as usize;
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            if back > out.len() {
                return Err("lzf: back reference before the start".into());
            }
            let start = out.len() - back;
            for k in 0..len + 2 {
                let x = out[start + k];
                out.push(x);
            }
        }
    }
    if out.len() != out_len {
        return Err(format!("lzf: {} bytes, expected {out_len}", out.len()));
    }
    Ok(out)
}

/// Takes a DUMP payload of a module value apart (checking its CRC).
pub fn parse(payload: &[u8]) -> Result<ModulePayload, String> {
    if payload.len() < 10 {
        return Err("shorter than the footer".into());
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let rdb_version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().unwrap());
    if crc64(&payload[..payload.len() - 8]) != crc {
        return Err("CRC64 mismatch".into());
    }
    let mut r = Rd { b: body, pos: 0 };
    if r.byte()? != 7 {
        return Err("not RDB_TYPE_MODULE_2".into());
    }
    let (type_id, special) = r.len()?;
    if special {
        return Err("bad module id".into());
    }
    let (op, _) = r.len()?;
    if op != 5 {
        return Err(format!("first module opcode {op}, expected a string (5)"));
    }
    let buffer = r.string()?;
    let (eof, _) = r.len()?;
    if eof != 0 {
        return Err(format!("opcode {eof} where the EOF marker should be"));
    }
    if r.pos != body.len() {
        return Err("bytes after the EOF marker".into());
    }
    Ok(ModulePayload {
        type_id,
        buffer,
        rdb_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_check_value() {
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }
}
