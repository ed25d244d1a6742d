//! When the CNI plugins' token is renewed and what the kubeconfig that
//! carries it says. Pure: the clock is an argument.

use std::fmt::Write;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The share of a token's lifetime after which it is renewed.
pub const RENEW_AT: f64 = 0.8;
/// The first retry after a failed request, doubled per failure up to
/// [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How long after `now` to renew a token that expires at `expires`:
/// 80 % of what is left of it (a token already expired, by a clock
/// ahead of ours, is renewed after the first backoff).
pub fn renew_in(now: SystemTime, expires: SystemTime) -> Duration {
    match expires.duration_since(now) {
        Ok(left) if !left.is_zero() => left.mul_f64(RENEW_AT),
        _ => FIRST_BACKOFF,
    }
}

/// The wait after the `failures`-th failure in a row (1: the first).
pub fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .saturating_mul(1 << doublings)
        .min(MAX_BACKOFF)
}

/// Where the plugins reach the API server, as felix reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub server: String,
    /// The API server's CA certificates (DER), when it has any.
    pub ca_der: Vec<Vec<u8>>,
    pub insecure: bool,
}

/// DER certificates as one PEM text.
fn pem(ders: &[Vec<u8>]) -> String {
    let mut out = String::new();
    for der in ders {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let b = STANDARD.encode(der);
        for line in b.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

/// The plugins' kubeconfig: `cluster` and `token`, one user, one context.
pub fn kubeconfig(cluster: &Cluster, token: &str) -> String {
    let q = |s: &str| serde_json::Value::from(s).to_string();
    let mut c = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: tartan\n  cluster:\n    server: {}\n",
        q(&cluster.server)
    );
    if !cluster.ca_der.is_empty() {
        let data = STANDARD.encode(pem(&cluster.ca_der));
        let _ = writeln!(c, "    certificate-authority-data: {data}");
    }
    if cluster.insecure {
        c.push_str("    insecure-skip-tls-verify: true\n");
    }
    let _ = write!(
        c,
        "users:\n- name: tartan-cni\n  user:\n    token: {}\ncontexts:\n- name: tartan\n  context:\n    cluster: tartan\n    user: tartan-cni\ncurrent-context: tartan\n",
        q(token)
    );
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_renewed_at_four_fifths_of_what_is_left() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(
            renew_in(now, now + Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(
            renew_in(now, now + Duration::from_secs(60)),
            Duration::from_secs(48)
        );
        assert_eq!(renew_in(now, now), FIRST_BACKOFF);
        assert_eq!(renew_in(now, now - Duration::from_secs(5)), FIRST_BACKOFF);
    }

    #[test]
    fn failures_back_off_doubling_to_a_cap() {
        let got: Vec<u64> = (1..=9).map(|n| backoff(n).as_millis() as u64).collect();
        assert_eq!(
            got,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert_eq!(backoff(0), FIRST_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn the_kubeconfig_reads_back_as_kube_reads_it() {
        let cluster = Cluster {
            server: "https://10.96.0.1:443".into(),
            ca_der: vec![vec![0x30, 0x82, 0x01, 0x0a, 0xff]],
            insecure: false,
        };
        let text = kubeconfig(&cluster, "tok\"en");
        let k = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(k.current_context.as_deref(), Some("tartan"));
        let c = k.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(c.server.as_deref(), Some("https://10.96.0.1:443"));
        let data = c.certificate_authority_data.as_deref().unwrap();
        let pem = String::from_utf8(STANDARD.decode(data).unwrap()).unwrap();
        assert_eq!(
            pem,
            "-----BEGIN CERTIFICATE-----\nMIIBCv8=\n-----END CERTIFICATE-----\n"
        );
        let user = k.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(user.token.is_some() && user.token_file.is_none());
        assert!(text.contains("    token: \"tok\\\"en\"\n"), "{text}");
        let plain = kubeconfig(
            &Cluster {
                server: "http://127.0.0.1:1".into(),
                ca_der: vec![],
                insecure: true,
            },
            "t",
        );
        let k = kube::config::Kubeconfig::from_yaml(&plain).unwrap();
        let c = k.clusters[0].cluster.as_ref().unwrap();
        assert!(c.certificate_authority_data.is_none());
        assert_eq!(c.insecure_skip_tls_verify, Some(true));
    }
}
