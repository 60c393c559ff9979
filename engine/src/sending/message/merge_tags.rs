//! A static check of the names a campaign's templates look up. MiniJinja renders a name nobody
//! provides as nothing (campaigns are lenient so a reader without a `city` still gets mail), so
//! `Hi {{ reader.nmae }},` went out as "Hi ," with no warning. This reads the
//! templates' undeclared variables (MiniJinja's own static analysis: nothing is rendered, so it
//! costs a parse, not a sandbox turn) and names each one that no reader, workspace or feed
//! provides, with the likely intended name. The editor shows them beside the field as the author
//! types; they warn, they never block a save or a send.

use herald_types::FieldError;
use minijinja::Environment;

use super::template::{BODY, PREHEADER, SUBJECT};

/// Every name a campaign can use, as `{{ … }}` writes it.
pub const KNOWN_NAMES: &[&str] = &[
    "reader.email",
    "reader.name",
    "unsubscribe_url",
    "web_version_url",
    "workspace.name",
    "workspace.postal_address",
];

/// Names under which any key may exist: a reader's attributes differ per reader, and a
/// recurring edition's feed is whatever the feed returns.
const ATTRIBUTES: &str = "reader.attributes";
const FEED: &str = "feed";
/// The workspace's custom fields: only their keys exist below it.
const FIELDS: &str = "reader.fields";

/// The templates' unknown names, one warning each, keyed by the field that uses them (the
/// subject, preheader or body); `field_keys` are the workspace's custom fields. A template with
/// a syntax error is skipped: the save reports that.
pub fn unknown_merge_tags(
    subject: &str,
    preheader: &str,
    body: &str,
    recurring: bool,
    field_keys: &[String],
) -> Vec<FieldError> {
    let known: Vec<String> =
        KNOWN_NAMES.iter().map(|n| n.to_string()).chain(field_keys.iter().map(|k| format!("{FIELDS}.{k}"))).collect();
    let env = Environment::new();
    let globals: Vec<String> = env.globals().map(|(name, _)| name.to_string()).collect();
    let mut warnings = Vec::new();
    for (field, source) in [(SUBJECT, subject), (PREHEADER, preheader), (BODY, body)] {
        let Ok(template) = env.template_from_str(source) else { continue };
        let mut names: Vec<String> = template.undeclared_variables(true).into_iter().collect();
        names.sort();
        for name in names {
            let root = name.split('.').next().unwrap_or_default();
            if globals.iter().any(|g| g == root) || is_known(&known, &name, recurring) {
                continue;
            }
            let message = if root == FEED {
                format!(
                    "“{name}” is only filled in for a recurring campaign with a data feed; here it renders as nothing."
                )
            } else {
                match suggestion(&known, &name) {
                    Some(s) => format!("Unknown merge tag “{name}”: it renders as nothing. Did you mean “{s}”?"),
                    None => format!(
                        "Unknown merge tag “{name}”: it renders as nothing. Readers have {}.",
                        KNOWN_NAMES
                            .iter()
                            .filter(|n| n.starts_with("reader."))
                            .copied()
                            .chain([ATTRIBUTES])
                            .map(|n| format!("“{n}”"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            };
            warnings.push(FieldError { field: Some(field.to_string()), message });
        }
    }
    warnings
}

/// A known name, a prefix of one (`{{ reader }}`, `{{ workspace["name"] }}`), or a key under an
/// open namespace.
fn is_known(known: &[String], name: &str, recurring: bool) -> bool {
    let under = |namespace: &str| name == namespace || name.starts_with(&format!("{namespace}."));
    known.iter().any(|k| k == name || k.starts_with(&format!("{name}.")) || name.starts_with(&format!("{k}.")))
        || name == FIELDS
        || under(ATTRIBUTES)
        || (recurring && under(FEED))
}

/// The known name closest to a typo (at most two edits away), or the attribute the author
/// probably meant (`reader.city` → `reader.attributes.city`).
fn suggestion(known: &[String], name: &str) -> Option<String> {
    let closest = known
        .iter()
        .map(|k| (strsim::levenshtein(name, k), k))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, k)| k.to_string());
    closest.or_else(|| {
        let key = name.strip_prefix("reader.")?;
        (!key.contains('.')).then(|| match known.iter().find(|k| k.strip_prefix(&format!("{FIELDS}.")) == Some(key)) {
            Some(field) => field.clone(),
            None => format!("{ATTRIBUTES}.{key}"),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(warnings: &[FieldError]) -> Vec<(String, String)> {
        warnings.iter().map(|w| (w.field.clone().unwrap_or_default(), w.message.clone())).collect()
    }

    #[test]
    fn typos_are_named_with_the_intended_name() {
        let w =
            unknown_merge_tags("Hi {{ reader.nmae }}", "", "Dear {{ reader.city }}, {{ unsubscribe_ur }}", false, &[]);
        let w = names(&w);
        assert_eq!(w.len(), 3, "{w:?}");
        assert_eq!(w[0].0, "subject");
        assert!(w[0].1.contains("“reader.nmae”") && w[0].1.contains("Did you mean “reader.name”?"), "{w:?}");
        assert!(w[1].1.contains("“reader.city”") && w[1].1.contains("“reader.attributes.city”"), "{w:?}");
        assert!(w[2].1.contains("“unsubscribe_ur”") && w[2].1.contains("“unsubscribe_url”"), "{w:?}");
    }

    #[test]
    fn known_names_locals_globals_and_open_namespaces_pass() {
        let body = "{{ reader.name | default('friend') }} {{ reader.email }} {{ reader.attributes.plan }}
            {% set greeting = 'Hi' %}{{ greeting }} {% for k, v in reader.attributes | items %}{{ k }}{{ v }}{% endfor %}
            {{ workspace.name }} {{ workspace.postal_address }} {{ unsubscribe_url }} {{ range(3) | list }}
            {{ reader }} {{ reader['name'] }}";
        assert_eq!(names(&unknown_merge_tags("", "", body, false, &[])), vec![]);
        // A feed key is fine in a recurring campaign, and named elsewhere.
        assert_eq!(names(&unknown_merge_tags("{{ feed.headline }}", "", "", true, &[])), vec![]);
        let w = names(&unknown_merge_tags("{{ feed.headline }}", "", "", false, &[]));
        assert!(w.len() == 1 && w[0].1.contains("recurring campaign"), "{w:?}");
        // A syntax error is the save's to report.
        assert_eq!(names(&unknown_merge_tags("{{ reader.nmae", "", "", false, &[])), vec![]);
    }

    #[test]
    fn custom_fields_are_known_names_and_their_typos_are_named() {
        let keys = vec!["plan".to_string(), "birthday".to_string()];
        let ok = "{{ reader.fields.plan }} {{ reader.fields.birthday | default('') }} {{ reader.fields }}";
        assert_eq!(names(&unknown_merge_tags("", "", ok, false, &keys)), vec![]);
        let w = names(&unknown_merge_tags("{{ reader.fields.pln }}", "", "{{ reader.plan }}", false, &keys));
        assert!(w[0].1.contains("Did you mean “reader.fields.plan”?"), "{w:?}");
        assert!(w[1].1.contains("“reader.fields.plan”"), "{w:?}");
    }
}
