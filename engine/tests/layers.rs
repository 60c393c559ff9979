//! The engine's modules import one way: each top-level module may use only modules of a lower
//! layer. This test reads the sources and fails on any import that points sideways or up, so a
//! cycle cannot come back unnoticed. To place a new module, add it to the layer whose modules it
//! needs at most.

use std::collections::BTreeMap;
use std::path::Path;

/// Lowest first.
const LAYERS: &[&[&str]] = &[
    // The crate's vocabulary.
    &["domain", "error"],
    // Knows nothing of newsletters.
    &["infra"],
    // Adapters: providers' webhook formats, parsed and verified.
    &["webhooks"],
    // From a message to an SMTP reply, for every kind of mail.
    &["sending"],
    // Limits per account: below every feature that counts against them.
    &["account_limits"],
    // Plain records the features share.
    &["jobs", "audit", "users", "workspaces", "events", "tracking"],
    // Features.
    &["accounts", "api_keys", "api_requests", "audience", "media", "outbound_webhooks"],
    // Invitations need a confirmed address (`accounts`).
    &["campaigns", "transactional", "two_factor", "invites"],
    &["feedback", "suspension"],
    // Automations send through campaigns' delivery.
    &["automations"],
    // Registers the job handlers; nothing imports it.
    &["worker"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// `crate::x` paths used by the code of `src` (comments and the test module left out).
fn imports(src: &str) -> Vec<String> {
    let code = src.split("#[cfg(test)]\nmod tests").next().unwrap_or(src);
    let mut out = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                out.push(name);
            }
        }
    }
    out
}

fn visit(dir: &Path, top: Option<&str>, found: &mut BTreeMap<String, Vec<(String, String)>>) {
    let Ok(entries) = std::fs::read_dir(dir) else { panic!("cannot read {}", dir.display()) };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        let module = top.map(str::to_string).unwrap_or_else(|| name.clone());
        if path.is_dir() {
            visit(&path, Some(&module), found);
        } else if path.extension().is_some_and(|e| e == "rs") && !(top.is_none() && name == "lib") {
            let src = std::fs::read_to_string(&path).unwrap_or_default();
            for used in imports(&src) {
                if used != module {
                    found.entry(module.clone()).or_default().push((used, path.display().to_string()));
                }
            }
        }
    }
}

#[test]
fn engine_modules_import_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeMap::new();
    visit(&src, None, &mut found);
    let mut wrong = Vec::new();
    for (module, uses) in &found {
        let Some(mine) = layer_of(module) else {
            wrong.push(format!("`{module}` is in no layer: add it to LAYERS"));
            continue;
        };
        for (used, file) in uses {
            match layer_of(used) {
                Some(theirs) if theirs < mine => {}
                Some(_) => wrong.push(format!("{file}: `{module}` uses `{used}`, which is not in a lower layer")),
                None => wrong.push(format!("{file}: `{used}` is in no layer")),
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "imports against the layering:\n{}", wrong.join("\n"));
    // The test sees the modules it guards.
    assert!(found.contains_key("campaigns") && found.contains_key("worker"), "{:?}", found.keys());
}

/// Circles between files, in the engine, the app and the server: files that import each other
/// (directly or round a ring) cannot be read, changed or tested one at a time. The one kept:
const ALLOWED_CIRCLES: &[(&str, &[&str])] = &[(
    // axum's router state: every route family reads `startup::ServerState`, which holds each
    // family's own state (tracking's buffers, webhooks' certificate cache) and is built where
    // the router is; a state module between them would only move the ring.
    "server",
    &[
        "routes/api",
        "routes/api/media",
        "routes/export",
        "routes/imports",
        "routes/media",
        "routes/public",
        "routes/tracking",
        "routes/webhooks",
        "startup",
    ],
)];

/// The file-level module path of `path` under `src`: `campaigns/delivery/mod.rs` → `campaigns/delivery`.
fn file_module(src: &Path, path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src).unwrap_or(path).with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each file's imports of other files of the same crate (`crate::`, `super::`, the crate's own
/// name), resolved to the longest module path that is a file.
fn file_graph(src: &Path, crate_name: &str) -> BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let modules: std::collections::BTreeSet<Vec<String>> = paths.iter().map(|p| file_module(src, p)).collect();
    let mut graph: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for path in &paths {
        let me = file_module(src, path);
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(&text);
        let code: String = code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        let edges = graph.entry(me.join("/")).or_default();
        let mut add = |full: Vec<String>| {
            for k in (1..=full.len()).rev() {
                let candidate = full[..k].to_vec();
                if modules.contains(&candidate) {
                    if candidate != me {
                        edges.insert(candidate.join("/"));
                    }
                    break;
                }
            }
        };
        let word = |s: &str| -> Vec<String> {
            s.split("::")
                .map(|p| p.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>())
                .take_while(|p| p.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
                .collect()
        };
        for root in ["crate::", "super::", &format!("{crate_name}::")] {
            let mut rest = code.as_str();
            while let Some(i) = rest.find(root) {
                let before = rest[..i].chars().last();
                rest = &rest[i + root.len()..];
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                // `use super::{a, b}` names several siblings at once.
                if root == "super::" && rest.starts_with('{') {
                    let group = &rest[1..rest.find('}').unwrap_or(1)];
                    for name in group.split(',') {
                        let mut full = me[..me.len().saturating_sub(1)].to_vec();
                        full.extend(word(name.trim()));
                        add(full);
                    }
                    continue;
                }
                let mut full = if root == "super::" { me[..me.len().saturating_sub(1)].to_vec() } else { Vec::new() };
                let mut tail = rest;
                // `super::super::x`
                while root == "super::" && tail.starts_with("super::") {
                    full.pop();
                    tail = &tail["super::".len()..];
                }
                full.extend(word(tail));
                add(full);
            }
        }
    }
    graph
}

/// Strongly connected groups of more than one file (Tarjan's algorithm).
fn circles(graph: &BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, std::collections::BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: std::collections::BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.found.push(group);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: Default::default(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn no_files_import_each_other_in_a_circle_but_the_one_explained() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut wrong = Vec::new();
    for (name, crate_name) in [("engine", "herald_engine"), ("app", "herald_app"), ("server", "herald_server")] {
        let graph = file_graph(&root.join(name).join("src"), crate_name);
        assert!(graph.len() > 10, "{name}: the test read only {} files", graph.len());
        for group in circles(&graph) {
            let allowed = ALLOWED_CIRCLES
                .iter()
                .any(|(c, files)| *c == name && group.iter().map(String::as_str).eq(files.iter().copied()));
            if !allowed {
                wrong.push(format!("{name}: {}", group.join(" ⇄ ")));
            }
        }
    }
    assert!(wrong.is_empty(), "files that import each other in a circle:\n{}", wrong.join("\n"));
}

#[test]
fn the_circle_test_finds_a_circle() {
    let mut graph: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    graph.entry("c".into()).or_default().insert("a".into());
    graph.entry("d".into()).or_default().insert("a".into());
    assert_eq!(circles(&graph), vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]);
}
