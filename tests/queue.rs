//! RL.QUEUE on a real server: requests shaped to one per interval (the 6th field,
//! delay_ms), hand-computed at a frozen test clock.
use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rate::*;

#[test]
fn queue_shapes_one_per_interval() {
    let (_srv, mut c) = Server::at_clock(T0);
    let q = args!("RL.QUEUE", "q", 5, 1_000);
    // 8 at once: 5 admitted with delays 0..4000, 3 refused.
    for i in 0..5 {
        assert_eq!(
            q6(&mut c, &q),
            [1, 5, 4 - i, 0, 1_000 * (i + 1), 1_000 * i],
            "request {}",
            i + 1
        );
    }
    let before = snap(&mut c, "q");
    for i in 5..8 {
        assert_eq!(
            q6(&mut c, &q),
            [0, 5, 0, 1_000, 5_000, 0],
            "request {}",
            i + 1
        );
    }
    assert_eq!(
        snap(&mut c, "q"),
        before,
        "a refused RL.QUEUE changed the key"
    );
    assert_info(
        &mut c,
        "q",
        &[
            ("algorithm", s("queue")),
            ("capacity", s(5)),
            ("interval_ms", s(1_000)),
            ("tat_ns", ns(T0 + 5_000)),
        ],
    );
    // It drains one per interval: each interval exactly one more, waiting 4000 ms.
    for k in 1..=4 {
        clock_set(&mut c, T0 + 1_000 * k);
        assert_eq!(q6(&mut c, &q), [1, 5, 0, 0, 5_000, 4_000], "at +{k} s");
        assert_eq!(q6(&mut c, &q), [0, 5, 0, 1_000, 5_000, 0], "at +{k} s");
    }
    clock_set(&mut c, T0 + 4_999);
    assert_eq!(q6(&mut c, &q), [0, 5, 0, 1, 4_001, 0]);
    // 2.5 s later: 2.5 places freed, 2 whole.
    clock_set(&mut c, T0 + 6_500);
    assert_eq!(q6(&mut c, &q), [1, 5, 1, 0, 3_500, 2_500]);
    assert_eq!(q6(&mut c, &q), [1, 5, 0, 0, 4_500, 3_500]);
    assert_eq!(q6(&mut c, &q), [0, 5, 0, 500, 4_500, 0]);
    // COST n waits for n places.
    let q2 = args!("RL.QUEUE", "q2", 5, 1_000, "COST", 2);
    assert_eq!(q6(&mut c, &q2), [1, 5, 3, 0, 2_000, 0]);
    assert_eq!(q6(&mut c, &q2), [1, 5, 1, 0, 4_000, 2_000]);
    assert_eq!(q6(&mut c, &q2), [0, 5, 1, 1_000, 4_000, 0]);
    assert_eq!(
        q6(&mut c, &args!("RL.QUEUE", "q2", 5, 1_000)),
        [1, 5, 0, 0, 5_000, 4_000]
    );
    // Idle longer than the reset: fresh.
    clock_set(&mut c, T0 + 60_000);
    assert_eq!(q6(&mut c, &q), [1, 5, 4, 0, 1_000, 0]);
}
