//! Network partitions: a TCP proxy per worker between it and Postgres, which the suite cuts and
//! heals.

use std::time::Duration;

/// A TCP proxy between one worker and Postgres that the suite can cut and heal. Cut, it forwards
/// nothing either way and leaves every connection open (a new one hangs before it reaches
/// Postgres), as a network partition does: the worker's queries and lease renewals neither
/// fail nor finish, while the other workers go on. Healed, whatever was held back goes through.
pub(super) struct Partition {
    pub(super) port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Partition {
    pub(super) async fn start(postgres_port: u16) -> anyhow::Result<Self> {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let shared = cut.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let cut = shared.clone();
                tokio::spawn(async move {
                    while cut.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", postgres_port)).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(pump(client_read, server_write, cut.clone()), pump(server_read, client_write, cut));
                });
            }
        });
        Ok(Self { port, cut })
    }

    /// Cuts the link for `span`, then heals it (in the background, as `Workers::freeze` does).
    pub(super) fn cut_for(&self, span: Duration) {
        use std::sync::atomic::Ordering;
        self.cut.store(true, Ordering::SeqCst);
        let cut = self.cut.clone();
        tokio::spawn(async move {
            tokio::time::sleep(span).await;
            cut.store(false, Ordering::SeqCst);
        });
    }
}

/// Copies one direction of a proxied connection, holding each chunk while the link is cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0_u8; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        while cut.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
