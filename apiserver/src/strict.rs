//! Server-side field validation (`fieldValidation=Strict|Warn|Ignore`):
//! the fields of a written object that its kind does not declare. Tartan
//! kinds are checked against the schema of their CRD (the one generated
//! from the same types as deploy/crds), the built-in kinds and
//! CustomResourceDefinitions by a round trip through their typed form
//! (`k8s-openapi`): a field that does not survive it is unknown. Pure.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tartan_api::kind::Kind;

use crate::resources::{Served, crd_of};

/// One step into an object: a key, or a list index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// A field of an object, from its root.
pub type Field = Vec<Step>;

/// `spec.ports[0].name`, as the API server names a field in messages.
pub fn display(f: &[Step]) -> String {
    let mut out = String::new();
    for step in f {
        match step {
            Step::Key(k) if out.is_empty() => out.push_str(k),
            Step::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Remove field `f` from `obj`, as the API server prunes what a kind
/// does not declare.
pub fn prune(obj: &mut Value, f: &[Step]) {
    let Some((last, head)) = f.split_last() else {
        return;
    };
    let mut at = obj;
    for step in head {
        let next = match (step, at) {
            (Step::Key(k), Value::Object(m)) => m.get_mut(k),
            (Step::Index(i), Value::Array(a)) => a.get_mut(*i),
            _ => None,
        };
        let Some(next) = next else {
            return;
        };
        at = next;
    }
    if let (Step::Key(k), Value::Object(m)) = (last, at) {
        m.remove(k);
    }
}

fn with(path: &[Step], step: Step) -> Field {
    let mut f = path.to_vec();
    f.push(step);
    f
}

/// The fields of `obj` that `served` does not declare. A value of the
/// wrong type is not reported here.
pub fn unknown_fields(served: &Served, obj: &Value) -> Vec<Field> {
    let mut out = Vec::new();
    use k8s_openapi::api::coordination::v1 as coord;
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::api::discovery::v1 as disc;
    use k8s_openapi::api::networking::v1 as net;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    let Some(kind) = served.kind else {
        round_trip::<ext::CustomResourceDefinition>(obj, &mut out);
        return out;
    };
    match kind {
        Kind::Node => round_trip::<core::Node>(obj, &mut out),
        Kind::Namespace => round_trip::<core::Namespace>(obj, &mut out),
        Kind::Pod => round_trip::<core::Pod>(obj, &mut out),
        Kind::Service => round_trip::<core::Service>(obj, &mut out),
        Kind::Secret => round_trip::<core::Secret>(obj, &mut out),
        Kind::ConfigMap => round_trip::<core::ConfigMap>(obj, &mut out),
        Kind::ServiceAccount => round_trip::<core::ServiceAccount>(obj, &mut out),
        Kind::EndpointSlice => round_trip::<disc::EndpointSlice>(obj, &mut out),
        Kind::KubeNetworkPolicy => round_trip::<net::NetworkPolicy>(obj, &mut out),
        Kind::Lease => round_trip::<coord::Lease>(obj, &mut out),
        _ => {
            let schema =
                crd_of(kind).and_then(|c| c.pointer("/spec/versions/0/schema/openAPIV3Schema"));
            let (Some(schema), Value::Object(m)) = (schema, obj) else {
                return out;
            };
            for (k, v) in m {
                match k.as_str() {
                    "apiVersion" | "kind" => {}
                    "metadata" => {
                        let mut meta = Vec::new();
                        round_trip_value::<
                            k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                        >(v, &mut meta);
                        out.extend(meta.into_iter().map(|p| {
                            let mut f = vec![Step::Key("metadata".into())];
                            f.extend(p);
                            f
                        }));
                    }
                    _ => match schema.get("properties").and_then(|p| p.get(k)) {
                        Some(s) => walk(v, s, vec![Step::Key(k.clone())], &mut out),
                        None => out.push(vec![Step::Key(k.clone())]),
                    },
                }
            }
        }
    }
    out
}

/// Compare `obj` with itself read into `T` and written back.
fn round_trip<T: DeserializeOwned + Serialize>(obj: &Value, out: &mut Vec<Field>) {
    round_trip_value::<T>(obj, out);
}

fn round_trip_value<T: DeserializeOwned + Serialize>(v: &Value, out: &mut Vec<Field>) {
    let Ok(typed) = serde_json::from_value::<T>(v.clone()) else {
        return;
    };
    let back = serde_json::to_value(&typed).unwrap_or(Value::Null);
    missing(v, &back, Vec::new(), out);
}

fn missing(orig: &Value, back: &Value, path: Field, out: &mut Vec<Field>) {
    match (orig, back) {
        (Value::Object(o), Value::Object(b)) => {
            for (k, v) in o {
                if v.is_null() {
                    continue;
                }
                match b.get(k) {
                    Some(bv) => missing(v, bv, with(&path, Step::Key(k.clone())), out),
                    None if k == "apiVersion" || k == "kind" => {}
                    None => out.push(with(&path, Step::Key(k.clone()))),
                }
            }
        }
        (Value::Array(o), Value::Array(b)) => {
            for (i, (v, bv)) in o.iter().zip(b).enumerate() {
                missing(v, bv, with(&path, Step::Index(i)), out);
            }
        }
        _ => {}
    }
}

/// Unknown fields of `v` under a structural schema.
fn walk(v: &Value, schema: &Value, path: Field, out: &mut Vec<Field>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties");
            for (k, c) in m {
                match (props.and_then(|p| p.get(k)), extra) {
                    (Some(s), _) => walk(c, s, with(&path, Step::Key(k.clone())), out),
                    (None, Some(Value::Bool(true))) => {}
                    (None, Some(s @ Value::Object(_))) => {
                        walk(c, s, with(&path, Step::Key(k.clone())), out)
                    }
                    (None, _) => out.push(with(&path, Step::Key(k.clone()))),
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for (i, c) in a.iter().enumerate() {
                    walk(c, items, with(&path, Step::Index(i)), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::{by_type, crd_resource};

    fn names(served: &Served, obj: &Value) -> Vec<String> {
        let mut v: Vec<String> = unknown_fields(served, obj)
            .iter()
            .map(|f| display(f))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn unknown_fields_are_found_for_each_family_of_kinds() {
        let pool = by_type("tartan.dev/v1", "IPPool").unwrap();
        let ok = json!({"apiVersion":"tartan.dev/v1","kind":"IPPool","metadata":{"name":"p","labels":{"a":"b"}},
                        "spec":{"cidr":"10.0.0.0/16"}});
        assert_eq!(names(&pool, &ok), Vec::<String>::new());
        let mut bad = json!({"apiVersion":"tartan.dev/v1","kind":"IPPool","metadata":{"name":"p","colour":"red"},
                         "spec":{"cidr":"10.0.0.0/16","bogus":1},"extra":true});
        assert_eq!(
            names(&pool, &bad),
            ["extra", "metadata.colour", "spec.bogus"]
        );
        for f in unknown_fields(&pool, &bad.clone()) {
            prune(&mut bad, &f);
        }
        assert_eq!(
            bad,
            json!({"apiVersion":"tartan.dev/v1","kind":"IPPool","metadata":{"name":"p"},
                               "spec":{"cidr":"10.0.0.0/16"}})
        );

        let cm = by_type("v1", "ConfigMap").unwrap();
        let good =
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}});
        assert_eq!(names(&cm, &good), Vec::<String>::new());
        let bad =
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"date":{"k":"v"}});
        assert_eq!(names(&cm, &bad), ["date"]);
        let svc = by_type("v1", "Service").unwrap();
        let bad =
            json!({"metadata":{"name":"s"},"spec":{"ports":[{"port":80},{"port":81,"nmae":"x"}]}});
        assert_eq!(names(&svc, &bad), ["spec.ports[1].nmae"]);

        let crd = crd_resource();
        let mut c = crate::resources::tartan_crds()[0].clone();
        assert_eq!(names(&crd, &c), Vec::<String>::new());
        c["spec"]["nmaes"] = json!({});
        assert_eq!(names(&crd, &c), ["spec.nmaes"]);
    }
}
