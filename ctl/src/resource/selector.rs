//! Label selectors for `get -l`, in Kubernetes syntax (`k=v`, `k==v`,
//! `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, joined by commas; all
//! terms must match), read as the API server reads them
//! ([`tartan_api::label_selector`]).

use std::collections::BTreeMap;

use anyhow::bail;
use tartan_api::label_selector::LabelSelector;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector(LabelSelector);

pub fn parse(s: &str) -> anyhow::Result<Selector> {
    if s.trim().is_empty() {
        bail!("selector {s:?}: empty");
    }
    match LabelSelector::parse(s) {
        Ok(sel) => Ok(Selector(sel)),
        Err(e) => bail!("selector {s:?}: {e}"),
    }
}

impl Selector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.matches_labels(Some(labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn terms_match() {
        let l = labels(&[("env", "prod"), ("tier", "web")]);
        for (sel, want) in [
            ("env=prod", true),
            ("env==prod", true),
            ("env=dev", false),
            ("env!=dev", true),
            ("env,tier", true),
            ("!legacy", true),
            ("!env", false),
            ("env in (dev, prod),tier notin (db)", true),
            ("env notin (prod)", false),
            ("missing notin (x)", true),
            ("missing in (x)", false),
            ("env=prod,tier=db", false),
        ] {
            assert_eq!(parse(sel).unwrap().matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn bad_selectors_are_errors() {
        for bad in ["", "env=prod,", "a in (x", "a in x)", "sp ace=1", "=x"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
