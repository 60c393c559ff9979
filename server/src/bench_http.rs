//! The benchmarks' load generator: raw HTTP/1.1 on tokio over keep-alive connections (no client
//! library), so most of the CPU it shares with the server goes to the server.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One keep-alive connection sending requests back to back until `running` turns false.
/// Returns the latency of each answered request (µs) and the number of connection errors.
pub async fn client(
    addr: std::net::SocketAddr,
    request: impl Fn(usize) -> Vec<u8>,
    first: usize,
    ok_statuses: &[u16],
    running: Arc<AtomicBool>,
) -> (Vec<u32>, u64) {
    let mut latencies = Vec::with_capacity(100_000);
    let mut errors = 0;
    let mut i = first;
    let mut buf = vec![0u8; 4096];
    'connect: while running.load(Ordering::Relaxed) {
        let Ok(mut stream) = TcpStream::connect(addr).await else {
            errors += 1;
            continue;
        };
        let _ = stream.set_nodelay(true);
        while running.load(Ordering::Relaxed) {
            let bytes = request(i);
            i += 1;
            let sent = Instant::now();
            if stream.write_all(&bytes).await.is_err() {
                errors += 1;
                continue 'connect;
            }
            // Read one response: headers, then Content-Length bytes of body.
            let mut filled = 0;
            let (header_end, length) = loop {
                match stream.read(&mut buf[filled..]).await {
                    Ok(0) | Err(_) => {
                        errors += 1;
                        continue 'connect;
                    }
                    Ok(n) => filled += n,
                }
                if let Some(end) = buf[..filled].windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                        .unwrap_or(0);
                    break (end + 4, length);
                }
                if filled == buf.len() {
                    errors += 1;
                    continue 'connect;
                }
            };
            while filled < header_end + length {
                match stream.read(&mut buf[filled..]).await {
                    Ok(0) | Err(_) => {
                        errors += 1;
                        continue 'connect;
                    }
                    Ok(n) => filled += n,
                }
            }
            let status =
                std::str::from_utf8(buf.get(9..12).unwrap_or_default()).ok().and_then(|s| s.parse::<u16>().ok());
            let status_ok = status.is_some_and(|s| ok_statuses.contains(&s));
            if status_ok {
                latencies.push(sent.elapsed().as_micros().min(u32::MAX as u128) as u32);
            } else {
                errors += 1;
            }
        }
    }
    (latencies, errors)
}
