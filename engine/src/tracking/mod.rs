//! Open and click tracking: tokens, link rewriting, the batching recorder, and telling privacy
//! prefetchers apart from people.

pub mod links;
pub mod recorder;
pub mod token;

pub use recorder::{Flusher, Hit, HitCounters, HitRecorder};
pub use token::{Target, TrackingKeys, WorkspaceMac};

use std::net::IpAddr;

/// The pixel: a transparent 1×1 GIF (43 bytes).
pub const PIXEL_GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff,
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02,
    0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// Whether an open looks like a privacy proxy loading every image on delivery rather than a
/// person reading. Apple Mail Privacy Protection fetches through Apple's relays (17.0.0.0/8)
/// with a bare `Mozilla/5.0` user agent. Proxies that fetch only when the reader opens
/// (Gmail's GoogleImageProxy, Yahoo) are real opens and are not flagged. Relays that use other
/// networks cannot be told apart; the stats page says so.
pub fn is_prefetch(ip: Option<IpAddr>, user_agent: Option<&str>) -> bool {
    let apple_net = matches!(ip, Some(IpAddr::V4(v4)) if v4.octets()[0] == 17);
    let bare_agent = user_agent.map(str::trim) == Some("Mozilla/5.0");
    apple_net || bare_agent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixel_is_a_gif() {
        assert_eq!(&PIXEL_GIF[..6], b"GIF89a");
        assert_eq!(PIXEL_GIF.len(), 43);
    }

    #[test]
    fn tells_apple_prefetch_from_people() {
        assert!(is_prefetch("17.58.1.2".parse().ok(), Some("Mozilla/5.0 (Macintosh)")));
        assert!(is_prefetch("203.0.113.9".parse().ok(), Some("Mozilla/5.0")));
        assert!(!is_prefetch("203.0.113.9".parse().ok(), Some("Mozilla/5.0 (Windows NT 10.0) Thunderbird/115")));
        assert!(!is_prefetch("66.249.84.1".parse().ok(), Some("Mozilla/5.0 (Windows NT 5.1) GoogleImageProxy")));
        assert!(!is_prefetch(None, None));
    }
}
