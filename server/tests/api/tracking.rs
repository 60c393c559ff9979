//! Opens and clicks through the real endpoints: tokens, redirects, batching, rollups, shutdown.
//! Messages are sent by the real delivery engine into the project's sink; the test follows the
//! pixel and links found in them.

use herald_engine::CampaignId;
use herald_engine::campaigns::stats;
use herald_engine::tracking::{Target, TrackingKeys};
use std::collections::BTreeSet;
use std::time::Duration;

use crate::helpers::TestResult;
use crate::sending::SendHarness;

/// The public URL the harness's workers put in messages; requests go to the test app instead.
const MAIL_BASE: &str = "https://news.herald.test";

const BODY: &str = "Hello {{ reader.name }}!\n\nRead [the post](https://blog.example/post?a=1&b=2) and \
[more](https://blog.example/more).\n\n[Unsubscribe]({{ unsubscribe_url }})";

/// A campaign with two links, sent to `readers` readers. Returns the harness and campaign id.
async fn sent_campaign(readers: usize, tracking: &str) -> anyhow::Result<(SendHarness, CampaignId)> {
    send_campaign(SendHarness::new(readers).await?, tracking).await
}

/// The campaign of [`sent_campaign`], sent by `h`.
async fn send_campaign(h: SendHarness, tracking: &str) -> anyhow::Result<(SendHarness, CampaignId)> {
    let input = herald_engine::campaigns::store::CampaignInput {
        name: "Tracked".into(),
        subject: "News".into(),
        from_email: "news@sender.test".into(),
        list_ids: vec![h.list.into()],
        body: BODY.into(),
        tracking: tracking.parse()?,
        ..Default::default()
    };
    let id =
        herald_engine::campaigns::store::create(&h.app.app.db, h.tenant, herald_engine::Role::Owner, &input).await?.id;
    h.start(id).await?;
    let cx = h.worker(&h.identity(100_000.0, 1000)?, None);
    for r in h.deliver(&cx, id, 2).await {
        r?;
    }
    Ok((h, id))
}

/// The pixel URL and the link URLs (in order) of the message to `rcpt`, pointed at the test app.
async fn urls_for(h: &SendHarness, rcpt: &str) -> (Option<String>, Vec<String>) {
    let mail = h.sink.wait_for_recipient(rcpt, Duration::from_secs(5)).await.expect("message arrived");
    let html = mail.parse().html.unwrap_or_default();
    let local = |u: &str| u.replace("&amp;", "&").replacen(MAIL_BASE, &h.app.base, 1);
    let mut pixel = None;
    let mut links = Vec::new();
    for part in html.split("src=\"").skip(1) {
        let url = part.split('"').next().unwrap_or_default();
        if url.contains("/o/") {
            pixel = Some(local(url));
        }
    }
    for part in html.split("href=\"").skip(1) {
        links.push(local(part.split('"').next().unwrap_or_default()));
    }
    (pixel, links)
}

fn client(agent: &str) -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).user_agent(agent).build().expect("client")
}

const THUNDERBIRD: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:115.0) Gecko/20100101 Thunderbird/115.3.1";

/// Waits until the batch writer has stored `n` hits (it flushes at least every 250 ms).
async fn wait_stored(h: &SendHarness, n: u64) {
    use herald_engine::tracking::HitCounters;
    for _ in 0..60 {
        if HitCounters::get(&h.app.hits.stored) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("only {} of {n} hits stored", HitCounters::get(&h.app.hits.stored));
}

#[tokio::test]
async fn opens_and_clicks_are_counted_per_reader_and_redirect_to_the_registered_url() -> TestResult {
    let (h, campaign) = sent_campaign(3, "on").await?;
    let (pixel1, links1) = urls_for(&h, "reader1@example.com").await;
    let (pixel2, _) = urls_for(&h, "reader2@example.com").await;
    let pixel1 = pixel1.expect("reader 1's message has a pixel");
    // Both content links are rewritten; the unsubscribe link is left alone.
    let tracked: Vec<&String> = links1.iter().filter(|l| l.contains("/c/")).collect();
    assert_eq!(tracked.len(), 2, "links: {links1:?}");
    assert!(links1.iter().any(|l| l.contains("/u/")), "unsubscribe link kept: {links1:?}");
    assert!(!links1.iter().any(|l| l.contains("blog.example")), "no raw link left: {links1:?}");

    let person = client(THUNDERBIRD);
    for _ in 0..2 {
        let r = person.get(&pixel1).send().await?;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "image/gif");
        assert!(r.headers()["cache-control"].to_str()?.contains("no-store"));
        assert_eq!(r.bytes().await?.len(), 43);
        let r = person.get(tracked[0]).send().await?;
        assert_eq!(r.status(), 302);
        assert_eq!(r.headers()["location"], "https://blog.example/post?a=1&b=2");
    }
    // Apple Mail Privacy Protection's fetch: counted apart, not as an open.
    let r = client("Mozilla/5.0").get(pixel2.expect("pixel")).send().await?;
    assert_eq!(r.status(), 200);

    wait_stored(&h, 5).await;
    let s = stats::campaign(&h.app.app.db, h.tenant, campaign).await?;
    let c = &s.counters;
    assert_eq!((c.opens, c.unique_opens, c.prefetch_opens), (2, 1, 1));
    assert_eq!((c.clicks, c.unique_clicks), (2, 1));
    assert_eq!(c.sent, 3, "delivery counts reached the rollup");
    let post = s.top_links.iter().find(|l| l.url == "https://blog.example/post?a=1&b=2").expect("link registered");
    assert_eq!((post.clicks, post.unique_clicks), (2, 1));
    let domain = s.domains.iter().find(|d| d.domain == "example.com").expect("domain row");
    assert_eq!((domain.sent, domain.unique_opens, domain.unique_clicks), (3, 1, 1));
    assert_eq!(s.timeline.iter().map(|p| p.opens).sum::<i64>(), 2);
    // The events are in the log, and the reader's history shows them.
    let kinds: Vec<(String, i64)> =
        sqlx::query_as("SELECT kind, count(*) FROM events WHERE campaign_id = $1 GROUP BY 1 ORDER BY 1")
            .bind(campaign)
            .fetch_all(&h.app.owner)
            .await?;
    assert_eq!(kinds, vec![("click".to_string(), 2), ("open".to_string(), 3)]);
    Ok(())
}

#[tokio::test]
async fn anonymous_tracking_counts_without_readers() -> TestResult {
    let (h, campaign) = sent_campaign(2, "anonymous").await?;
    let (pixel, links) = urls_for(&h, "reader1@example.com").await;
    let person = client(THUNDERBIRD);
    assert_eq!(person.get(pixel.expect("pixel")).send().await?.status(), 200);
    let link = links.iter().find(|l| l.contains("/c/")).expect("tracked link");
    assert_eq!(person.get(link).send().await?.status(), 302);
    wait_stored(&h, 2).await;
    let with_reader: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE campaign_id = $1 AND reader_id IS NOT NULL")
            .bind(campaign)
            .fetch_one(&h.app.owner)
            .await?;
    assert_eq!(with_reader, 0, "anonymous events name no reader");
    let c = stats::campaign(&h.app.app.db, h.tenant, campaign).await?.counters;
    assert_eq!((c.opens, c.clicks, c.unique_opens, c.unique_clicks), (1, 1, 0, 0));
    Ok(())
}

#[tokio::test]
async fn tracking_off_leaves_the_message_alone() -> TestResult {
    let (h, _) = sent_campaign(1, "off").await?;
    let (pixel, links) = urls_for(&h, "reader1@example.com").await;
    assert!(pixel.is_none());
    assert!(links.iter().any(|l| l == "https://blog.example/post?a=1&b=2"), "links: {links:?}");
    Ok(())
}

#[tokio::test]
async fn forged_truncated_and_foreign_tokens_are_404_and_record_nothing() -> TestResult {
    let (h, campaign) = sent_campaign(1, "on").await?;
    let (pixel, links) = urls_for(&h, "reader1@example.com").await;
    let pixel = pixel.expect("pixel");
    let link = links.into_iter().find(|l| l.contains("/c/")).expect("link");
    let person = client(THUNDERBIRD);
    let mut bad: Vec<String> = Vec::new();
    for url in [&pixel, &link] {
        let (prefix, token) = url.rsplit_once('/').expect("token");
        bad.push(format!("{prefix}/{}", &token[..token.len() - 3])); // truncated
        bad.push(format!("{prefix}/{token}AA")); // extended
        bad.push(format!("{prefix}/")); // empty
        bad.push(format!("{prefix}/not-a-token"));
        for i in [0, 5, 20, token.len() / 2, token.len() - 1] {
            let mut chars: Vec<char> = token.chars().collect();
            chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
            bad.push(format!("{prefix}/{}", chars.into_iter().collect::<String>()));
        }
    }
    // Correctly signed, but naming another workspace's campaign and link: only someone with the
    // server key could make these; the click is still refused and the open stored nowhere.
    let keys = TrackingKeys::new(&h.app.app.signer);
    let other = herald_engine::TenantId::new();
    let target = Target { tenant: other, campaign: campaign.0, reader: Some(1) };
    let mac = keys.workspace(other);
    let link_id: i64 = sqlx::query_scalar("SELECT min(id) FROM campaign_links WHERE campaign_id = $1")
        .bind(campaign)
        .fetch_one(&h.app.owner)
        .await?;
    let foreign_click = format!("{}/c/{}", h.app.base, keys.click_token(&mac, &target, link_id));
    bad.push(foreign_click);
    for url in &bad {
        let status = person.get(url).send().await?.status();
        assert!(status == 404 || status == 405, "{url} answered {status}");
    }
    let foreign_open = format!("{}/o/{}", h.app.base, keys.open_token(&mac, &target));
    assert_eq!(person.get(&foreign_open).send().await?.status(), 200, "opens never wait on the database");
    tokio::time::sleep(Duration::from_millis(600)).await;
    use herald_engine::tracking::HitCounters;
    assert_eq!(HitCounters::get(&h.app.hits.accepted), 1, "only the foreign open reached the buffer");
    assert_eq!(HitCounters::get(&h.app.hits.stored), 0);
    assert_eq!(HitCounters::get(&h.app.hits.discarded), 1, "and the database refused it");
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events").fetch_one(&h.app.owner).await?;
    assert_eq!(events, 0);
    Ok(())
}

#[tokio::test]
async fn a_thousand_open_redirect_attempts_never_leave_the_registered_urls() -> TestResult {
    let (h, campaign) = sent_campaign(2, "on").await?;
    let registered: BTreeSet<String> =
        sqlx::query_scalar::<_, String>("SELECT url FROM campaign_links WHERE campaign_id = $1")
            .bind(campaign)
            .fetch_all(&h.app.owner)
            .await?
            .into_iter()
            .collect();
    assert_eq!(registered.len(), 2);
    let (_, links) = urls_for(&h, "reader1@example.com").await;
    let links: Vec<String> = links.into_iter().filter(|l| l.contains("/c/")).collect();
    let keys = TrackingKeys::new(&h.app.app.signer);
    let mac = keys.workspace(h.tenant);
    let person = client(THUNDERBIRD);
    let evil = "https://evil.example/phish";
    let (mut redirects, mut off_registered) = (0, 0);
    for i in 0..1000usize {
        let base = &links[i % links.len()];
        let (prefix, token) = base.rsplit_once('/').expect("token");
        let url = match i % 5 {
            // The URL or a redirect target smuggled into the query or path.
            0 => format!("{base}?url={evil}&redirect={evil}"),
            1 => format!("{prefix}/{token}/{evil}"),
            // Valid signatures for link ids that are not this campaign's.
            2 => format!(
                "{prefix}/{}",
                keys.click_token(
                    &mac,
                    &Target { tenant: h.tenant, campaign: campaign.0, reader: Some(1) },
                    1_000 + i as i64
                )
            ),
            // Valid signatures for campaigns that do not exist.
            3 => format!(
                "{prefix}/{}",
                keys.click_token(&mac, &Target { tenant: h.tenant, campaign: uuid::Uuid::new_v4(), reader: None }, 1)
            ),
            // Random bit flips.
            _ => {
                let mut bytes = token.as_bytes().to_vec();
                let at = (i * 7) % bytes.len();
                bytes[at] = if bytes[at] == b'x' { b'y' } else { b'x' };
                format!("{prefix}/{}", String::from_utf8_lossy(&bytes))
            }
        };
        let r = person.get(&url).send().await?;
        if r.status().is_redirection() {
            redirects += 1;
            let location = r.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
            if !registered.contains(&location) {
                off_registered += 1;
            }
        }
    }
    assert_eq!(off_registered, 0, "redirects off the registered URLs");
    // Only the untouched tokens (with junk in the query) redirect, and to their own URL.
    assert_eq!(redirects, 200);
    Ok(())
}

#[tokio::test]
async fn hits_still_buffered_at_shutdown_are_written() -> TestResult {
    let (mut h, campaign) = sent_campaign(1, "on").await?;
    let (pixel, _) = urls_for(&h, "reader1@example.com").await;
    let pixel = pixel.expect("pixel");
    let person = client(THUNDERBIRD);
    for _ in 0..40 {
        assert_eq!(person.get(&pixel).send().await?.status(), 200);
    }
    // Straight to shutdown: the 250 ms flush has not come round for most of these.
    h.app.shutdown().await?;
    use herald_engine::tracking::HitCounters;
    assert_eq!(HitCounters::get(&h.app.hits.accepted), 40);
    assert_eq!(HitCounters::get(&h.app.hits.dropped), 0);
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE campaign_id = $1 AND kind = 'open'")
        .bind(campaign)
        .fetch_one(&h.app.owner)
        .await?;
    assert_eq!(stored, 40);
    let opens: i64 = sqlx::query_scalar("SELECT opens FROM campaign_stats WHERE campaign_id = $1")
        .bind(campaign)
        .fetch_one(&h.app.owner)
        .await?;
    assert_eq!(opens, 40);
    Ok(())
}

/// The mail's own events reach a workspace's webhook endpoints: `message.sent` written with the
/// batch that records the send, opens and clicks with the hits that record them (the receiving
/// end is tested in `outbound_webhooks.rs`).
#[tokio::test]
async fn sends_opens_and_clicks_become_webhook_events() -> TestResult {
    let h = SendHarness::new(3).await?;
    let hooks = herald_engine::outbound_webhooks::Change {
        db: &h.app.app.db,
        signer: &h.app.app.signer,
        egress: &h.app.app.egress,
        jobs: &h.app.app.jobs,
        tenant: h.tenant,
        role: herald_engine::Role::Owner,
        actor: herald_engine::audit::Actor::Operator,
    };
    let input = herald_types::WebhookEndpointInput {
        url: "https://hooks.example/herald".into(),
        event_types: vec!["message.*".into()],
        enabled: true,
        ..Default::default()
    };
    herald_engine::outbound_webhooks::create(&hooks, &input).await?;
    let (h, id) = send_campaign(h, "on").await?;
    let (pixel, links) = urls_for(&h, "reader1@example.com").await;
    let person = client(THUNDERBIRD);
    assert_eq!(person.get(pixel.expect("pixel")).send().await?.status(), 200);
    assert!(person.get(&links[0]).send().await?.status().is_redirection());
    wait_stored(&h, 2).await;
    let events: Vec<(String, serde_json::Value)> =
        sqlx::query_as("SELECT type, data FROM outbound_events WHERE tenant_id = $1 ORDER BY occurred_at, type")
            .bind(h.tenant)
            .fetch_all(&h.app.owner)
            .await?;
    let of = |t: &str| events.iter().filter(|(ty, _)| ty == t).map(|(_, d)| d.clone()).collect::<Vec<_>>();
    let sent = of("message.sent");
    assert_eq!(sent.len(), 3, "{events:?}");
    assert!(sent.iter().all(|d| d["message"]["campaign_id"] == id.to_string()), "{sent:?}");
    let to: BTreeSet<&str> = sent.iter().filter_map(|d| d["message"]["to"].as_str()).collect();
    assert_eq!(to.len(), 3);
    let opened = of("message.opened");
    assert_eq!(opened.len(), 1, "{events:?}");
    assert_eq!(opened[0]["privacy_prefetch"], false);
    let clicked = of("message.clicked");
    assert_eq!(clicked.len(), 1, "{events:?}");
    assert_eq!(clicked[0]["url"], "https://blog.example/post?a=1&b=2");
    assert_eq!(clicked[0]["reader"]["id"], opened[0]["reader"]["id"]);
    let deliveries: i64 = sqlx::query_scalar("SELECT count(*) FROM outbound_deliveries WHERE tenant_id = $1")
        .bind(h.tenant)
        .fetch_one(&h.app.owner)
        .await?;
    assert_eq!(deliveries, 5, "one delivery per event to the one endpoint");
    Ok(())
}
