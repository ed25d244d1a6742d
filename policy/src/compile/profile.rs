//! One profile chain: its policies' runs and written rules in order,
//! stretches of runs behind guards, and the chain a Pass goes to. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nftables::expr::MetaKey;
use nftables::stmt::Statement;

use super::prepared::CachedPolicy;
use super::rules::{PASS_TARGET, Run, addr_field, log_prefix, nfproto, port_field};
use super::stmt::*;
use super::{NamedPort, fam, hash, merge};
use crate::ir::{Cond, Policy, Rule, Side};
use crate::model::Action;

/// A run of a profile written as set lookups (kept by its sets' name
/// stem): what their elements are computed from.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RunSets {
    pub(super) ingress: bool,
    pub(super) rules: Vec<Rule>,
    pub(super) local_ports: Vec<NamedPort>,
}

/// Runs and guards by their sets' name stem.
pub(super) type Runs = BTreeMap<String, Arc<RunSets>>;

/// What building one profile made: its chains (the profile, its Pass
/// chain, its stretches and guards) and the runs and guards whose sets
/// they use.
#[derive(Debug, Default)]
pub(super) struct Built {
    pub(super) chains: BTreeMap<String, Arc<Vec<Stmts>>>,
    pub(super) runs: Runs,
}

/// The names of a run's two sets in family `v6`.
pub fn run_set(stem: &str, ports: bool, v6: bool) -> String {
    format!("{stem}{}{}", if ports { "p" } else { "a" }, fam(v6))
}

/// Which of a run's two sets exist in family `v6` (portless, ported),
/// from the rules' shape alone, whatever the endpoints: a pod created
/// changes their elements, never the chains.
pub(super) fn run_shapes(rules: &[Rule], v6: bool) -> (bool, bool) {
    let possible = rules.iter().filter(|r| merge::possible_in(r, v6));
    let (mut portless, mut ported) = (false, false);
    for r in possible {
        if merge::has_ports(r) {
            ported = true;
        } else {
            portless = true;
        }
    }
    (portless, ported)
}

/// One step of a profile chain.
enum Item {
    /// A run written as lookups in its sets, each with `verdict` (`ids`:
    /// the policy runs it joins, `source#index`).
    Run {
        stem: String,
        verdict: Box<Statement<'static>>,
        shapes: Vec<(bool, (bool, bool))>,
        ids: Vec<String>,
    },
    /// A rule written as it is, for each IP family it needs.
    Written(Vec<Stmts>),
    /// Lookups in a guard's sets that lead into a stretch's chain (see
    /// [`guard_stretches`]), or the jump to a chain of such lookups.
    Guard(Vec<Stmts>),
}

/// A run's or guard's lookups: one rule per family and shape present,
/// with `verdict`.
fn lookup_rules(
    stem: &str,
    shapes: &[(bool, (bool, bool))],
    ingress: bool,
    verdict: &Statement<'static>,
) -> Vec<Stmts> {
    let side = if ingress {
        Side::Source
    } else {
        Side::Destination
    };
    let mut out = Vec::new();
    for &(v6, (portless, ported)) in shapes {
        for (present, ports) in [(portless, false), (ported, true)] {
            if !present {
                continue;
            }
            let mut key = vec![addr_field(v6, side), meta(MetaKey::L4proto)];
            if ports {
                key.push(port_field(Side::Destination));
            }
            out.push(vec![
                nfproto(v6),
                matches(
                    concat(key),
                    s(format!("@{}", run_set(stem, ports, v6))),
                    true,
                ),
                verdict.clone(),
            ]);
        }
    }
    out
}

fn render_items<'i>(
    items: impl IntoIterator<Item = &'i Item>,
    ingress: bool,
    pass: &Statement<'static>,
) -> Vec<Stmts> {
    let mut out = Vec::new();
    for it in items {
        match it {
            Item::Run {
                stem,
                verdict,
                shapes,
                ..
            } => out.extend(lookup_rules(stem, shapes, ingress, verdict)),
            Item::Written(stmts) => {
                for st in stmts {
                    let mut st = st.clone();
                    if let Some(last) = st.last_mut()
                        && matches!(last, Statement::Goto(t) if t.target == PASS_TARGET)
                    {
                        *last = pass.clone();
                    }
                    out.push(st);
                }
            }
            Item::Guard(rules) => out.extend(rules.iter().cloned()),
        }
    }
    out
}

/// The chain of a profile that a Pass goes to: its Kubernetes policies.
pub fn pass_chain(profile: &str) -> String {
    format!("k{}", &profile[1..])
}

/// What a profile's runs and guards have in common.
struct ProfileCtx<'a> {
    ingress: bool,
    local_ports: &'a [NamedPort],
    families: &'a [bool],
}

impl ProfileCtx<'_> {
    /// The endpoint's numbers for the named ports `rules` use (ingress):
    /// with the rules, all a run's boxes depend on besides its peers.
    fn ports_of(&self, rules: &[Rule]) -> Vec<NamedPort> {
        let names: BTreeSet<&str> = rules
            .iter()
            .flat_map(|r| &r.conds)
            .filter_map(|c| match c {
                Cond::NamedPort { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        self.local_ports
            .iter()
            .filter(|p| names.contains(p.name.as_str()))
            .cloned()
            .collect()
    }

    /// The name stem of a run's or guard's sets: its direction, the
    /// policy runs it holds and the endpoint's numbers for the named
    /// ports they use, so profiles with the same run share its sets.
    fn stem(&self, kind: &str, ids: &[String], ports: &[NamedPort]) -> String {
        let ports: Vec<String> = ports
            .iter()
            .map(|p| format!("{}={}/{}", p.name, p.protocol, p.port))
            .collect();
        format!(
            "r{}",
            hash(&format!(
                "{kind}{}|{}|{}",
                if self.ingress { "in" } else { "out" },
                ports.join(","),
                ids.join(",")
            ))
        )
    }

    fn shapes(&self, rules: &[Rule]) -> Vec<(bool, (bool, bool))> {
        self.families
            .iter()
            .map(|&v6| (v6, run_shapes(rules, v6)))
            .collect()
    }

    /// Notes the sets of run or guard `stem` holding `rules`' boxes.
    fn note_sets(&self, stem: &str, rules: Vec<Rule>, ports: Vec<NamedPort>, runs: &mut Runs) {
        runs.entry(stem.to_string()).or_insert_with(|| {
            Arc::new(RunSets {
                ingress: self.ingress,
                rules,
                local_ports: ports,
            })
        });
    }
}

/// Puts each stretch of consecutive runs of one segment in a chain
/// of its own (`x…`), entered only by a packet in the union of their
/// boxes: one lookup per family and shape in a guard set (`r…`, like a
/// run's). A packet outside it skips the whole stretch: none of its
/// rules could match. More than one guard lookup goes in a chain of its
/// own (`g…`, each lookup a `goto` into the stretch) entered by `jump`,
/// so the stretch is walked once at most and the profile goes on after
/// it. A run holding a rule that matches every packet (no condition but
/// the IP version) is kept out of stretches, and a stretch is guarded
/// only when that saves lookups.
fn guard_stretches(
    items: Vec<(u8, Item)>,
    ctx: &ProfileCtx<'_>,
    built: &mut Built,
) -> Vec<(u8, Item)> {
    let boxed_rules = |it: &Item| -> Option<Vec<Rule>> {
        let Item::Run { stem, .. } = it else {
            return None;
        };
        let rules = &built.runs.get(stem)?.rules;
        (!rules.iter().any(merge::universal)).then(|| rules.clone())
    };
    // Each item with its rules when it can be guarded.
    let marked: Vec<(u8, Item, Option<Vec<Rule>>)> = items
        .into_iter()
        .map(|(seg, it)| {
            let rules = boxed_rules(&it);
            (seg, it, rules)
        })
        .collect();
    let mut out = Vec::new();
    let mut stretch: Vec<(u8, Item, Vec<Rule>)> = Vec::new();
    let flush =
        |stretch: &mut Vec<(u8, Item, Vec<Rule>)>, out: &mut Vec<(u8, Item)>, built: &mut Built| {
            let taken = std::mem::take(stretch);
            let Some(&(seg, _, _)) = taken.first() else {
                return;
            };
            let mut ids = Vec::new();
            let mut rules = Vec::new();
            for (_, it, r) in &taken {
                if let Item::Run { ids: i, .. } = it {
                    ids.extend(i.iter().cloned());
                }
                rules.extend(r.iter().cloned());
            }
            let shapes = ctx.shapes(&rules);
            let lookups: usize = shapes
                .iter()
                .map(|(_, (a, p))| usize::from(*a) + usize::from(*p))
                .sum();
            // No Pass in a stretch: its verdict does not matter here.
            let body = render_items(taken.iter().map(|(_, it, _)| it), ctx.ingress, &accept());
            if lookups == 0 || body.len() <= 2 * lookups {
                out.extend(taken.into_iter().map(|(s, it, _)| (s, it)));
                return;
            }
            let ports = ctx.ports_of(&rules);
            let stem = ctx.stem("guard|", &ids, &ports);
            let body_chain = format!("x{}", &stem[1..]);
            built
                .chains
                .entry(body_chain.clone())
                .or_insert_with(|| Arc::new(body));
            let entry = if lookups == 1 {
                lookup_rules(&stem, &shapes, ctx.ingress, &jump(&body_chain))
            } else {
                let guard_chain = format!("g{}", &stem[1..]);
                built.chains.entry(guard_chain.clone()).or_insert_with(|| {
                    Arc::new(lookup_rules(
                        &stem,
                        &shapes,
                        ctx.ingress,
                        &goto(&body_chain),
                    ))
                });
                vec![vec![jump(&guard_chain)]]
            };
            ctx.note_sets(&stem, rules, ports, &mut built.runs);
            out.push((seg, Item::Guard(entry)));
        };
    for (seg, it, rules) in marked {
        match rules {
            Some(rules) => {
                if stretch.first().is_some_and(|(s, _, _)| *s != seg) {
                    flush(&mut stretch, &mut out, built);
                }
                stretch.push((seg, it, rules));
            }
            None => {
                flush(&mut stretch, &mut out, built);
                out.push((seg, it));
            }
        }
    }
    flush(&mut stretch, &mut out, built);
    out
}

/// Writes the profile chain `name` for the policies `list` (and its Pass
/// chain when one is needed), noting the runs whose sets it uses.
#[allow(clippy::too_many_arguments)]
pub(super) fn build_profile(
    name: &str,
    list: &[usize],
    sorted: &[&Policy],
    prepared: &BTreeMap<(usize, bool), Arc<CachedPolicy>>,
    ingress: bool,
    local_ports: &[NamedPort],
    families: &[bool],
    pass_allows: bool,
    built: &mut Built,
) {
    let ctx = ProfileCtx {
        ingress,
        local_ports,
        families,
    };
    // Segments: Tartan policies before the Kubernetes ones (1), the
    // Kubernetes ones (2), Tartan policies after them (3). Runs never
    // join across segments: a Pass goes on to segment 2 alone.
    let mut items: Vec<(u8, Item)> = Vec::new();
    // The run being joined: its segment, action, verdict, runs, rules.
    type Open = Option<(u8, Action, Statement<'static>, Vec<String>, Vec<Rule>)>;
    let mut open: Open = None;
    let close = |open: &mut Open, items: &mut Vec<(u8, Item)>, runs: &mut Runs| {
        let Some((seg, _, verdict, ids, rules)) = open.take() else {
            return;
        };
        let ports = ctx.ports_of(&rules);
        let stem = ctx.stem("", &ids, &ports);
        let shapes = ctx.shapes(&rules);
        ctx.note_sets(&stem, rules, ports, runs);
        items.push((
            seg,
            Item::Run {
                stem,
                verdict: Box::new(verdict),
                shapes,
                ids,
            },
        ));
    };
    let mut seen_kubernetes = false;
    let mut can_pass = false;
    for &i in list {
        let p = sorted[i];
        let seg = if p.source.is_kubernetes() {
            seen_kubernetes = true;
            2
        } else if seen_kubernetes {
            3
        } else {
            1
        };
        let Some(cp) = prepared.get(&(i, ingress)) else {
            continue;
        };
        let source = p.source.to_string();
        for (k, run) in cp.runs.iter().enumerate() {
            match run {
                Run::Merged { action, rules } => {
                    // Allow and Deny runs join across policies; a Log
                    // run stays alone.
                    if let Some((s, a, _, ids, rs)) = open.as_mut()
                        && *s == seg
                        && a == action
                        && *action != Action::Log
                    {
                        ids.push(format!("{source}#{k}"));
                        rs.extend(rules.iter().cloned());
                        continue;
                    }
                    close(&mut open, &mut items, &mut built.runs);
                    let verdict = match action {
                        Action::Deny => drop(),
                        Action::Log => log(&log_prefix(p, ingress)),
                        _ => accept(),
                    };
                    open = Some((
                        seg,
                        *action,
                        verdict,
                        vec![format!("{source}#{k}")],
                        rules.clone(),
                    ));
                }
                Run::Written(stmts) => {
                    close(&mut open, &mut items, &mut built.runs);
                    can_pass |= stmts.iter().any(
                        |st| matches!(st.last(), Some(Statement::Goto(t)) if t.target == PASS_TARGET),
                    );
                    items.push((seg, Item::Written(stmts.clone())));
                }
            }
        }
    }
    close(&mut open, &mut items, &mut built.runs);
    let items = guard_stretches(items, &ctx, built);
    let pass = if seen_kubernetes {
        goto(&pass_chain(name))
    } else if pass_allows {
        accept()
    } else {
        drop()
    };
    let mut chain = render_items(items.iter().map(|(_, it)| it), ingress, &pass);
    chain.push(vec![drop()]);
    built.chains.insert(name.to_string(), Arc::new(chain));
    if can_pass && seen_kubernetes {
        let kube = items.iter().filter(|(s, _)| *s == 2).map(|(_, it)| it);
        let mut chain = render_items(kube, ingress, &pass);
        chain.push(vec![drop()]);
        built.chains.insert(pass_chain(name), Arc::new(chain));
    }
}
