//! `tartan-apiserver`: the API server stand-in as a program. It serves
//! plain HTTP, writes a kubeconfig per identity into `--dir` (the admin,
//! and each service account of the `--rbac` manifests), judges requests by
//! those manifests' roles (refusing with 403 under `--enforce`), serves
//! requests without a token as the admin under `--insecure-admin` (how
//! kubectl, which sends no token over plain HTTP, gets in), and
//! writes each request to `requests.jsonl` as it comes (one JSON line:
//! user, client, RBAC verb and request, method, path, verdict), keeping
//! none in memory, so a long-lived lab does not grow with its requests.
//! With `--token-lifetime`, every token lives that long (TokenRequests
//! get no longer) and each identity's kubeconfig reads its token from a
//! file (`tokenFile`, as a projected service account token) that is
//! rewritten with a new token every third of the lifetime, as the
//! kubelet rotates projected tokens.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use tartan_api::logging::LogFormat;
use tartan_apiserver::rbac::ADMIN;
use tartan_apiserver::{ApiServer, Policy, Running, kubeconfig_token_file, service_account_user};

#[derive(Parser)]
#[command(
    name = "tartan-apiserver",
    version,
    about = "A stand-in for the Kubernetes API server: a memory store, tokens per identity, RBAC from manifests, every request recorded"
)]
struct Cli {
    /// Address to serve on (port 0: any free port; the URL is printed and
    /// written to DIR/url).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Where the kubeconfigs, the URL and the request log go.
    #[arg(long)]
    dir: PathBuf,
    /// A folder of manifests (deploy/) whose RBAC judges each request.
    #[arg(long)]
    rbac: Option<PathBuf>,
    /// Refuse (403) what the RBAC does not allow.
    #[arg(long, requires = "rbac")]
    enforce: bool,
    /// Serve requests that carry no token as the admin (the old insecure
    /// port's rule). kubectl sends no token to a plain-HTTP server, so this
    /// is how kubectl reaches the stand-in.
    #[arg(long)]
    insecure_admin: bool,
    /// Seconds each token lives (none: for ever). Clients that cache a
    /// token file for up to a minute (kube-rs does) need more than 90.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    token_lifetime: Option<u64>,
    /// Log format (the filter is TARTAN_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "TARTAN_LOG_FORMAT")]
    log_format: LogFormat,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tartan_api::logging::init(cli.log_format, "info");
    let mut server = ApiServer::new().with_system_namespaces();
    let lifetime = cli.token_lifetime.map(std::time::Duration::from_secs);
    if let Some(l) = lifetime {
        server = server.with_token_lifetime(l);
    }
    let mut users = vec![("admin".to_string(), ADMIN.to_string())];
    if let Some(dir) = &cli.rbac {
        let policy = Policy::from_dir(dir).with_context(|| format!("RBAC of {}", dir.display()))?;
        for (ns, sa) in &policy.service_accounts {
            users.push((format!("{ns}.{sa}"), service_account_user(ns, sa)));
        }
        server = server.with_policy(policy, cli.enforce);
    }
    if cli.insecure_admin {
        server = server.with_insecure_user(ADMIN);
    }
    std::fs::create_dir_all(&cli.dir).with_context(|| format!("create {}", cli.dir.display()))?;
    let log_path = cli.dir.join("requests.jsonl");
    let server = server
        .with_request_file(&log_path)
        .with_context(|| format!("create {}", log_path.display()))?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let listener = std::net::TcpListener::bind(cli.listen)
            .with_context(|| format!("listen on {}", cli.listen))?;
        let running = server.start_on(listener).await?;
        for (file, user) in &users {
            let path = cli.dir.join(format!("kubeconfig-{file}"));
            let text = match lifetime {
                None => running.kubeconfig_for(user, file),
                Some(_) => {
                    let token_file = cli.dir.join(format!("token-{file}"));
                    write_token(&running, &token_file, user, file)?;
                    kubeconfig_token_file(&running.url, user, &token_file.display().to_string())
                }
            };
            std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        }
        if let Some(l) = lifetime {
            // The kubelet's rotation: a new token well before the old expires.
            let (server, users, dir) = (running.server.clone(), users.clone(), cli.dir.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval((l / 3).max(std::time::Duration::from_millis(100)));
                tick.tick().await;
                loop {
                    tick.tick().await;
                    for (file, user) in &users {
                        let token = server.tokens.issue(user, file);
                        let path = dir.join(format!("token-{file}"));
                        if let Err(e) = write_atomic(&path, &token) {
                            tracing::error!(path = %path.display(), error = %e, "could not rotate a token");
                        }
                    }
                }
            });
        }
        std::fs::write(cli.dir.join("url"), &running.url)?;
        println!("{}", running.url);
        tracing::info!(url = %running.url, dir = %cli.dir.display(), "serving");
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => {}
            r = tokio::signal::ctrl_c() => r?,
        }
        running
            .server
            .requests
            .flush()
            .with_context(|| format!("write {}", log_path.display()))?;
        let v = running.server.requests.verdicts();
        tracing::info!(
            allowed = v.allowed,
            refused = v.refused,
            unjudged = v.unjudged,
            lost = running.server.requests.lost(),
            file = %log_path.display(),
            "stopping; every request is in the log"
        );
        Ok(())
    })
}

/// A new token for `user` held by `client`, written to `path`.
fn write_token(running: &Running, path: &std::path::Path, user: &str, client: &str) -> Result<()> {
    let token = running.server.tokens.issue(user, client);
    write_atomic(path, &token).with_context(|| format!("write {}", path.display()))
}

/// `text` to `path` through a temporary file renamed over it.
fn write_atomic(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}
