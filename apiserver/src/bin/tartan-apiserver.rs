//! `tartan-apiserver`: the API server stand-in as a program. It serves
//! plain HTTP, writes a kubeconfig per identity into `--dir` (the admin,
//! and each service account of the `--rbac` manifests), judges requests by
//! those manifests' roles (refusing with 403 under `--enforce`), and writes
//! each request to `requests.jsonl` as it comes (one JSON line: user,
//! client, RBAC verb and request, method, path, verdict), keeping none in
//! memory, so a long-lived lab does not grow with its requests.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use tartan_api::logging::LogFormat;
use tartan_apiserver::rbac::ADMIN;
use tartan_apiserver::{ApiServer, Policy, service_account_user};

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
    /// Log format (the filter is TARTAN_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "TARTAN_LOG_FORMAT")]
    log_format: LogFormat,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tartan_api::logging::init(cli.log_format, "info");
    let mut server = ApiServer::new();
    let mut users = vec![("admin".to_string(), ADMIN.to_string())];
    if let Some(dir) = &cli.rbac {
        let policy = Policy::from_dir(dir).with_context(|| format!("RBAC of {}", dir.display()))?;
        for (ns, sa) in &policy.service_accounts {
            users.push((format!("{ns}.{sa}"), service_account_user(ns, sa)));
        }
        server = server.with_policy(policy, cli.enforce);
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
            std::fs::write(&path, running.kubeconfig_for(user, file))
                .with_context(|| format!("write {}", path.display()))?;
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
