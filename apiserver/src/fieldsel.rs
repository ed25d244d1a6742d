//! Field selectors as the API server reads them for every kind:
//! `metadata.name` and `metadata.namespace` with `=`, `==` or `!=`,
//! comma-separated (kubectl's `delete` waits on `metadata.name=…`). Other
//! fields are refused as the API server refuses fields a kind does not
//! index. Pure.

use serde_json::Value;

/// One term: field, whether it must equal (or differ), the value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parse a selector; the error is the API server's message.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in s.split(',').filter(|t| !t.trim().is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if field != "metadata.name" && field != "metadata.namespace" {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, equal, want)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let have = obj.pointer(&pointer).and_then(Value::as_str).unwrap_or("");
            (have == want) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn names_and_namespaces_select() {
        let o = json!({"metadata":{"name":"a","namespace":"ns"}});
        let yes = [
            "",
            "metadata.name=a",
            "metadata.name==a,metadata.namespace=ns",
            "metadata.name!=b",
        ];
        for s in yes {
            assert!(FieldSelector::parse(s).unwrap().matches(&o), "{s}");
        }
        for s in ["metadata.name=b", "metadata.namespace!=ns"] {
            assert!(!FieldSelector::parse(s).unwrap().matches(&o), "{s}");
        }
        assert_eq!(
            FieldSelector::parse("spec.nodeName=n1").unwrap_err(),
            "field label not supported: spec.nodeName"
        );
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
