//! The CNI installer's parts (the `tartan-install-cni` binary, run by the
//! DaemonSet's init container): the ConfigMap `tartan-config` read as the
//! files of its volume, the [`underlay`] it measures the MTU on, the
//! [`conflist`] it renders, written atomically.

pub mod conflist;
pub mod underlay;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// A ConfigMap volume's keys and values: one file per key. Names starting
/// with `.` are the kubelet's own (`..data`, the timestamped directory).
pub fn read_config_dir(dir: &Path) -> std::io::Result<BTreeMap<String, String>> {
    let mut data = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        // Follows the kubelet's symlinks to the current version.
        if std::fs::metadata(entry.path())?.is_dir() {
            continue;
        }
        data.insert(name, std::fs::read_to_string(entry.path())?);
    }
    Ok(data)
}

/// Write `text` to `path` so that a reader sees the old file or the new,
/// never a part: a temporary file beside it, synced, then renamed over.
pub fn write_atomic(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no file", path.display())))?;
    let tmp = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_map_volume_reads_as_its_keys() {
        let dir = std::env::temp_dir().join(format!("tartan-cmvol-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // The kubelet's layout: keys are symlinks into ..data.
        let data = dir.join("..2026_11_26_12_00_00.1");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("mtu"), "1400").unwrap();
        std::fs::write(data.join("encapsulation"), "VXLAN").unwrap();
        std::os::unix::fs::symlink("..2026_11_26_12_00_00.1", dir.join("..data")).unwrap();
        for k in ["mtu", "encapsulation"] {
            std::os::unix::fs::symlink(format!("..data/{k}"), dir.join(k)).unwrap();
        }
        let got = read_config_dir(&dir);
        let out = dir.join("10-tartan.conflist");
        write_atomic(&out, "old\n", 0o644).unwrap();
        write_atomic(&out, "new\n", 0o644).unwrap();
        let written = std::fs::read_to_string(&out);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        let got = got.unwrap();
        assert_eq!(
            got,
            BTreeMap::from([
                ("encapsulation".to_string(), "VXLAN".to_string()),
                ("mtu".to_string(), "1400".to_string()),
            ])
        );
        assert_eq!(written.unwrap(), "new\n");
        assert!(leftovers.is_empty());
    }
}
