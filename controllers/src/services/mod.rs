//! The control plane's Service parts, played by `tartan-lab`:
//!
//! - `tartan-lab ctl apply|create|replace -f …` reads and checks the
//!   files as tartanctl does, gives each Service what the API server and a
//!   load-balancer controller would ([`alloc`]: ClusterIP from the lab's
//!   service range, NodePorts, LoadBalancer ingress IPs from the LB
//!   range), and hands tartanctl the completed objects; a refused
//!   allocation writes nothing.
//! - After every command that may change Services or Pods (`ctl` apply,
//!   create, replace, delete, label; `pod add`, `del`, `ready`,
//!   `terminate`) the EndpointSlices are brought in line with the Pods
//!   ([`slices`]).
//!
//! One lock file per lab keeps two such commands from interleaving.

pub mod alloc;
pub mod slices;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{Value, json};
use tartan_api::Kind;
use tartan_api::store::typed::{TypedStore, from_dynamic, to_dynamic};
use tartan_api::store::{Datastore, DynamicObject, StoreError, connect};

use super::state::{self, LabState};
use super::up::runtime;
pub use alloc::Ranges;

/// The lab's ranges.
pub fn ranges(st: &LabState) -> Result<Ranges> {
    Ok(Ranges::new(
        st.service_cidr
            .parse()
            .with_context(|| format!("service range {:?}", st.service_cidr))?,
        st.lb_cidr
            .parse()
            .with_context(|| format!("LoadBalancer range {:?}", st.lb_cidr))?,
    ))
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
    connect(&st.datastore, Some(Duration::from_secs(10)))
        .await
        .with_context(|| format!("open the lab's datastore {}", st.datastore))
}

/// The EndpointSlices brought in line with the Services and Pods; the
/// number of writes.
pub async fn sync_slices(store: &dyn Datastore) -> Result<usize> {
    // A write that races another writer is read again and retried.
    for _ in 0..5 {
        let (services, _) = store.list_typed::<Service>(None).await?;
        let (pods, _) = store.list_typed::<Pod>(None).await?;
        let (stored, _) = store.list_typed::<EndpointSlice>(None).await?;
        let views: Vec<slices::PodView> = pods.iter().map(slices::PodView::from_pod).collect();
        let plan = slices::plan(&services, &views, &stored);
        let mut writes = 0;
        let mut conflict = false;
        for s in &plan.create {
            match store.create_typed(s).await {
                Ok(_) => writes += 1,
                Err(StoreError::AlreadyExists(_)) => conflict = true,
                Err(e) => return Err(e.into()),
            }
        }
        for s in &plan.update {
            match store.update_typed(s).await {
                Ok(_) => writes += 1,
                Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => conflict = true,
                Err(e) => return Err(e.into()),
            }
        }
        for (ns, name) in &plan.delete {
            match store
                .delete_typed::<EndpointSlice>(Some(ns), name, None)
                .await
            {
                Ok(()) | Err(StoreError::NotFound(_)) => writes += 1,
                Err(e) => return Err(e.into()),
            }
        }
        if !conflict {
            return Ok(writes);
        }
    }
    bail!("the EndpointSlices kept changing under the lab's controller")
}

/// [`sync_slices`] for a lab, under its lock.
pub fn sync(st: &LabState) -> Result<usize> {
    let _l = lock(&st.name)?;
    sync_unlocked(st)
}

fn sync_unlocked(st: &LabState) -> Result<usize> {
    runtime()?
        .block_on(async { sync_slices(&*open(st).await?).await })
        .context("keeping the EndpointSlices")
}

/// `objects` (from files) with their Services completed; every problem
/// otherwise.
pub async fn complete(
    store: &dyn Datastore,
    ranges: &Ranges,
    objects: Vec<DynamicObject>,
) -> Result<std::result::Result<Vec<DynamicObject>, Vec<String>>> {
    let is_service = |o: &DynamicObject| {
        o.types
            .as_ref()
            .is_some_and(|t| t.api_version == "v1" && t.kind == "Service")
    };
    let mut incoming = Vec::new();
    let mut problems = Vec::new();
    for o in objects.iter().filter(|o| is_service(o)) {
        match from_dynamic::<Service>(o.clone()) {
            Ok(s) => incoming.push(s),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        return Ok(Err(problems));
    }
    if incoming.is_empty() {
        return Ok(Ok(objects));
    }
    let (stored, _) = store.list_typed::<Service>(None).await?;
    let done = match alloc::allocate(ranges, &stored, &incoming) {
        Ok(d) => d,
        Err(p) => return Ok(Err(p)),
    };
    let mut done = done.into_iter();
    let mut out = Vec::with_capacity(objects.len());
    for o in objects {
        if is_service(&o) {
            let s = done
                .next()
                .ok_or_else(|| anyhow!("a Service went missing"))?;
            out.push(to_dynamic(&s)?);
        } else {
            out.push(o);
        }
    }
    Ok(Ok(out))
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
    let mut tmp: Option<TempFile> = None;
    if let (Some(cli), Some(fa)) = (&parsed, files) {
        use tartanctl::resource::objects::Check;
        let items = match tartanctl::resource::load(
            &fa.files,
            cli.global.namespace.as_deref(),
            Check::Validate,
        ) {
            Ok(items) => items,
            Err(e) => {
                eprintln!("error: {e:#}");
                return Ok(1);
            }
        };
        let services = items.iter().any(|p| p.key.kind == Kind::Service);
        let stdin = fa.files.iter().any(|f| f.as_os_str() == "-");
        if services || stdin {
            let ranges = ranges(st)?;
            let objects: Vec<DynamicObject> = items.into_iter().map(|p| p.obj).collect();
            let completed = runtime()?.block_on(async {
                let store = open(st).await?;
                complete(&*store, &ranges, objects).await
            })?;
            let objects = match completed {
                Ok(o) => o,
                Err(problems) => {
                    for p in &problems {
                        eprintln!("error: {p}");
                    }
                    eprintln!("error: nothing was written");
                    return Ok(1);
                }
            };
            let path = state::dir(&st.name).join(format!("ctl-{}.json", std::process::id()));
            std::fs::write(
                &path,
                serde_json::to_string_pretty(&json!({
                    "apiVersion": "v1", "kind": "List", "items": objects
                }))?,
            )?;
            tmp = Some(TempFile(path.clone()));
            args = rebuilt_args(cli, &path);
        }
    }
    let status = Command::new(tartanctl)
        .arg("--datastore")
        .arg(&st.datastore)
        .args(&args)
        .status()
        .with_context(|| format!("run {}", tartanctl.display()))?;
    drop(tmp);
    if writes && let Err(e) = sync_unlocked(st) {
        eprintln!("tartan-lab: {e:#}");
        return Ok(1);
    }
    Ok(status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(1))
}

/// The command line again, its files replaced by `path`.
fn rebuilt_args(cli: &tartanctl::Cli, path: &Path) -> Vec<String> {
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
    a.extend([verb.to_string(), "-f".into(), path.display().to_string()]);
    if f.continue_on_error {
        a.push("--continue-on-error".into());
    }
    a
}

struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Reads pod `ns/name`, changes it with `f` (as JSON) and writes it back,
/// retrying when it changed meanwhile.
pub async fn edit_pod(
    store: &dyn Datastore,
    ns: &str,
    name: &str,
    f: impl Fn(&mut Value),
) -> Result<()> {
    for _ in 0..10 {
        let pod: Pod = store
            .get_typed(Some(ns), name)
            .await
            .with_context(|| format!("read Pod {ns}/{name}"))?;
        let mut v = serde_json::to_value(&pod)?;
        f(&mut v);
        let new: Pod = serde_json::from_value(v)?;
        match store.update_typed(&new).await {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e).with_context(|| format!("write Pod {ns}/{name}")),
        }
    }
    bail!("Pod {ns}/{name} kept changing; try again")
}

/// The Pod's status as a kubelet reports it once the pod is wired: its
/// address, its node's address, Running and Ready.
pub fn running_status(v: &mut Value, pod_ip: &str, host_ip: &str) {
    v["status"] = json!({
        "phase": "Running",
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "hostIP": host_ip,
        "conditions": [{"type": "Ready", "status": "True"}],
    });
}

/// Sets the Ready condition.
pub fn set_ready(v: &mut Value, ready: bool) {
    let want = if ready { "True" } else { "False" };
    let conds = &mut v["status"]["conditions"];
    if !conds.is_array() {
        *conds = json!([]);
    }
    let list = conds.as_array_mut().expect("made an array");
    match list.iter_mut().find(|c| c["type"] == "Ready") {
        Some(c) => c["status"] = json!(want),
        None => list.push(json!({"type": "Ready", "status": want})),
    }
}

/// Marks the pod as being deleted (graceful termination has begun).
pub fn set_terminating(v: &mut Value, now: std::time::SystemTime) {
    if v["metadata"]["deletionTimestamp"].is_null() {
        v["metadata"]["deletionTimestamp"] = json!(rfc3339(now));
        v["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    }
}

/// `2025-01-02T03:04:05Z`.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_709_251_199)),
            "2024-02-29T23:59:59Z"
        );
    }

    #[test]
    fn pod_status_edits() {
        let mut v = json!({"metadata": {"name": "a"}});
        running_status(&mut v, "10.0.0.1", "10.213.1.2");
        set_ready(&mut v, false);
        set_terminating(&mut v, UNIX_EPOCH);
        let p: Pod = serde_json::from_value(v.clone()).unwrap();
        let view = slices::PodView::from_pod(&p);
        assert!(!view.ready && view.terminating);
        assert_eq!(view.ip.as_deref(), Some("10.0.0.1"));
        set_ready(&mut v, true);
        let p: Pod = serde_json::from_value(v).unwrap();
        assert!(slices::PodView::from_pod(&p).ready);
    }

    #[tokio::test]
    async fn files_complete_against_the_store_and_refuse_whole() {
        let store = tartan_api::store::connect("memory", None).await.unwrap();
        let ranges = Ranges::new(
            "10.96.0.0/16".parse().unwrap(),
            "192.0.2.0/24".parse().unwrap(),
        );
        let obj = |v: Value| -> DynamicObject { serde_json::from_value(v).unwrap() };
        let svc = |name: &str, node_port: Option<i32>| {
            let mut port = json!({"port": 80});
            if let Some(n) = node_port {
                port["nodePort"] = json!(n);
            }
            obj(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"type": "NodePort", "selector": {"app": name}, "ports": [port]}}))
        };
        let pool = obj(json!({"apiVersion": "tartan.dev/v1", "kind": "IPPool",
            "metadata": {"name": "p"}, "spec": {"cidr": "10.1.0.0/16"}}));
        let out = complete(&*store, &ranges, vec![pool.clone(), svc("a", Some(30080))])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            serde_json::to_value(&out[0]).unwrap(),
            serde_json::to_value(&pool).unwrap(),
            "other kinds pass untouched"
        );
        assert_eq!(out[1].data["spec"]["clusterIP"], "10.96.0.2");
        store.create(out[1].clone()).await.unwrap();
        let refused = complete(
            &*store,
            &ranges,
            vec![svc("b", None), svc("c", Some(30080))],
        )
        .await
        .unwrap()
        .unwrap_err();
        assert_eq!(
            refused,
            vec![
                "Service default/c: spec.ports[0].nodePort: 30080 is already allocated to Service default/a"
            ]
        );
    }
}
