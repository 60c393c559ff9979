//! A tenant's template and variables through the real render path: parse in this process,
//! render in the `herald render-sandbox` child with its memory, time and output limits. Whatever
//! the template does, this process must get an answer (the output, or an error naming the
//! template), never a panic, and never more than the output cap.
//! Needs the `herald` binary: `HERALD_BIN` (scripts/fuzz.sh builds it and sets it).
#![no_main]
use herald_engine::sending::template_sandbox::{self, Dialect, TemplateSet};

const OUTPUT_CAP: usize = 2 * 1024 * 1024;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        let bin = std::env::var("HERALD_BIN").expect("HERALD_BIN names the herald binary");
        template_sandbox::use_program(bin);
    });
    let Some((&flags, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let (source, vars) = text.split_once('\0').unwrap_or((&text, "{}"));
    let vars: serde_json::Value = serde_json::from_str(vars).unwrap_or_else(|_| serde_json::json!({"name": vars}));
    let dialect = if flags & 2 == 0 { Dialect::Campaign { markdown: flags & 1 == 1 } } else { Dialect::Transactional };
    let Ok(set) = TemplateSet::parse(dialect, vec![("body", source.to_string())]) else { return };
    for outcome in set.render(&["body"], &minijinja::Value::from_serialize(&vars)) {
        if let Ok(out) = outcome {
            assert!(out.len() <= OUTPUT_CAP, "a render returned {} bytes", out.len());
        }
    }
});
