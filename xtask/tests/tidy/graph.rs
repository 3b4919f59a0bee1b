//! The rule `import-circle` over each crate's module graph: a node per
//! module (files and inline `mod` blocks alike, submodules their own
//! nodes, binaries' crates included), an edge where one module names
//! another. A name brought in by a `use` (a root's `pub use` re-export, a
//! parent's import) is followed to the module that defines it, so
//! `crate::Stream` is an edge to `stream`, not to the root.
//!
//! The graph is checked at every depth: first the top-level modules, each
//! with its submodules folded in (so a circle through a child is its
//! parent's), then the submodules of each module apart. A module naming
//! its own ancestor is no edge: Rust lets a child use its parent's items
//! (its privacy is built on that), and the parent declares the child.
//! Code under `#[cfg(test)]` is no part of the graph: a unit test may drive
//! its module through the one above it (`checks`' tests through `report`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::rules::{table_line, violation, Rule, Violation};
use crate::tree::{Reference, Scan, SourceFile};
use crate::{KnownCircle, Tables};

type Module = Vec<String>;

/// One crate's modules and the names their `use` items bring in.
#[derive(Default)]
struct Crate<'a> {
    modules: BTreeSet<Module>,
    names: BTreeMap<(&'a [String], &'a str), &'a Reference>,
}

impl<'a> Crate<'a> {
    /// The module `r` names: its longest module prefix, each `use` name on
    /// the way followed to what it stands for; `None` for another crate's
    /// item or a local one (a type, a variant, a generic). Where a `use`
    /// name leads out of the crate or round in a loop, the module whose
    /// name it is.
    fn resolve(&self, r: &'a Reference) -> Option<Module> {
        if !self.is_ours(r) {
            return None;
        }
        let followed = self.resolve_within(r, 32);
        followed.or_else(|| Some(r.resolved[..self.known_prefix(&r.resolved)].to_vec()))
    }

    /// Whether `r` names something of this crate: anchored paths do; a
    /// relative one only through a child module or a `use` name of the
    /// module it is written in.
    fn is_ours(&self, r: &Reference) -> bool {
        if r.anchored {
            return true;
        }
        let Some(first) = r.resolved.get(r.from.len()) else {
            return false;
        };
        let mut child = r.from.clone();
        child.push(first.clone());
        self.modules.contains(&child)
            || self
                .names
                .contains_key(&(r.from.as_slice(), first.as_str()))
    }

    /// How many names of `path` are a module (the root, at least).
    fn known_prefix(&self, path: &[String]) -> usize {
        (0..=path.len())
            .rev()
            .find(|&k| self.modules.contains(&path[..k]))
            .unwrap_or(0)
    }

    /// [`Crate::resolve`] following at most `budget` more names (`use`
    /// loops do not compile, but the tidy test reads sources that may not);
    /// `None` when a name leads out of the crate or the budget runs out.
    fn resolve_within(&self, r: &'a Reference, budget: usize) -> Option<Module> {
        if !self.is_ours(r) {
            return None;
        }
        let mut path: Module = r.resolved.clone();
        for budget in (0..budget).rev() {
            let known = self.known_prefix(&path);
            let Some(next) = path.get(known) else {
                return Some(path);
            };
            let Some(&target) = self.names.get(&(&path[..known], next.as_str())) else {
                return Some(path[..known].to_vec());
            };
            if std::ptr::eq(target, r) {
                return Some(path[..known].to_vec());
            }
            let mut followed = self.resolve_within(target, budget)?;
            if followed.len() < target.resolved.len() {
                // The `use` named an item of that module: the rest of the
                // path is inside the item.
                return Some(followed);
            }
            followed.extend_from_slice(&path[known + 1..]);
            path = followed;
        }
        None
    }
}

/// Where a module first names another: file, line, the path as written.
type Site = (String, usize, String);

/// One module naming another: from, to, where.
type Edge<'a> = (&'a [String], Module, Site);

pub(crate) fn check_import_circles(files: &[SourceFile], tables: &Tables) -> Vec<Violation> {
    let scans: Vec<(&SourceFile, &str, Scan)> = files
        .iter()
        .filter_map(|f| {
            let (krate, _) = f.module.as_ref()?;
            Some((f, krate.as_str(), Scan::of(f)?))
        })
        .collect();
    let mut crates: BTreeMap<&str, Crate<'_>> = BTreeMap::new();
    for (file, krate, scan) in &scans {
        let c = crates.entry(krate).or_default();
        c.modules.insert(Vec::new());
        if let Some((_, module)) = &file.module {
            // Every ancestor of a file's module is a module too (`a/b.rs`
            // with no `a.rs` is still under a module `a`).
            c.modules
                .extend((0..=module.len()).map(|k| module[..k].to_vec()));
        }
        c.modules.extend(scan.inline_modules.iter().cloned());
        for u in &scan.use_names {
            c.names
                .insert((u.module.as_slice(), u.name.as_str()), &u.target);
        }
    }
    // Every edge, module to module, in file and line order.
    let mut edges: BTreeMap<&str, Vec<Edge<'_>>> = BTreeMap::new();
    for (file, krate, scan) in &scans {
        let c = &crates[krate];
        let in_test = |r: &Reference| scan.test_modules.iter().any(|t| r.from.starts_with(t));
        for r in scan.references.iter().filter(|r| !in_test(r)) {
            let Some(to) = c.resolve(r) else { continue };
            let site = (file.path.clone(), r.line, r.written.clone());
            edges
                .entry(krate)
                .or_default()
                .push((r.from.as_slice(), to, site));
        }
    }
    let mut found = Vec::new();
    let mut seen_known = BTreeSet::new();
    for (krate, edges) in &edges {
        for (members, v) in circles_at_every_depth(edges) {
            let known = tables
                .known_circles
                .iter()
                .position(|k| k.krate == *krate && same_members(k, &members));
            match known {
                Some(i) => {
                    seen_known.insert(i);
                }
                None => found.push(v),
            }
        }
    }
    for (i, k) in tables.known_circles.iter().enumerate() {
        if !seen_known.contains(&i) {
            let message = format!(
                "KNOWN_CIRCLES lists {} in {} ({}), which is no circle now: remove the entry",
                k.members.join(" ↔ "),
                k.krate,
                k.why
            );
            let line = table_line(&format!("krate: \"{}\"", k.krate));
            found.push(violation(
                Rule::ImportCircle,
                crate::TABLES_FILE,
                line,
                message,
            ));
        }
    }
    found
}

/// The circles of the graph seen at each depth `k`: modules cut to their
/// first `k` names (a submodule folded into its ancestor at that depth), an
/// edge from a module to itself or to its ancestor dropped. At depth 1 these
/// are the top-level modules with their submodules; deeper, siblings inside
/// one module. A circle is reported at the shallowest depth it shows: one
/// whose modules, cut one name shorter, are still apart was reported there.
fn circles_at_every_depth(edges: &[Edge<'_>]) -> Vec<(Vec<String>, Violation)> {
    let deepest = edges
        .iter()
        .map(|(from, to, _)| from.len().max(to.len()))
        .max()
        .unwrap_or(0);
    let mut found = Vec::new();
    for depth in 1..=deepest {
        let mut graph: BTreeMap<(String, String), Site> = BTreeMap::new();
        for (from, to, site) in edges {
            let (from, to) = (&from[..from.len().min(depth)], &to[..to.len().min(depth)]);
            if !from.starts_with(to) {
                graph
                    .entry((name(from), name(to)))
                    .or_insert_with(|| site.clone());
            }
        }
        for (members, v) in circles(&graph) {
            let shallower: BTreeSet<String> = members
                .iter()
                .map(|m| m.split("::").take(depth - 1).collect::<Vec<_>>().join("::"))
                .collect();
            if depth == 1 || shallower.len() == 1 {
                found.push((members, v));
            }
        }
    }
    found
}

fn same_members(known: &KnownCircle, members: &[String]) -> bool {
    let known: BTreeSet<&str> = known.members.iter().copied().collect();
    known == members.iter().map(String::as_str).collect()
}

/// A module's name in messages: `a::b`, `crate` for the root.
fn name(module: &[String]) -> String {
    match module.is_empty() {
        true => "crate".to_owned(),
        false => module.join("::"),
    }
}

/// One violation per strongly connected set of modules, naming its shortest
/// circle through the first module in name order, with the set's members.
fn circles(edges: &BTreeMap<(String, String), Site>) -> Vec<(Vec<String>, Violation)> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
    }
    let reach = |start: &str| -> BTreeSet<String> {
        let (mut seen, mut queue) = (BTreeSet::new(), VecDeque::from([start.to_owned()]));
        while let Some(n) = queue.pop_front() {
            for &m in next.get(n.as_str()).into_iter().flatten() {
                if seen.insert(m.to_owned()) {
                    queue.push_back(m.to_owned());
                }
            }
        }
        seen
    };
    let (mut reported, mut found) = (BTreeSet::new(), Vec::new());
    for &start in next.keys() {
        if reported.contains(start) || !reach(start).contains(start) {
            continue;
        }
        let members: Vec<String> = reach(start)
            .into_iter()
            .filter(|m| reach(m).contains(start))
            .collect();
        reported.extend(members.iter().cloned());
        let cycle = shortest_circle(&next, start);
        let sites: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let (path, line, written) = &edges[&(w[0].to_owned(), w[1].to_owned())];
                format!("{path}:{line} names {written}")
            })
            .collect();
        let (path, line, _) = &edges[&(cycle[0].to_owned(), cycle[1].to_owned())];
        let message = format!(
            "import circle {} ({}){}",
            cycle.join(" → "),
            sites.join("; "),
            match members.len() + 1 - cycle.len() {
                0 => String::new(),
                _ => format!("; the modules {} all reach each other", members.join(", ")),
            }
        );
        found.push((members, violation(Rule::ImportCircle, path, *line, message)));
    }
    found
}

fn shortest_circle<'a>(next: &BTreeMap<&'a str, Vec<&'a str>>, start: &'a str) -> Vec<&'a str> {
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for &m in next.get(n).into_iter().flatten() {
            if m == start {
                let mut cycle = vec![n];
                while let Some(&p) = parent.get(cycle[cycle.len() - 1]) {
                    cycle.push(p);
                }
                cycle.reverse();
                cycle.push(start);
                return cycle;
            }
            if !parent.contains_key(m) {
                parent.insert(m, n);
                queue.push_back(m);
            }
        }
    }
    unreachable!("start is on a circle")
}
