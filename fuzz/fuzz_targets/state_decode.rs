//! The state codec, as RDB load, RESTORE and RL._APPLY use it, on arbitrary bytes:
//! - `State::decode` and `split_payload` never panic;
//! - whatever decodes encodes canonically (leases in token order) and decodes equal again;
//! - a decoded state (a crafted RESTORE payload the decoder accepted) then hit by a command
//!   of its own algorithm with any valid parameters, cost and time keeps every per-call
//!   property (`rl_fuzz::check`): no panic, sane reply, no block beyond the reset time.
//!
//! - `replay::Op::decode` (an RL._APPLY operation) never panics, re-encodes to the same
//!   bytes, and runs on any decoded state without panicking.
//! - closure: any write a command may make (`ops::Write`: every rate request with its
//!   options, lease operations, CL.THROTTLE) on a decoded state leaves a state the codec
//!   accepts again, equal (so RDB load never refuses what a command stored).
//!
//! Input layout for the last part: the first 48 bytes choose the rule, cost and time; the
//! rest is the payload. The whole input is also decoded as is.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use rl_fuzz::replay::Op;
use rl_fuzz::state::{split_payload, State};
use rl_fuzz::{call, cost, num, ops, rule_of, write_of, MAX_NOW_US};

const HEAD: usize = 48;

fn codec(data: &[u8]) -> Option<State> {
    let s = State::decode(data).ok()?;
    let enc = s.encode();
    // The encoding is canonical (leases in token order, whatever order the payload had):
    // decoding it gives the same state, and encoding that gives the same bytes.
    let back = State::decode(enc.as_slice());
    assert_eq!(back.as_ref(), Ok(&s), "decode(encode(s)) != s");
    if let Ok(b) = back {
        assert_eq!(
            b.encode().as_slice(),
            enc.as_slice(),
            "encoding is not canonical: {s:?}"
        );
    }
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
        assert_eq!(
            op.encode().as_slice(),
            &data[..len],
            "op decode/encode: {op:?}"
        );
        let mut s = match State::decode(&data[len..]) {
            Ok(s) if s.fits(op.algo()) => s,
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
    // A key holding only a pause: any algorithm's command may come.
    let algo = s
        .algo()
        .unwrap_or(rl_fuzz::ALGOS[usize::from(head[0]) % rl_fuzz::ALGOS.len()]);
    if let Ok(Some(w)) = write_of(&mut Unstructured::new(head), algo, &s) {
        if let Err(e) = ops::stays_storable(&s, &w) {
            panic!("a write left a state the codec refuses: {e}");
        }
    }
    let mut u = Unstructured::new(head);
    let Ok(Some(rule)) = rule_of(&mut u, algo) else {
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
