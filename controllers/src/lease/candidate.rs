//! One candidate's decisions, pure: given the Lease as last read (or none)
//! and the time, whether to create it, renew or take it, or follow its
//! holder; and whether this candidate may act at a given time.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The election's periods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `leaseDurationSeconds` written into the Lease: how long others wait
    /// without a renewal before taking it.
    pub lease_duration: Duration,
    /// How long after a renewal began the holder may still act without
    /// another; shorter than `lease_duration`.
    pub renew_deadline: Duration,
    /// How often a candidate reads (and the holder renews) the Lease.
    pub retry_period: Duration,
}

impl Timing {
    /// client-go's defaults: 15 s, 10 s, 2 s.
    pub const DEFAULT: Timing = Timing {
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };

    /// Why these periods cannot work, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.lease_duration.as_secs() < 1 || self.lease_duration.subsec_nanos() != 0 {
            return Err("the lease duration must be a whole number of seconds, at least 1".into());
        }
        if self.renew_deadline >= self.lease_duration {
            return Err("the renew deadline must be shorter than the lease duration".into());
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return Err("the retry period must be above zero and below the renew deadline".into());
        }
        Ok(())
    }
}

/// What a candidate writes next.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// No Lease exists: create it with this spec.
    Create(LeaseSpec),
    /// Replace the Lease (the version read) with this spec: a renewal or
    /// a takeover.
    Update(LeaseSpec),
    /// Someone else holds it and it has not expired: write nothing.
    Follow { holder: String },
}

/// The part of a Lease that says whether its holder is alive.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    holder: Option<String>,
    renew: Option<MicroTime>,
    acquire: Option<MicroTime>,
    transitions: Option<i32>,
    duration: Option<i32>,
}

impl Record {
    fn of(s: &LeaseSpec) -> Record {
        Record {
            holder: s.holder_identity.clone().filter(|h| !h.is_empty()),
            renew: s.renew_time.clone(),
            acquire: s.acquire_time.clone(),
            transitions: s.lease_transitions,
            duration: s.lease_duration_seconds,
        }
    }
}

/// One candidate for the Lease.
#[derive(Debug, Clone)]
pub struct Candidate {
    id: String,
    timing: Timing,
    /// The holder's record as last seen, and when (this clock) it was
    /// first seen so.
    observed: Option<(Record, Timestamp)>,
    /// When this candidate's last successful write began: it may act
    /// until that plus the renew deadline.
    renewed_at: Option<Timestamp>,
}

impl Candidate {
    pub fn new(id: &str, timing: Timing) -> Candidate {
        Candidate {
            id: id.to_string(),
            timing,
            observed: None,
            renewed_at: None,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// What to write, given the Lease as read at `now` (`None`: there is
    /// none). `now` is also the time the write begins.
    pub fn plan(&mut self, lease: Option<&LeaseSpec>, now: Timestamp) -> Plan {
        let Some(lease) = lease else {
            self.observed = None;
            return Plan::Create(self.spec(now, now, 0));
        };
        let record = Record::of(lease);
        match &self.observed {
            Some((seen, _)) if *seen == record => {}
            _ => self.observed = Some((record.clone(), now)),
        }
        let transitions = record.transitions.unwrap_or(0).max(0);
        match record.holder.as_deref() {
            Some(h) if h == self.id => {
                let acquired = record.acquire.map_or(now, |t| t.0);
                Plan::Update(self.spec(acquired, now, transitions))
            }
            Some(h) if !self.expired(&record, now) => Plan::Follow {
                holder: h.to_string(),
            },
            // Released (no holder) or expired: take it.
            _ => Plan::Update(self.spec(now, now, transitions.saturating_add(1))),
        }
    }

    /// Whether the holder of `record`, first seen at the observed time,
    /// has let it lapse by `now`.
    fn expired(&self, record: &Record, now: Timestamp) -> bool {
        let Some((_, seen_at)) = &self.observed else {
            return false;
        };
        // The Lease's own duration, if it gives a sane one, else ours.
        let secs = record
            .duration
            .filter(|d| *d > 0)
            .map_or(self.timing.lease_duration.as_secs() as i64, i64::from);
        now >= seen_at
            .saturating_add(SignedDuration::from_secs(secs))
            .unwrap_or(Timestamp::MAX)
    }

    fn spec(&self, acquired: Timestamp, now: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.id.clone()),
            lease_duration_seconds: Some(
                self.timing.lease_duration.as_secs().min(i32::MAX as u64) as i32
            ),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// The write planned at `began` succeeded: this candidate holds the
    /// Lease and may act until `began` plus the renew deadline.
    pub fn written(&mut self, began: Timestamp, spec: &LeaseSpec) {
        self.observed = Some((Record::of(spec), began));
        self.renewed_at = Some(began);
    }

    /// The write failed or another holds the Lease: stop acting at once.
    pub fn lost(&mut self) {
        self.renewed_at = None;
    }

    /// Whether this candidate may act at `now`.
    pub fn leading(&self, now: Timestamp) -> bool {
        let Some(at) = self.renewed_at else {
            return false;
        };
        let deadline =
            SignedDuration::try_from(self.timing.renew_deadline).unwrap_or(SignedDuration::ZERO);
        at.saturating_add(deadline).is_ok_and(|end| now < end)
    }
}
