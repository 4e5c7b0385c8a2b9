//! Redis Cluster's hash slot of a key, computed here so that `STAGGER` gives every server
//! (and every client) the same window offset, clustered or not: CRC16 (XMODEM, as Redis's
//! `crc16.c`) of the key, or of its hash tag (the part between the first `{` and the next
//! `}`, when not empty), mod 16384.

/// Number of hash slots.
pub const SLOTS: u16 = 16_384;

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: its hash tag if it has a non-empty one, else all of it.
fn hashed(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    let rest = key.get(open + 1..).unwrap_or(&[]);
    match rest.iter().position(|&b| b == b'}') {
        Some(0) | None => key,
        Some(close) => rest.get(..close).unwrap_or(key),
    }
}

/// The key's hash slot, `0..16384` (what `CLUSTER KEYSLOT` answers).
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hashed(key)) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_cluster() {
        // CRC16 check value of the XMODEM variant, and slots CLUSTER KEYSLOT answers.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"{user1000}.followers"), key_slot(b"user1000"));
        // An empty tag hashes the whole key; only the first tag counts.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot(b"foo{{bar}}zap"), crc16(b"{bar") % SLOTS);
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"{"), crc16(b"{") % SLOTS);
        assert_eq!(key_slot(b""), 0);
    }
}
