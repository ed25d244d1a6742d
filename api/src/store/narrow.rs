//! A listing narrowed to a few objects of a kind, which every backend
//! reads without reading the whole kind: the objects whose name starts
//! with a prefix and that carry one label value. Writers that want their
//! objects found this way set both (IPAM names a node's BlockAffinity
//! `<node>.<block>` and labels it with the node): etcd reads the key
//! range of the prefix, Kubernetes selects by the label, and each then
//! checks the other half, so every backend returns the same objects.

use super::DynamicObject;

/// Which objects a narrowed listing returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Narrow<'a> {
    /// The start of the objects' names.
    pub name_prefix: &'a str,
    /// A label key and the value it must have.
    pub label: (&'a str, &'a str),
}

impl Narrow<'_> {
    /// Whether `o` is one of the objects.
    pub fn matches(&self, o: &DynamicObject) -> bool {
        let name = o.metadata.name.as_deref().unwrap_or("");
        let (k, v) = self.label;
        name.starts_with(self.name_prefix)
            && o.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(k))
                .is_some_and(|have| have == v)
    }

    /// The Kubernetes label selector of the label half.
    pub fn label_selector(&self) -> String {
        format!("{}={}", self.label.0, self.label.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, label: Option<&str>) -> DynamicObject {
        let mut o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "tartan.dev/v1", "kind": "BlockAffinity",
            "metadata": {"name": name},
        }))
        .unwrap();
        if let Some(v) = label {
            o.metadata.labels = Some([("tartan.dev/node".to_string(), v.to_string())].into());
        }
        o
    }

    #[test]
    fn both_the_prefix_and_the_label_must_match() {
        let n = Narrow {
            name_prefix: "n1.",
            label: ("tartan.dev/node", "n1"),
        };
        assert!(n.matches(&obj("n1.10-0-0-0-26", Some("n1"))));
        assert!(!n.matches(&obj("n1.10-0-0-0-26", None)));
        assert!(!n.matches(&obj("n1.example.10-0-0-0-26", Some("n1.example"))));
        assert!(!n.matches(&obj("n2.10-0-0-0-26", Some("n1"))));
        assert_eq!(n.label_selector(), "tartan.dev/node=n1");
    }
}
