//! Turning a campaign and one reader into a complete RFC 5322 message.
//!
//! This runs once per recipient, so the expensive parts happen once per campaign:
//! [`CompiledCampaign::compile`] parses the subject, preheader and body templates into a
//! MiniJinja environment (and test-renders them so authors see mistakes before sending);
//! [`CompiledCampaign::render`] then only evaluates them for a reader, turns Markdown into HTML,
//! wraps it in the email layout and derives the text part; [`build_message`] assembles the
//! multipart/alternative message with the list headers and, when given a [`DkimSigner`], signs it.
//!
//! Safety rules: every value that comes from data (reader fields, attributes, workspace fields)
//! is HTML-escaped in the body (and, for Markdown bodies, Markdown-escaped so that a reader's
//! name cannot become a link); the subject and preheader are rendered without escaping but
//! collapsed to one line, and [`build_message`] refuses line breaks and control characters in
//! every other header value, so no data can inject a header.

mod blocks;
mod content;
mod dkim;
mod escape;
mod layout;
mod merge_tags;
mod mime;
mod template;
#[cfg(test)]
mod tests;
mod text;

use blocks::{BlockMap, mapped_body_template};
pub use blocks::{blocks_to_template, body_template};
pub use content::*;
pub use dkim::*;
pub(crate) use escape::*;
use layout::*;
pub use merge_tags::*;
pub use mime::*;
pub use template::*;
pub use text::*;

use std::fmt;
use std::sync::Arc;

use minijinja::AutoEscape;
use minijinja::value::Value;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::sending::template_sandbox::{Busy, Dialect, RenderFailure, TemplateSet, Turn};
