//! Who sends a request: bearer tokens, one per identity (a service
//! account's user name, as the API server names it), and the kubeconfig a
//! client of that identity reads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Who holds a token: the user the API server would name, and which
/// client (program) it was given to, so that requests of several programs
/// under one service account can be told apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub user: String,
    pub client: String,
}

/// Tokens and who holds them. Empty: the server asks for no token and
/// records no user (the Kubernetes backend's unit tests).
#[derive(Clone, Default)]
pub struct Tokens(Arc<Mutex<HashMap<String, Holder>>>);

impl Tokens {
    /// A new token (a random UUID) for `user`, held by `client`.
    pub fn issue(&self, user: &str, client: &str) -> String {
        let token = format!("tartan-{}", uuid::Uuid::new_v4().simple());
        let holder = Holder {
            user: user.to_string(),
            client: client.to_string(),
        };
        self.lock().insert(token.clone(), holder);
        token
    }

    /// Whether tokens are required at all.
    pub fn required(&self) -> bool {
        !self.lock().is_empty()
    }

    /// Who holds a token.
    pub fn holder(&self, token: &str) -> Option<Holder> {
        self.lock().get(token).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Holder>> {
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
    }
}
