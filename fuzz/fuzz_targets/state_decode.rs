//! The state codec, as RDB load, RESTORE and RL._APPLY use it, on arbitrary bytes:
//! - `State::decode` and `split_payload` never panic;
//! - whatever decodes re-encodes to exactly the same bytes, and decodes equal again;
//! - a decoded state (a crafted RESTORE payload the decoder accepted) then hit by a command
//!   of its own algorithm with any valid parameters, cost and time keeps every per-call
//!   property (`rl_fuzz::check`): no panic, sane reply, no block beyond the reset time.
//!
//! - `replay::Op::decode` (an RL._APPLY operation) never panics, re-encodes to the same
//!   bytes, and runs on any decoded state without panicking.
//!
//! Input layout for the last part: the first 48 bytes choose the rule, cost and time; the
//! rest is the payload. The whole input is also decoded as is.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use rl_fuzz::replay::Op;
use rl_fuzz::state::{split_payload, State};
use rl_fuzz::{call, cost, num, rule_of, MAX_NOW_US};

const HEAD: usize = 48;

fn codec(data: &[u8]) -> Option<State> {
    let s = State::decode(data).ok()?;
    let enc = s.encode();
    assert_eq!(
        enc.as_slice(),
        data,
        "decode/encode is not the identity: {s:?}"
    );
    assert_eq!(State::decode(enc.as_slice()).as_ref(), Ok(&s));
    let _ = s.mem_usage();
    Some(s)
}

/// An operation at the front of `data` (its encoding's length is fixed by its tag), run on
/// the state the rest decodes to, or on its fresh state.
fn replay(data: &[u8]) {
    for len in [26, 34, 66] {
        let Some(op) = data.get(..len).and_then(|b| Op::decode(b).ok()) else {
            continue;
        };
        assert_eq!(op.encode().as_slice(), &data[..len], "op decode/encode: {op:?}");
        let mut s = match State::decode(&data[len..]) {
            Ok(s) if s.algo() == op.algo() => s,
            _ => match op.fresh() {
                Some(s) => s,
                None => return,
            },
        };
        op.run(&mut s);
        let enc = s.encode();
        assert_eq!(State::decode(enc.as_slice()).as_ref(), Ok(&s));
    }
}

fuzz_target!(|data: &[u8]| {
    replay(data);
    let whole = codec(data);
    match split_payload(data) {
        Ok((at, s)) => {
            assert_eq!(Some(&s), codec(&data[8..]).as_ref());
            let head = u64::from_le_bytes(data[..8].try_into().unwrap());
            assert_eq!(at, (head != 0).then_some(head));
        }
        Err(_) => assert!(data.len() < 8 || State::decode(&data[8..]).is_err()),
    }
    let _ = whole;
    if data.len() <= HEAD {
        return;
    }
    let (head, payload) = data.split_at(HEAD);
    let Some(s) = codec(payload) else { return };
    let mut u = Unstructured::new(head);
    let Ok(Some(rule)) = rule_of(&mut u, s.algo()) else {
        return;
    };
    let (Ok(c), Ok(now), Ok(dry)) = (
        cost(&mut u, &rule),
        num(&mut u, MAX_NOW_US),
        u.arbitrary::<bool>(),
    ) else {
        return;
    };
    let mut stored = Some(s);
    call(&rule, &mut stored, c, now, !dry);
});
