//! Which filesystem holds a path, from the mount table: a benchmark's
//! figures for etcd depend on it (a write waits for etcd's fsync, nearly
//! free on `tmpfs`, a disk's latency elsewhere).

use std::path::{Component, Path};

/// The type of the filesystem mounted deepest above `path` in `mounts`
/// (the text of `/proc/mounts`), or `None` if no line names a mount
/// point above it. Mount points are compared by whole components, so
/// `/tmpfoo` is not under `/tmp`; octal escapes (`\040` for a space) are
/// read as the kernel writes them.
pub fn filesystem_of(path: &Path, mounts: &str) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for line in mounts.lines() {
        let mut fields = line.split_whitespace();
        let (Some(_device), Some(point), Some(fstype)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let point = unescape(point);
        let point = Path::new(&point);
        if !path.starts_with(point) {
            continue;
        }
        let depth = point
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count();
        // A later line at the same depth is mounted over the earlier one.
        if best.is_none_or(|(d, _)| depth >= d) {
            best = Some((depth, fstype));
        }
    }
    best.map(|(_, t)| t.to_string())
}

/// The filesystem type holding `path` on this machine ("unknown" if the
/// mount table cannot be read or names none).
pub fn filesystem_here(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    std::fs::read_to_string("/proc/mounts")
        .ok()
        .and_then(|m| filesystem_of(&path, &m))
        .unwrap_or_else(|| "unknown".to_string())
}

/// `\ooo` octal escapes undone, as in /proc/mounts fields.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::filesystem_of;
    use std::path::Path;

    const MOUNTS: &str = "\
/dev/vda / ext4 rw,relatime 0 0
proc /proc proc rw 0 0
tmpfs /dev/shm tmpfs rw,relatime 0 0
/dev/vdb /tmp/my\\040disk xfs rw 0 0
tmpfs /run tmpfs rw 0 0
/dev/vdc /run xfs rw 0 0
";

    fn fs(p: &str) -> Option<String> {
        filesystem_of(Path::new(p), MOUNTS)
    }

    #[test]
    fn the_deepest_mount_point_above_the_path_decides() {
        assert_eq!(fs("/tmp/tartan-lab-etcd-1/m0").as_deref(), Some("ext4"));
        assert_eq!(fs("/dev/shm/tartan-lab-etcd-1").as_deref(), Some("tmpfs"));
        assert_eq!(fs("/dev/shm").as_deref(), Some("tmpfs"));
        assert_eq!(fs("/").as_deref(), Some("ext4"));
    }

    #[test]
    fn mount_points_match_whole_components_and_escapes_are_read() {
        assert_eq!(fs("/dev/shmx/a").as_deref(), Some("ext4"));
        assert_eq!(fs("/tmp/my disk/etcd").as_deref(), Some("xfs"));
        assert_eq!(fs("/tmp/my\\040disk/etcd").as_deref(), Some("ext4"));
    }

    #[test]
    fn the_later_of_two_mounts_on_one_point_is_the_one_seen() {
        assert_eq!(fs("/run/etcd").as_deref(), Some("xfs"));
    }

    #[test]
    fn no_mount_above_the_path_and_bad_lines_give_none() {
        assert_eq!(filesystem_of(Path::new("relative/x"), MOUNTS), None);
        assert_eq!(filesystem_of(Path::new("/x"), "garbage\n\n/dev/a"), None);
    }
}
