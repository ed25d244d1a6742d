//! The lab's side of the Service control plane, whose parts are in
//! `tartan-controllers` ([`tartan_controllers::services`]):
//!
//! - `tartan-lab ctl apply|create|replace -f …` reads and checks the
//!   files as tartanctl does, has each Service completed (ClusterIP from
//!   the lab's service range, NodePorts, claimed in the ranges'
//!   allocation records; LoadBalancer ingress addresses are
//!   tartan-controllers' to give, from the LoadBalancerIPPool `up` makes
//!   of the lab's LB range), and hands
//!   tartanctl the completed objects; a refused allocation writes
//!   nothing. Once tartanctl has written them, what the Services no
//!   longer hold (a NodePort Service turned ClusterIP) is freed.
//! - `ctl delete` of Services frees what they held once they are gone
//!   (deletes it cannot name beforehand: a repair from the Services).
//! - After every command that may change Services or Pods (`ctl` apply,
//!   create, replace, delete, label; `pod add`, `del`, `ready`,
//!   `terminate`) the EndpointSlices are brought in line with the Pods:
//!   after an apply of files without Pods, those of the files' Services
//!   only (so that its cost does not grow with the store), else all.
//!
//! One lock file per lab keeps two such commands from interleaving.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::Service;
use tartan_api::Kind;
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, DynamicObject, ObjectKey, StoreError};
use tartan_controllers::services::{
    Ranges, Release, complete, release, repair, sync_slices, sync_slices_of,
};

use super::runtime::runtime;
use super::state::{self, LabState};

/// The lab's ranges: a dual-stack lab's IPv6 service range second.
pub fn ranges(st: &LabState) -> Result<Ranges> {
    let v4 = st
        .service_cidr
        .parse()
        .with_context(|| format!("service range {:?}", st.service_cidr))?;
    Ok(match &st.service_cidr6 {
        None => Ranges::new(v4),
        Some(s) => Ranges::dual_stack(
            v4,
            s.parse()
                .with_context(|| format!("IPv6 service range {s:?}"))?,
        ),
    })
}

/// An exclusive lock on the lab's control plane, released on drop.
pub struct Lock {
    _file: File,
}

pub fn lock(lab: &str) -> Result<Lock> {
    let dir = state::dir(lab);
    std::fs::create_dir_all(&dir)?;
    let f = File::create(dir.join("controller.lock"))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!(
            "lock {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(Lock { _file: f })
}

async fn open(st: &LabState) -> Result<std::sync::Arc<dyn Datastore>> {
    super::store::open(st, Duration::from_secs(10)).await
}

/// [`sync_slices`] for a lab, under its lock.
pub fn sync(st: &LabState) -> Result<usize> {
    let _l = lock(&st.name)?;
    sync_unlocked(st)
}

fn sync_unlocked(st: &LabState) -> Result<usize> {
    runtime()?
        .block_on(async { Ok::<_, anyhow::Error>(sync_slices(&*open(st).await?).await?) })
        .context("keeping the EndpointSlices")
}

/// `tartan-lab ctl ARGS…`: tartanctl against the lab's datastore, with
/// Services completed on the way in and EndpointSlices kept after any
/// write. Its exit code.
pub fn ctl(st: &LabState, tartanctl: &Path, args: &[String]) -> Result<u8> {
    use tartanctl::cli::Command as Ctl;
    let _l = lock(&st.name)?;
    let mut argv: Vec<String> = vec![
        "tartanctl".into(),
        "--datastore".into(),
        st.datastore.clone(),
    ];
    argv.extend(args.iter().cloned());
    let parsed = tartanctl::Cli::try_parse_from(&argv).ok();
    let (writes, files) = match parsed.as_ref().map(|c| &c.command) {
        Some(Ctl::Apply(f) | Ctl::Create(f) | Ctl::Replace(f)) => (true, Some(f)),
        Some(Ctl::Delete(_) | Ctl::Label(_)) => (true, None),
        _ => (false, None),
    };
    let mut args = args.to_vec();
    let mut tmp: Option<TempFiles> = None;
    // What to free once tartanctl is done, and which Services' slices to
    // keep (`None`: every Service's).
    let mut freed = Release::default();
    let mut scope: Option<Vec<(String, String)>> = None;
    let deleting = match parsed.as_ref() {
        Some(
            cli @ tartanctl::Cli {
                command: Ctl::Delete(d),
                ..
            },
        ) => Some(services_deleted(st, cli, d)?),
        _ => None,
    };
    if let (Some(cli), Some(fa)) = (&parsed, files) {
        use tartan_api::validate::depends_on_stored;
        use tartanctl::resource::objects::Check;
        use tartanctl::resource::updates::check_against_stored;
        use tartanctl::resource::write::Mode;
        let items = match tartanctl::resource::load(
            &fa.files,
            cli.global.namespace.as_deref(),
            Check::ValidateUnlessStored,
        ) {
            Ok(items) => items,
            Err(e) => {
                eprintln!("error: {e:#}");
                return Ok(1);
            }
        };
        // A Service update is checked as the API server checks it, against
        // its stored version, before anything is claimed for it.
        let mode = match &cli.command {
            Ctl::Create(_) => Mode::Create,
            Ctl::Replace(_) => Mode::Replace,
            _ => Mode::Apply,
        };
        let checked = if items.iter().any(|p| depends_on_stored(p.key.kind)) {
            runtime()?.block_on(async {
                let store = open(st).await?;
                check_against_stored(&*store, mode, &items).await
            })
        } else {
            Ok(())
        };
        if let Err(e) = checked {
            eprintln!("error: {e:#}");
            return Ok(1);
        }
        let services = items.iter().any(|p| p.key.kind == Kind::Service);
        let stdin = fa.files.iter().any(|f| f.as_os_str() == "-");
        // Pods and Nodes (a Node's zone is its pods' endpoints') change
        // other Services' slices: those writes sync them all.
        if !items
            .iter()
            .any(|p| matches!(p.key.kind, Kind::Pod | Kind::Node))
        {
            scope = Some(
                items
                    .iter()
                    .filter(|p| p.key.kind == Kind::Service)
                    .map(|p| {
                        let ns = p.key.namespace.clone().unwrap_or_else(|| "default".into());
                        (ns, p.key.name.clone())
                    })
                    .collect(),
            );
        }
        if services || stdin {
            let ranges = ranges(st)?;
            let objects: Vec<DynamicObject> = items.into_iter().map(|p| p.obj).collect();
            let completed = runtime()?.block_on(async {
                let store = open(st).await?;
                Ok::<_, anyhow::Error>(complete(&*store, &ranges, objects).await?)
            })?;
            let objects = match completed {
                Ok(c) => {
                    freed = c.release;
                    c.objects
                }
                Err(problems) => {
                    for p in &problems {
                        eprintln!("error: {p}");
                    }
                    eprintln!("error: nothing was written");
                    return Ok(1);
                }
            };
            let paths = write_lists(&state::dir(&st.name), &objects)?;
            args = rebuilt_args(cli, &paths);
            tmp = Some(TempFiles(paths));
        }
    }
    let mut cmd = Command::new(tartanctl);
    super::apiserver::datastore_env(&mut cmd, st, super::apiserver::Identity::Admin);
    let status = cmd
        .arg("--datastore")
        .arg(&st.datastore)
        .args(&args)
        .status()
        .with_context(|| format!("run {}", tartanctl.display()))?;
    drop(tmp);
    // Freed only when every write is done: after a failure the old
    // holdings stay claimed until a repair.
    if status.success() && !freed.is_empty() {
        free(st, &freed)?;
    }
    if let Some(deleting) = deleting
        && deleting.as_ref().is_none_or(|d| !d.is_empty())
    {
        free_deleted(st, deleting)?;
    }
    let synced = match scope {
        _ if !writes => Ok(0),
        Some(keys) => runtime()?.block_on(async {
            Ok::<_, anyhow::Error>(sync_slices_of(&*open(st).await?, &keys).await?)
        }),
        None => sync_unlocked(st),
    };
    if let Err(e) = synced {
        eprintln!("tartan-lab: {e:#}");
        return Ok(1);
    }
    Ok(status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(1))
}

/// What a `ctl delete` is about to delete of Services: those it names
/// (their stored versions, read now), or `None` when it names them in a
/// way not read here (then a repair follows).
type Deleting = Option<Vec<Service>>;

fn services_deleted(
    st: &LabState,
    cli: &tartanctl::Cli,
    d: &tartanctl::cli::DeleteArgs,
) -> Result<Deleting> {
    use tartanctl::resource::objects::Check;
    let ns = cli.global.namespace.as_deref();
    if d.files.iter().any(|f| f.as_os_str() == "-") {
        // Standard input is tartanctl's to read.
        return Ok(None);
    }
    let keys: Vec<ObjectKey> = if !d.files.is_empty() {
        match tartanctl::resource::load(&d.files, ns, Check::KeyOnly) {
            Ok(items) => items.into_iter().map(|p| p.key).collect(),
            // tartanctl says what is wrong with them.
            Err(_) => return Ok(Some(vec![])),
        }
    } else {
        match d.words.split_first() {
            Some((kind, names)) if Kind::from_cli(kind) == Some(Kind::Service) => names
                .iter()
                .map(|n| ObjectKey::new(Kind::Service, Some(ns.unwrap_or("default")), n))
                .collect(),
            Some((kind, _)) if Kind::from_cli(kind).is_some() => vec![],
            _ => return Ok(Some(vec![])),
        }
    };
    let keys: Vec<ObjectKey> = keys
        .into_iter()
        .filter(|k| k.kind == Kind::Service)
        .collect();
    if keys.is_empty() {
        return Ok(Some(vec![]));
    }
    runtime()?.block_on(async {
        let store = open(st).await?;
        let mut out = vec![];
        for k in &keys {
            match store
                .get_typed::<Service>(k.namespace.as_deref(), &k.name)
                .await
            {
                Ok(s) => out.push(s),
                Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(out))
    })
}

/// Frees `r` in the lab's allocation records.
fn free(st: &LabState, r: &Release) -> Result<()> {
    let ranges = ranges(st)?;
    runtime()?
        .block_on(async { Ok::<_, anyhow::Error>(release(&*open(st).await?, &ranges, r).await?) })
        .context("freeing Service allocations")
}

/// Frees what the deleted Services held (those still there keep it).
fn free_deleted(st: &LabState, deleting: Deleting) -> Result<()> {
    let ranges = ranges(st)?;
    runtime()?
        .block_on(async {
            let store = open(st).await?;
            let Some(services) = deleting else {
                repair(&*store, &ranges).await?;
                return Ok(());
            };
            let mut gone = vec![];
            for s in services {
                let ns = s.metadata.namespace.as_deref().unwrap_or("default");
                let name = s.metadata.name.as_deref().unwrap_or("");
                match store.get_typed::<Service>(Some(ns), name).await {
                    Err(StoreError::NotFound(_)) => gone.push(s),
                    Ok(_) => {}
                    Err(e) => return Err(anyhow::Error::from(e)),
                }
            }
            release(&*store, &ranges, &Release::of(&ranges, &gone)).await?;
            Ok(())
        })
        .context("freeing the deleted Services' allocations")
}

/// The largest file written for tartanctl (which takes at most 3 MiB of
/// JSON a file).
const LIST_BYTES: usize = 2 << 20;

/// `objects` written into `dir` as JSON Lists of at most [`LIST_BYTES`]
/// each (an object larger than that alone in its file); their paths.
fn write_lists(dir: &Path, objects: &[DynamicObject]) -> Result<Vec<PathBuf>> {
    let mut chunks: Vec<Vec<String>> = vec![vec![]];
    let mut size = 0;
    for o in objects {
        let text = serde_json::to_string(o)?;
        let last = chunks.last().map_or(0, Vec::len);
        if last > 0 && size + text.len() + 64 > LIST_BYTES {
            chunks.push(vec![]);
            size = 0;
        }
        size += text.len() + 1;
        if let Some(c) = chunks.last_mut() {
            c.push(text);
        }
    }
    let mut paths = vec![];
    for (i, c) in chunks.iter().enumerate() {
        let path = dir.join(format!("ctl-{}-{i}.json", std::process::id()));
        let text = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{}]}}",
            c.join(",")
        );
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        paths.push(path);
    }
    Ok(paths)
}

/// The command line again, its files replaced by `paths`.
fn rebuilt_args(cli: &tartanctl::Cli, paths: &[PathBuf]) -> Vec<String> {
    use tartanctl::cli::Command as Ctl;
    let mut a = vec![];
    if let Some(ns) = &cli.global.namespace {
        a.extend(["--namespace".to_string(), ns.clone()]);
    }
    a.extend(["--timeout".to_string(), cli.global.timeout.to_string()]);
    let (verb, f) = match &cli.command {
        Ctl::Apply(f) => ("apply", f),
        Ctl::Create(f) => ("create", f),
        Ctl::Replace(f) => ("replace", f),
        _ => unreachable!("only file commands are rebuilt"),
    };
    a.push(verb.to_string());
    for p in paths {
        a.extend(["-f".to_string(), p.display().to_string()]);
    }
    if f.continue_on_error {
        a.push("--continue-on-error".into());
    }
    a
}

struct TempFiles(Vec<PathBuf>);

impl Drop for TempFiles {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_writes_are_split_into_lists_tartanctl_takes() {
        let dir = std::env::temp_dir().join(format!("tartan-lab-lists-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = "x".repeat(100_000);
        let objects: Vec<DynamicObject> = (0..50)
            .map(|i| {
                serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": format!("s{i}"), "annotations": {"a": big}}}))
                .unwrap()
            })
            .collect();
        let paths = write_lists(&dir, &objects).unwrap();
        let guard = TempFiles(paths.clone());
        assert!(paths.len() >= 3, "{paths:?}");
        let mut names = vec![];
        for p in &paths {
            let text = std::fs::read_to_string(p).unwrap();
            assert!(text.len() <= LIST_BYTES, "{} bytes", text.len());
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            for o in v["items"].as_array().unwrap() {
                names.push(o["metadata"]["name"].as_str().unwrap().to_string());
            }
        }
        let want: Vec<String> = (0..50).map(|i| format!("s{i}")).collect();
        assert_eq!(names, want, "every object once, in order");
        drop(guard);
        assert!(paths.iter().all(|p| !p.exists()));
        let _ = std::fs::remove_dir(&dir);
    }
}
