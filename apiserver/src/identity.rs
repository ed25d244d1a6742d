//! Who sends a request: bearer tokens, one per identity (a service
//! account's user name, as the API server names it), and the kubeconfig a
//! client of that identity reads. A token may have a lifetime (the
//! server's, or the one a TokenRequest asked for), may be bound to a Pod
//! (it dies with the Pod, checked by [`crate::tokenrequest`]), and may be
//! revoked by a test; any of these makes it answer 401.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Who holds a token: the user the API server would name, and which
/// client (program) it was given to, so that requests of several programs
/// under one service account can be told apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub user: String,
    pub client: String,
    /// When it stops being accepted; `None`: never.
    pub expires: Option<SystemTime>,
    /// The Pod it is bound to.
    pub bound: Option<BoundPod>,
    /// Whether the API server is among its audiences (a TokenRequest for
    /// other audiences gets a token the API server refuses).
    pub for_api: bool,
    pub revoked: bool,
}

/// The object a token is bound to: a Pod, by namespace, name and UID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// Why a token is refused (each answered 401, as the API server does,
/// without saying which).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    Unknown,
    Expired,
    Revoked,
    /// Issued for other audiences than the API server.
    Audience,
}

#[derive(Default)]
struct Inner {
    tokens: HashMap<String, Holder>,
    /// The lifetime of tokens issued without one, and the longest a
    /// TokenRequest gets (the API server's
    /// `--service-account-max-token-expiration`).
    lifetime: Option<Duration>,
}

/// Tokens and who holds them. Empty: the server asks for no token and
/// records no user (the Kubernetes backend's unit tests).
#[derive(Clone, Default)]
pub struct Tokens(Arc<Mutex<Inner>>);

impl Tokens {
    /// A new token (a random UUID) for `user`, held by `client`, living
    /// the server's token lifetime.
    pub fn issue(&self, user: &str, client: &str) -> String {
        let expires = self.lifetime().map(|l| SystemTime::now() + l);
        self.issue_with(user, client, expires, None, true)
    }

    /// A new token for `user` held by `client`, expiring at `expires`,
    /// bound to `bound`, usable at the API server when `for_api`.
    pub fn issue_with(
        &self,
        user: &str,
        client: &str,
        expires: Option<SystemTime>,
        bound: Option<BoundPod>,
        for_api: bool,
    ) -> String {
        let token = format!("tartan-{}", uuid::Uuid::new_v4().simple());
        let holder = Holder {
            user: user.to_string(),
            client: client.to_string(),
            expires,
            bound,
            for_api,
            revoked: false,
        };
        self.lock().tokens.insert(token.clone(), holder);
        token
    }

    /// Tokens issued from now on live `lifetime` (`None`: for ever), and
    /// no TokenRequest gets a longer one.
    pub fn set_lifetime(&self, lifetime: Option<Duration>) {
        self.lock().lifetime = lifetime;
    }

    pub fn lifetime(&self) -> Option<Duration> {
        self.lock().lifetime
    }

    /// Revoke a token: from now on it is answered 401. Whether it was
    /// known.
    pub fn revoke(&self, token: &str) -> bool {
        match self.lock().tokens.get_mut(token) {
            Some(h) => {
                h.revoked = true;
                true
            }
            None => false,
        }
    }

    /// Whether tokens are required at all.
    pub fn required(&self) -> bool {
        !self.lock().tokens.is_empty()
    }

    /// Who holds a token, valid or not.
    pub fn holder(&self, token: &str) -> Option<Holder> {
        self.lock().tokens.get(token).cloned()
    }

    /// Who holds `token` if it is accepted at `now` (the Pod binding is
    /// checked apart, against the store).
    pub fn authenticate(&self, token: &str, now: SystemTime) -> Result<Holder, Refused> {
        let h = self.holder(token).ok_or(Refused::Unknown)?;
        if h.revoked {
            return Err(Refused::Revoked);
        }
        if h.expires.is_some_and(|e| now >= e) {
            return Err(Refused::Expired);
        }
        if !h.for_api {
            return Err(Refused::Audience);
        }
        Ok(h)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The token in a request's `Authorization: Bearer …` header.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let h = header?.trim();
    let (scheme, token) = h.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

/// A kubeconfig for `server` (an `http://` URL) with `token`.
pub fn kubeconfig(server: &str, user: &str, token: &str) -> String {
    let q = |s: &str| serde_json::Value::from(s).to_string();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster:\n    server: {}\nusers:\n- name: {}\n  user:\n    token: {}\ncontexts:\n- name: stand-in\n  context:\n    cluster: stand-in\n    user: {}\ncurrent-context: stand-in\n",
        q(server),
        q(user),
        q(token),
        q(user)
    )
}

/// A kubeconfig for `server` whose token is read from `token_file` (as
/// a projected service account token is): clients re-read the file, so a
/// token rewritten there replaces the old one without a restart.
pub fn kubeconfig_token_file(server: &str, user: &str, token_file: &str) -> String {
    let q = |s: &str| serde_json::Value::from(s).to_string();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster:\n    server: {}\nusers:\n- name: {}\n  user:\n    tokenFile: {}\ncontexts:\n- name: stand-in\n  context:\n    cluster: stand-in\n    user: {}\ncurrent-context: stand-in\n",
        q(server),
        q(user),
        q(token_file),
        q(user)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(None), None);
    }

    #[test]
    fn tokens_name_their_user() {
        let t = Tokens::default();
        assert!(!t.required());
        let a = t.issue("system:serviceaccount:a:b", "bgpd");
        let c = t.issue("system:serviceaccount:a:b", "felix");
        assert_ne!(a, c);
        assert!(t.required());
        let h = t.holder(&c).unwrap();
        assert_eq!(h.user, "system:serviceaccount:a:b");
        assert_eq!(h.client, "felix");
        assert_eq!(t.holder("nope"), None);
        let k = kubeconfig("http://127.0.0.1:1", "u", &a);
        assert!(k.contains(&format!("token: \"{a}\"")), "{k}");
        let k = kubeconfig_token_file("http://127.0.0.1:1", "u", "/t");
        assert!(k.contains("tokenFile: \"/t\""), "{k}");
    }

    #[test]
    fn tokens_expire_and_are_revoked() {
        let t = Tokens::default();
        let now = SystemTime::now();
        let forever = t.issue("u", "c");
        assert!(
            t.authenticate(&forever, now + Duration::from_secs(1 << 30))
                .is_ok()
        );
        t.set_lifetime(Some(Duration::from_secs(60)));
        let short = t.issue("u", "c");
        assert!(
            t.authenticate(&short, now + Duration::from_secs(30))
                .is_ok()
        );
        assert_eq!(
            t.authenticate(&short, now + Duration::from_secs(61)),
            Err(Refused::Expired)
        );
        assert!(t.revoke(&forever));
        assert_eq!(t.authenticate(&forever, now), Err(Refused::Revoked));
        assert!(!t.revoke("nope"));
        assert_eq!(t.authenticate("nope", now), Err(Refused::Unknown));
        let other = t.issue_with("u", "c", None, None, false);
        assert_eq!(t.authenticate(&other, now), Err(Refused::Audience));
        // Still known (recorded with its holder), though refused.
        assert_eq!(t.holder(&short).unwrap().user, "u");
    }
}
