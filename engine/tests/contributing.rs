//! CONTRIBUTING.md stays the map of the engine: every top-level module under `engine/src` has a
//! row in its layout tables, so a new module cannot land without saying where it sits.

use std::path::Path;

#[test]
fn every_engine_module_appears_in_the_contributing_layout() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let contributing = std::fs::read_to_string(root.join("../CONTRIBUTING.md")).expect("CONTRIBUTING.md");
    let rows: Vec<&str> = contributing.lines().filter(|l| l.starts_with('|')).collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("src")).expect("engine/src").flatten() {
        let path = entry.path();
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if name == "lib" {
            continue;
        }
        let wanted = if path.is_dir() { format!("`{name}/`") } else { format!("`{name}`") };
        if !rows.iter().any(|r| r.contains(&wanted)) {
            missing.push(wanted);
        }
    }
    missing.sort();
    assert!(missing.is_empty(), "engine modules with no row in CONTRIBUTING.md's layout: {missing:?}");
}
