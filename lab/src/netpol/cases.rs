//! Running a list of cases on one cluster, each from a clean start: every
//! case runs, its failure is recorded, and the cluster is reset (policies
//! deleted, labels restored, grid all reachable again) before the next.

use std::time::Instant;

use anyhow::Result;

use super::cluster::NetpolCluster;

/// A named case: policies applied and grids expected.
pub type Case = (&'static str, fn(&NetpolCluster) -> Result<()>);

impl NetpolCluster {
    /// Runs every case in turn with a reset after each; `Err` lists the
    /// cases that failed with their reports. A reset that fails ends the
    /// run (the next case would start from an unknown state).
    pub fn run_cases(&self, cases: &[Case]) -> std::result::Result<(), String> {
        let mut failed: Vec<(&str, String)> = vec![];
        let run = Instant::now();
        for (name, case) in cases {
            let t = Instant::now();
            eprintln!("== case: {name}");
            let r = case(self);
            match &r {
                Ok(()) => eprintln!("== case: {name}: ok in {:?}", t.elapsed()),
                Err(e) => {
                    eprintln!("== case: {name}: FAILED in {:?}:\n{e:#}", t.elapsed());
                    failed.push((name, format!("{e:#}")));
                }
            }
            if let Err(e) = self.reset() {
                failed.push(("(reset)", format!("after {name}: {e:#}")));
                break;
            }
        }
        eprintln!(
            "== {} cases in {:?}, {} failed",
            cases.len(),
            run.elapsed(),
            failed.len()
        );
        if failed.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = failed.iter().map(|(n, _)| *n).collect();
        let mut s = format!(
            "{} of {} cases failed: {names:?}\n",
            failed.len(),
            cases.len()
        );
        for (n, e) in &failed {
            s += &format!("\n=== {n}\n{e}\n");
        }
        Err(s)
    }
}
