//! Open and click tokens. A token is `base64url(payload ‖ tag)`: a kind byte, the workspace,
//! the campaign, the reader (0 for anonymous tracking) and, for clicks, the link id, followed by
//! a 96-bit HMAC-SHA256 tag.
//!
//! The tag's key is derived per workspace from the server secret, so a token whose workspace
//! bytes were changed fails verification instead of reaching another workspace's campaign, and
//! verification needs no database read (the open endpoint never waits on Postgres).
//! Binary rather than the JSON `tokens::Signer` format: these land in every link of every
//! message, and a 75-character token keeps rewritten links short.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;

use crate::domain::TenantId;
use crate::infra::tokens::Signer;
use herald_types::MessageId;

const OPEN: u8 = b'o';
const CLICK: u8 = b'c';
/// Transactional messages: the "campaign" bytes hold the message id, the reader is 0, and a
/// click's link id is an index into the message's own link list.
const MESSAGE_OPEN: u8 = b'm';
const MESSAGE_CLICK: u8 = b'k';
const TAG_LEN: usize = 12;
const OPEN_LEN: usize = 1 + 16 + 16 + 8;
const CLICK_LEN: usize = OPEN_LEN + 8;

/// What a verified token points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub tenant: TenantId,
    pub campaign: Uuid,
    /// `None` under anonymous tracking.
    pub reader: Option<i64>,
}

#[derive(Clone)]
pub struct TrackingKeys {
    master: [u8; 32],
}

impl std::fmt::Debug for TrackingKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TrackingKeys(..)")
    }
}

/// One workspace's MAC state, computed once per delivery loop and cloned per token.
#[derive(Clone)]
pub struct WorkspaceMac(Hmac<Sha256>);

impl TrackingKeys {
    pub fn new(signer: &Signer) -> Self {
        Self { master: signer.derive_key("tracking") }
    }

    pub fn workspace(&self, tenant: TenantId) -> WorkspaceMac {
        #[allow(clippy::unwrap_used)] // HMAC takes keys of any length
        let mut kdf = Hmac::<Sha256>::new_from_slice(&self.master).unwrap();
        kdf.update(tenant.0.as_bytes());
        let key = kdf.finalize().into_bytes();
        #[allow(clippy::unwrap_used)]
        WorkspaceMac(Hmac::<Sha256>::new_from_slice(&key).unwrap())
    }

    /// The open pixel's token.
    pub fn open_token(&self, mac: &WorkspaceMac, target: &Target) -> String {
        seal(mac, &payload(OPEN, target, None))
    }

    /// A click token for one registered link.
    pub fn click_token(&self, mac: &WorkspaceMac, target: &Target, link: i64) -> String {
        seal(mac, &payload(CLICK, target, Some(link)))
    }

    /// A transactional message's open pixel token.
    pub fn message_open_token(&self, mac: &WorkspaceMac, tenant: TenantId, message: MessageId) -> String {
        seal(mac, &payload(MESSAGE_OPEN, &Target { tenant, campaign: message.0, reader: None }, None))
    }

    /// A click token for the `index`th link of a transactional message.
    pub fn message_click_token(&self, mac: &WorkspaceMac, tenant: TenantId, message: MessageId, index: i64) -> String {
        seal(mac, &payload(MESSAGE_CLICK, &Target { tenant, campaign: message.0, reader: None }, Some(index)))
    }

    /// Checks a message open token: the workspace and the message.
    pub fn verify_message_open(&self, token: &str) -> Option<(TenantId, MessageId)> {
        self.verify(token, MESSAGE_OPEN, OPEN_LEN).map(|(t, _)| (t.tenant, MessageId(t.campaign)))
    }

    /// Checks a message click token: the workspace, the message and the link's index.
    pub fn verify_message_click(&self, token: &str) -> Option<(TenantId, MessageId, i64)> {
        let (t, link) = self.verify(token, MESSAGE_CLICK, CLICK_LEN)?;
        Some((t.tenant, MessageId(t.campaign), link?))
    }

    /// Checks an open token. Anything malformed, truncated or forged is `None`.
    pub fn verify_open(&self, token: &str) -> Option<Target> {
        self.verify(token, OPEN, OPEN_LEN).map(|(t, _)| t)
    }

    /// Checks a click token; returns the target and link id.
    pub fn verify_click(&self, token: &str) -> Option<(Target, i64)> {
        let (t, link) = self.verify(token, CLICK, CLICK_LEN)?;
        Some((t, link?))
    }

    fn verify(&self, token: &str, kind: u8, len: usize) -> Option<(Target, Option<i64>)> {
        if token.len() > 128 {
            return None;
        }
        let raw = B64.decode(token).ok()?;
        if raw.len() != len + TAG_LEN || raw[0] != kind {
            return None;
        }
        let (body, tag) = raw.split_at(len);
        let tenant = TenantId(Uuid::from_slice(&body[1..17]).ok()?);
        let mut mac = self.workspace(tenant).0;
        mac.update(body);
        mac.verify_truncated_left(tag).ok()?;
        let campaign = Uuid::from_slice(&body[17..33]).ok()?;
        let reader = i64::from_be_bytes(body[33..41].try_into().ok()?);
        let link = (kind == CLICK || kind == MESSAGE_CLICK)
            .then(|| body[41..49].try_into().ok().map(i64::from_be_bytes))
            .flatten();
        Some((Target { tenant, campaign, reader: (reader > 0).then_some(reader) }, link))
    }
}

fn payload(kind: u8, target: &Target, link: Option<i64>) -> Vec<u8> {
    let mut p = Vec::with_capacity(CLICK_LEN + TAG_LEN);
    p.push(kind);
    p.extend_from_slice(target.tenant.0.as_bytes());
    p.extend_from_slice(target.campaign.as_bytes());
    p.extend_from_slice(&target.reader.unwrap_or(0).to_be_bytes());
    if let Some(link) = link {
        p.extend_from_slice(&link.to_be_bytes());
    }
    p
}

fn seal(mac: &WorkspaceMac, payload: &[u8]) -> String {
    let mut m = mac.0.clone();
    m.update(payload);
    let tag = m.finalize().into_bytes();
    let mut out = payload.to_vec();
    out.extend_from_slice(&tag[..TAG_LEN]);
    B64.encode(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn keys() -> TrackingKeys {
        TrackingKeys::new(&Signer::new(b"test secret key of some length....."))
    }

    fn target(reader: Option<i64>) -> Target {
        Target { tenant: TenantId(Uuid::new_v4()), campaign: Uuid::new_v4(), reader }
    }

    #[test]
    fn round_trips_and_keeps_kinds_apart() {
        let k = keys();
        let t = target(Some(42));
        let mac = k.workspace(t.tenant);
        let open = k.open_token(&mac, &t);
        let click = k.click_token(&mac, &t, 7);
        assert_eq!(k.verify_open(&open), Some(t));
        assert_eq!(k.verify_click(&click), Some((t, 7)));
        assert_eq!(k.verify_open(&click), None, "a click token is not an open token");
        assert_eq!(k.verify_click(&open), None);
        let anon = target(None);
        let open = k.open_token(&k.workspace(anon.tenant), &anon);
        assert_eq!(k.verify_open(&open).map(|t| t.reader), Some(None));
    }

    #[test]
    fn message_tokens_are_their_own_kind() {
        let k = keys();
        let t = target(None);
        let mac = k.workspace(t.tenant);
        let message = MessageId(t.campaign);
        let open = k.message_open_token(&mac, t.tenant, message);
        let click = k.message_click_token(&mac, t.tenant, message, 3);
        assert_eq!(k.verify_message_open(&open), Some((t.tenant, message)));
        assert_eq!(k.verify_message_click(&click), Some((t.tenant, message, 3)));
        // A message token never passes as a campaign token, or the other way round.
        assert_eq!(k.verify_open(&open), None);
        assert_eq!(k.verify_click(&click), None);
        assert_eq!(k.verify_message_open(&k.open_token(&mac, &t)), None);
        assert_eq!(k.verify_message_click(&k.click_token(&mac, &t, 3)), None);
    }

    #[test]
    fn refuses_forged_truncated_and_other_workspace_tokens() {
        let k = keys();
        let t = target(Some(42));
        let token = k.click_token(&k.workspace(t.tenant), &t, 7);
        // Truncated.
        assert_eq!(k.verify_click(&token[..token.len() - 2]), None);
        assert_eq!(k.verify_click(""), None);
        assert_eq!(k.verify_click("%%%"), None);
        // Every single-byte change in the payload or tag.
        let raw = B64.decode(&token).expect("valid base64");
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 0x01;
            assert_eq!(k.verify_click(&B64.encode(&bad)), None, "byte {i} flipped");
        }
        // The same payload re-pointed at another workspace.
        let mut moved = raw.clone();
        moved[1..17].copy_from_slice(Uuid::new_v4().as_bytes());
        assert_eq!(k.verify_click(&B64.encode(&moved)), None);
        // Another server secret.
        let other = TrackingKeys::new(&Signer::new(b"another secret key .................."));
        assert_eq!(other.verify_click(&token), None);
    }
}
