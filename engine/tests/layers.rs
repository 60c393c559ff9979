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
    &["accounts", "api_keys", "audience", "media"],
    // Invitations need a confirmed address (`accounts`).
    &["campaigns", "transactional", "two_factor", "invites"],
    &["feedback", "suspension"],
    // Automations send through campaigns' delivery (issue 33).
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
