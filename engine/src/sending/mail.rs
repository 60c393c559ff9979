//! Outgoing mail over real SMTP (lettre). In dev the default server is the built-in catcher
//! (the SMTP sink in `herald-devtools`); in production `HERALD_SMTP_URL` names the relay.

use lettre::message::{Mailbox, MultiPart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde::{Deserialize, Serialize};

use crate::domain::Email;
use crate::error::{Error, Result};

/// One message to one recipient, already rendered.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct OutgoingMail {
    pub to: String,
    pub subject: String,
    pub html: String,
    pub text: String,
    /// Who it says it is from. Absent in jobs queued before it existed: Herald.
    #[serde(default)]
    pub from: MailFrom,
}

/// Who a system mail is from. A reader's opt-in confirmation is the workspace's mail, not
/// Herald's: it comes from the workspace's own sender when that domain is verified (and signed
/// with its DKIM key), else from Herald's address under the workspace's name (it came
/// from `noreply@localhost`, a name no reader knows).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub enum MailFrom {
    /// Herald's own address (`HERALD_MAIL_FROM`): account mail, invites, approvals.
    #[default]
    Herald,
    /// Herald's address, named "<workspace> via <Herald's name>".
    HeraldFor { workspace: String },
    /// The workspace's sender, on a domain it verified with its DKIM key published; `workspace`
    /// names it the [`MailFrom::HeraldFor`] way should that key be gone when it is sent.
    Workspace { tenant: crate::domain::TenantId, workspace: String, name: String, email: String },
}

#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mailer(from {})", self.from)
    }
}

impl Mailer {
    /// `url` is lettre's SMTP URL syntax: `smtp://host:port` (plain), `smtp://host:587?tls=required`
    /// (STARTTLS) or `smtps://user:pass@host:465` (TLS).
    pub fn from_url(url: &str, from: &str) -> anyhow::Result<Self> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|e| anyhow::anyhow!("HERALD_SMTP_URL is not a valid SMTP URL: {e}"))?
            .build();
        let from: Mailbox = from.parse().map_err(|e| anyhow::anyhow!("invalid sender address {from:?}: {e}"))?;
        Ok(Self { transport, from })
    }

    /// Sends one message with an HTML and a plain-text part, DKIM-signed when `dkim` is given
    /// (a workspace's own sender). Subjects, names and addresses are checked for CR/LF (header
    /// injection) before they reach lettre.
    #[tracing::instrument(skip_all, fields(to = %mail.to))]
    pub async fn send(&self, mail: &OutgoingMail, dkim: Option<&crate::sending::message::DkimSigner>) -> Result<()> {
        let to = Email::parse(&mail.to)?;
        if mail.subject.chars().any(char::is_control) {
            return Err(Error::invalid("The subject must be one line."));
        }
        let to: Mailbox =
            to.as_str().parse().map_err(|_| Error::invalid(format!("“{}” is not a valid email address", mail.to)))?;
        let message = Message::builder()
            .from(self.sender_mailbox(&mail.from)?)
            .to(to)
            .subject(mail.subject.clone())
            .multipart(MultiPart::alternative_plain_html(mail.text.clone(), mail.html.clone()))
            .map_err(|e| Error::Unexpected(anyhow::anyhow!("building message: {e}")))?;
        let sent = match dkim {
            None => self.transport.send(message).await.map(drop),
            Some(dkim) => {
                let signed = dkim.sign(&message.formatted())?;
                self.transport.send_raw(message.envelope(), &signed).await.map(drop)
            }
        };
        sent.map_err(|e| Error::Unexpected(anyhow::anyhow!("SMTP send failed: {e}")))
    }

    /// The From header for `from`. Names are made one line (no header injection) and short.
    fn sender_mailbox(&self, from: &MailFrom) -> Result<Mailbox> {
        let one_line = |s: &str| {
            s.split(char::is_control).collect::<Vec<_>>().join(" ").trim().chars().take(80).collect::<String>()
        };
        Ok(match from {
            MailFrom::Herald => self.from.clone(),
            MailFrom::HeraldFor { workspace } => {
                let herald = self.from.name.clone().unwrap_or_else(|| "Herald".into());
                Mailbox::new(Some(format!("{} via {herald}", one_line(workspace))), self.from.email.clone())
            }
            MailFrom::Workspace { name, email, .. } => {
                let address = Email::parse(email)?
                    .as_str()
                    .parse()
                    .map_err(|_| Error::invalid(format!("“{email}” is not a valid sender address")))?;
                Mailbox::new(Some(one_line(name)).filter(|n| !n.is_empty()), address)
            }
        })
    }
}

/// Longest name a system mail's subject quotes (workspace, inviter).
const SUBJECT_NAME_CHARS: usize = 40;

/// A user-chosen name as it may appear in a system mail's subject: one line, at most
/// [`SUBJECT_NAME_CHARS`] characters (with "…"), in quotation marks, so it reads as data inside
/// Herald's own sentence and cannot become the subject ("Your account is suspended, click…").
pub fn subject_name(name: &str) -> String {
    let one_line: String = name.split_whitespace().collect::<Vec<_>>().join(" ");
    let one_line: String = one_line.chars().filter(|c| !c.is_control()).collect();
    let mut short: String = one_line.chars().take(SUBJECT_NAME_CHARS).collect();
    if one_line.chars().count() > SUBJECT_NAME_CHARS {
        short = format!("{}…", short.trim_end());
    }
    format!("“{short}”")
}

pub use herald_types::html::escape_html;

#[cfg(test)]
mod tests {
    use super::subject_name;

    #[test]
    fn names_in_subjects_are_quoted_one_line_and_short() {
        assert_eq!(subject_name("Acme  Weekly"), "“Acme Weekly”");
        assert_eq!(subject_name("Evil\r\nBcc: x@y.z"), "“Evil Bcc: x@y.z”");
        let long = "Your account is suspended, verify your password at once or lose it";
        let quoted = subject_name(long);
        assert_eq!(quoted.chars().count(), 40 + 3, "{quoted}");
        assert!(quoted.ends_with("…”"), "{quoted}");
    }
}
