//! Lost races are tried again, preconditions and apply conflicts are not:
//! over objects whose first writes lose.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::json;

use super::*;
use crate::objects::conflict;
use crate::resources::{Served, by_type};

/// One IPPool whose first `losses` updates lose a race.
struct Flaky {
    served: Served,
    object: Mutex<Value>,
    losses: Mutex<u32>,
    updates: Mutex<u32>,
}

impl Flaky {
    fn new(losses: u32) -> Self {
        Flaky {
            served: by_type("tartan.dev/v1", "IPPool").unwrap(),
            object: Mutex::new(json!({"apiVersion":"tartan.dev/v1","kind":"IPPool",
                "metadata":{"name":"p","resourceVersion":"1","generation":1},"spec":{"cidr":"10.0.0.0/16"}})),
            losses: Mutex::new(losses),
            updates: Mutex::new(0),
        }
    }
}

impl Objects for Flaky {
    fn served(&self) -> &Served {
        &self.served
    }
    fn namespace(&self) -> Option<&str> {
        None
    }
    async fn get(&self, _: &str) -> Result<Option<Value>, Response> {
        Ok(Some(self.object.lock().unwrap().clone()))
    }
    async fn create(&self, obj: Value) -> Result<Value, Response> {
        Ok(obj)
    }
    async fn update(&self, mut obj: Value) -> Result<Value, Response> {
        *self.updates.lock().unwrap() += 1;
        let mut losses = self.losses.lock().unwrap();
        let mut current = self.object.lock().unwrap();
        let rv: u64 = current["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        if *losses > 0 {
            // Someone else wrote first.
            *losses -= 1;
            current["metadata"]["resourceVersion"] = (rv + 1).to_string().into();
            return Err(conflict(&self.served, "p"));
        }
        if obj["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
            return Err(conflict(&self.served, "p"));
        }
        obj["metadata"]["resourceVersion"] = (rv + 1).to_string().into();
        *current = obj.clone();
        Ok(obj)
    }
}

fn ctx(query: &HashMap<String, String>) -> Ctx<'_> {
    Ctx {
        query,
        user_agent: "test/1",
        now: 0,
        dry_run: false,
    }
}

#[tokio::test]
async fn a_lost_race_is_tried_again() {
    let o = Flaky::new(2);
    let q = HashMap::new();
    let r = patch(
        &o,
        "p",
        "application/merge-patch+json",
        br#"{"spec":{"blockSize":27}}"#,
        &ctx(&q),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(*o.updates.lock().unwrap(), 3);
    assert_eq!(o.object.lock().unwrap()["spec"]["blockSize"], 27);
    // Always losing: the 409 comes back after the last try.
    let o = Flaky::new(100);
    let r = patch(
        &o,
        "p",
        "application/merge-patch+json",
        br#"{"spec":{"blockSize":27}}"#,
        &ctx(&q),
    )
    .await;
    assert_eq!(r.status(), 409);
    assert_eq!(*o.updates.lock().unwrap(), RETRIES);
}

#[tokio::test]
async fn preconditions_and_apply_conflicts_are_not_retried() {
    let o = Flaky::new(1);
    let q = HashMap::new();
    let body = br#"{"metadata":{"resourceVersion":"1"},"spec":{"blockSize":27}}"#;
    let r = patch(&o, "p", "application/merge-patch+json", body, &ctx(&q)).await;
    assert_eq!(r.status(), 409);
    assert_eq!(*o.updates.lock().unwrap(), 1);

    let o = Flaky::new(0);
    let q: HashMap<String, String> = [("fieldManager".to_string(), "a".to_string())].into();
    let apply = br#"{"apiVersion":"tartan.dev/v1","kind":"IPPool","metadata":{"name":"p"},"spec":{"cidr":"10.0.0.0/16"}}"#;
    assert_eq!(
        patch(&o, "p", "application/apply-patch+yaml", apply, &ctx(&q))
            .await
            .status(),
        200
    );
    let q: HashMap<String, String> = [("fieldManager".to_string(), "b".to_string())].into();
    let other = br#"{"apiVersion":"tartan.dev/v1","kind":"IPPool","metadata":{"name":"p"},"spec":{"cidr":"10.1.0.0/16"}}"#;
    let r = patch(&o, "p", "application/apply-patch+yaml", other, &ctx(&q)).await;
    assert_eq!(r.status(), 409);
    assert_eq!(
        *o.updates.lock().unwrap(),
        1,
        "the conflict is the answer, not a race"
    );
}

/// The answer's status, reason and message.
async fn refusal(r: Response) -> (u16, Value) {
    let code = r.status().as_u16();
    let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    (code, json!([body["reason"], body["message"]]))
}

#[tokio::test]
async fn json_patches_past_the_limits_are_refused_as_the_api_server_does() {
    let o = Flaky::new(0);
    let q = HashMap::new();
    let json = "application/json-patch+json";
    let test = json!({"op":"test","path":"/spec/cidr","value":"10.0.0.0/16"});
    let many = Value::Array(vec![test; 10_001]).to_string();
    let (code, said) = refusal(patch(&o, "p", json, many.as_bytes(), &ctx(&q)).await).await;
    assert_eq!(code, 413);
    assert_eq!(
        said,
        json!([
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        ])
    );
    // Each copy doubles the list.
    let mut copies = vec![json!({"op":"add","path":"/spec/l","value":["10.0.0.0/16"]})];
    copies.extend(vec![
        json!({"op":"copy","from":"/spec/l","path":"/spec/l/-"});
        40
    ]);
    let copies = Value::Array(copies).to_string();
    let (code, said) = refusal(patch(&o, "p", json, copies.as_bytes(), &ctx(&q)).await).await;
    assert_eq!(code, 422);
    assert_eq!(said[0], "Invalid");
    assert!(
        said[1]
            .as_str()
            .unwrap()
            .contains("exceeding the limit 3145728"),
        "{said}"
    );
    let deeper = [
        json!({"op":"add","path":"/w","value":{}}),
        json!({"op":"move","from":"/spec","path":"/w/spec"}),
        json!({"op":"move","from":"/w","path":"/spec"}),
    ];
    let deeper = Value::Array(deeper.iter().cycle().take(3_000).cloned().collect());
    let (code, said) =
        refusal(patch(&o, "p", json, deeper.to_string().as_bytes(), &ctx(&q)).await).await;
    assert_eq!(code, 422);
    assert!(
        said[1]
            .as_str()
            .unwrap()
            .contains("at most 127 are allowed"),
        "{said}"
    );
    assert_eq!(*o.updates.lock().unwrap(), 0, "nothing written");
}
