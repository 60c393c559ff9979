//! Provider webhooks through the real endpoint: signatures checked, events matched to the send
//! log, applied exactly once, and their effects on the next campaign. The providers' signature
//! schemes themselves (SNS certificates, SendGrid ECDSA, ...) have unit tests with keys made in
//! the test (engine/src/webhooks).

use herald_engine::CampaignId;
use herald_engine::campaigns::stats;
use herald_engine::sending::identities;
use herald_engine::webhooks::sign_generic;
use herald_engine::{Role, TenantId};
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

use crate::helpers::TestResult;
use crate::sending::{SendHarness, addresses};

const SECRET: &str = "generic-webhook-secret-0123456789";

/// A harness with `n` readers, a sending identity taking generic webhooks, and one campaign sent.
struct Hooked {
    h: SendHarness,
    campaign: CampaignId,
    url: String,
}

async fn hooked(n: usize, provider: &str, secret: &str) -> anyhow::Result<Hooked> {
    let h = SendHarness::new(n).await?;
    let input = identities::IdentityInput {
        name: "Relay".into(),
        smtp_url: h.smtp.clone(),
        max_connections: 4,
        rate_per_second: 1000.0,
        burst: 100,
        ..Default::default()
    };
    let db = &h.app.app.db;
    let identity = identities::save(db, &h.app.app.signer, h.tenant, Role::Owner, None, &input).await?;
    let identity =
        identities::configure_webhook(db, &h.app.app.signer, h.tenant, Role::Owner, identity.id, provider, secret)
            .await?;
    let url = format!("{}/webhooks/{provider}/{}", h.app.base, identity.webhook_token.expect("token"));
    let campaign = h.campaign("First", vec![h.list]).await?;
    h.start(campaign).await?;
    let cx = h.worker(&h.identity(100_000.0, 1000)?, None);
    for r in h.deliver(&cx, campaign, 1).await {
        r?;
    }
    Ok(Hooked { h, campaign, url })
}

impl Hooked {
    async fn reader_id(&self, email: &str) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar("SELECT id FROM readers WHERE tenant_id = $1 AND email = $2")
            .bind(self.h.tenant)
            .bind(email)
            .fetch_one(&self.h.app.owner)
            .await?)
    }

    /// Our Message-ID for a reader's copy of the campaign.
    async fn message_id(&self, email: &str) -> anyhow::Result<String> {
        Ok(format!("<{}.{}@sender.test>", self.campaign, self.reader_id(email).await?))
    }

    async fn post_generic(&self, body: &Value, t: i64, secret: &str) -> anyhow::Result<(u16, Value)> {
        let raw = serde_json::to_vec(body)?;
        let r = reqwest::Client::new()
            .post(&self.url)
            .header("content-type", "application/json")
            .header("x-herald-signature", sign_generic(secret, t, &raw))
            .body(raw)
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    async fn counters(&self) -> anyhow::Result<stats::Counters> {
        Ok(stats::campaign(&self.h.app.app.db, self.h.tenant, self.campaign).await?.counters)
    }

    async fn suppression(&self, email: &str) -> anyhow::Result<Option<String>> {
        Ok(sqlx::query_scalar("SELECT reason FROM suppressions WHERE tenant_id = $1 AND email_lower = lower($2)")
            .bind(self.h.tenant)
            .bind(email)
            .fetch_optional(&self.h.app.owner)
            .await?)
    }
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[tokio::test]
async fn hard_bounce_suppresses_once_and_the_next_campaign_skips_the_address() -> TestResult {
    let k = hooked(3, "generic", SECRET).await?;
    let event = json!({
        "event_id": "evt-bounce-1", "type": "bounce", "bounce_type": "hard",
        "email": "reader1@example.com", "message_id": k.message_id("reader1@example.com").await?,
        "detail": "550 5.1.1 user unknown"
    });
    let (status, body) = k.post_generic(&event, now(), SECRET).await?;
    assert_eq!((status, &body["applied"], &body["unmatched"]), (200, &json!(1), &json!(0)), "{body}");
    // The same delivery again (providers retry): exactly one effect.
    for _ in 0..3 {
        let (status, body) = k.post_generic(&event, now(), SECRET).await?;
        assert_eq!((status, &body["duplicates"]), (200, &json!(1)), "{body}");
    }
    assert_eq!(k.suppression("reader1@example.com").await?.as_deref(), Some("hard_bounce"));
    assert_eq!(k.counters().await?.hard_bounces, 1);
    let bounces: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE kind = 'bounce_hard'").fetch_one(&k.h.app.owner).await?;
    assert_eq!(bounces, 1);

    // The next campaign to the same list skips the bounced address.
    k.h.sink.clear().await;
    let next = k.h.campaign("Second", vec![k.h.list]).await?;
    k.h.start(next).await?;
    let cx = k.h.worker(&k.h.identity(100_000.0, 1000)?, None);
    for r in k.h.deliver(&cx, next, 1).await {
        r?;
    }
    k.h.assert_exactly_once(&addresses("reader", 2..=3)).await;
    assert_eq!(k.h.status(next).await?.skipped, 1);
    Ok(())
}

#[tokio::test]
async fn complaint_unsubscribes_and_suppresses_and_soft_bounces_add_up() -> TestResult {
    let k = hooked(3, "generic", SECRET).await?;
    let complaint = json!({ "event_id": "c-1", "type": "complaint", "email": "reader2@example.com",
                            "message_id": k.message_id("reader2@example.com").await? });
    assert_eq!(k.post_generic(&complaint, now(), SECRET).await?.0, 200);
    let reader2 = k.reader_id("reader2@example.com").await?;
    let (status, subscribed): (String, i64) = sqlx::query_as(
        "SELECT r.status, (SELECT count(*) FROM subscriptions s WHERE s.reader_id = r.id AND s.status <> 'unsubscribed')
         FROM readers r WHERE r.id = $1",
    )
    .bind(reader2)
    .fetch_one(&k.h.app.owner)
    .await?;
    assert_eq!((status.as_str(), subscribed), ("unsubscribed", 0));
    assert_eq!(k.suppression("reader2@example.com").await?.as_deref(), Some("complaint"));
    assert_eq!(k.counters().await?.complaints, 1);

    // Soft bounces: two leave the address alone, the third (the default limit) suppresses it.
    for i in 1..=3 {
        let soft = json!({ "event_id": format!("s-{i}"), "type": "bounce", "bounce_type": "soft",
                           "email": "reader3@example.com", "message_id": k.message_id("reader3@example.com").await? });
        assert_eq!(k.post_generic(&soft, now(), SECRET).await?.0, 200);
        let expected = if i < 3 { None } else { Some("soft_bounce") };
        assert_eq!(k.suppression("reader3@example.com").await?.as_deref(), expected, "after {i} soft bounces");
    }
    assert_eq!(k.counters().await?.soft_bounces, 3);

    // Delivered reports count once per message.
    for id in ["d-1", "d-2"] {
        let delivered = json!({ "event_id": id, "type": "delivered", "email": "reader1@example.com",
                                "message_id": k.message_id("reader1@example.com").await? });
        assert_eq!(k.post_generic(&delivered, now(), SECRET).await?.0, 200);
    }
    assert_eq!(k.counters().await?.delivered, 1);
    Ok(())
}

#[tokio::test]
async fn unverifiable_webhooks_are_refused_and_record_nothing() -> TestResult {
    let k = hooked(1, "generic", SECRET).await?;
    let event = json!({ "event_id": "x-1", "type": "complaint", "email": "reader1@example.com" });
    let raw = serde_json::to_vec(&event)?;
    let client = reqwest::Client::new();
    // Wrong secret, stale timestamp, missing signature, tampered body.
    assert_eq!(k.post_generic(&event, now(), "not-the-secret").await?.0, 401);
    assert_eq!(k.post_generic(&event, now() - 3600, SECRET).await?.0, 401);
    let r = client.post(&k.url).body(raw.clone()).send().await?;
    assert_eq!(r.status(), 401);
    let mut tampered = raw.clone();
    let at = tampered.iter().position(|b| *b == b'1').expect("a digit");
    tampered[at] = b'2';
    let r = client
        .post(&k.url)
        .header("x-herald-signature", sign_generic(SECRET, now(), &raw))
        .body(tampered)
        .send()
        .await?;
    assert_eq!(r.status(), 401);
    // An unknown token, or the right token under another provider's path: no such webhook.
    let token = k.url.rsplit('/').next().expect("token");
    let bogus = format!("{}/webhooks/generic/{}", k.h.app.base, "A".repeat(32));
    assert_eq!(client.post(&bogus).body(raw.clone()).send().await?.status(), 404);
    let wrong_provider = format!("{}/webhooks/mailgun/{token}", k.h.app.base);
    assert_eq!(client.post(&wrong_provider).body(raw.clone()).send().await?.status(), 404);
    // A verified but unreadable payload.
    assert_eq!(k.post_generic(&json!({ "hello": "world" }), now(), SECRET).await?.0, 400);

    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_events").fetch_one(&k.h.app.owner).await?;
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events").fetch_one(&k.h.app.owner).await?;
    assert_eq!((seen, events), (0, 0));
    assert_eq!(k.suppression("reader1@example.com").await?, None);
    Ok(())
}

#[tokio::test]
async fn one_workspace_webhook_cannot_touch_another_workspace() -> TestResult {
    let k = hooked(1, "generic", SECRET).await?;
    // Another workspace with the same address on its list.
    let other = TenantId::new();
    sqlx::query("INSERT INTO tenants (id, name, slug) VALUES ($1, 'Other', $2)")
        .bind(other)
        .bind(format!("other-{}", &Uuid::new_v4().simple().to_string()[..8]))
        .execute(&k.h.app.owner)
        .await?;
    sqlx::query("INSERT INTO readers (tenant_id, email) VALUES ($1, 'reader1@example.com')")
        .bind(other)
        .execute(&k.h.app.owner)
        .await?;
    let event = json!({ "event_id": "c-x", "type": "complaint", "email": "reader1@example.com" });
    assert_eq!(k.post_generic(&event, now(), SECRET).await?.0, 200);
    let other_suppressed: i64 = sqlx::query_scalar("SELECT count(*) FROM suppressions WHERE tenant_id = $1")
        .bind(other)
        .fetch_one(&k.h.app.owner)
        .await?;
    let other_status: String = sqlx::query_scalar("SELECT status FROM readers WHERE tenant_id = $1")
        .bind(other)
        .fetch_one(&k.h.app.owner)
        .await?;
    assert_eq!((other_suppressed, other_status.as_str()), (0, "active"));
    assert_eq!(k.suppression("reader1@example.com").await?.as_deref(), Some("complaint"));
    Ok(())
}

#[tokio::test]
async fn mailgun_and_postmark_deliveries_are_verified() -> TestResult {
    // Mailgun: HMAC-SHA256 of timestamp + token with the signing key.
    let key = "mailgun-signing-key-123";
    let k = hooked(1, "mailgun", key).await?;
    let sign = |ts: &str, token: &str, key: &str| {
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).expect("key");
        mac.update(format!("{ts}{token}").as_bytes());
        hex::encode(mac.finalize().into_bytes())
    };
    let ts = now().to_string();
    let payload = |signature: String| {
        json!({
            "signature": { "timestamp": ts, "token": "tok-1", "signature": signature },
            "event-data": { "event": "failed", "severity": "permanent", "id": "mg-1", "recipient": "reader1@example.com",
                            "timestamp": 1.7e9, "message": { "headers": { "message-id": "unknown@elsewhere" } } }
        })
    };
    let client = reqwest::Client::new();
    let bad = client.post(&k.url).json(&payload(sign(&ts, "tok-1", "wrong-key"))).send().await?;
    assert_eq!(bad.status(), 401);
    assert_eq!(k.suppression("reader1@example.com").await?, None);
    let good = client.post(&k.url).json(&payload(sign(&ts, "tok-1", key))).send().await?;
    assert_eq!(good.status(), 200);
    assert_eq!(k.suppression("reader1@example.com").await?.as_deref(), Some("hard_bounce"));
    // Mailgun signs the token, not the event data: the same signature block lifted onto other
    // event data is a replay, and is not applied.
    let mut replay = payload(sign(&ts, "tok-1", key));
    replay["event-data"]["id"] = json!("mg-2");
    replay["event-data"]["event"] = json!("complained");
    let r: serde_json::Value = client.post(&k.url).json(&replay).send().await?.json().await?;
    assert_eq!((r["applied"].as_i64(), r["duplicates"].as_i64()), (Some(0), Some(1)), "{r}");

    // Postmark: basic auth.
    let p = hooked(1, "postmark", "hook:pa55word").await?;
    let bounce = json!({ "RecordType": "Bounce", "ID": 42, "Type": "HardBounce", "Email": "reader1@example.com",
                         "MessageID": "pm-1", "BouncedAt": "2026-11-23T10:00:00Z", "Description": "unknown user" });
    let r = client.post(&p.url).basic_auth("hook", Some("wrong")).json(&bounce).send().await?;
    assert_eq!(r.status(), 401);
    let r = client.post(&p.url).basic_auth("hook", Some("pa55word")).json(&bounce).send().await?;
    assert_eq!(r.status(), 200);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(p.suppression("reader1@example.com").await?.as_deref(), Some("hard_bounce"));
    Ok(())
}

/// A webhook URL can be replaced (the old one answers 404 at once), an SES webhook keeps the
/// first SNS topic it hears from, and changing provider or URL forgets that topic.
#[tokio::test]
async fn webhook_urls_rotate_and_ses_topics_stay_pinned() -> TestResult {
    let k = hooked(1, "generic", SECRET).await?;
    let (db, tenant) = (&k.h.app.app.db, k.h.tenant);
    let identity = identities::list(db, tenant).await?.into_iter().next().expect("identity");
    let body = json!({ "event_id": "e-rot-1", "type": "delivered", "email": "reader1@example.com" });
    assert_eq!(k.post_generic(&body, now(), SECRET).await?.0, 200);

    let rotated = identities::rotate_webhook(db, tenant, Role::Admin, identity.id).await?;
    assert_ne!(rotated.webhook_token, identity.webhook_token);
    assert_eq!(k.post_generic(&body, now(), SECRET).await?.0, 404, "the old URL is dead");
    let err = identities::rotate_webhook(db, tenant, Role::Author, identity.id).await.expect_err("admins only");
    assert!(matches!(err, herald_engine::Error::Forbidden), "{err:?}");

    // SES: the first topic wins, a second is refused, switching provider forgets it.
    let ses =
        identities::configure_webhook(db, &k.h.app.app.signer, tenant, Role::Admin, identity.id, "ses", "").await?;
    let mine = "arn:aws:sns:eu-west-1:111111111111:ses-events";
    assert!(identities::pin_sns_topic(db, tenant, ses.id, mine).await?);
    assert!(identities::pin_sns_topic(db, tenant, ses.id, mine).await?, "the same topic again");
    assert!(!identities::pin_sns_topic(db, tenant, ses.id, "arn:aws:sns:eu-west-1:999999999999:evil").await?);
    let token = identities::list(db, tenant).await?.into_iter().next().and_then(|i| i.webhook_token).expect("token");
    let target = identities::webhook_target(db, &k.h.app.app.signer, &token).await?.expect("target");
    assert_eq!(target.sns_topic.as_deref(), Some(mine));
    let rotated = identities::rotate_webhook(db, tenant, Role::Admin, ses.id).await?;
    assert_eq!(rotated.webhook_sns_topic, None, "a new URL forgets the topic");
    assert!(identities::pin_sns_topic(db, tenant, ses.id, mine).await?);
    let generic =
        identities::configure_webhook(db, &k.h.app.app.signer, tenant, Role::Admin, ses.id, "generic", SECRET).await?;
    assert_eq!(generic.webhook_sns_topic, None, "another provider forgets the topic");
    Ok(())
}
