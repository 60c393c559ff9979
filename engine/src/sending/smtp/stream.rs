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

    /// The end-of-data marker was the last thing written. Right after the DATA command the tail
    /// is `ATA\r\n`, so this cannot be a previous message's marker.
    pub(super) fn end_of_data_sent(&self) -> bool {
        self.tail.load(Ordering::Relaxed) == END_OF_DATA
    }
}

/// The stream lettre speaks over: replays what we already read (the banner), then reads and
/// writes the socket, telling the [`Tap`] what went by.
#[derive(Debug)]
pub(super) struct TappedStream {
    io: Io,
    replay: Vec<u8>,
    replayed: usize,
    tap: Arc<Tap>,
}

impl TappedStream {
    /// `io`, which first replays `replay` (what was read before lettre took over), with `tap`
    /// watching what is written.
    pub(super) fn new(io: Io, replay: Vec<u8>, tap: Arc<Tap>) -> Self {
        Self { io, replay, replayed: 0, tap }
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
        // The fence is checked right before each write reaches the socket: the end-of-data
        // marker can only be written while the sender still owns the message.
        if this.tap.fence.lock().unwrap_or_else(PoisonError::into_inner).as_ref().is_some_and(|f| !f.is_open()) {
            return Poll::Ready(Err(io::Error::other("fenced: the sender no longer owns this message")));
        }
        let poll = Pin::new(&mut this.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            this.tap.wrote(&buf[..n.min(buf.len())]);
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
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
