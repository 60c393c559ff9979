//! A block campaign's body: a typed document the editor builds and the engine renders
//! to email-safe HTML through MJML (`engine/src/sending/message/blocks.rs`).
//!
//! It is stored as JSON in the campaign's `body`, tagged with a `version`. [`BlockDocument::parse`]
//! reads every version ever saved and upgrades it to the current shape, so a document saved once
//! keeps opening; `types/tests/fixtures/blocks_v1.json` is a version-1 document that must always
//! parse. A document from a newer Herald is refused with a clear message rather than misread.
//!
//! Every text field may hold merge tags (`{{ reader.name }}`); paragraphs, quotes and the footer
//! are Markdown (bold, italic, links, lists), never raw HTML: the HTML block is the one place
//! for that.

use serde::{Deserialize, Serialize};

use crate::brand::Theme;
use crate::{Invalid, Problems};

/// The shape [`BlockDocument`] has now. Raise it (and add an upgrade in [`BlockDocument::parse`])
/// whenever a change would make an older document deserialize differently.
pub const CURRENT_VERSION: u32 = 1;

/// The most blocks one document holds, counting those inside columns.
pub const MAX_BLOCKS: usize = 200;

/// The widest an email's content is, in CSS pixels: the width every client renders well.
pub const CONTENT_WIDTH: u32 = 600;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct BlockDocument {
    pub version: u32,
    /// Colours and typeface. Documents saved before themes existed read as the default theme,
    /// which is how they always looked, so this needed no new version.
    #[serde(default)]
    pub theme: Theme,
    pub blocks: Vec<Block>,
}

/// One block. Serialized with a `type` tag: `{"type": "heading", "text": "Hi", "level": 1}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Heading {
        text: String,
        /// 1 (title) to 3.
        #[serde(default = "default_heading_level")]
        level: u8,
    },
    /// Markdown: **bold**, _italic_, [links](https://…), `-` and `1.` lists.
    Paragraph {
        text: String,
    },
    Image {
        /// An `https://` address: one from the media library, or any public image.
        src: String,
        /// What the image shows, for readers who cannot see it; required.
        alt: String,
        /// Where a click on the image goes; empty for nowhere.
        #[serde(default)]
        href: String,
        /// Display width in pixels, at most [`CONTENT_WIDTH`].
        #[serde(default = "default_image_width")]
        width: u32,
    },
    Button {
        label: String,
        href: String,
    },
    Divider,
    Spacer {
        /// Pixels.
        #[serde(default = "default_spacer_height")]
        height: u32,
    },
    /// Two or three columns side by side (stacked on phones), each with its own blocks.
    Columns {
        columns: Vec<Column>,
    },
    /// Markdown, set off as a quotation.
    Quote {
        text: String,
    },
    /// Shown as written, in a monospace font.
    Code {
        text: String,
    },
    Social {
        links: Vec<SocialLink>,
    },
    /// Raw HTML, for what the other blocks cannot do.
    Html {
        html: String,
    },
    /// Small print at the end (Markdown). A `{{ unsubscribe_url }}` link here replaces the
    /// unsubscribe link Herald otherwise adds.
    Footer {
        text: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Column {
    /// Blocks hold columns and columns hold blocks: the schema stops there (utoipa would
    /// otherwise recurse until the stack runs out).
    #[cfg_attr(feature = "utoipa", schema(no_recursion))]
    pub blocks: Vec<Block>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SocialLink {
    /// Shown as the link's text: "Mastodon", "YouTube", "Website"…
    pub label: String,
    pub url: String,
}

fn default_heading_level() -> u8 {
    2
}
fn default_image_width() -> u32 {
    CONTENT_WIDTH
}
fn default_spacer_height() -> u32 {
    24
}

/// The kinds an author can add, in the order the "Add block" menu lists them.
pub const BLOCK_KINDS: &[(&str, &str)] = &[
    ("heading", "Heading"),
    ("paragraph", "Paragraph"),
    ("image", "Image"),
    ("button", "Button"),
    ("divider", "Divider"),
    ("spacer", "Spacer"),
    ("columns2", "Two columns"),
    ("columns3", "Three columns"),
    ("quote", "Quote"),
    ("code", "Code"),
    ("social", "Social links"),
    ("html", "HTML"),
    ("footer", "Footer"),
];

impl Block {
    /// A new block of a kind from [`BLOCK_KINDS`], filled so that it renders something.
    pub fn new(kind: &str) -> Option<Block> {
        let paragraph = || Block::Paragraph { text: "Write something…".into() };
        Some(match kind {
            "heading" => Block::Heading { text: "A heading".into(), level: 2 },
            "paragraph" => paragraph(),
            "image" => {
                Block::Image { src: String::new(), alt: String::new(), href: String::new(), width: CONTENT_WIDTH }
            }
            "button" => Block::Button { label: "Read more".into(), href: "https://".into() },
            "divider" => Block::Divider,
            "spacer" => Block::Spacer { height: default_spacer_height() },
            "columns2" | "columns3" => {
                let n = if kind == "columns2" { 2 } else { 3 };
                Block::Columns { columns: (0..n).map(|_| Column { blocks: vec![paragraph()] }).collect() }
            }
            "quote" => Block::Quote { text: "A quotation.".into() },
            "code" => Block::Code { text: String::new() },
            "social" => Block::Social { links: vec![SocialLink { label: "Website".into(), url: "https://".into() }] },
            "html" => Block::Html { html: "<p></p>".into() },
            "footer" => Block::Footer {
                text: "You get this because you subscribed to {{ workspace.name }}. \
                       [View in your browser]({{ web_version_url }}) · [Unsubscribe]({{ unsubscribe_url }})"
                    .into(),
            },
            _ => return None,
        })
    }

    /// What the editor calls this block.
    pub fn label(&self) -> &'static str {
        match self {
            Block::Heading { .. } => "Heading",
            Block::Paragraph { .. } => "Paragraph",
            Block::Image { .. } => "Image",
            Block::Button { .. } => "Button",
            Block::Divider => "Divider",
            Block::Spacer { .. } => "Spacer",
            Block::Columns { columns } if columns.len() == 3 => "Three columns",
            Block::Columns { .. } => "Two columns",
            Block::Quote { .. } => "Quote",
            Block::Code { .. } => "Code",
            Block::Social { .. } => "Social links",
            Block::Html { .. } => "HTML",
            Block::Footer { .. } => "Footer",
        }
    }

    /// Every block in this one, itself first (columns hold blocks).
    fn count(&self) -> usize {
        match self {
            Block::Columns { columns } => 1 + columns.iter().flat_map(|c| &c.blocks).map(Block::count).sum::<usize>(),
            _ => 1,
        }
    }
}

impl Default for BlockDocument {
    /// What a new campaign starts with: a greeting, a paragraph, a button and the footer.
    fn default() -> Self {
        BlockDocument {
            version: CURRENT_VERSION,
            theme: Theme::default(),
            blocks: vec![
                Block::Heading { text: "Hello {{ reader.name | default('there') }}".into(), level: 1 },
                Block::Paragraph {
                    text:
                        "Write what this issue is about. **Bold**, _italic_ and [links](https://example.com) work here."
                            .into(),
                },
                Block::Button { label: "Read more".into(), href: "https://example.com".into() },
                Block::new("footer").unwrap_or(Block::Divider),
            ],
        }
    }
}

impl BlockDocument {
    /// Reads a stored or submitted document of any version this Herald knows, upgraded to the
    /// current shape. Problems are filed under `body`.
    pub fn parse(json: &str) -> Result<BlockDocument, Invalid> {
        #[derive(Deserialize)]
        struct Versioned {
            version: Option<u32>,
        }
        let not_a_document =
            |e: serde_json::Error| Invalid::field("body", format!("The block document cannot be read: {e}."));
        let version = serde_json::from_str::<Versioned>(json).map_err(not_a_document)?.version;
        match version {
            Some(1) => serde_json::from_str::<BlockDocument>(json).map_err(not_a_document),
            Some(v) if v > CURRENT_VERSION => Err(Invalid::field(
                "body",
                format!("This block document was saved by a newer Herald (version {v}); it cannot be opened here."),
            )),
            _ => Err(Invalid::field("body", "The block document has no known version.")),
        }
    }

    /// The stored form.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Every problem at once, each keyed by the field it is about:
    /// `body.blocks.2.href`, `body.blocks.4.columns.1.blocks.0.alt`.
    pub fn validate(&self) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        if self.blocks.is_empty() {
            problems.add("body", "Add at least one block.");
        }
        let total: usize = self.blocks.iter().map(Block::count).sum();
        if total > MAX_BLOCKS {
            problems.add("body", format!("A campaign has at most {MAX_BLOCKS} blocks; this one has {total}."));
        }
        let footers = self.blocks.iter().filter(|b| matches!(b, Block::Footer { .. })).count();
        if footers > 1 {
            problems.add("body", "Use one footer block.");
        }
        for (i, block) in self.blocks.iter().enumerate() {
            check_block(&mut problems, &format!("body.blocks.{i}"), block, false);
        }
        problems.into_result()
    }

    /// The document as Markdown, for an author who switches the campaign to Markdown: each
    /// block as Markdown writes it (an HTML block stays HTML, which Markdown passes through).
    pub fn to_markdown(&self) -> String {
        let mut parts = Vec::new();
        for block in &self.blocks {
            markdown_of(block, &mut parts);
        }
        parts.join("\n\n")
    }
}

fn markdown_of(block: &Block, out: &mut Vec<String>) {
    match block {
        Block::Heading { text, level } => {
            out.push(format!("{} {}", "#".repeat(usize::from((*level).clamp(1, 3))), text))
        }
        Block::Paragraph { text } | Block::Footer { text } => out.push(text.clone()),
        Block::Image { src, alt, href, .. } if href.is_empty() => out.push(format!("![{alt}]({src})")),
        Block::Image { src, alt, href, .. } => out.push(format!("[![{alt}]({src})]({href})")),
        Block::Button { label, href } => out.push(format!("[{label}]({href})")),
        Block::Divider => out.push("---".into()),
        Block::Spacer { .. } => {}
        Block::Columns { columns } => {
            for block in columns.iter().flat_map(|c| &c.blocks) {
                markdown_of(block, out);
            }
        }
        Block::Quote { text } => out.push(text.lines().map(|l| format!("> {l}")).collect::<Vec<_>>().join("\n")),
        Block::Code { text } => out.push(format!("```\n{text}\n```")),
        Block::Social { links } => {
            out.push(links.iter().map(|l| format!("[{}]({})", l.label, l.url)).collect::<Vec<_>>().join(" · "))
        }
        Block::Html { html } => out.push(html.clone()),
    }
}

/// A link an email can carry: `https://…`, `http://…`, `mailto:…`, or one a merge tag gives
/// (`{{ reader.fields.site }}`).
pub fn is_mail_link(url: &str) -> bool {
    let url = url.trim();
    let has_scheme = |p: &str| url.len() > p.len() && url.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p));
    has_scheme("https://") || has_scheme("http://") || has_scheme("mailto:") || url.starts_with("{{")
}

fn check_block(problems: &mut Problems, at: &str, block: &Block, in_column: bool) {
    let text = |problems: &mut Problems, field: &str, value: &str, what: &str, max: usize, required: bool| {
        if required && value.trim().is_empty() {
            problems.add(&format!("{at}.{field}"), format!("Write the {what}."));
        } else if value.chars().count() > max {
            problems.add(&format!("{at}.{field}"), format!("The {what} may have at most {max} characters."));
        }
    };
    match block {
        Block::Heading { text: t, level } => {
            text(problems, "text", t, "heading", 300, true);
            if !(1..=3).contains(level) {
                problems.add(&format!("{at}.level"), "Choose heading level 1, 2 or 3.");
            }
        }
        Block::Paragraph { text: t } => text(problems, "text", t, "paragraph", 20_000, false),
        Block::Quote { text: t } => text(problems, "text", t, "quotation", 5_000, true),
        Block::Code { text: t } => text(problems, "text", t, "code", 20_000, false),
        Block::Html { html } => text(problems, "html", html, "HTML", 100_000, false),
        Block::Footer { text: t } => {
            text(problems, "text", t, "footer", 2_000, false);
            if in_column {
                problems.add(at, "A footer cannot sit inside a column.");
            }
        }
        Block::Image { src, alt, href, width } => {
            let src_ok = src.trim().starts_with("https://") || src.trim().starts_with("http://");
            if src.trim().is_empty() {
                problems.add(&format!("{at}.src"), "Choose an image or paste its address.");
            } else if !src_ok || src.chars().any(char::is_whitespace) {
                problems.add(&format!("{at}.src"), "Give the image's full address, starting with https://.");
            }
            text(problems, "alt", alt, "image description (alt text) for readers who cannot see it", 300, true);
            if !href.trim().is_empty() && !is_mail_link(href) {
                problems.add(&format!("{at}.href"), "Give a full link, starting with https:// (or leave it empty).");
            }
            if !(16..=CONTENT_WIDTH).contains(width) {
                problems.add(&format!("{at}.width"), format!("Choose a width between 16 and {CONTENT_WIDTH} pixels."));
            }
        }
        Block::Button { label, href } => {
            text(problems, "label", label, "button's label", 100, true);
            if !is_mail_link(href) {
                problems.add(&format!("{at}.href"), "Give the button a full link, starting with https://.");
            }
        }
        Block::Divider => {}
        Block::Spacer { height } => {
            if !(4..=120).contains(height) {
                problems.add(&format!("{at}.height"), "Choose a height between 4 and 120 pixels.");
            }
        }
        Block::Social { links } => {
            if links.is_empty() || links.len() > 8 {
                problems.add(at, "Add between one and eight links.");
            }
            for (j, link) in links.iter().enumerate() {
                let at = format!("{at}.links.{j}");
                if link.label.trim().is_empty() || link.label.chars().count() > 40 {
                    problems.add(&format!("{at}.label"), "Name the link in at most 40 characters.");
                }
                if !is_mail_link(&link.url) {
                    problems.add(&format!("{at}.url"), "Give a full link, starting with https://.");
                }
            }
        }
        Block::Columns { columns } => {
            if in_column {
                problems.add(at, "Columns cannot sit inside a column.");
            } else if !(2..=3).contains(&columns.len()) {
                problems.add(at, "Use two or three columns.");
            }
            for (c, column) in columns.iter().enumerate() {
                for (j, inner) in column.blocks.iter().enumerate() {
                    check_block(problems, &format!("{at}.columns.{c}.blocks.{j}"), inner, true);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_document_keeps_opening() {
        let stored = include_str!("../tests/fixtures/blocks_v1.json");
        let doc = BlockDocument::parse(stored).expect("the version-1 fixture must keep parsing");
        assert_eq!(doc.version, 1);
        assert_eq!(doc.blocks.len(), 13, "every kind of block is in the fixture");
        assert!(doc.validate().is_ok(), "{:?}", doc.validate());
        // It round-trips: what is saved reads back the same.
        assert_eq!(BlockDocument::parse(&doc.to_json()).ok(), Some(doc));
    }

    #[test]
    fn newer_and_unversioned_documents_are_refused_clearly() {
        let newer = BlockDocument::parse(r#"{"version": 99, "blocks": []}"#).expect_err("refused");
        assert!(newer.message_for("body").is_some_and(|m| m.contains("newer Herald")), "{newer:?}");
        let none = BlockDocument::parse(r#"{"blocks": []}"#).expect_err("refused");
        assert!(none.message_for("body").is_some(), "{none:?}");
        let garbage = BlockDocument::parse("# Markdown").expect_err("refused");
        assert!(garbage.message_for("body").is_some_and(|m| m.contains("cannot be read")), "{garbage:?}");
        let unknown = BlockDocument::parse(r#"{"version": 1, "blocks": [{"type": "marquee"}]}"#).expect_err("refused");
        assert!(unknown.message_for("body").is_some(), "{unknown:?}");
    }

    #[test]
    fn problems_are_keyed_by_block_and_field() {
        let doc = BlockDocument {
            version: CURRENT_VERSION,
            theme: Default::default(),
            blocks: vec![
                Block::Heading { text: " ".into(), level: 7 },
                Block::Image {
                    src: "javascript:alert(1)".into(),
                    alt: String::new(),
                    href: "ftp://x".into(),
                    width: 900,
                },
                Block::Button { label: "Go".into(), href: "example.com".into() },
                Block::Columns {
                    columns: vec![
                        Column {
                            blocks: vec![Block::Button { label: String::new(), href: "https://ok.example".into() }],
                        },
                        Column { blocks: vec![Block::Columns { columns: vec![] }] },
                    ],
                },
                Block::Spacer { height: 1000 },
                Block::Social {
                    links: vec![SocialLink { label: "Site".into(), url: "{{ reader.fields.site }}".into() }],
                },
            ],
        };
        let e = doc.validate().expect_err("refused");
        let fields: Vec<&str> = e.errors.iter().filter_map(|e| e.field.as_deref()).collect();
        assert_eq!(
            fields,
            vec![
                "body.blocks.0.text",
                "body.blocks.0.level",
                "body.blocks.1.src",
                "body.blocks.1.alt",
                "body.blocks.1.href",
                "body.blocks.1.width",
                "body.blocks.2.href",
                "body.blocks.3.columns.0.blocks.0.label",
                "body.blocks.3.columns.1.blocks.0",
                "body.blocks.4.height",
            ],
            "{e:?}"
        );
    }

    #[test]
    fn the_starter_document_and_every_new_block_are_valid() {
        assert_eq!(BlockDocument::default().validate(), Ok(()));
        for (kind, label) in BLOCK_KINDS {
            let block = Block::new(kind).expect(kind);
            assert_eq!(block.label(), *label);
            if !matches!(block, Block::Image { .. } | Block::Button { .. } | Block::Social { .. }) {
                let doc = BlockDocument { version: CURRENT_VERSION, theme: Theme::default(), blocks: vec![block] };
                assert_eq!(doc.validate(), Ok(()), "{kind}");
            }
        }
    }

    #[test]
    fn markdown_keeps_every_block() {
        let md = BlockDocument::parse(include_str!("../tests/fixtures/blocks_v1.json")).expect("fixture").to_markdown();
        for expected in ["# Spring issue", "![A tulip field](https://", "[Read the story](https://", "---", "> ", "```"]
        {
            assert!(md.contains(expected), "{expected} missing from {md}");
        }
    }
}
