//! The SMTP client of the delivery workers: one connection, many messages, precise errors.
//!
//! Built on lettre's low-level [`AsyncSmtpConnection`], with the TCP (and TLS) stream opened
//! here rather than by lettre, for three reasons:
//!
//! - **Speed.** lettre 0.11.23 never sets `TCP_NODELAY`, and writes the end-of-data marker
//!   (`\r\n.\r\n`) as a write of its own. With Nagle on, that small write waits for the ACK of
//!   the body, which the server delays by 40 ms (it has nothing to say until it sees the marker):
//!   about 23 messages a second per connection. Our socket has `TCP_NODELAY`, and our stream
//!   sends only whole lines, so the data and its marker leave in one write ([`TappedStream`]).
//! - **Knowing whether a message may have been delivered.** The stream records the last bytes
//!   written, so an error after the whole DATA went out (but before the reply) is told apart
//!   from one before: [`SmtpError::maybe_delivered`].
//! - **Showing the server's greeting** (banner and EHLO reply) for the "send test" button.
//!
//! The banner (and for STARTTLS, the plaintext EHLO and STARTTLS exchange) is read here, then
//! replayed to lettre, which sends EHLO (again, inside TLS), authenticates and speaks the
//! transaction. One connection sends one message at a time, one recipient per message.

mod connection;
mod error;
mod stream;
#[cfg(test)]
mod tests;
mod url;

pub use connection::*;
pub use error::*;
use stream::*;
pub use url::*;

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::io::{AsyncRead as FuturesRead, AsyncWrite as FuturesWrite};
use lettre::Address;
use lettre::transport::smtp::Error as LettreError;
use lettre::transport::smtp::authentication::{Credentials, DEFAULT_MECHANISMS};
use lettre::transport::smtp::client::{AsyncSmtpConnection, AsyncTokioStream, TlsParameters};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};
use lettre::transport::smtp::response::{Response, Severity};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::sending::lease::Fence;

/// lettre's stream type: deprecated as "not meant to be public", but it is the only way to run
/// lettre's TLS (and its certificate store) over a socket we opened.
#[allow(deprecated)]
type LettreStream = lettre::transport::smtp::client::AsyncNetworkStream;

/// Time allowed for MAIL FROM, RCPT TO and DATA, each.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed to write the message and get the server's reply to it.
pub const DEFAULT_DATA_TIMEOUT: Duration = Duration::from_secs(60);
const QUIT_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_REPLY_BYTES: usize = 64 * 1024;
const MAX_ADDRESS_BYTES: usize = 320;

// ---------------------------------------------------------------------------------------------
