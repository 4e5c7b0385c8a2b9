//! RL.ACQUIRE, RL.RELEASE and RL.RENEW on a real server: the concurrency limit, leases
//! released, expired and renewed (also shortened, the TTL following), and fencing tokens
//! (the 6th field) that only increase, across release, expiry and re-creation of the key.
use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rate::*;
use std::time::Duration;

#[test]
fn concurrency_limit_release_expiry_renew() {
    let (_srv, mut c) = Server::at_clock(T0);
    let a = args!("RL.ACQUIRE", "a", 3, 10_000);
    let (r, t0) = acq(&mut c, &a);
    assert_eq!(
        (r, t0.as_deref()),
        ([1, 3, 2, 0, 10_000], Some(&*tok(T0, 0)))
    );
    // Same millisecond: the sequence counts up.
    let (r, t1) = acq(&mut c, &a);
    assert_eq!(
        (r, t1.as_deref()),
        ([1, 3, 1, 0, 10_000], Some(&*tok(T0, 1)))
    );
    clock_set(&mut c, T0 + 2_000);
    let (r, t2) = acq(&mut c, &a);
    assert_eq!(
        (r, t2.as_deref()),
        ([1, 3, 0, 0, 10_000], Some(&*tok(T0 + 2_000, 0)))
    );
    let (t0, t1, t2) = (t0.unwrap(), t1.unwrap(), t2.unwrap());
    assert_info(
        &mut c,
        "a",
        &[
            ("algorithm", s("concurrency")),
            ("limit", s(3)),
            ("max_lease_ms", s(10_000)),
            ("leases", s(3)),
            ("last_token", tok(T0 + 2_000, 0)),
            ("horizon_us", us(T0 + 12_000)),
        ],
    );
    // The 4th is refused: retry when the earliest lease (T0+10 s) expires, reset when the
    // last one (T0+12 s) does. Nothing changes.
    clock_set(&mut c, T0 + 3_000);
    let before = snap(&mut c, "a");
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 7_000, 9_000], None));
    assert_eq!(
        snap(&mut c, "a"),
        before,
        "a refused RL.ACQUIRE changed the key"
    );

    // RELEASE frees a slot (the key lives on until the last lease expires).
    let (r, p) = lease_op(&mut c, &args!("RL.RELEASE", "a", t1));
    assert_eq!(r, 1, "RELEASE of a live lease");
    assert_pttl_in_multi(p, 9_000, "after RELEASE");
    assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "a", t1)).0, 0);
    assert_eq!(lease_op(&mut c, &args!("RL.RENEW", "a", t1, 5_000)).0, 0);
    let (r, t3) = acq(&mut c, &a);
    assert_eq!(
        (r, t3.as_deref()),
        ([1, 3, 0, 0, 10_000], Some(&*tok(T0 + 3_000, 0)))
    );
    let t3 = t3.unwrap();
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 7_000, 10_000], None));

    // An expired lease frees its slot without a RELEASE.
    clock_set(&mut c, T0 + 9_999);
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 1, 3_001], None));
    clock_set(&mut c, T0 + 10_000);
    let (r, t4) = acq(&mut c, &a);
    assert_eq!(
        (r, t4.as_deref()),
        ([1, 3, 0, 0, 10_000], Some(&*tok(T0 + 10_000, 0)))
    );
    let t4 = t4.unwrap();
    // A stale (expired) token: RELEASE and RENEW answer 0 and free nothing.
    let before = snap(&mut c, "a");
    assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "a", t0)).0, 0);
    assert_eq!(lease_op(&mut c, &args!("RL.RENEW", "a", t0, 60_000)).0, 0);
    assert_eq!(
        lease_op(&mut c, &args!("RL.RELEASE", "a", tok(T0 + 99_000, 0))).0,
        0
    );
    assert_eq!(
        snap(&mut c, "a"),
        before,
        "a stale RELEASE/RENEW changed the key"
    );
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 2_000, 10_000], None));

    // RENEW extends the lease and moves the TTL: t2 now expires at T0+40 s.
    let (r, p) = lease_op(&mut c, &args!("RL.RENEW", "a", &t2, 30_000));
    assert_eq!(r, 1);
    assert_pttl_in_multi(p, 30_000, "after RENEW");
    // Earliest expiry now t3 at T0+13 s.
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 3_000, 30_000], None));
    clock_set(&mut c, T0 + 12_500);
    // t2 would have expired at T0+12 s without the RENEW: still live, so still full.
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 500, 27_500], None));
    // t3 expires at T0+13 s: one slot free; the key lives until t2's new expiry.
    clock_set(&mut c, T0 + 13_000);
    let (r, t5) = acq(&mut c, &a);
    assert_eq!(
        (r, t5.as_deref()),
        ([1, 3, 0, 0, 27_000], Some(&*tok(T0 + 13_000, 0)))
    );
    assert_info(
        &mut c,
        "a",
        &[
            ("max_lease_ms", s(30_000)),
            ("last_token", tok(T0 + 13_000, 0)),
            ("horizon_us", us(T0 + 40_000)),
        ],
    );
    // RELEASE/RENEW on a key that does not exist: 0, no key created.
    assert_eq!(
        lease_op(&mut c, &args!("RL.RELEASE", "nokey", tok(T0, 0))).0,
        0
    );
    assert_eq!(
        lease_op(&mut c, &args!("RL.RENEW", "nokey", tok(T0, 0), 1000)).0,
        0
    );
    assert!(!exists(&mut c, "nokey"));
    // Tokens strictly increased throughout.
    let all = [t0, t1, t2, t3, t4, t5.unwrap()];
    for w in all.windows(2) {
        assert!(parse_tok(&w[0]) < parse_tok(&w[1]), "tokens {all:?}");
    }
}

/// RENEW sets the lease's expiry to now + lease_ms, also earlier than before, and the
/// key's TTL is the time until the last lease expires (contract, RL.ACQUIRE section).
#[test]
fn renew_can_shorten_a_lease_and_the_ttl_follows() {
    let (_srv, mut c) = Server::at_clock(T0);
    let a = args!("RL.ACQUIRE", "a", 2, 10_000);
    let (r, t) = acq(&mut c, &a);
    assert_eq!(r, [1, 2, 1, 0, 10_000]);
    let t = t.unwrap();
    let (r, p) = lease_op(&mut c, &args!("RL.RENEW", "a", &t, 1_000));
    assert_eq!(r, 1);
    // The lease is now the only one and expires at T0+1 s.
    assert_pttl_in_multi(p, 1_000, "after RENEW to 1000 ms");
    clock_set(&mut c, T0 + 999);
    assert_eq!(acq(&mut c, &with(&a, &["DRYRUN"])).0, [1, 2, 0, 0, 10_000]);
    clock_set(&mut c, T0 + 1_000);
    // Expired: both slots free; RENEW/RELEASE of it answer 0.
    assert_eq!(lease_op(&mut c, &args!("RL.RENEW", "a", &t, 5_000)).0, 0);
    let (r, t2) = acq(&mut c, &args!("RL.ACQUIRE", "a", 2, 2_000));
    assert_eq!(
        r,
        [1, 2, 1, 0, 2_000],
        "a fresh key's answer after the renewed lease expired"
    );
    assert!(parse_tok(&t) < parse_tok(&t2.unwrap()));
}

#[test]
fn tokens_increase_across_release_expiry_and_recreation() {
    let (_srv, mut c) = Server::at_clock(T0);
    // RELEASE does not let a later ACQUIRE at the same ms reuse a token. Another lease is
    // held: with every lease released the key lives only until its token's ms is past, 1
    // ms of real time while the test clock stands still (`algo::lease`'s unit tests cover
    // that case on the pure state).
    let kept = args!("RL.ACQUIRE", "s", 3, 60_000);
    let (r, a) = acq(&mut c, &kept);
    assert_eq!(r, [1, 3, 2, 0, 60_000]);
    let a = a.unwrap();
    assert_eq!(acq(&mut c, &kept).0[0], 1);
    assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "s", &a)).0, 1);
    let (_, b) = acq(&mut c, &kept);
    let b = b.unwrap();
    assert!(parse_tok(&a) < parse_tok(&b), "{a} then {b} at the same ms");
    // The key lives no longer than its leases (it may be gone already): let it expire in
    // real time, with the test clock moved along.
    let short = args!("RL.ACQUIRE", "t", 3, 50);
    let (r, old) = acq(&mut c, &short);
    assert_eq!(r, [1, 3, 2, 0, 50]);
    let old = old.unwrap();
    let p = pttl(&mut c, "t");
    assert!(
        p == -2 || (0..=50).contains(&p),
        "the key outlives its leases: PTTL {p}"
    );
    wait_until("the key to expire", Duration::from_secs(10), || {
        !exists(&mut c, "t")
    });
    clock_advance(&mut c, 120);
    // Re-created with a long lease, so it stays while the stale token is tried.
    let long = args!("RL.ACQUIRE", "t", 3, 60_000);
    let (r, d) = acq(&mut c, &long);
    assert_eq!(r, [1, 3, 2, 0, 60_000]);
    assert_eq!(d.unwrap(), tok(T0 + 120, 0));
    // A token from before the re-creation is stale: 0, nothing freed.
    let before = snap(&mut c, "t");
    assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "t", &old)).0, 0);
    assert_eq!(lease_op(&mut c, &args!("RL.RENEW", "t", &old, 50)).0, 0);
    assert_eq!(snap(&mut c, "t"), before);
    assert_eq!(
        acq(&mut c, &with(&long, &["DRYRUN"])).0,
        [1, 3, 1, 0, 60_000]
    );

    // The same with the real clock: the key expires, is re-created, tokens go on rising.
    ok(&mut c, &args!("RL.CLOCK", "REAL"));
    let real = args!("RL.ACQUIRE", "r", 2, 50);
    let mut prev: Option<String> = None;
    for round in 0..3 {
        let (r, t) = acq(&mut c, &real);
        assert_eq!(r[0], 1, "round {round}");
        let t = t.unwrap();
        let (r2, t2) = acq(&mut c, &real);
        assert_eq!(r2[0], 1, "round {round}");
        let t2 = t2.unwrap();
        assert!(parse_tok(&t) < parse_tok(&t2), "{t} then {t2}");
        if let Some(p) = &prev {
            assert!(parse_tok(p) < parse_tok(&t), "{p} then {t}");
            // A re-created key exists only after every earlier lease expired.
            assert!(
                parse_tok(&t).0 >= parse_tok(p).0 + 50,
                "re-created key's token {t} not 50 ms after {p}"
            );
            assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "r", p)).0, 0);
        }
        prev = Some(t2);
        let p = pttl(&mut c, "r");
        assert!(
            p == -2 || (0..=50).contains(&p),
            "round {round}: the key outlives its leases: PTTL {p}"
        );
        wait_until("the key to expire", Duration::from_secs(10), || {
            !exists(&mut c, "r")
        });
    }
}
