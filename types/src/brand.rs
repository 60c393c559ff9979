//! A workspace's brand, the starter layouts built from it, and authors' saved campaign
//! templates.
//!
//! The brand (logo, colours, font, footer text) is copied into a block document when a campaign
//! starts from a layout, a template or a blank page: the colours and font as the document's
//! [`Theme`], the logo as an image block, the footer text into the footer block. A sent
//! campaign therefore keeps looking as it was sent when the brand changes later, and an author
//! can still restyle one campaign without touching the others. (The postal address lives in the
//! workspace's general settings and every footer shows it.)

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::blocks::{Block, BlockDocument, CONTENT_WIDTH, CURRENT_VERSION};
use crate::invalid::Problems;
use crate::{BodyFormat, CampaignTemplateId, Invalid};

/// A colour as mail clients understand it everywhere: `#rrggbb`, stored lowercase. Built only
/// through [`Colour::parse`] (also when deserialised), so it can go into a style attribute
/// without escaping.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Colour(String);

impl Colour {
    pub fn parse(s: &str) -> Result<Colour, Invalid> {
        let s = s.trim();
        let hex = s.strip_prefix('#').unwrap_or(s);
        if hex.len() == 6 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Colour(format!("#{}", hex.to_ascii_lowercase())))
        } else {
            Err(Invalid::new(format!("“{s}” is not a colour: write it as #rrggbb, for example #2563eb.")))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Relative luminance (WCAG 2), 0 for black to 1 for white.
    pub fn luminance(&self) -> f64 {
        let channel = |i: usize| {
            let v = f64::from(u8::from_str_radix(&self.0[i..i + 2], 16).unwrap_or(0)) / 255.0;
            if v <= 0.039_28 { v / 12.92 } else { ((v + 0.055) / 1.055).powf(2.4) }
        };
        0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
    }

    /// White or near-black, whichever reads better on this colour (a button's label).
    pub fn readable_text(&self) -> &'static str {
        // The luminance where white and #111827 have the same contrast against the colour.
        if self.luminance() > 0.18 { "#111827" } else { "#ffffff" }
    }
}

impl TryFrom<String> for Colour {
    type Error = Invalid;
    fn try_from(s: String) -> Result<Self, Invalid> {
        Colour::parse(&s)
    }
}

impl From<Colour> for String {
    fn from(c: Colour) -> String {
        c.0
    }
}

impl std::fmt::Display for Colour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

string_enum! {
    /// The typeface of a document: font stacks every mail client has, so nothing is downloaded.
    Font, invalid = "Choose one of the fonts offered.", default = Sans {
        /// The reader's system font (San Francisco, Segoe UI, Roboto…).
        Sans = "sans",
        /// Georgia and its kin: a letter, an essay.
        Serif = "serif",
        /// Verdana: wide and plain, easy on small screens.
        Wide = "wide",
        /// A typewriter face.
        Mono = "mono",
    }
}

impl Font {
    /// The CSS font stack (a constant: it goes into the mail as written).
    pub fn stack(self) -> &'static str {
        match self {
            Font::Sans => "-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif",
            Font::Serif => "Georgia, 'Times New Roman', Times, serif",
            Font::Wide => "Verdana, Geneva, Tahoma, sans-serif",
            Font::Mono => "Menlo, Consolas, 'Courier New', monospace",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Font::Sans => "System sans-serif",
            Font::Serif => "Serif (Georgia)",
            Font::Wide => "Wide sans-serif (Verdana)",
            Font::Mono => "Monospace",
        }
    }
}

/// How a block document looks: its colours and typeface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Theme {
    /// Links and buttons.
    pub accent: Colour,
    /// Around the content column.
    pub background: Colour,
    /// Body text.
    pub text: Colour,
    #[serde(default)]
    pub font: Font,
}

impl Default for Theme {
    fn default() -> Self {
        Theme {
            accent: Colour("#2563eb".into()),
            background: Colour("#f4f4f5".into()),
            text: Colour("#1f2937".into()),
            font: Font::Sans,
        }
    }
}

/// The default logo width, in pixels.
pub const DEFAULT_LOGO_WIDTH: u32 = 160;

/// A workspace's brand.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Brand {
    pub theme: Theme,
    /// The logo's address (usually from the media library); empty for none.
    #[serde(default)]
    pub logo_src: String,
    /// Shown at this width, in pixels (16 to 600).
    #[serde(default = "default_logo_width")]
    pub logo_width: u32,
    /// Markdown shown in every layout's footer above the unsubscribe link: who you are, why
    /// readers get this. May hold merge tags.
    #[serde(default)]
    pub footer_text: String,
}

fn default_logo_width() -> u32 {
    DEFAULT_LOGO_WIDTH
}

impl Default for Brand {
    fn default() -> Self {
        Brand {
            theme: Theme::default(),
            logo_src: String::new(),
            logo_width: DEFAULT_LOGO_WIDTH,
            footer_text: String::new(),
        }
    }
}

impl Brand {
    /// Every problem at once, keyed by field (`logo_src`, `logo_width`, `footer_text`).
    pub fn validate(&self) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        let src = self.logo_src.trim();
        if !src.is_empty()
            && (!(src.starts_with("https://") || src.starts_with("http://")) || src.chars().any(char::is_whitespace))
        {
            problems.add("logo_src", "Give the logo's full address, starting with https://, or leave it empty.");
        }
        if src.chars().count() > 2_000 {
            problems.add("logo_src", "The logo's address may have at most 2000 characters.");
        }
        if !(16..=CONTENT_WIDTH).contains(&self.logo_width) {
            problems.add("logo_width", format!("Choose a width between 16 and {CONTENT_WIDTH} pixels."));
        }
        if self.footer_text.chars().count() > 1_000 {
            problems.add("footer_text", "The footer text may have at most 1000 characters.");
        }
        problems.into_result()
    }

    /// `blocks` dressed in the brand: the theme, the logo on top (when there is one) and the
    /// footer text at the start of the footer block (added when `blocks` has none).
    pub fn dress(&self, blocks: Vec<Block>) -> BlockDocument {
        let mut out = Vec::with_capacity(blocks.len() + 2);
        if !self.logo_src.trim().is_empty() {
            out.push(Block::Image {
                src: self.logo_src.trim().to_string(),
                // A merge tag, not the name itself: a name is data, and `{{` in one would be
                // read as template source.
                alt: "{{ workspace.name }}".into(),
                href: String::new(),
                width: self.logo_width.clamp(16, CONTENT_WIDTH),
            });
        }
        out.extend(blocks.into_iter().filter(|b| !matches!(b, Block::Footer { .. })));
        let standard = match Block::new("footer") {
            Some(Block::Footer { text }) => text,
            _ => String::new(),
        };
        let footer = match self.footer_text.trim() {
            "" => standard,
            own => format!("{own}\n\n{standard}"),
        };
        out.push(Block::Footer { text: footer });
        BlockDocument { version: CURRENT_VERSION, theme: self.theme.clone(), blocks: out }
    }
}

string_enum! {
    /// The starter layouts every workspace has, dressed in its brand.
    Layout, invalid = "There is no such layout." {
        /// Several stories, each with an image and a link.
        Newsletter = "newsletter",
        /// One thing, said big, with one button.
        Announcement = "announcement",
        /// Plain text, like a personal letter.
        Letter = "letter",
    }
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Newsletter => "Newsletter",
            Layout::Announcement => "Announcement",
            Layout::Letter => "Plain letter",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Layout::Newsletter => "A greeting, two stories side by side and a closing note.",
            Layout::Announcement => "One headline, one picture-sized message and one button.",
            Layout::Letter => "Just words, like a note from a person.",
        }
    }

    /// The layout's blocks, before the brand dresses them.
    fn blocks(self) -> Vec<Block> {
        let paragraph = |text: &str| Block::Paragraph { text: text.into() };
        match self {
            Layout::Newsletter => vec![
                Block::Heading { text: "This week at {{ workspace.name }}".into(), level: 1 },
                paragraph("Hello {{ reader.name | default('there') }}, here is what happened since the last issue."),
                Block::Divider,
                Block::Columns {
                    columns: (1..=2)
                        .map(|n| crate::blocks::Column {
                            blocks: vec![
                                Block::Heading { text: format!("Story {n}"), level: 3 },
                                paragraph("Two or three sentences about it, and why it matters."),
                                Block::Button { label: "Read more".into(), href: "https://example.com".into() },
                            ],
                        })
                        .collect(),
                },
                Block::Divider,
                paragraph("Thanks for reading. Reply to this mail: it reaches a person."),
            ],
            Layout::Announcement => vec![
                Block::Spacer { height: 16 },
                Block::Heading { text: "Something new".into(), level: 1 },
                paragraph("Say in one or two sentences what it is and why your readers will care."),
                Block::Button { label: "See it".into(), href: "https://example.com".into() },
                Block::Spacer { height: 16 },
            ],
            Layout::Letter => vec![
                paragraph("Dear {{ reader.name | default('friend') }},"),
                paragraph("Write as you would to one person."),
                paragraph("Yours,\n\n{{ workspace.name }}"),
            ],
        }
    }

    /// The layout dressed in `brand`.
    pub fn document(self, brand: &Brand) -> BlockDocument {
        let mut doc = brand.dress(self.blocks());
        if self == Layout::Letter {
            // A letter looks like one: no logo banner, a serif face unless the brand chose one.
            doc.blocks.retain(|b| !matches!(b, Block::Image { .. }));
            if doc.theme.font == Font::Sans {
                doc.theme.font = Font::Serif;
            }
        }
        doc
    }
}

/// A starter layout as the API lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct LayoutView {
    pub layout: Layout,
    pub name: String,
    pub description: String,
    /// The block document, dressed in the workspace's brand: use it as a campaign's `body`
    /// with `body_format` `blocks`.
    pub body: BlockDocument,
}

/// An author's own starting point for campaigns: a subject, preheader and body saved under a
/// name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CampaignTemplate {
    pub id: CampaignTemplateId,
    pub name: String,
    pub subject: String,
    pub preheader: String,
    pub body_format: BodyFormat,
    pub body: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A template as listed: what the list shows, not its body (up to 1 MB each).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CampaignTemplateSummary {
    pub id: CampaignTemplateId,
    pub name: String,
    pub subject: String,
    pub body_format: BodyFormat,
    pub updated_at: DateTime<Utc>,
}

/// What `POST`/`PUT /api/v1/campaign-templates` take.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CampaignTemplateInput {
    /// 1–100 characters, unique in the workspace (whatever the case).
    pub name: String,
    #[serde(default)]
    pub subject: String,
    #[serde(default)]
    pub preheader: String,
    /// Markdown unless said otherwise, as for a campaign made through the API.
    #[serde(default)]
    pub body_format: BodyFormat,
    pub body: String,
}

/// The most a template's body holds (as a campaign's).
pub const MAX_TEMPLATE_BODY: usize = 1024 * 1024;

impl CampaignTemplateInput {
    pub fn validate(&self) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        let name = self.name.trim();
        if name.is_empty() {
            problems.add("name", "Name the template.");
        } else if name.chars().count() > 100 || name.contains(['\n', '\r']) {
            problems.add("name", "A template's name is one line of at most 100 characters.");
        }
        if self.subject.chars().count() > 300 {
            problems.add("subject", "The subject may have at most 300 characters.");
        }
        if self.preheader.chars().count() > 300 {
            problems.add("preheader", "The preheader may have at most 300 characters.");
        }
        if self.body.len() > MAX_TEMPLATE_BODY {
            problems.add("body", "The body may be at most 1 MB.");
        } else if self.body_format == BodyFormat::Blocks {
            problems.check(BlockDocument::parse(&self.body).and_then(|doc| doc.validate()));
        }
        problems.into_result()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_parsed_once_and_lowercased() {
        assert_eq!(Colour::parse("#AABBCC").expect("colour").as_str(), "#aabbcc");
        assert_eq!(Colour::parse("aabbcc").expect("colour").as_str(), "#aabbcc");
        for bad in ["#abc", "red", "#12345g", "#1234567", "\"><script>", ""] {
            assert!(Colour::parse(bad).is_err(), "{bad} passed");
        }
        // Also when deserialised: a stored theme cannot carry CSS.
        let bad = r##"{"accent":"#fff;background:url(x)","background":"#ffffff","text":"#000000"}"##;
        assert!(serde_json::from_str::<Theme>(bad).is_err());
    }

    #[test]
    fn button_labels_stay_readable() {
        assert_eq!(Colour::parse("#2563eb").expect("colour").readable_text(), "#ffffff");
        assert_eq!(Colour::parse("#fde047").expect("colour").readable_text(), "#111827");
        assert_eq!(Colour::parse("#000000").expect("colour").readable_text(), "#ffffff");
    }

    #[test]
    fn every_layout_dressed_in_a_brand_is_a_valid_document() {
        let brand = Brand {
            theme: Theme { accent: Colour::parse("#be123c").expect("colour"), ..Theme::default() },
            logo_src: "https://example.com/logo.png".into(),
            logo_width: 120,
            footer_text: "Tulip Weekly, for people who grow things.".into(),
        };
        for layout in Layout::ALL {
            let doc = layout.document(&brand);
            doc.validate().unwrap_or_else(|e| panic!("{layout}: {e}"));
            assert_eq!(doc.theme.accent, brand.theme.accent, "{layout}");
            let Some(Block::Footer { text }) = doc.blocks.last() else { panic!("{layout} has no footer last") };
            assert!(text.starts_with("Tulip Weekly"), "{layout}: {text}");
            assert!(text.contains("{{ unsubscribe_url }}"), "{layout}");
            let logo = doc.blocks.iter().any(|b| matches!(b, Block::Image { src, .. } if src.ends_with("logo.png")));
            assert_eq!(logo, *layout != Layout::Letter, "{layout}");
            // It survives the stored form.
            assert_eq!(BlockDocument::parse(&doc.to_json()).expect("parses"), doc);
        }
        // Without a brand: no logo block, the standard footer.
        let plain = Layout::Announcement.document(&Brand::default());
        assert!(!plain.blocks.iter().any(|b| matches!(b, Block::Image { .. })));
    }

    #[test]
    fn brand_problems_are_keyed_by_field() {
        let brand = Brand {
            logo_src: "javascript:alert(1)".into(),
            logo_width: 4,
            footer_text: "x".repeat(1_001),
            ..Brand::default()
        };
        let fields: Vec<_> =
            brand.validate().expect_err("refused").errors.into_iter().filter_map(|e| e.field).collect();
        assert_eq!(fields, ["logo_src", "logo_width", "footer_text"]);
        assert!(Brand::default().validate().is_ok());
    }

    #[test]
    fn template_input_checks_its_body() {
        let mut input = CampaignTemplateInput {
            name: "Weekly".into(),
            subject: String::new(),
            preheader: String::new(),
            body_format: BodyFormat::Blocks,
            body: BlockDocument::default().to_json(),
        };
        assert!(input.validate().is_ok());
        input.body = "{\"version\":1,\"blocks\":[]}".into();
        assert!(input.validate().is_err());
        input.body_format = BodyFormat::Markdown;
        input.body = "Hello".into();
        input.name = " ".into();
        let fields: Vec<_> =
            input.validate().expect_err("refused").errors.into_iter().filter_map(|e| e.field).collect();
        assert_eq!(fields, ["name"]);
    }
}
