use super::*;

// The connection
// ---------------------------------------------------------------------------------------------

/// One SMTP session, ready to send. Not shared: one message at a time.
pub struct SmtpConnection {
    conn: AsyncSmtpConnection,
    tap: Arc<Tap>,
    greeting: String,
    encrypted: bool,
    broken: bool,
    /// The server offers PIPELINING (RFC 2920): MAIL FROM, RCPT TO and DATA go out in one write
    /// and their replies are read together, one round trip where there were three.
    pipelining: bool,
    command_timeout: Duration,
    data_timeout: Duration,
}

impl fmt::Debug for SmtpConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpConnection")
            .field("server", &self.conn.server_info().to_string())
            .field("encrypted", &self.is_encrypted())
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

impl SmtpConnection {
    /// Connects (TCP with `TCP_NODELAY`, TLS as the server's settings say), reads the greeting,
    /// says EHLO and authenticates. `timeout` bounds all of it.
    pub async fn connect(server: &SmtpServer, timeout: Duration) -> Result<Self, SmtpError> {
        match tokio::time::timeout(timeout, Self::open(server)).await {
            Ok(result) => result,
            Err(_) => Err(SmtpError::transient(
                SmtpStage::Connect,
                format!(
                    "no ready SMTP session with {}:{} within {} s",
                    server.host,
                    server.port,
                    timeout.as_secs_f32()
                ),
            )),
        }
    }

    async fn open(server: &SmtpServer) -> Result<Self, SmtpError> {
        let stage = SmtpStage::Connect;
        let tcp = open_tcp(&server.host, server.port, server.egress.as_ref()).await?;
        let mut io = Io::Tcp(tcp);
        if server.tls == TlsMode::Implicit {
            io = io.upgrade(&server.host).await?;
        }
        let mut buf = Vec::with_capacity(512);
        let (code, len) = read_reply(&mut io, &mut buf).await?;
        let banner: Vec<u8> = buf.drain(..len).collect();
        if code != 220 {
            return Err(SmtpError::from_reply(stage, code, reply_text(&banner).trim()));
        }
        if matches!(server.tls, TlsMode::StartTls | TlsMode::Opportunistic) {
            io.write_all(format!("EHLO {}\r\n", server.helo).as_bytes()).await.map_err(|e| io_error(stage, &e))?;
            let (code, len) = read_reply(&mut io, &mut buf).await?;
            let ehlo: Vec<u8> = buf.drain(..len).collect();
            let offers_starttls = code == 250 && offers(&String::from_utf8_lossy(&ehlo), "STARTTLS");
            if offers_starttls {
                io.write_all(b"STARTTLS\r\n").await.map_err(|e| io_error(stage, &e))?;
                let (code, len) = read_reply(&mut io, &mut buf).await?;
                if code != 220 {
                    return Err(SmtpError::from_reply(stage, code, reply_text(&buf[..len]).trim()));
                }
                // Anything the server sent after its 220 and before TLS is an injection attempt
                // (RFC 3207 §6): never let it reach the encrypted session.
                buf.clear();
                io = io.upgrade(&server.host).await?;
            } else if server.tls == TlsMode::StartTls {
                return Err(SmtpError::transient(stage, "the server does not offer STARTTLS (tls=required)"));
            }
        }
        let encrypted = matches!(io, Io::Tls(_));
        let tap = Arc::new(Tap::default());
        let mut replay = banner.clone();
        replay.extend_from_slice(&buf);
        let stream = TappedStream::new(io, replay, tap.clone());
        let hello = ClientId::Domain(server.helo.clone());
        let mut conn = AsyncSmtpConnection::connect_with_transport(Box::new(stream), &hello)
            .await
            .map_err(|e| from_lettre(&e, stage, false))?;
        if let Some((user, password)) = &server.credentials {
            conn.auth(DEFAULT_MECHANISMS, &Credentials::new(user.clone(), password.clone()))
                .await
                .map_err(|e| from_lettre(&e, SmtpStage::Auth, false))?;
        }
        let ehlo = std::mem::take(&mut *tap.ehlo_reply.lock().unwrap_or_else(PoisonError::into_inner));
        let ehlo = reply_text(&ehlo);
        let greeting = format!("{}\n{}", reply_text(&banner).trim_end(), ehlo.trim_end());
        let pipelining = offers(&ehlo, "PIPELINING");
        Ok(Self {
            conn,
            tap,
            greeting: greeting.trim().to_string(),
            encrypted,
            broken: false,
            pipelining,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            data_timeout: DEFAULT_DATA_TIMEOUT,
        })
    }

    /// The server's banner and EHLO reply (inside TLS when there is TLS), one reply line a line,
    /// e.g. `220 mx.example ESMTP ready\n250-mx.example\n250-8BITMIME\n250 SIZE 26214400`.
    pub fn greeting(&self) -> &str {
        &self.greeting
    }

    /// Writes that reached the socket since the connection opened.
    #[cfg(test)]
    pub(super) fn socket_writes(&self) -> u64 {
        self.tap.socket_writes()
    }

    /// Whether the session runs inside TLS (implicit or STARTTLS). lettre's own
    /// `is_encrypted` says false: to lettre our stream is "plain TCP", whatever is inside.
    pub fn is_encrypted(&self) -> bool {
        self.encrypted
    }

    /// Sets the time allowed for each command and for the message data with its reply
    /// (defaults [`DEFAULT_COMMAND_TIMEOUT`] and [`DEFAULT_DATA_TIMEOUT`]).
    pub fn set_timeouts(&mut self, command: Duration, data: Duration) {
        self.command_timeout = command;
        self.data_timeout = data;
    }

    /// False once an error left the session in an unknown state.
    pub fn is_usable(&self) -> bool {
        !self.broken && !self.conn.has_broken()
    }

    /// Sends one message to one recipient: MAIL FROM, RCPT TO, DATA, the message (line endings
    /// made CRLF, dot-stuffed, end marker added). Returns the server's final reply text, e.g.
    /// `2.0.0 OK queued as 17`. An empty `envelope_from` sends the null reverse-path (`<>`).
    ///
    /// Addresses with CR, LF, other control characters, spaces or angle brackets are refused
    /// before any byte goes out (SMTP command injection); so is a recipient lettre cannot parse.
    ///
    /// **After any error, discard the connection** (drop it, or [`quit`](Self::quit)) and open a
    /// new one: a half-done transaction leaves the server expecting something else ("503 sender
    /// already specified"). Sending again on a connection after an error fails at once.
    pub async fn send(&mut self, envelope_from: &str, rcpt_to: &str, raw_message: &[u8]) -> Result<String, SmtpError> {
        self.send_fenced(envelope_from, rcpt_to, raw_message, &Fence::always_open()).await
    }

    /// [`send`](Self::send) under a [`Fence`]: once the fence closes, no further byte is
    /// written and a transaction that has not written the end of its data is abandoned at once
    /// (an error of kind [`SmtpErrorKind::Fenced`]: not delivered). A transaction that has
    /// written it waits for the server's reply as usual: the message may already be delivered.
    pub async fn send_fenced(
        &mut self,
        envelope_from: &str,
        rcpt_to: &str,
        raw_message: &[u8],
        fence: &Fence,
    ) -> Result<String, SmtpError> {
        let (from, to) = envelope(envelope_from, rcpt_to)?;
        if !self.is_usable() {
            return Err(SmtpError::transient(SmtpStage::Connect, "this connection failed earlier; open a new one"));
        }
        if !fence.is_open() {
            return Err(SmtpError::fenced(SmtpStage::MailFrom));
        }
        *self.tap.fence.lock().unwrap_or_else(PoisonError::into_inner) = Some(fence.clone());
        let tap = self.tap.clone();
        let result = {
            let transaction = self.transaction(from, to, raw_message);
            tokio::pin!(transaction);
            tokio::select! {
                result = &mut transaction => result,
                _ = fence.closed() => {
                    if tap.end_of_data_sent() {
                        // Past the end of the data: only the reply is left to wait for.
                        transaction.await
                    } else {
                        Err(SmtpError::fenced(SmtpStage::Data))
                    }
                }
            }
        };
        *self.tap.fence.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let result = match result {
            // A write refused by the fence surfaces as an I/O error from lettre.
            Err(e) if !fence.is_open() && e.code.is_none() && !e.maybe_delivered() => Err(SmtpError::fenced(e.stage)),
            other => other,
        };
        if result.is_err() {
            self.broken = true;
            self.tap.close();
        }
        result
    }

    async fn transaction(&mut self, from: Option<Address>, to: Address, raw: &[u8]) -> Result<String, SmtpError> {
        let info = self.conn.server_info();
        let mut params = Vec::new();
        if !raw.is_ascii() {
            if !info.supports_feature(Extension::EightBitMime) {
                return Err(SmtpError::permanent(
                    SmtpStage::MailFrom,
                    "the message has 8-bit content and the server does not offer 8BITMIME",
                ));
            }
            params.push(MailParameter::Body(MailBodyParameter::EightBitMime));
        }
        let ascii = |a: &Address| AsRef::<str>::as_ref(a).is_ascii();
        let utf8_addresses = !ascii(&to) || from.as_ref().is_some_and(|f| !ascii(f));
        if utf8_addresses {
            if !info.supports_feature(Extension::SmtpUtfEight) {
                return Err(SmtpError::permanent(
                    SmtpStage::RcptTo,
                    "the address is not ASCII and the server does not offer SMTPUTF8",
                ));
            }
            params.push(MailParameter::SmtpUtfEight);
        }
        let limit = self.command_timeout;
        let (mail, rcpt) = (Mail::new(from, params), Rcpt::new(to, Vec::new()));
        let reply = if self.pipelining {
            // One write, three replies read in order. A refusal of any of them fails the
            // transaction (and the connection is never reused), so the replies still in flight
            // after it do not matter.
            let envelope = format!("{mail}{rcpt}{Data}");
            let reply = timed(SmtpStage::MailFrom, limit, self.conn.command(envelope)).await?;
            expect_2xx(SmtpStage::MailFrom, &reply)?;
            let reply = timed(SmtpStage::RcptTo, limit, self.conn.read_response()).await?;
            expect_2xx(SmtpStage::RcptTo, &reply)?;
            timed(SmtpStage::Data, limit, self.conn.read_response()).await?
        } else {
            let reply = timed(SmtpStage::MailFrom, limit, self.conn.command(mail)).await?;
            expect_2xx(SmtpStage::MailFrom, &reply)?;
            let reply = timed(SmtpStage::RcptTo, limit, self.conn.command(rcpt)).await?;
            expect_2xx(SmtpStage::RcptTo, &reply)?;
            timed(SmtpStage::Data, limit, self.conn.command(Data)).await?
        };
        if !reply.has_code(354) {
            return Err(SmtpError::transient(
                SmtpStage::Data,
                format!("expected 354 after DATA, got {} {}", u16::from(reply.code()), joined(&reply)),
            ));
        }
        let body = data_body(raw);
        let reply = match tokio::time::timeout(self.data_timeout, self.conn.message(&body)).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => return Err(from_lettre(&e, SmtpStage::Data, self.tap.end_of_data_sent())),
            Err(_) if self.tap.end_of_data_sent() => {
                return Err(SmtpError::transient(
                    SmtpStage::AfterData,
                    format!(
                        "no reply within {} s after the message data (the message may have been delivered)",
                        self.data_timeout.as_secs_f32()
                    ),
                ));
            }
            Err(_) => {
                return Err(SmtpError::transient(
                    SmtpStage::Data,
                    format!("could not write the message within {} s", self.data_timeout.as_secs_f32()),
                ));
            }
        };
        if reply.code().severity != Severity::PositiveCompletion {
            // A 3xx here is nonsense; whether the server kept the message is anyone's guess.
            return Err(SmtpError::new(
                SmtpErrorKind::Transient,
                Some(u16::from(reply.code())),
                format!("{} (unexpected reply to the message data; it may have been delivered)", joined(&reply)),
                SmtpStage::AfterData,
            ));
        }
        Ok(joined(&reply))
    }

    /// Says QUIT (waiting at most 5 s for the reply) and closes.
    pub async fn quit(mut self) {
        if self.is_usable() {
            let _ = tokio::time::timeout(QUIT_TIMEOUT, self.conn.quit()).await;
        }
    }
}

/// Checks and parses the envelope addresses. Nothing has been sent yet when this fails.
pub(super) fn envelope(envelope_from: &str, rcpt_to: &str) -> Result<(Option<Address>, Address), SmtpError> {
    let from = if envelope_from.is_empty() {
        None
    } else {
        check_address(envelope_from, SmtpStage::MailFrom)?;
        Some(
            Address::from_str(envelope_from)
                .map_err(|e| SmtpError::permanent(SmtpStage::MailFrom, format!("invalid sender address: {e}")))?,
        )
    };
    check_address(rcpt_to, SmtpStage::RcptTo)?;
    let to = Address::from_str(rcpt_to)
        .map_err(|e| SmtpError::permanent(SmtpStage::RcptTo, format!("invalid recipient address: {e}")))?;
    Ok((from, to))
}

pub(super) fn check_address(address: &str, stage: SmtpStage) -> Result<(), SmtpError> {
    if address.len() > MAX_ADDRESS_BYTES {
        return Err(SmtpError::permanent(stage, "the address is too long"));
    }
    if address.chars().any(|c| c.is_control() || c.is_whitespace() || c == '<' || c == '>') {
        return Err(SmtpError::permanent(
            stage,
            "the address contains control characters, spaces or angle brackets; refused before sending",
        ));
    }
    Ok(())
}

pub(super) async fn timed<T>(
    stage: SmtpStage,
    limit: Duration,
    fut: impl Future<Output = Result<T, LettreError>>,
) -> Result<T, SmtpError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(from_lettre(&e, stage, false)),
        Err(_) => Err(SmtpError::transient(stage, format!("no reply within {} s", limit.as_secs_f32()))),
    }
}

pub(super) fn expect_2xx(stage: SmtpStage, reply: &Response) -> Result<(), SmtpError> {
    if reply.code().severity == Severity::PositiveCompletion {
        Ok(())
    } else {
        Err(SmtpError::transient(stage, format!("unexpected reply {} {}", u16::from(reply.code()), joined(reply))))
    }
}

pub(super) fn joined(reply: &Response) -> String {
    let mut out = String::new();
    for line in reply.message() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
    }
    out
}

/// The message as lettre must get it: CRLF line endings (a bare LF would let "\n.\n" end the
/// data early on lenient servers), and no final CRLF, because lettre always appends
/// `\r\n.\r\n` (a message ending in CRLF would otherwise grow an empty line). lettre does the
/// dot-stuffing.
pub(super) fn data_body(raw: &[u8]) -> Cow<'_, [u8]> {
    let bare_lf = raw.iter().enumerate().any(|(i, &b)| b == b'\n' && (i == 0 || raw[i - 1] != b'\r'));
    if !bare_lf {
        return Cow::Borrowed(raw.strip_suffix(b"\r\n").unwrap_or(raw));
    }
    let mut out = Vec::with_capacity(raw.len() + raw.len() / 32);
    for (i, &b) in raw.iter().enumerate() {
        if b == b'\n' && (i == 0 || raw[i - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(b);
    }
    if out.ends_with(b"\r\n") {
        out.truncate(out.len() - 2);
    }
    Cow::Owned(out)
}

pub(super) async fn open_tcp(
    host: &str,
    port: u16,
    egress: Option<&crate::infra::egress::Egress>,
) -> Result<TcpStream, SmtpError> {
    let stage = SmtpStage::Connect;
    let addrs: Vec<std::net::SocketAddr> = match egress {
        // A tenant's server: only checked addresses, and the tenant learns nothing of the inside.
        Some(policy) => {
            let checked = async {
                policy.check_smtp_port(port)?;
                policy.resolve(host, port).await
            };
            checked.await.map_err(|refused| {
                tracing::info!(%host, port, %refused, "refused a tenant's SMTP destination");
                SmtpError::transient(stage, refused.generic())
            })?
        }
        None => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| SmtpError::transient(stage, format!("cannot resolve {host}: {e}")))?
            .collect(),
    };
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                // The point of opening the socket ourselves: see the module documentation.
                stream.set_nodelay(true).map_err(|e| io_error(stage, &e))?;
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => SmtpError::transient(stage, format!("cannot connect to {host}:{port}: {e}")),
        None => SmtpError::transient(stage, format!("{host} has no address")),
    })
}

/// Whether an EHLO reply (`250-host`, `250-KEYWORD params`…) offers the extension `keyword`.
pub(super) fn offers(ehlo: &str, keyword: &str) -> bool {
    ehlo.lines().any(|l| l.get(4..).is_some_and(|k| k.trim().eq_ignore_ascii_case(keyword)))
}

pub(super) fn io_error(stage: SmtpStage, e: &io::Error) -> SmtpError {
    SmtpError::transient(stage, format!("network error: {e}"))
}

pub(super) fn reply_text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).replace("\r\n", "\n")
}

/// Reads one complete (possibly multi-line) reply into `buf`; returns its code and length.
pub(super) async fn read_reply(io: &mut Io, buf: &mut Vec<u8>) -> Result<(u16, usize), SmtpError> {
    let stage = SmtpStage::Connect;
    let mut start = 0;
    loop {
        while let Some(nl) = buf[start..].iter().position(|&b| b == b'\n') {
            let line = &buf[start..start + nl + 1];
            let code = line
                .get(..3)
                .filter(|c| c.iter().all(u8::is_ascii_digit))
                .and_then(|c| std::str::from_utf8(c).ok())
                .and_then(|c| c.parse::<u16>().ok());
            let Some(code) = code else {
                return Err(SmtpError::transient(stage, "the server's reply is not SMTP"));
            };
            start += nl + 1;
            match line.get(3) {
                Some(b'-') => continue,
                Some(b' ' | b'\r' | b'\n') | None => return Ok((code, start)),
                Some(_) => return Err(SmtpError::transient(stage, "the server's reply is not SMTP")),
            }
        }
        if buf.len() > MAX_REPLY_BYTES {
            return Err(SmtpError::transient(stage, "the server's reply is too long"));
        }
        let n = io.read_buf(buf).await.map_err(|e| io_error(stage, &e))?;
        if n == 0 {
            return Err(SmtpError::transient(stage, "the server closed the connection"));
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// The provider's id for the message, when its 250 names one ("250 Ok: queued as 4B7D1", SES's
/// "250 Ok 0100018c…"): the last word, if it looks like an id rather than prose.
pub(crate) fn provider_id(reply: &str) -> Option<String> {
    let word = reply.split_whitespace().last()?.trim_matches(|c: char| matches!(c, '<' | '>' | '.' | ',' | ')' | '('));
    (word.len() >= 6 && word.len() <= 200 && word.chars().any(|c| c.is_ascii_digit()) && !word.contains('@'))
        .then(|| word.to_string())
}
