//! Reachability grids: for every (from, to) pair of pods, whether a
//! connection gets through. Built like the upstream netpol e2e suite's
//! `Reachability`: start from all true or all false, then set rows,
//! columns, namespaces or single cells. Rows are clients, columns servers.

use std::fmt::Write;

/// Names of pods as `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reachability {
    pods: Vec<String>,
    /// Row-major: `cells[from * n + to]`.
    cells: Vec<bool>,
    /// Names given to the setters that are not pods of the grid (kept,
    /// not panicked on: comparing a grid with these fails and names them).
    unknown: Vec<String>,
}

impl Reachability {
    /// A grid over `pods` (`ns/name`) with every cell `value`.
    pub fn new(pods: &[String], value: bool) -> Self {
        Reachability {
            pods: pods.to_vec(),
            cells: vec![value; pods.len() * pods.len()],
            unknown: vec![],
        }
    }

    /// A grid over the netpol cluster's nine pods (`x/a` … `z/c`).
    pub fn all(value: bool) -> Self {
        Self::new(&super::pod_names(), value)
    }

    pub fn pods(&self) -> &[String] {
        &self.pods
    }

    /// Names used in expectations that are no pods of the grid.
    pub fn unknown(&self) -> &[String] {
        &self.unknown
    }

    fn index(&mut self, pod: &str) -> Option<usize> {
        let i = self.pods.iter().position(|p| p == pod);
        if i.is_none() && !self.unknown.iter().any(|u| u == pod) {
            self.unknown.push(pod.to_string());
        }
        i
    }

    fn namespace_of(pod: &str) -> &str {
        pod.split_once('/').map(|(ns, _)| ns).unwrap_or("")
    }

    /// The pods of namespace `ns`, recording `ns` as unknown when it has none.
    fn in_namespace(&mut self, ns: &str) -> Vec<usize> {
        let v: Vec<usize> = (0..self.pods.len())
            .filter(|i| Self::namespace_of(&self.pods[*i]) == ns)
            .collect();
        if v.is_empty() && !self.unknown.iter().any(|u| u == ns) {
            self.unknown.push(ns.to_string());
        }
        v
    }

    fn set_many(&mut self, froms: &[usize], tos: &[usize], value: bool) -> &mut Self {
        let n = self.pods.len();
        for f in froms {
            for t in tos {
                self.cells[f * n + t] = value;
            }
        }
        self
    }

    fn everyone(&self) -> Vec<usize> {
        (0..self.pods.len()).collect()
    }

    /// Every cell.
    pub fn expect_all(&mut self, value: bool) -> &mut Self {
        self.cells.iter_mut().for_each(|c| *c = value);
        self
    }

    /// One cell: `from` → `to`.
    pub fn expect(&mut self, from: &str, to: &str, value: bool) -> &mut Self {
        match (self.index(from), self.index(to)) {
            (Some(f), Some(t)) => self.set_many(&[f], &[t], value),
            _ => self,
        }
    }

    /// The row of `from`: everything it connects to.
    pub fn expect_from(&mut self, from: &str, value: bool) -> &mut Self {
        let all = self.everyone();
        match self.index(from) {
            Some(f) => self.set_many(&[f], &all, value),
            None => self,
        }
    }

    /// The column of `to`: everything that connects to it.
    pub fn expect_to(&mut self, to: &str, value: bool) -> &mut Self {
        let all = self.everyone();
        match self.index(to) {
            Some(t) => self.set_many(&all, &[t], value),
            None => self,
        }
    }

    /// Every pod of namespace `ns` as client.
    pub fn expect_from_namespace(&mut self, ns: &str, value: bool) -> &mut Self {
        let (f, all) = (self.in_namespace(ns), self.everyone());
        self.set_many(&f, &all, value)
    }

    /// Every pod of namespace `ns` as server.
    pub fn expect_to_namespace(&mut self, ns: &str, value: bool) -> &mut Self {
        let (t, all) = (self.in_namespace(ns), self.everyone());
        self.set_many(&all, &t, value)
    }

    /// From every pod of `from_ns` to every pod of `to_ns`.
    pub fn expect_namespaces(&mut self, from_ns: &str, to_ns: &str, value: bool) -> &mut Self {
        let (f, t) = (self.in_namespace(from_ns), self.in_namespace(to_ns));
        self.set_many(&f, &t, value)
    }

    /// From every pod of namespace `from_ns` to the pod `to`.
    pub fn expect_namespace_to(&mut self, from_ns: &str, to: &str, value: bool) -> &mut Self {
        let f = self.in_namespace(from_ns);
        match self.index(to) {
            Some(t) => self.set_many(&f, &[t], value),
            None => self,
        }
    }

    /// From the pod `from` to every pod of namespace `to_ns`.
    pub fn expect_to_namespace_from(&mut self, from: &str, to_ns: &str, value: bool) -> &mut Self {
        let t = self.in_namespace(to_ns);
        match self.index(from) {
            Some(f) => self.set_many(&[f], &t, value),
            None => self,
        }
    }

    /// Every pod reaches itself (upstream's `AllowLoopback`): a connection
    /// to a pod's own address stays on its loopback and meets no policy.
    pub fn allow_loopback(&mut self) -> &mut Self {
        let n = self.pods.len();
        for i in 0..n {
            self.cells[i * n + i] = true;
        }
        self
    }

    /// The cell `from` → `to`; `None` for names not in the grid.
    pub fn get(&self, from: &str, to: &str) -> Option<bool> {
        let f = self.pods.iter().position(|p| p == from)?;
        let t = self.pods.iter().position(|p| p == to)?;
        Some(self.cells[f * self.pods.len() + t])
    }

    /// Sets a cell by index (for observed grids).
    pub(crate) fn set_index(&mut self, from: usize, to: usize, value: bool) {
        let n = self.pods.len();
        if from < n && to < n {
            self.cells[from * n + to] = value;
        }
    }

    /// The pairs where `self` and `other` (over the same pods) disagree.
    pub fn differences(&self, other: &Reachability) -> Vec<(String, String)> {
        if self.pods != other.pods {
            return vec![("(pods)".into(), "(pods differ)".into())];
        }
        let n = self.pods.len();
        let mut out = vec![];
        for f in 0..n {
            for t in 0..n {
                if self.cells[f * n + t] != other.cells[f * n + t] {
                    out.push((self.pods[f].clone(), self.pods[t].clone()));
                }
            }
        }
        out
    }

    /// The grid as a table: `.` reachable, `X` not; a cell that differs
    /// from `compare` (when given) carries a `*`.
    pub fn table(&self, compare: Option<&Reachability>) -> String {
        let n = self.pods.len();
        let w = self.pods.iter().map(String::len).max().unwrap_or(1).max(4);
        let mut s = format!("{:w$} ", "");
        for p in &self.pods {
            let _ = write!(s, " {p:<w$}");
        }
        s.push('\n');
        for f in 0..n {
            let _ = write!(s, "{:w$} ", self.pods[f]);
            for t in 0..n {
                let v = self.cells[f * n + t];
                let mark = if v { "." } else { "X" };
                let differs = compare
                    .filter(|c| c.pods == self.pods)
                    .is_some_and(|c| c.cells[f * n + t] != v);
                let cell = format!("{mark}{}", if differs { "*" } else { "" });
                let _ = write!(s, " {cell:<w$}");
            }
            s.push('\n');
        }
        s
    }

    /// Expected and observed side by side in one report (rows: from,
    /// columns: to; `*` marks the observed cells that differ).
    pub fn report(expected: &Reachability, observed: &Reachability, what: &str) -> String {
        let diff = expected.differences(observed);
        const LISTED: usize = 20;
        let mut list: Vec<String> = diff
            .iter()
            .take(LISTED)
            .map(|(f, t)| {
                let want = expected.get(f, t).unwrap_or(false);
                format!(
                    "{f} -> {t} expected {}",
                    if want { "reachable" } else { "blocked" }
                )
            })
            .collect();
        if diff.len() > LISTED {
            list.push(format!("and {} more", diff.len() - LISTED));
        }
        format!(
            "{what}: {} of {} pairs differ (rows: from, columns: to; . reachable, X blocked)\n\
             expected:\n{}observed (* differs from expected):\n{}differences: {}\n",
            diff.len(),
            expected.pods.len() * expected.pods.len(),
            expected.table(None),
            observed.table(Some(expected)),
            list.join(", ")
        )
    }
}
