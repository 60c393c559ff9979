use super::*;

// The stream handed to lettre
// ---------------------------------------------------------------------------------------------

/// The socket, plain or inside lettre's TLS.
#[derive(Debug)]
pub(super) enum Io {
    Tcp(TcpStream),
    Tls(Box<LettreStream>),
}

impl Io {
    #[allow(deprecated)]
    pub(super) async fn upgrade(self, host: &str) -> Result<Self, SmtpError> {
        let Io::Tcp(tcp) = self else { return Ok(self) };
        let params = TlsParameters::new(host.to_string())
            .map_err(|e| SmtpError::permanent(SmtpStage::Connect, format!("TLS set-up: {e}")))?;
        let mut stream = LettreStream::use_existing_tokio1(Box::new(tcp));
        stream
            .upgrade_tls(params)
            .await
            .map_err(|e| SmtpError::transient(SmtpStage::Connect, format!("TLS handshake: {e}")))?;
        Ok(Io::Tls(Box::new(stream)))
    }
}

impl AsyncRead for Io {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => {
                let dst = buf.initialize_unfilled();
                match FuturesRead::poll_read(Pin::new(&mut **s), cx, dst) {
                    Poll::Ready(Ok(n)) => {
                        buf.advance(n);
                        Poll::Ready(Ok(()))
                    }
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => FuturesWrite::poll_write(Pin::new(&mut **s), cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => FuturesWrite::poll_flush(Pin::new(&mut **s), cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => FuturesWrite::poll_close(Pin::new(&mut **s), cx),
        }
    }
}

/// What the stream saw, shared between the stream (owned by lettre) and [`SmtpConnection`].
#[derive(Debug, Default)]
pub(super) struct Tap {
    /// Writes that moved at least one byte.
    writes: AtomicU64,
    /// The last five bytes written, big-endian in the low 40 bits.
    tail: AtomicU64,
    /// What the server sent after lettre's first write (EHLO) and before its second.
    pub(super) ehlo_reply: Mutex<Vec<u8>>,
    /// While a fenced send runs: no byte is written once it closes (see [`crate::sending::lease`]).
    pub(super) fence: Mutex<Option<Fence>>,
    /// Set when a transaction failed (or a write was refused): nothing more reaches the socket,
    /// so data held back for a transaction that was given up can never follow it later (a
    /// QUIT on the way out would otherwise flush the end of a message counted as unsent).
    closed: AtomicBool,
}

/// `\r\n.\r\n` as [`Tap::tail`] holds it.
pub(super) const END_OF_DATA: u64 = u64::from_be_bytes([0, 0, 0, b'\r', b'\n', b'.', b'\r', b'\n']);
pub(super) const MAX_CAPTURE: usize = 16 * 1024;

impl Tap {
    fn wrote(&self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        let mut tail = self.tail.load(Ordering::Relaxed);
        for &b in &data[data.len().saturating_sub(5)..] {
            tail = ((tail << 8) | u64::from(b)) & 0xff_ffff_ffff;
        }
        self.tail.store(tail, Ordering::Relaxed);
    }

    fn read(&self, data: &[u8]) {
        if !data.is_empty() && self.writes.load(Ordering::Relaxed) == 1 {
            let mut captured = self.ehlo_reply.lock().unwrap_or_else(PoisonError::into_inner);
            let room = MAX_CAPTURE.saturating_sub(captured.len());
            captured.extend_from_slice(&data[..data.len().min(room)]);
        }
    }

    /// No further byte is written to this connection.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }

    /// Writes that reached the socket.
    #[cfg(test)]
    pub(super) fn socket_writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// The end-of-data marker was the last thing written. Right after the DATA command the tail
    /// is `ATA\r\n`, so this cannot be a previous message's marker.
    pub(super) fn end_of_data_sent(&self) -> bool {
        self.tail.load(Ordering::Relaxed) == END_OF_DATA
    }
}

/// The stream lettre speaks over: replays what we already read (the banner), then reads and
/// writes the socket, telling the [`Tap`] what went by.
///
/// Writes reach the socket at lettre's flush, and only whole lines do: lettre writes a message's
/// data (which [`data_body`] hands it without its last CRLF) and the end-of-data marker as two
/// writes, each flushed, so without holding the partial line back every message cost a second
/// write, a second TCP segment and a second wake-up of the server. Every SMTP command, and the
/// data with its marker, ends in CRLF, and a server cannot act on half a line: holding one back
/// until the rest comes changes nothing it sees but the number of segments. A transaction given
/// up with its data held back never sent that data (and the fence is checked before each write
/// that does reach the socket).
#[derive(Debug)]
pub(super) struct TappedStream {
    io: Io,
    replay: Vec<u8>,
    replayed: usize,
    /// Written by lettre, not yet by us; `pending[sent..]` is still to go.
    pending: Vec<u8>,
    sent: usize,
    tap: Arc<Tap>,
}

impl TappedStream {
    /// `io`, which first replays `replay` (what was read before lettre took over), with `tap`
    /// watching what is written.
    pub(super) fn new(io: Io, replay: Vec<u8>, tap: Arc<Tap>) -> Self {
        Self { io, replay, replayed: 0, pending: Vec::new(), sent: 0, tap }
    }

    /// Writes what is pending to the socket, unless it ends in the middle of a line.
    fn poll_send_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.tap.closed.load(Ordering::Relaxed) {
            self.pending = Vec::new();
            self.sent = 0;
            return Poll::Ready(Err(io::Error::other("this connection failed earlier; nothing more is written")));
        }
        if !self.pending.ends_with(b"\r\n") {
            return Poll::Ready(Ok(()));
        }
        while self.sent < self.pending.len() {
            // The fence is checked right before each write reaches the socket: the end-of-data
            // marker can only be written while the sender still owns the message.
            if self.tap.fence.lock().unwrap_or_else(PoisonError::into_inner).as_ref().is_some_and(|f| !f.is_open()) {
                self.tap.close();
                self.pending = Vec::new();
                self.sent = 0;
                return Poll::Ready(Err(io::Error::other("fenced: the sender no longer owns this message")));
            }
            match Pin::new(&mut self.io).poll_write(cx, &self.pending[self.sent..]) {
                Poll::Ready(Ok(0)) => {
                    self.tap.close();
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => {
                    let n = n.min(self.pending.len() - self.sent);
                    self.tap.wrote(&self.pending[self.sent..self.sent + n]);
                    self.sent += n;
                }
                Poll::Ready(Err(e)) => {
                    self.tap.close();
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        self.pending.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for TappedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.replayed < this.replay.len() {
            let n = (this.replay.len() - this.replayed).min(buf.remaining());
            buf.put_slice(&this.replay[this.replayed..this.replayed + n]);
            this.replayed += n;
            if this.replayed == this.replay.len() {
                this.replay = Vec::new();
                this.replayed = 0;
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            this.tap.read(&buf.filled()[before..]);
        }
        poll
    }
}

impl AsyncWrite for TappedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // What an earlier flush could not finish goes first, so the order on the wire holds.
        if this.sent > 0 || this.tap.closed.load(Ordering::Relaxed) {
            ready!(this.poll_send_pending(cx))?;
        }
        this.pending.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send_pending(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send_pending(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

impl AsyncTokioStream for TappedStream {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.io {
            Io::Tcp(s) => s.peer_addr(),
            Io::Tls(s) => s.peer_addr(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
