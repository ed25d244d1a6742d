//! BFD settings of a BGP session (RFC 5880/5881), shared by BGPPeer and the
//! node mesh in BGPConfiguration.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problems, parse_duration};
use super::schema_rules;

/// The shortest and longest BFD interval accepted.
pub const BFD_MIN_INTERVAL: Duration = Duration::from_millis(10);
pub const BFD_MAX_INTERVAL: Duration = Duration::from_secs(60);
/// Defaults when a field is left out.
pub const BFD_DEFAULT_INTERVAL: Duration = Duration::from_millis(300);
pub const BFD_DEFAULT_MULTIPLIER: u8 = 3;

/// Bidirectional Forwarding Detection for the session: the session is
/// closed (and its routes withdrawn, without graceful restart) as soon as
/// BFD declares the path down, and is not opened while BFD is not up.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BfdSpec {
    /// The shortest interval at which this node accepts the peer's
    /// packets, e.g. `300ms`; 10ms to 60s. Default 300ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::bfd_interval)]
    pub min_rx: Option<String>,
    /// The shortest interval at which this node wants to send, e.g.
    /// `300ms`; 10ms to 60s. Default 300ms. The slower of this and the
    /// peer's minRx is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::bfd_interval)]
    pub min_tx: Option<String>,
    /// Packets the peer may miss before the session is declared down
    /// (RFC 5880 Detect Mult); 1 to 255. Default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub multiplier: Option<u8>,
}

/// The checked timers of a [`BfdSpec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BfdTimers {
    pub min_rx: Duration,
    pub min_tx: Duration,
    pub multiplier: u8,
}

fn interval(s: Option<&str>) -> Result<Duration, String> {
    let Some(s) = s else {
        return Ok(BFD_DEFAULT_INTERVAL);
    };
    let d = parse_duration(s)?;
    if d < BFD_MIN_INTERVAL || d > BFD_MAX_INTERVAL {
        return Err(format!("{s} is out of range; allowed 10ms to 60s"));
    }
    Ok(d)
}

impl BfdSpec {
    /// The timers with defaults filled in, or the first problem.
    pub fn timers(&self) -> Result<BfdTimers, String> {
        let multiplier = self.multiplier.unwrap_or(BFD_DEFAULT_MULTIPLIER);
        if multiplier == 0 {
            return Err("multiplier 0 is out of range; allowed 1 to 255".into());
        }
        Ok(BfdTimers {
            min_rx: interval(self.min_rx.as_deref())?,
            min_tx: interval(self.min_tx.as_deref())?,
            multiplier,
        })
    }

    /// Record every problem against `field` (e.g. `spec.bfd`).
    pub(crate) fn check(&self, field: &str, p: &mut Problems) {
        p.take(&format!("{field}.minRx"), interval(self.min_rx.as_deref()));
        p.take(&format!("{field}.minTx"), interval(self.min_tx.as_deref()));
        if self.multiplier == Some(0) {
            p.add(
                format!("{field}.multiplier"),
                "0 is out of range; allowed 1 to 255",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(spec: &BfdSpec) -> Vec<(String, String)> {
        let mut p = Problems::default();
        spec.check("spec.bfd", &mut p);
        p.0
    }

    #[test]
    fn defaults_and_values() {
        let t = BfdSpec::default().timers().unwrap();
        assert_eq!(
            (t.min_rx, t.min_tx, t.multiplier),
            (Duration::from_millis(300), Duration::from_millis(300), 3)
        );
        let s = BfdSpec {
            min_rx: Some("50ms".into()),
            min_tx: Some("1s".into()),
            multiplier: Some(5),
        };
        let t = s.timers().unwrap();
        assert_eq!(
            (t.min_rx, t.min_tx, t.multiplier),
            (Duration::from_millis(50), Duration::from_secs(1), 5)
        );
        assert!(problems(&s).is_empty());
    }

    #[test]
    fn rejects_out_of_range_and_malformed() {
        let s = BfdSpec {
            min_rx: Some("5ms".into()),
            min_tx: Some("fast".into()),
            multiplier: Some(0),
        };
        let p = problems(&s);
        let fields: Vec<&str> = p.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.bfd.minRx", "spec.bfd.minTx", "spec.bfd.multiplier"]
        );
        assert!(p[0].1.contains("allowed 10ms to 60s"), "{}", p[0].1);
        assert!(s.timers().is_err());
        let slow = BfdSpec {
            min_tx: Some("61s".into()),
            ..Default::default()
        };
        assert_eq!(problems(&slow).len(), 1);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let r: Result<BfdSpec, _> = serde_json::from_str(r#"{"minRx":"300ms","interval":"1s"}"#);
        assert!(r.is_err());
    }
}
