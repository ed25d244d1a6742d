//! The election with a controllable clock: the candidate's rules, and two
//! candidates on one simulated Lease (compare-and-swap, slow writes,
//! pauses) that never both lead.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::jiff::Timestamp;

use super::{Candidate, Plan, Timing};

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(1_800_000_000_000 + ms).unwrap()
}

fn spec_of(p: &Plan) -> LeaseSpec {
    match p {
        Plan::Create(s) | Plan::Update(s) => s.clone(),
        Plan::Follow { holder } => panic!("follows {holder}"),
    }
}

#[test]
fn creates_renews_and_takes_over_only_after_the_duration() {
    let t = Timing::DEFAULT;
    let mut a = Candidate::new("a", t);
    let mut b = Candidate::new("b", t);
    let p = a.plan(None, at(0));
    assert!(matches!(p, Plan::Create(_)));
    let lease = spec_of(&p);
    assert_eq!(lease.holder_identity.as_deref(), Some("a"));
    assert_eq!(lease.lease_duration_seconds, Some(15));
    assert_eq!(lease.lease_transitions, Some(0));
    a.written(at(0), &lease);
    assert!(a.leading(at(9_999)));
    assert!(!a.leading(at(10_000)), "the renew deadline ends leadership");

    // b sees a's lease at 1 s: it follows until 16 s on its own clock.
    assert_eq!(
        b.plan(Some(&lease), at(1_000)),
        Plan::Follow { holder: "a".into() }
    );
    assert!(matches!(
        b.plan(Some(&lease), at(15_999)),
        Plan::Follow { .. }
    ));

    // a renews at 2 s: same acquire time, new renew time.
    let renewed = spec_of(&a.plan(Some(&lease), at(2_000)));
    assert_eq!(renewed.acquire_time, lease.acquire_time);
    assert_eq!(renewed.renew_time.as_ref().unwrap().0, at(2_000));
    assert_eq!(renewed.lease_transitions, Some(0));
    a.written(at(2_000), &renewed);
    // A new record restarts b's wait, from when b first sees it.
    assert!(matches!(
        b.plan(Some(&renewed), at(5_000)),
        Plan::Follow { .. }
    ));
    assert!(matches!(
        b.plan(Some(&renewed), at(19_999)),
        Plan::Follow { .. }
    ));
    let taken = spec_of(&b.plan(Some(&renewed), at(20_000)));
    assert_eq!(taken.holder_identity.as_deref(), Some("b"));
    assert_eq!(taken.lease_transitions, Some(1));
    assert_eq!(taken.acquire_time.as_ref().unwrap().0, at(20_000));
    assert!(!a.leading(at(20_000)), "a stopped acting long before");
}

#[test]
fn a_released_lease_is_taken_at_once_and_a_lost_write_stops_acting() {
    let mut a = Candidate::new("a", Timing::DEFAULT);
    let released = LeaseSpec {
        holder_identity: Some(String::new()),
        lease_transitions: Some(4),
        ..Default::default()
    };
    let p = spec_of(&a.plan(Some(&released), at(0)));
    assert_eq!(p.lease_transitions, Some(5));
    a.written(at(0), &p);
    assert!(a.leading(at(1)));
    a.lost();
    assert!(!a.leading(at(2)));
}

#[test]
fn timings_are_checked() {
    assert_eq!(Timing::DEFAULT.check(), Ok(()));
    let bad = Timing {
        renew_deadline: Duration::from_secs(15),
        ..Timing::DEFAULT
    };
    assert!(bad.check().is_err());
    let bad = Timing {
        lease_duration: Duration::from_millis(1500),
        ..Timing::DEFAULT
    };
    assert!(bad.check().is_err());
    let bad = Timing {
        retry_period: Duration::ZERO,
        ..Timing::DEFAULT
    };
    assert!(bad.check().is_err());
}

/// A deterministic pseudo-random sequence (a fixed-seed LCG), so that the
/// simulation below is the same on every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// A write begun at `began` that lands on the store at `lands`.
struct Pending {
    plan: Plan,
    read_version: Option<u64>,
    began: Timestamp,
    lands: i64,
}

#[test]
fn two_candidates_never_both_lead() {
    let timing = Timing {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
    };
    for seed in 1..=20u64 {
        let mut rng = Lcg(seed);
        let mut cands = [Candidate::new("a", timing), Candidate::new("b", timing)];
        // The store: the Lease and its version (None: absent).
        let mut lease: Option<(LeaseSpec, u64)> = None;
        let mut version = 0u64;
        let mut pending: [Option<Pending>; 2] = [None, None];
        let mut next_round = [0i64; 2];
        let mut paused_until = [0i64; 2];
        let (mut led, mut handovers, mut last) = (0u32, 0u32, None);
        for tick in 0..6_000i64 {
            let ms = tick * 50;
            let now = at(ms);
            for i in 0..2 {
                if paused_until[i] > ms {
                    continue;
                }
                if rng.below(400) == 0 {
                    // A pause (a stopped process, a lost network) of up
                    // to 8 s; a write in flight lands meanwhile or not.
                    paused_until[i] = ms + rng.below(8_000) as i64;
                    continue;
                }
                if let Some(p) = pending[i].take_if(|p| p.lands <= ms) {
                    let ok = match (&p.plan, &lease) {
                        (Plan::Create(_), None) => true,
                        (Plan::Update(_), Some((_, v))) => Some(*v) == p.read_version,
                        _ => false,
                    };
                    if ok {
                        version += 1;
                        let s = spec_of(&p.plan);
                        cands[i].written(p.began, &s);
                        lease = Some((s, version));
                    } else {
                        cands[i].lost();
                    }
                } else if pending[i].is_none() && ms >= next_round[i] {
                    next_round[i] = ms + timing.retry_period.as_millis() as i64;
                    let read = lease.clone();
                    match cands[i].plan(read.as_ref().map(|(s, _)| s), now) {
                        Plan::Follow { .. } => cands[i].lost(),
                        plan => {
                            // Writes take up to 2.5 s, past the deadline.
                            let delay = if rng.below(10) == 0 { 2_500 } else { 200 };
                            pending[i] = Some(Pending {
                                plan,
                                read_version: read.map(|(_, v)| v),
                                began: now,
                                lands: ms + rng.below(delay) as i64,
                            });
                        }
                    }
                }
            }
            let leaders: Vec<usize> = (0..2).filter(|&i| cands[i].leading(now)).collect();
            assert!(leaders.len() <= 1, "seed {seed}: both lead at {ms} ms");
            if let Some(&l) = leaders.first() {
                led += 1;
                if last.is_some_and(|x| x != l) {
                    handovers += 1;
                }
                last = Some(l);
            }
        }
        assert!(
            led > 3_000,
            "seed {seed}: someone leads most of the time ({led})"
        );
        assert!(handovers > 0, "seed {seed}: pauses hand the lease over");
    }
}

#[tokio::test]
async fn a_released_lease_is_taken_at_the_next_round() {
    use std::sync::Arc;

    use super::elect::{Elector, Round, release};

    let store: Arc<dyn tartan_api::store::Datastore> =
        tartan_api::store::connect("memory", None).await.unwrap();
    let elector = |id: &str| Elector {
        store: store.clone(),
        namespace: "tartan-system".into(),
        name: "tartan-controllers".into(),
        candidate: Candidate::new(id, Timing::DEFAULT),
    };
    let (mut a, mut b) = (elector("a"), elector("b"));
    assert_eq!(a.round(|| at(0)).await, Round::Holds);
    assert_eq!(b.round(|| at(100)).await, Round::Follows("a".into()));
    assert!(
        !release(&*store, "tartan-system", "tartan-controllers", "b")
            .await
            .unwrap()
    );
    assert!(
        release(&*store, "tartan-system", "tartan-controllers", "a")
            .await
            .unwrap()
    );
    assert_eq!(b.round(|| at(200)).await, Round::Holds);
    assert!(b.candidate.leading(at(201)));
}
