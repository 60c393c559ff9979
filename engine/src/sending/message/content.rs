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

/// A template mistake, positioned for the author: `body, line 3, column 7: unknown filter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateError {
    /// `"subject"`, `"preheader"` or `"body"`.
    pub field: &'static str,
    /// 1-based.
    pub line: Option<usize>,
    /// 1-based, in characters.
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field)?;
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
