//! Reading RBAC out of install manifests: the ClusterRoles, Roles,
//! ClusterRoleBindings and RoleBindings of multi-document YAML files
//! (other kinds are passed over), into the [`Policy`] the evaluator
//! answers from.

use std::path::Path;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Binding, Policy, RbacError, RoleDef, RoleKind, Rule, Subject};

impl Policy {
    /// The RBAC of every `*.yaml` file directly in `dir` (deploy/; its
    /// CRDs are in a folder of their own and hold no RBAC).
    pub fn from_dir(dir: &Path) -> Result<Policy, RbacError> {
        let io = |e: std::io::Error| RbacError::Io {
            path: dir.display().to_string(),
            message: e.to_string(),
        };
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        let mut texts = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|e| RbacError::Io {
                path: f.display().to_string(),
                message: e.to_string(),
            })?;
            texts.push((f.display().to_string(), text));
        }
        let refs: Vec<(&str, &str)> = texts
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        Policy::from_manifests(&refs)
    }

    /// The RBAC of the `(file name, YAML text)` pairs. A binding whose role
    /// is not among them is an error (a typo there grants nothing).
    pub fn from_manifests(files: &[(&str, &str)]) -> Result<Policy, RbacError> {
        let mut policy = Policy::default();
        for (file, text) in files {
            let docs: Vec<Value> =
                serde_saphyr::from_multiple(text).map_err(|e| RbacError::Yaml {
                    file: file.to_string(),
                    message: e.to_string(),
                })?;
            for doc in docs.into_iter().filter(|d| d.is_object()) {
                read_document(&mut policy, file, doc)?;
            }
        }
        for b in &policy.bindings {
            if policy
                .role(b.role_kind, b.namespace.as_deref(), &b.role)
                .is_none()
            {
                return Err(RbacError::Dangling {
                    binding: b.describe(),
                    role: b.role.clone(),
                });
            }
        }
        Ok(policy)
    }
}

fn typed<T: DeserializeOwned>(file: &str, doc: Value) -> Result<T, RbacError> {
    serde_json::from_value(doc).map_err(|e| RbacError::Yaml {
        file: file.to_string(),
        message: e.to_string(),
    })
}

fn read_document(policy: &mut Policy, file: &str, doc: Value) -> Result<(), RbacError> {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    match kind {
        "ClusterRole" => {
            let r: ClusterRole = typed(file, doc)?;
            policy.roles.push(RoleDef {
                kind: RoleKind::ClusterRole,
                name: r.metadata.name.unwrap_or_default(),
                namespace: None,
                rules: rules(r.rules),
            });
        }
        "Role" => {
            let r: Role = typed(file, doc)?;
            policy.roles.push(RoleDef {
                kind: RoleKind::Role,
                name: r.metadata.name.unwrap_or_default(),
                namespace: Some(r.metadata.namespace.unwrap_or_else(|| "default".into())),
                rules: rules(r.rules),
            });
        }
        "ClusterRoleBinding" => {
            let b: ClusterRoleBinding = typed(file, doc)?;
            let role_kind = role_kind(file, &b.role_ref.kind)?;
            if role_kind != RoleKind::ClusterRole {
                return Err(RbacError::Invalid {
                    file: file.to_string(),
                    message: "a ClusterRoleBinding can only refer to a ClusterRole".into(),
                });
            }
            policy.bindings.push(Binding {
                name: b.metadata.name.unwrap_or_default(),
                namespace: None,
                role_kind,
                role: b.role_ref.name,
                subjects: subjects(file, b.subjects.unwrap_or_default())?,
            });
        }
        "RoleBinding" => {
            let b: RoleBinding = typed(file, doc)?;
            policy.bindings.push(Binding {
                name: b.metadata.name.unwrap_or_default(),
                namespace: Some(b.metadata.namespace.unwrap_or_else(|| "default".into())),
                role_kind: role_kind(file, &b.role_ref.kind)?,
                role: b.role_ref.name,
                subjects: subjects(file, b.subjects.unwrap_or_default())?,
            });
        }
        "ServiceAccount" => {
            let meta = doc.get("metadata").cloned().unwrap_or(Value::Null);
            let name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
            let ns = meta
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or("default");
            policy
                .service_accounts
                .push((ns.to_string(), name.to_string()));
        }
        _ => {}
    }
    Ok(())
}

fn role_kind(file: &str, kind: &str) -> Result<RoleKind, RbacError> {
    match kind {
        "ClusterRole" => Ok(RoleKind::ClusterRole),
        "Role" => Ok(RoleKind::Role),
        other => Err(RbacError::Invalid {
            file: file.to_string(),
            message: format!("roleRef kind {other:?} is neither ClusterRole nor Role"),
        }),
    }
}

fn rules(rules: Option<Vec<PolicyRule>>) -> Vec<Rule> {
    rules
        .unwrap_or_default()
        .into_iter()
        .map(|r| Rule {
            verbs: r.verbs,
            api_groups: r.api_groups.unwrap_or_default(),
            resources: r.resources.unwrap_or_default(),
            resource_names: r.resource_names.unwrap_or_default(),
            non_resource_urls: r.non_resource_urls.unwrap_or_default(),
        })
        .collect()
}

fn subjects(
    file: &str,
    subjects: Vec<k8s_openapi::api::rbac::v1::Subject>,
) -> Result<Vec<Subject>, RbacError> {
    subjects
        .into_iter()
        .map(|s| match s.kind.as_str() {
            "ServiceAccount" => match s.namespace {
                Some(ns) if !ns.is_empty() => Ok(Subject::ServiceAccount {
                    namespace: ns,
                    name: s.name,
                }),
                _ => Err(RbacError::Invalid {
                    file: file.to_string(),
                    message: format!("ServiceAccount subject {:?} has no namespace", s.name),
                }),
            },
            "User" => Ok(Subject::User(s.name)),
            "Group" => Ok(Subject::Group(s.name)),
            other => Err(RbacError::Invalid {
                file: file.to_string(),
                message: format!("subject kind {other:?} is not User, Group or ServiceAccount"),
            }),
        })
        .collect()
}
