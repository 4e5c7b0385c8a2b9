//! Integer arguments as Redis reads them, with precise errors. (The options of the rate
//! commands are parsed by `options.rs`, over any [`Word`].)

use crate::algo::ParamError;
use crate::error::{Error, NOT_INTEGER};
use crate::options::Word;
use crate::rm::{self, RStr};

/// A signed 64-bit integer argument, parsed exactly like Redis parses integers.
#[inline]
pub fn int(s: &RStr) -> Result<i64, Error> {
    s.int().ok_or(Error::Static(NOT_INTEGER))
}

impl Word for RStr {
    #[inline]
    fn bytes(&self) -> &[u8] {
        rm::bytes(self)
    }
}

/// An integer argument that must be at least 1.
#[inline]
pub fn positive(s: &RStr, name: &'static str) -> Result<u64, Error> {
    match int(s)? {
        v if v >= 1 => Ok(v as u64),
        _ => Err(ParamError::NotPositive(name).into()),
    }
}

/// An integer argument that must be at least 0.
pub fn non_negative(s: &RStr, name: &'static str) -> Result<u64, Error> {
    match int(s)? {
        v if v >= 0 => Ok(v as u64),
        _ => Err(ParamError::Negative(name).into()),
    }
}

#[cfg(test)]
mod tests {
    use crate::options::parse_i64;
    use proptest::prelude::*;

    /// Redis's `string2ll`, as its rules read: the reference for [`parse_i64`].
    fn reference(b: &[u8]) -> Option<i64> {
        let s = std::str::from_utf8(b).ok()?;
        let digits = s.strip_prefix('-').unwrap_or(s);
        let well_formed = !digits.is_empty()
            && digits.bytes().all(|d| d.is_ascii_digit())
            && (s == "0" || !digits.starts_with('0'))
            && b.len() <= 20;
        if !well_formed {
            return None;
        }
        s.parse().ok()
    }

    #[test]
    fn integers_as_redis_reads_them() {
        for (s, want) in [
            ("0", Some(0)),
            ("1", Some(1)),
            ("-1", Some(-1)),
            ("3600000", Some(3_600_000)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("18446744073709551616", None),
            ("", None),
            ("-", None),
            ("-0", None),
            ("00", None),
            ("01", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("1e3", None),
            ("0x10", None),
            ("1.0", None),
        ] {
            assert_eq!(parse_i64(s.as_bytes()), want, "{s:?}");
            assert_eq!(reference(s.as_bytes()), want, "{s:?}");
        }
    }

    proptest! {
        #[test]
        fn same_as_string2ll(
            s in prop_oneof![
                "-?[0-9]{1,21}",
                "[-+ 0-9a]{0,22}",
                any::<i64>().prop_map(|v| v.to_string()),
            ],
        ) {
            prop_assert_eq!(parse_i64(s.as_bytes()), reference(s.as_bytes()));
        }
    }
}
