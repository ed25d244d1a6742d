//! What the stand-in serves, described as discovery describes it: every
//! kind of the project's kind table (Tartan's with the names of the CRDs
//! generated from the same types) and CustomResourceDefinitions
//! themselves. Pure.

use std::sync::OnceLock;

use serde_json::Value;
use tartan_api::kind::Kind;

/// One served resource.
#[derive(Clone, Debug)]
pub struct Served {
    /// `None`: CustomResourceDefinitions (kept apart from the store).
    pub kind: Option<Kind>,
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub name: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub has_status: bool,
}

pub const CRD_GROUP: &str = "apiextensions.k8s.io";

impl Served {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `ippools.tartan.dev`, `configmaps`: as messages name it.
    pub fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// Tartan's CRDs (as deploy/crds holds them), as JSON.
pub fn tartan_crds() -> &'static [Value] {
    static CRDS: OnceLock<Vec<Value>> = OnceLock::new();
    CRDS.get_or_init(|| {
        tartan_api::resources::crd::crds()
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect()
    })
}

/// The CRD (JSON) of a Tartan kind.
pub fn crd_of(kind: Kind) -> Option<&'static Value> {
    let i = kind.info();
    tartan_crds().iter().find(|c| {
        c.pointer("/spec/group").and_then(Value::as_str) == Some(i.group)
            && c.pointer("/spec/names/plural").and_then(Value::as_str) == Some(i.plural)
    })
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Categories of the built-in kinds, as the API server lists them.
fn builtin_categories(kind: Kind) -> Vec<String> {
    match kind {
        Kind::Pod | Kind::Service => vec!["all".into()],
        _ => Vec::new(),
    }
}

fn of_kind(kind: Kind) -> Served {
    let i = kind.info();
    let crd = crd_of(kind);
    let names = crd.and_then(|c| c.pointer("/spec/names"));
    let has_status = match crd {
        Some(c) => c.pointer("/spec/versions/0/subresources/status").is_some(),
        None => matches!(
            kind,
            Kind::Node | Kind::Namespace | Kind::Pod | Kind::Service
        ),
    };
    Served {
        kind: Some(kind),
        group: i.group.into(),
        version: i.version.into(),
        plural: i.plural.into(),
        singular: names
            .and_then(|n| n.get("singular"))
            .and_then(Value::as_str)
            .map_or_else(|| i.name.to_ascii_lowercase(), str::to_string),
        name: i.name.into(),
        namespaced: i.namespaced,
        short_names: match names {
            Some(n) => strings(n.get("shortNames")),
            None => i.short_names.iter().map(|s| s.to_string()).collect(),
        },
        categories: match names {
            Some(n) => strings(n.get("categories")),
            None => builtin_categories(kind),
        },
        has_status,
    }
}

/// CustomResourceDefinitions, as the API server serves them.
pub fn crd_resource() -> Served {
    Served {
        kind: None,
        group: CRD_GROUP.into(),
        version: "v1".into(),
        plural: "customresourcedefinitions".into(),
        singular: "customresourcedefinition".into(),
        name: "CustomResourceDefinition".into(),
        namespaced: false,
        short_names: vec!["crd".into(), "crds".into()],
        categories: vec!["api-extensions".into()],
        has_status: true,
    }
}

/// Everything served.
pub fn all() -> Vec<Served> {
    let mut v: Vec<Served> = Kind::all().map(of_kind).collect();
    v.push(crd_resource());
    v
}

/// The resource a group, version and plural name.
pub fn find(group: &str, version: &str, plural: &str) -> Option<Served> {
    all()
        .into_iter()
        .find(|s| s.group == group && s.version == version && s.plural == plural)
}

/// The served resource of an object's apiVersion and kind.
pub fn by_type(api_version: &str, kind: &str) -> Option<Served> {
    all()
        .into_iter()
        .find(|s| s.api_version() == api_version && s.name == kind)
}
