//! The loop that keeps the CNI plugins' kubeconfig fresh: a TokenRequest
//! for their service account, the kubeconfig written atomically (a
//! temporary file in the same directory, mode 0600, renamed over), the
//! next request at 80 % of the token's lifetime, and on failure a retry
//! with backoff. Every attempt builds its API client anew from felix's
//! own configuration, so that felix's token, when the kubelet rewrites its
//! file (rotation, or a revoked token replaced), is read at once rather
//! than at the client library's next reload.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use tartan_api::cni_files::pending_conflist as pending;
use tracing::{info, warn};

use super::CniToken;
use super::schedule::{Cluster, backoff, kubeconfig, renew_in};
use crate::health::Health;

/// Keep the plugins' kubeconfig fresh, for ever (the caller aborts it).
pub async fn run(cfg: CniToken, health: Arc<Health>) {
    let mut failures: u32 = 0;
    loop {
        let wait = match refresh_once(&cfg).await {
            Ok(expires) => {
                failures = 0;
                let unix = expires
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                health.cni_token_expiry.set(unix as i64);
                health.cni_token_refreshes.inc();
                let wait = renew_in(SystemTime::now(), expires);
                info!(
                    kubeconfig = %cfg.kubeconfig.display(),
                    service_account = %format!("{}/{}", cfg.namespace, cfg.service_account),
                    expires_unix = unix,
                    renew_in_s = wait.as_secs_f64(),
                    "wrote the CNI plugins' token"
                );
                wait
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                health.cni_token_failures.inc();
                let wait = backoff(failures);
                warn!(
                    error = format!("{e:#}"),
                    failures,
                    retry_in_s = wait.as_secs_f64(),
                    "could not renew the CNI plugins' token"
                );
                wait
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// One TokenRequest, its token written; when it expires.
pub async fn refresh_once(cfg: &CniToken) -> Result<SystemTime> {
    // felix's own configuration, read now (its token file included).
    let config = kube::Config::infer()
        .await
        .context("felix's API server configuration")?;
    let cluster = Cluster {
        server: config.cluster_url.to_string(),
        ca_der: config.root_cert.clone().unwrap_or_default(),
        insecure: config.accept_invalid_certs,
    };
    let client = kube::Client::try_from(config).context("an API client")?;
    let api: Api<ServiceAccount> = Api::namespaced(client, &cfg.namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(cfg.seconds),
            bound_object_ref: cfg.pod.as_ref().map(|(name, uid)| BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name.clone()),
                uid: uid.clone(),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = api
        .create_token_request(&cfg.service_account, &PostParams::default(), &request)
        .await
        .with_context(|| format!("TokenRequest for {}/{}", cfg.namespace, cfg.service_account))?;
    let Some(status) = answer.status else {
        bail!("the TokenRequest came back without a status");
    };
    if status.token.is_empty() {
        bail!("the TokenRequest came back without a token");
    }
    let expires = SystemTime::from(status.expiration_timestamp.0);
    write_private(&cfg.kubeconfig, &kubeconfig(&cluster, &status.token))
        .with_context(|| format!("write {}", cfg.kubeconfig.display()))?;
    if let Some(conflist) = &cfg.conflist
        && install_pending(conflist)
            .with_context(|| format!("install {}", pending(conflist).display()))?
    {
        info!(conflist = %conflist.display(), "installed the CNI configuration: pods on this node can be wired");
    }
    Ok(expires)
}

/// Renames `<conflist>.pending` over `conflist` (one step: the runtime
/// sees the old file or the new); false when there is none.
pub fn install_pending(conflist: &Path) -> std::io::Result<bool> {
    match std::fs::rename(pending(conflist), conflist) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    if let Some(dir) = conflist.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(true)
}

/// Write `text` to `path` so that a reader sees the old file or the new,
/// never a part, and only root reads it: a temporary file of mode 0600
/// beside it, synced, renamed over, the directory synced.
pub fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no file", path.display())))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    // A leftover of a crash could have another mode: start afresh.
    let _ = std::fs::remove_file(&tmp);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_pending_conflist_is_moved_into_place_once() {
        let dir = std::env::temp_dir().join(format!("tartan-conflist-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let conflist = dir.join("10-tartan.conflist");
        assert_eq!(pending(&conflist), dir.join("10-tartan.conflist.pending"));
        // Nothing pending: the configuration in place (a felix restart)
        // is left as it is.
        std::fs::write(&conflist, "old").unwrap();
        let none = install_pending(&conflist);
        let kept = std::fs::read_to_string(&conflist);
        std::fs::write(pending(&conflist), "new").unwrap();
        let moved = install_pending(&conflist);
        let text = std::fs::read_to_string(&conflist);
        let again = install_pending(&conflist);
        let left = std::fs::read_dir(&dir).unwrap().count();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!none.unwrap());
        assert_eq!(kept.unwrap(), "old");
        assert!(moved.unwrap());
        assert_eq!(text.unwrap(), "new");
        assert!(!again.unwrap(), "moved once");
        assert_eq!(left, 1, "no pending file left beside it");
    }

    #[test]
    fn the_kubeconfig_is_replaced_whole_and_private() {
        let dir = std::env::temp_dir().join(format!("tartan-cnitoken-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tartan-kubeconfig");
        // An older file, readable by all (as install-cni.sh once wrote it
        // under a wider umask).
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let r1 = write_private(&path, "new one");
        let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777);
        let text = std::fs::read_to_string(&path);
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let r2 = write_private(&dir.join("missing").join("x"), "y");
        let _ = std::fs::remove_dir_all(&dir);
        r1.unwrap();
        assert_eq!(mode.unwrap(), 0o600);
        assert_eq!(text.unwrap(), "new one");
        assert_eq!(left, ["tartan-kubeconfig"]);
        assert!(r2.is_err(), "a missing directory is an error, not ignored");
    }
}
