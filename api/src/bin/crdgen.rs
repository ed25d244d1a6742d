//! `tartan-crdgen [DIR] [--check]`: write Tartan's CRDs as YAML files, one
//! per CRD, or check that the files there are up to date.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use tartan_api::resources::crd;

#[derive(Parser)]
#[command(
    name = "tartan-crdgen",
    about = "Write or check Tartan's CRD manifests"
)]
struct Args {
    /// Directory of the CRD files. Default: deploy/crds in the workspace
    /// root (found from the current directory upwards), else in the
    /// current directory.
    dir: Option<PathBuf>,
    /// Change nothing; exit 1 listing files that differ, are missing or
    /// are not generated any more.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("tartan-crdgen: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The files that should be in the directory: name and contents.
fn wanted() -> Result<Vec<(String, String)>> {
    crd::crds()
        .iter()
        .map(|c| Ok((crd::file_name(c), crd::to_yaml(c).context("writing YAML")?)))
        .collect()
}

fn default_dir() -> Result<PathBuf> {
    let cwd = std::env::current_dir().context("current directory")?;
    for dir in cwd.ancestors() {
        let manifest = dir.join("Cargo.toml");
        if std::fs::read_to_string(&manifest).is_ok_and(|t| t.contains("[workspace]")) {
            return Ok(dir.join("deploy/crds"));
        }
    }
    Ok(cwd.join("deploy/crds"))
}

/// Generated YAML files present in `dir`.
fn present(dir: &Path) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for e in entries {
        let name = e?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".tartan.dev.yaml") {
            out.insert(name);
        }
    }
    Ok(out)
}

fn run(args: &Args) -> Result<bool> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => default_dir()?,
    };
    let files = wanted()?;
    let mut extra = present(&dir)?;
    let mut stale = Vec::new();
    for (name, text) in &files {
        extra.remove(name);
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(old) if old == *text => {}
            Ok(_) => stale.push(format!("{} differs", path.display())),
            Err(_) => stale.push(format!("{} is missing", path.display())),
        }
    }
    let extra: Vec<String> = extra
        .into_iter()
        .map(|n| format!("{} is not generated any more", dir.join(n).display()))
        .collect();
    if args.check {
        for line in stale.iter().chain(&extra) {
            println!("{line}");
        }
        if stale.is_empty() && extra.is_empty() {
            println!("{} CRDs in {} are up to date", files.len(), dir.display());
            return Ok(true);
        }
        println!("run `cargo run -p tartan-api --bin tartan-crdgen` to regenerate them");
        return Ok(false);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, text) in &files {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    for line in &extra {
        println!("note: {line}; remove it if the kind is gone");
    }
    println!("wrote {} CRDs to {}", files.len(), dir.display());
    Ok(true)
}
