//! The names of this node's blocks, kept in a local file between calls
//! ([`super::IpamConfig::remember`]). An ADD reads the blocks named there
//! together with its other reads, where it would otherwise list the
//! node's BlockAffinities first and read the blocks after. The file is
//! written when the node's affinities were listed and when a block is
//! claimed (before an address is taken from it, so that a retried ADD
//! finds what it took).

use std::collections::HashSet;
use std::io;
use std::path::Path;

use tartan_api::resources::common::dns_subdomain;
use tracing::warn;

use super::Ipam;

/// More names than a node could hold are not read.
const MOST: usize = 4096;

impl Ipam {
    /// The block names kept; none when there is no file (or it is
    /// unreadable: the ADD then lists the affinities, as without one).
    pub(super) fn remembered(&self) -> Vec<String> {
        let Some(path) = &self.cfg.remember else {
            return Vec::new();
        };
        std::fs::read_to_string(path)
            .map(|s| parse(&s))
            .unwrap_or_default()
    }

    /// Keep `names` as this node's blocks, instead of what was kept.
    pub(super) fn remember(&self, names: &[String]) {
        let Some(path) = &self.cfg.remember else {
            return;
        };
        if let Err(e) = write(path, names) {
            warn!(path = %path.display(), error = %e, "cannot keep this node's block names; ADDs will list its affinities");
        }
    }

    /// Add `name` to the names kept.
    pub(super) fn remember_also(&self, name: &str) {
        let mut names = self.remembered();
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
            self.remember(&names);
        }
    }
}

/// One name a line; what is not an object name is passed over.
fn parse(s: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out: Vec<String> = Vec::new();
    for line in s.lines().map(str::trim) {
        if out.len() == MOST {
            break;
        }
        if dns_subdomain(line).is_ok() && seen.insert(line) {
            out.push(line.to_string());
        }
    }
    out
}

/// Written whole and renamed into place: a reader sees the old list or
/// the new one.
fn write(path: &Path, names: &[String]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}", std::process::id()));
    let mut text = names.join("\n");
    text.push('\n');
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_a_block_name_is_passed_over() {
        let names = parse("10-0-0-0-26\n\n ../etc \nA_B\n10-0-0-0-26\n10-0-0-64-26\n");
        assert_eq!(names, vec!["10-0-0-0-26", "10-0-0-64-26"]);
        assert!(parse(&"x\n".repeat(MOST + 10)).len() <= MOST);
    }
}
