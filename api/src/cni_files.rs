//! The node's CNI files shared between the init container and felix: the
//! conflist waits beside its place as `<conflist>.pending` (an extension
//! the runtime does not read) until felix has written the plugins'
//! kubeconfig, then felix renames it into place (docs/install.md).

use std::path::{Path, PathBuf};

/// Where `conflist` waits for felix.
pub fn pending_conflist(conflist: &Path) -> PathBuf {
    let mut name = conflist.as_os_str().to_owned();
    name.push(".pending");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pending_name_has_an_extension_no_runtime_reads() {
        let p = pending_conflist(Path::new("/etc/cni/net.d/10-tartan.conflist"));
        assert_eq!(p, Path::new("/etc/cni/net.d/10-tartan.conflist.pending"));
        let ext = p.extension().and_then(|e| e.to_str());
        assert!(!matches!(ext, Some("conf" | "conflist" | "json")));
    }
}
