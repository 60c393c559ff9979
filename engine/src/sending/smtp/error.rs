use super::*;

// Errors
// ---------------------------------------------------------------------------------------------

/// What the caller should do about a failed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmtpErrorKind {
    /// Try again later: 4xx replies, timeouts, dropped connections, TLS and network errors.
    Transient,
    /// Do not retry this message (5xx), but the address itself is not known to be bad.
    Permanent,
    /// The server says the mailbox does not exist: suppress the address.
    HardBounce,
    /// The sender's [`Fence`] closed before the end of the message data was written (its lease
    /// may be gone, or its campaign was paused or cancelled): the message was not delivered, and
    /// this sender must not record anything about it but a release.
    Fenced,
}

/// How far the SMTP conversation got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmtpStage {
    /// TCP, TLS, greeting, EHLO, STARTTLS.
    Connect,
    /// AUTH.
    Auth,
    MailFrom,
    RcptTo,
    /// The DATA command, the message, or a reply refusing the message: not delivered.
    Data,
    /// The whole message (with its end marker) was written but no final reply came: the
    /// server may have accepted it. See [`SmtpError::maybe_delivered`].
    AfterData,
}

impl fmt::Display for SmtpStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SmtpStage::Connect => "connecting",
            SmtpStage::Auth => "AUTH",
            SmtpStage::MailFrom => "MAIL FROM",
            SmtpStage::RcptTo => "RCPT TO",
            SmtpStage::Data => "DATA",
            SmtpStage::AfterData => "after the message data",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmtpError {
    pub kind: SmtpErrorKind,
    /// The server's reply code, when the error is a reply.
    pub code: Option<u16>,
    /// The server's reply text (enhanced status code first, when it sent one), or what went wrong.
    pub message: String,
    pub stage: SmtpStage,
}

impl SmtpError {
    pub fn new(kind: SmtpErrorKind, code: Option<u16>, message: impl Into<String>, stage: SmtpStage) -> Self {
        Self { kind, code, message: message.into(), stage }
    }

    /// An error made of a server reply, classified by [`classify`].
    pub fn from_reply(stage: SmtpStage, code: u16, text: &str) -> Self {
        Self::new(classify(code, text, stage), Some(code), text, stage)
    }

    pub(super) fn transient(stage: SmtpStage, message: impl Into<String>) -> Self {
        Self::new(SmtpErrorKind::Transient, None, message, stage)
    }

    pub(super) fn fenced(stage: SmtpStage) -> Self {
        Self::new(
            SmtpErrorKind::Fenced,
            None,
            "stopped before the end of the data (lease lost, or the send was paused)",
            stage,
        )
    }

    pub(super) fn permanent(stage: SmtpStage, message: impl Into<String>) -> Self {
        Self::new(SmtpErrorKind::Permanent, None, message, stage)
    }

    /// True when the whole message was written and the connection failed (or timed out) before
    /// the server's reply: the server may have queued it. Retrying risks a duplicate; not
    /// retrying risks a loss. Record it as ambiguous either way.
    pub fn maybe_delivered(&self) -> bool {
        self.stage == SmtpStage::AfterData
    }

    pub fn is_hard_bounce(&self) -> bool {
        self.kind == SmtpErrorKind::HardBounce
    }

    pub fn is_transient(&self) -> bool {
        self.kind == SmtpErrorKind::Transient
    }
}

impl fmt::Display for SmtpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => write!(f, "{}: {code} {}", self.stage, self.message),
            None => write!(f, "{}: {}", self.stage, self.message),
        }
    }
}

impl std::error::Error for SmtpError {}

/// Classifies a negative reply: 4xx transient, 5xx permanent, and a 5xx that says the mailbox
/// does not exist a hard bounce.
///
/// A hard bounce is a 5xx at RCPT TO (or at the end of DATA: one recipient per message here)
/// whose enhanced status code is 5.1.1 (no such mailbox), 5.1.2 (no such domain), 5.1.3 (bad
/// address syntax) or 5.1.10 (null MX). Without an enhanced code, a 550/551/553 at RCPT TO whose
/// text says so ("user unknown", "no such user", "mailbox unavailable", "does not exist", ...).
/// An enhanced code other than those wins over the text: "550 5.7.1 mailbox unavailable" is a
/// policy refusal, not a bad address.
pub fn classify(code: u16, text: &str, stage: SmtpStage) -> SmtpErrorKind {
    match code {
        500..=599 => {}
        _ => return SmtpErrorKind::Transient,
    }
    if !matches!(stage, SmtpStage::RcptTo | SmtpStage::Data | SmtpStage::AfterData) {
        return SmtpErrorKind::Permanent;
    }
    let first = text.split_whitespace().next().unwrap_or("");
    if let Some(enhanced) = enhanced_code(first) {
        return if matches!(enhanced, "5.1.1" | "5.1.2" | "5.1.3" | "5.1.10") {
            SmtpErrorKind::HardBounce
        } else {
            SmtpErrorKind::Permanent
        };
    }
    const PHRASES: &[&str] = &[
        "user unknown",
        "unknown user",
        "no such user",
        "no such mailbox",
        "no such recipient",
        "mailbox unavailable",
        "mailbox not found",
        "mailbox does not exist",
        "does not exist",
        "recipient unknown",
        "unknown recipient",
        "invalid recipient",
        "invalid mailbox",
    ];
    if stage == SmtpStage::RcptTo && matches!(code, 550 | 551 | 553) {
        let lower = text.to_ascii_lowercase();
        if PHRASES.iter().any(|p| lower.contains(p)) {
            return SmtpErrorKind::HardBounce;
        }
    }
    SmtpErrorKind::Permanent
}

/// `5.1.1` from `5.1.1` (or `5.1.1:`): class.subject.detail, all digits.
pub(super) fn enhanced_code(word: &str) -> Option<&str> {
    let word = word.trim_end_matches([':', ',', ';']);
    let mut parts = word.split('.');
    let ok = |p: Option<&str>, max: usize| {
        p.is_some_and(|p| !p.is_empty() && p.len() <= max && p.bytes().all(|b| b.is_ascii_digit()))
    };
    (ok(parts.next(), 1) && ok(parts.next(), 3) && ok(parts.next(), 3) && parts.next().is_none()).then_some(word)
}

/// Turns a lettre error into ours. `terminator_sent`: the end-of-data marker went out.
pub(super) fn from_lettre(e: &LettreError, stage: SmtpStage, terminator_sent: bool) -> SmtpError {
    if let Some(code) = e.status() {
        let text = std::error::Error::source(e).map(|s| s.to_string()).unwrap_or_default();
        let stage = if stage == SmtpStage::AfterData { SmtpStage::Data } else { stage };
        return SmtpError::from_reply(stage, u16::from(code), &text);
    }
    if e.is_client() {
        // lettre refused before sending: no usable AUTH mechanism and the like.
        return SmtpError::permanent(stage, e.to_string());
    }
    // Network, TLS, an unparsable reply, or the connection closed ("incomplete response").
    let stage = if matches!(stage, SmtpStage::Data | SmtpStage::AfterData) && terminator_sent {
        SmtpStage::AfterData
    } else if stage == SmtpStage::AfterData {
        SmtpStage::Data
    } else {
        stage
    };
    let mut message = e.to_string();
    if stage == SmtpStage::AfterData {
        message.push_str(" (the message may have been delivered)");
    }
    SmtpError::transient(stage, message)
}

// ---------------------------------------------------------------------------------------------
