//! The RBAC test's verdict over the recorded requests: those no role of
//! their identity allows, the grants (one verb on one resource) no request
//! used less a reasoned allow-list, and the table of used against granted
//! per identity.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use tartan_apiserver::rbac::Grant;
use tartan_apiserver::{Policy, Recorded, service_account_user};

/// A grant that no run uses, kept on purpose.
pub struct Unused {
    /// `namespace/name` of the service account.
    pub account: &'static str,
    pub verb: &'static str,
    /// API group ("" for core).
    pub group: &'static str,
    /// `resource` or `resource/subresource`.
    pub resource: &'static str,
    pub why: &'static str,
}

impl Unused {
    fn covers(&self, account: &str, atom: &Grant) -> bool {
        self.account == account
            && atom.rule.verbs.first().is_some_and(|v| v == self.verb)
            && atom
                .rule
                .api_groups
                .first()
                .is_some_and(|g| g == self.group)
            && atom
                .rule
                .resources
                .first()
                .is_some_and(|r| r == self.resource)
    }
}

#[derive(Default)]
pub struct Verdict {
    /// Used against granted, per identity, for the log.
    pub table: String,
    /// Requests no role allows (or without a valid token), named.
    pub denied: Vec<String>,
    /// Grants no request used and the allow-list does not excuse.
    pub unused: Vec<String>,
    /// Allow-list entries that were used after all (the list can shrink).
    pub used_anyway: Vec<String>,
}

/// Judge `requests` of the service accounts `accounts` (`namespace/name`)
/// by `policy`; requests of other users are listed, not judged.
pub fn judge(
    policy: &Policy,
    accounts: &[&str],
    requests: &[Recorded],
    allow: &[Unused],
) -> Verdict {
    let mut v = Verdict::default();
    let mut judged_users = BTreeSet::new();
    for account in accounts {
        let (ns, name) = account.split_once('/').unwrap_or(("", account));
        let user = service_account_user(ns, name);
        judged_users.insert(user.clone());
        let mine: Vec<&Recorded> = requests
            .iter()
            .filter(|r| r.user.as_deref() == Some(user.as_str()))
            .collect();
        let _ = writeln!(v.table, "\n{account} ({user}): {} requests", mine.len());
        // What was asked, by whom.
        let mut asked: BTreeMap<String, (usize, BTreeSet<String>)> = BTreeMap::new();
        for r in &mine {
            let mut a = r.attributes.clone();
            if let Some(res) = a.resource.as_mut()
                && res.object_path
            {
                // One row per kind of request, not per object.
                res.name = None;
            }
            let mark = if r.allowed == Some(true) {
                "allowed"
            } else {
                "DENIED"
            };
            let e = asked.entry(format!("{mark:>7}  {a}")).or_default();
            e.0 += 1;
            e.1.insert(r.client.clone().unwrap_or_default());
            if r.allowed != Some(true) {
                v.denied.push(format!(
                    "{account} ({}): {} {} = {}",
                    r.client.as_deref().unwrap_or("?"),
                    r.method,
                    r.path,
                    r.attributes
                ));
            }
        }
        let _ = writeln!(v.table, "  used:");
        for (what, (n, clients)) in &asked {
            let by: Vec<&str> = clients.iter().map(String::as_str).collect();
            let _ = writeln!(v.table, "    {n:>5} x {what}  (by {})", by.join(", "));
        }
        let _ = writeln!(v.table, "  granted:");
        for grant in policy.grants(&user) {
            for atom in grant.atoms() {
                let users: Vec<&&Recorded> =
                    mine.iter().filter(|r| atom.allows(&r.attributes)).collect();
                let excuse = allow.iter().find(|u| u.covers(account, &atom));
                let clients: BTreeSet<&str> =
                    users.iter().filter_map(|r| r.client.as_deref()).collect();
                let note = match (users.len(), excuse) {
                    (0, Some(u)) => format!("unused, kept: {}", u.why),
                    (0, None) => {
                        v.unused.push(format!("{account}: {atom}"));
                        "UNUSED".to_string()
                    }
                    (_, Some(_)) => {
                        v.used_anyway.push(format!("{account}: {atom}"));
                        format!("by {}", clients.into_iter().collect::<Vec<_>>().join(", "))
                    }
                    (_, None) => {
                        format!("by {}", clients.into_iter().collect::<Vec<_>>().join(", "))
                    }
                };
                let _ = writeln!(v.table, "    {:>5} x {atom}  ({note})", users.len());
            }
        }
    }
    let others: Vec<&Recorded> = requests
        .iter()
        .filter(|r| r.user.as_ref().is_none_or(|u| !judged_users.contains(u)))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(v.table, "\nother users (not judged):");
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for r in &others {
            let who = r.user.as_deref().unwrap_or("(no valid token)");
            *seen
                .entry(format!(
                    "{who} ({}): {}",
                    r.client.as_deref().unwrap_or("?"),
                    r.attributes
                ))
                .or_default() += 1;
            if r.user.is_none() {
                v.denied
                    .push(format!("unauthenticated: {} {}", r.method, r.path));
            }
        }
        for (what, n) in seen {
            let _ = writeln!(v.table, "    {n:>5} x {what}");
        }
    }
    v
}
