//! `Token::parse` (RL.RELEASE / RL.RENEW arguments): never panics, agrees with a reference
//! parser of `<ms>-<seq>` (1 to 20 ASCII digits each, values within u64), and a parsed token
//! prints back to a string that parses to the same token.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rl_fuzz::algo::lease::Token;

fn number(d: &[u8]) -> Option<u64> {
    if d.is_empty() || d.len() > 20 || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = d
        .iter()
        .fold(0u128, |acc, &b| acc * 10 + u128::from(b - b'0'));
    u64::try_from(v).ok()
}

fn reference(s: &[u8]) -> Option<Token> {
    let dash = s.iter().position(|&b| b == b'-')?;
    Some(Token {
        ms: number(&s[..dash])?,
        seq: number(&s[dash + 1..])?,
    })
}

fuzz_target!(|data: &[u8]| {
    let got = Token::parse(data);
    assert_eq!(
        got,
        reference(data),
        "input {:?}",
        String::from_utf8_lossy(data)
    );
    if let Some(t) = got {
        let printed = t.to_string();
        assert_eq!(Token::parse(printed.as_bytes()), Some(t));
        // Canonical input (no leading zeros) prints back identically.
        let canonical = |d: &[u8]| d.len() == 1 || d.first() != Some(&b'0');
        let dash = data.iter().position(|&b| b == b'-').unwrap();
        if canonical(&data[..dash]) && canonical(&data[dash + 1..]) {
            assert_eq!(printed.as_bytes(), data);
        }
    }
});
