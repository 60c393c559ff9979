//! Network faults between a client and Postgres: a TCP proxy per worker, which the suite cuts
//! and heals (a partition), and one that drops connections as replies come back (a reply lost,
//! sometimes the reply to a COMMIT that took effect).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A TCP proxy between one worker and Postgres that the suite can cut and heal. Cut, it forwards
/// nothing either way and leaves every connection open (a new one hangs before it reaches
/// Postgres), as a network partition does: the worker's queries and lease renewals neither
/// fail nor finish, while the other workers go on. Healed, whatever was held back goes through.
pub(super) struct Partition {
    pub(super) port: u16,
    cut: Arc<AtomicBool>,
}

/// Connections dropped as a reply came back: each chunk Postgres sends is the last one with
/// probability `p` (in millionths), and then both sides of the connection close.
struct LostReplies {
    p: AtomicU64,
    rng: std::sync::Mutex<StdRng>,
    dropped: AtomicU64,
}

impl LostReplies {
    fn now(&self) -> bool {
        let p = self.p.load(Ordering::SeqCst);
        let lose = p > 0 && self.rng.lock().map(|mut r| r.gen_range(0..1_000_000) < p).unwrap_or(false);
        if lose {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
        lose
    }
}

/// A link to Postgres that loses replies: the proxy drops the connection, as a reset would, just
/// before handing on a chunk of Postgres's reply. Whatever that chunk answered has happened on
/// the server (a COMMIT among them); the client sees only a dead connection and tries again.
pub(super) struct LossyLink {
    pub(super) port: u16,
    lost: Arc<LostReplies>,
}

impl LossyLink {
    /// A link that loses nothing until [`Self::lose`] says how much.
    pub(super) async fn start(postgres_port: u16, seed: u64) -> anyhow::Result<Self> {
        let lost = Arc::new(LostReplies {
            p: AtomicU64::new(0),
            rng: std::sync::Mutex::new(StdRng::seed_from_u64(seed)),
            dropped: 0.into(),
        });
        let port = proxy(postgres_port, Arc::new(AtomicBool::new(false)), Some(lost.clone())).await?;
        Ok(Self { port, lost })
    }

    /// From now on, each chunk of a reply is lost with a probability of `per_million` in a million.
    pub(super) fn lose(&self, per_million: u64) {
        self.lost.p.store(per_million, Ordering::SeqCst);
    }

    /// How many connections it has dropped mid-reply.
    pub(super) fn dropped(&self) -> u64 {
        self.lost.dropped.load(Ordering::SeqCst)
    }
}

/// Listens on a port of its own and forwards each connection to Postgres, through `cut` and,
/// from Postgres back, `lost`.
async fn proxy(postgres_port: u16, cut: Arc<AtomicBool>, lost: Option<Arc<LostReplies>>) -> anyhow::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let cut = cut.clone();
            let lost = lost.clone();
            tokio::spawn(async move {
                while cut.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", postgres_port)).await else {
                    return;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                // A reply dropped closes the connection both ways: the client side's pump ends
                // when the client, seeing the connection dead, closes it.
                tokio::join!(
                    pump(client_read, server_write, cut.clone(), None),
                    pump(server_read, client_write, cut, lost)
                );
            });
        }
    });
    Ok(port)
}

impl Partition {
    pub(super) async fn start(postgres_port: u16) -> anyhow::Result<Self> {
        let cut = Arc::new(AtomicBool::new(false));
        let port = proxy(postgres_port, cut.clone(), None).await?;
        Ok(Self { port, cut })
    }

    /// Cuts the link for `span`, then heals it (in the background, as `Workers::freeze` does).
    pub(super) fn cut_for(&self, span: Duration) {
        self.cut.store(true, Ordering::SeqCst);
        let cut = self.cut.clone();
        tokio::spawn(async move {
            tokio::time::sleep(span).await;
            cut.store(false, Ordering::SeqCst);
        });
    }
}

/// Copies one direction of a proxied connection, holding each chunk while the link is cut, and
/// ending it (as a reset would) when `lost` says this chunk is lost.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: Arc<AtomicBool>,
    lost: Option<Arc<LostReplies>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0_u8; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        while cut.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if lost.as_ref().is_some_and(|l| l.now()) {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
