use super::*;

pub use herald_types::BodyFormat;

/// What the author wrote. All three fields are MiniJinja templates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CampaignContent {
    pub subject: String,
    /// The preview line inbox lists show after the subject; may be empty.
    pub preheader: String,
    pub format: BodyFormat,
    pub body: String,
}

/// The sending workspace, as templates and the compliance footer see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    pub name: String,
    /// Physical postal address (CAN-SPAM); one or more lines.
    pub postal_address: String,
}

/// One reader, borrowed from the row being sent.
#[derive(Debug, Clone, Copy)]
pub struct Recipient<'a> {
    pub email: &'a str,
    /// May be empty: templates then see it as undefined, so `default("friend")` applies.
    pub name: &'a str,
    /// A JSON object of custom attributes (anything else is treated as no attributes).
    pub attributes: &'a serde_json::Value,
}

/// Per-message values that are not about the reader.
#[derive(Debug, Clone, Copy)]
pub struct MessageContext<'a> {
    /// This reader's one-click unsubscribe URL (`{{ unsubscribe_url }}`).
    pub unsubscribe_url: &'a str,
    /// This reader's copy of the mail on the web (`{{ web_version_url }}`); empty
    /// where there is none (a transactional message).
    pub web_version_url: &'a str,
}

/// A reader's subject, preheader and body HTML, before layout and footer.
#[derive(Clone, Debug)]
pub struct RenderedBody {
    pub subject: String,
    pub preheader: String,
    pub body: String,
}

/// A rendered message: a one-line subject, the full HTML document and its plain-text twin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rendered {
    pub subject: String,
    pub html: String,
    pub text: String,
}

/// A template mistake, positioned for the author: `body, line 3, column 7: unknown filter`, or
/// in a block document `body, block 3 (Paragraph): unknown filter` (its line in the generated
/// HTML would mean nothing to the author).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateError {
    /// `"subject"`, `"preheader"` or `"body"`.
    pub field: &'static str,
    /// 1-based.
    pub line: Option<usize>,
    /// 1-based, in characters.
    pub column: Option<usize>,
    pub message: String,
    /// The block (and its field) the mistake is in, for a block document's body (boxed: every
    /// render's result carries this error type).
    pub block: Option<Box<BlockAt>>,
}

/// Where in a block document a piece of template came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockAt {
    /// As the editor names the field's errors: `body.blocks.2.text`,
    /// `body.blocks.1.columns.0.blocks.0.href`.
    pub path: String,
    /// As the author sees it: `block 3 (Paragraph)`, `block 2 (Two columns), column 1, block 1 (Button)`.
    pub label: String,
}

impl TemplateError {
    /// The form field to mark: the block's field when known, else `subject`, `preheader` or `body`.
    pub fn location(&self) -> &str {
        self.block.as_ref().map_or(self.field, |b| b.path.as_str())
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field)?;
        if let Some(block) = &self.block {
            return write!(f, ", {}: {}", block.label, self.message);
        }
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
        }
        if let Some(column) = self.column {
            write!(f, ", column {column}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for TemplateError {}

impl From<TemplateError> for Error {
    fn from(e: TemplateError) -> Self {
        Error::invalid(e.to_string())
    }
}
