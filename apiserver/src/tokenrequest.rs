//! Tokens with a lifetime and the TokenRequest API, as the API server has
//! them: `POST /api/v1/namespaces/NS/serviceaccounts/NAME/token` with an
//! `authentication.k8s.io/v1` TokenRequest (`spec.expirationSeconds`, at
//! least 600, default 3600, cut to the server's token lifetime as
//! `--service-account-max-token-expiration` cuts it; `spec.audiences`;
//! `spec.boundObjectRef` to a Pod of the namespace) answered 201 with
//! `status.token` and `status.expirationTimestamp`. RBAC judges it as
//! `create` on `serviceaccounts/token` (the request attributes do that).
//! A token bound to a Pod is accepted only while that Pod exists with the
//! UID it was bound to.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::response::Response;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use tartan_api::kind::Kind;
use tartan_api::store::{Datastore, ObjectKey};

use crate::identity::{BoundPod, Holder};
use crate::request::ResourceRef;
use crate::server::ApiServer;
use crate::wire::{json_response, status};

/// The audience of tokens the API server accepts (kubeadm's default
/// `--api-audiences`), given to a TokenRequest that names none.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// The shortest and default `spec.expirationSeconds`.
const MIN_SECONDS: i64 = 600;
const DEFAULT_SECONDS: i64 = 3600;
const MAX_SECONDS: i64 = 1 << 32;

/// `t` cut to whole seconds, as tokens and timestamps carry it.
fn whole_seconds(t: SystemTime) -> SystemTime {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn timestamp(t: SystemTime) -> Value {
    k8s_openapi::jiff::Timestamp::try_from(t)
        .ok()
        .and_then(|ts| serde_json::to_value(Time(ts)).ok())
        .unwrap_or(Value::Null)
}

fn invalid(name: &str, field: &str, value: &Value, why: &str) -> Response {
    status(
        422,
        "Invalid",
        &format!(
            "TokenRequest.authentication.k8s.io \"{name}\" is invalid: {field}: Invalid value: {value}: {why}"
        ),
        Some(
            json!({"name": name, "group": "authentication.k8s.io", "kind": "TokenRequest",
                    "causes": [{"reason": "FieldValueInvalid", "message": why, "field": field}]}),
        ),
    )
}

impl ApiServer {
    /// Tokens issued from now on live `lifetime`, and no TokenRequest
    /// gets a longer one.
    pub fn with_token_lifetime(self, lifetime: Duration) -> Self {
        self.tokens.set_lifetime(Some(lifetime));
        self
    }

    /// Who sends `token`, if the API server would accept it now: known,
    /// not revoked, not expired, for the API server's audience, and its
    /// Pod (if bound) still there with the same UID.
    pub async fn authenticate(&self, token: &str) -> Option<Holder> {
        let holder = self.tokens.authenticate(token, SystemTime::now()).ok()?;
        if let Some(b) = &holder.bound {
            let pod = self
                .store
                .get(&ObjectKey::new(Kind::Pod, Some(&b.namespace), &b.name))
                .await
                .ok()?;
            if pod.metadata.uid.as_deref() != Some(b.uid.as_str()) {
                return None;
            }
        }
        Some(holder)
    }

    /// A TokenRequest for the service account `r` names, made by `verb`.
    pub async fn token_request(&self, verb: &str, r: &ResourceRef, body: Value) -> Response {
        let (Some(ns), Some(name)) = (r.namespace.as_deref(), r.name.as_deref()) else {
            return crate::route::no_such_resource();
        };
        if verb != "create" {
            return status(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                None,
            );
        }
        let known = self.policy.as_ref().is_none_or(|p| {
            p.service_accounts
                .iter()
                .any(|(n, s)| n.as_str() == ns && s.as_str() == name)
        });
        if !known {
            return status(
                404,
                "NotFound",
                &format!("serviceaccounts \"{name}\" not found"),
                Some(json!({"name": name, "kind": "serviceaccounts"})),
            );
        }
        let request: TokenRequest = match serde_json::from_value(body) {
            Ok(t) => t,
            Err(e) => return status(400, "BadRequest", &e.to_string(), None),
        };
        let mut spec = request.spec;
        let seconds = spec.expiration_seconds.unwrap_or(DEFAULT_SECONDS);
        if seconds < MIN_SECONDS {
            return invalid(
                name,
                "spec.expirationSeconds",
                &seconds.into(),
                "may not specify a duration less than 10 minutes",
            );
        }
        if seconds > MAX_SECONDS {
            return invalid(
                name,
                "spec.expirationSeconds",
                &seconds.into(),
                "may not specify a duration larger than 2^32 seconds",
            );
        }
        spec.expiration_seconds = Some(seconds);
        if spec.audiences.is_empty() {
            spec.audiences = vec![API_AUDIENCE.to_string()];
        }
        let bound = match &spec.bound_object_ref {
            None => None,
            Some(b) => match self.bind(ns, b).await {
                Ok(p) => Some(p),
                Err(answer) => return answer,
            },
        };
        let mut lifetime = Duration::from_secs(seconds.unsigned_abs());
        if let Some(max) = self.tokens.lifetime() {
            lifetime = lifetime.min(max);
        }
        let now = SystemTime::now();
        let expires = whole_seconds(now + lifetime);
        let user = crate::rbac::service_account_user(ns, name);
        let for_api = spec.audiences.iter().any(|a| a == API_AUDIENCE);
        let token = self
            .tokens
            .issue_with(&user, name, Some(expires), bound, for_api);
        tracing::info!(%user, lifetime_s = lifetime.as_secs_f64(), "token issued");
        json_response(
            201,
            &json!({
                "kind": "TokenRequest",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": ns, "creationTimestamp": timestamp(whole_seconds(now))},
                "spec": spec,
                "status": {"token": token, "expirationTimestamp": timestamp(expires)},
            }),
        )
    }

    /// The Pod `b` names in `namespace`, as the token will be bound to it.
    async fn bind(
        &self,
        namespace: &str,
        b: &k8s_openapi::api::authentication::v1::BoundObjectReference,
    ) -> Result<BoundPod, Response> {
        let kind = b.kind.as_deref().unwrap_or_default();
        if kind != "Pod" {
            return Err(status(
                400,
                "BadRequest",
                &format!(
                    "cannot bind token to object of kind {kind:?}: the stand-in binds to Pods"
                ),
                None,
            ));
        }
        let name = b.name.clone().unwrap_or_default();
        let pod = match self
            .store
            .get(&ObjectKey::new(Kind::Pod, Some(namespace), &name))
            .await
        {
            Ok(p) => p,
            Err(_) => {
                return Err(status(
                    404,
                    "NotFound",
                    &format!("pods \"{name}\" not found"),
                    Some(json!({"name": name, "kind": "pods"})),
                ));
            }
        };
        let uid = pod.metadata.uid.unwrap_or_default();
        if let Some(want) = b.uid.as_deref().filter(|u| !u.is_empty())
            && want != uid
        {
            return Err(status(
                409,
                "Conflict",
                &format!(
                    "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
                None,
            ));
        }
        Ok(BoundPod {
            namespace: namespace.to_string(),
            name,
            uid,
        })
    }
}
