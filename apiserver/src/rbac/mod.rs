//! Kubernetes RBAC over install manifests, answering as the API server's
//! RBAC authorizer does: a request is allowed when a rule of a role bound
//! to the user (or to one of its groups) matches its verb, API group,
//! resource (`resource/subresource` for a subresource, `*` and
//! `*/subresource` as wildcards), the object's name where the rule lists
//! `resourceNames`, and, for a RoleBinding, its namespace. Nothing is
//! denied explicitly; what no rule allows is refused. Pure.
//!
//! [`manifests`] reads the policy from YAML, [`eval`] matches requests.

pub mod eval;
pub mod manifests;
#[cfg(test)]
mod tests;

use std::fmt;

/// Why a set of manifests is not a usable policy.
#[derive(Debug, thiserror::Error)]
pub enum RbacError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{file}: {message}")]
    Yaml { file: String, message: String },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    #[error("{binding} refers to the role {role:?}, which no manifest defines")]
    Dangling { binding: String, role: String },
}

/// One rule of a role, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleKind {
    ClusterRole,
    Role,
}

#[derive(Clone, Debug)]
pub struct RoleDef {
    pub kind: RoleKind,
    pub name: String,
    /// A Role's namespace; `None` for a ClusterRole.
    pub namespace: Option<String>,
    pub rules: Vec<Rule>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    User(String),
    Group(String),
    ServiceAccount { namespace: String, name: String },
}

#[derive(Clone, Debug)]
pub struct Binding {
    pub name: String,
    /// A RoleBinding's namespace; `None` for a ClusterRoleBinding.
    pub namespace: Option<String>,
    pub role_kind: RoleKind,
    pub role: String,
    pub subjects: Vec<Subject>,
}

impl Binding {
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("RoleBinding {ns}/{}", self.name),
            None => format!("ClusterRoleBinding {}", self.name),
        }
    }
}

/// Every role and binding of a set of manifests, and the service accounts
/// they define.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub roles: Vec<RoleDef>,
    pub bindings: Vec<Binding>,
    /// `(namespace, name)` of each ServiceAccount.
    pub service_accounts: Vec<(String, String)>,
}

/// The user name the API server gives a service account's tokens.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The user of kubeadm's admin.conf, in the group `system:masters`.
pub const ADMIN: &str = "kubernetes-admin";

/// The group the API server lets do anything, whatever the roles say.
pub const MASTERS: &str = "system:masters";

/// The groups the API server puts an authenticated user in.
pub fn groups_of(user: &str) -> Vec<String> {
    let mut groups = Vec::new();
    if user == ADMIN {
        groups.push(MASTERS.to_string());
    }
    if let Some(rest) = user.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
    {
        groups.push("system:serviceaccounts".to_string());
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    groups.push("system:authenticated".to_string());
    groups
}

/// One rule as a user holds it through one binding: where it applies and
/// which role and binding it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub rule: Rule,
    /// The RoleBinding's namespace; `None`: cluster-wide.
    pub scope: Option<String>,
    /// `ClusterRole tartan-node`, `Role tartan-system/tartan-node-secrets`.
    pub role: String,
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.rule;
        if !r.non_resource_urls.is_empty() {
            write!(f, "{} {}", r.verbs.join(","), r.non_resource_urls.join(","))?;
        } else {
            let groups: Vec<&str> = r
                .api_groups
                .iter()
                .map(|g| if g.is_empty() { "core" } else { g.as_str() })
                .collect();
            write!(
                f,
                "{} {} ({})",
                r.verbs.join(","),
                r.resources.join(","),
                groups.join(",")
            )?;
        }
        match &self.scope {
            Some(ns) => write!(f, " in {ns}")?,
            None => write!(f, " cluster-wide")?,
        }
        if !r.resource_names.is_empty() {
            write!(f, " named {}", r.resource_names.join(","))?;
        }
        write!(f, " [{}]", self.role)
    }
}

impl Policy {
    /// The role a binding of `kind` in `namespace` (None: a
    /// ClusterRoleBinding) refers to by `name`.
    pub fn role(&self, kind: RoleKind, namespace: Option<&str>, name: &str) -> Option<&RoleDef> {
        self.roles.iter().find(|r| {
            r.kind == kind
                && r.name == name
                && (kind == RoleKind::ClusterRole || r.namespace.as_deref() == namespace)
        })
    }

    /// Every rule `user` holds, through every binding naming it or one of
    /// its groups.
    pub fn grants(&self, user: &str) -> Vec<Grant> {
        let groups = groups_of(user);
        let names_user = |s: &Subject| match s {
            Subject::User(u) => u == user,
            Subject::Group(g) => groups.contains(g),
            Subject::ServiceAccount { namespace, name } => {
                service_account_user(namespace, name) == user
            }
        };
        let mut out = Vec::new();
        for b in self
            .bindings
            .iter()
            .filter(|b| b.subjects.iter().any(&names_user))
        {
            let Some(role) = self.role(b.role_kind, b.namespace.as_deref(), &b.role) else {
                continue;
            };
            let role_name = match &role.namespace {
                Some(ns) => format!("Role {ns}/{}", role.name),
                None => format!("ClusterRole {}", role.name),
            };
            for rule in &role.rules {
                out.push(Grant {
                    rule: rule.clone(),
                    scope: b.namespace.clone(),
                    role: role_name.clone(),
                });
            }
        }
        out
    }

    /// Whether `user` may make the request `attrs` (members of
    /// `system:masters` may make any).
    pub fn allows(&self, user: &str, attrs: &crate::request::Attributes) -> bool {
        groups_of(user).iter().any(|g| g == MASTERS)
            || self.grants(user).iter().any(|g| g.allows(attrs))
    }
}
