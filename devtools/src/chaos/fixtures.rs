//! The scene's building blocks, written as the API or an import would leave them: workspaces,
//! lists of readers, campaigns (to lists, to segments, A/B tests), transactional messages; and
//! what the round does to them by hand (opt-outs, the end of an A/B test).

use chrono::{DateTime, Utc};
use herald_engine::audience::segments;
use herald_engine::campaigns::store::{self, CampaignInput};
use herald_engine::jobs::Jobs;
use herald_engine::{CampaignId, Db, Role, TenantId};
use sqlx::PgPool;
use uuid::Uuid;

pub(super) async fn insert_tenant(owner: &PgPool, name: &str, cap: Option<i32>) -> anyhow::Result<TenantId> {
    let tenant = TenantId::new();
    sqlx::query(
        "INSERT INTO tenants (id, name, slug, postal_address, default_from_name, default_from_email, frequency_cap_hours,
                              campaign_mail_per_day)
         VALUES ($1, $2, $3, '1 Chaos Road, Lyon', $2, 'news@chaos.test', $4, NULL)",
    )
    .bind(tenant)
    .bind(name)
    .bind(format!("{}-{}", name.to_lowercase(), &Uuid::new_v4().simple().to_string()[..8]))
    .bind(cap)
    .execute(owner)
    .await?;
    Ok(tenant)
}

/// A list of confirmed readers (see [`insert_list_into`]); returns the list and the addresses.
pub(super) async fn insert_list(
    owner: &PgPool,
    tenant: TenantId,
    prefix: &str,
    n: usize,
) -> anyhow::Result<(Uuid, Vec<String>)> {
    let list = Uuid::new_v4();
    sqlx::query("INSERT INTO lists (id, tenant_id, name, slug, opt_in) VALUES ($1, $2, $3, $3, 'single')")
        .bind(list)
        .bind(tenant)
        .bind(format!("{prefix}-{}", &list.simple().to_string()[..6]))
        .execute(owner)
        .await?;
    insert_list_into(owner, tenant, list, prefix, n).await
}

pub(super) async fn create_campaign(
    db: &Db,
    tenant: TenantId,
    name: &str,
    lists: &[Uuid],
) -> anyhow::Result<CampaignId> {
    let input = CampaignInput {
        name: name.into(),
        subject: format!("{name} for {{{{ reader.name }}}}"),
        from_email: "news@chaos.test".into(),
        from_name: "Chaos".into(),
        list_ids: lists.iter().map(|&l| l.into()).collect(),
        // Written in blocks: the main campaign of every round goes through the MJML
        // render, so the faults are survived by block campaigns too.
        body_format: herald_types::BodyFormat::Blocks,
        body: herald_types::BlockDocument {
            version: herald_types::blocks::CURRENT_VERSION,
            theme: Default::default(),
            blocks: vec![
                herald_types::Block::Paragraph {
                    text: "Hello {{ reader.name }}! A [link](https://example.com/a).".into(),
                },
                herald_types::Block::Footer { text: "[Unsubscribe]({{ unsubscribe_url }})".into() },
            ],
        }
        .to_json(),
        ..Default::default()
    };
    Ok(store::create(db, tenant, Role::Owner, &input).await?.id)
}

/// A campaign to a segment with an exclusion: 300 readers on a list of their own, a
/// third of them tagged "vip", half on the Free plan; it targets the tagged readers and leaves
/// out the Free plan. Returns it and the readers it must reach (the check also fails it for a
/// copy to anyone else).
pub(super) async fn segment_campaign(
    owner: &PgPool,
    db: &Db,
    tenant: TenantId,
) -> anyhow::Result<(CampaignId, Vec<String>)> {
    let (list, _) = insert_list(owner, tenant, "seg", 300).await?;
    let tag = Uuid::new_v4();
    sqlx::query("INSERT INTO tags (tenant_id, id, name) VALUES ($1, $2, 'vip')")
        .bind(tenant)
        .bind(tag)
        .execute(owner)
        .await?;
    sqlx::query(
        "INSERT INTO reader_tags (tenant_id, tag_id, reader_id)
         SELECT $1, $2, reader_id FROM subscriptions WHERE list_id = $3 AND reader_id % 3 = 0",
    )
    .bind(tenant)
    .bind(tag)
    .bind(list)
    .execute(owner)
    .await?;
    sqlx::query("INSERT INTO fields (tenant_id, key, label, kind, choices) VALUES ($1, 'plan', 'Plan', 'choice', '[\"Free\", \"Pro\"]')")
        .bind(tenant)
        .execute(owner)
        .await?;
    sqlx::query(
        "UPDATE readers SET attributes = jsonb_build_object('plan', CASE WHEN id % 2 = 0 THEN 'Free' ELSE 'Pro' END)
         WHERE id IN (SELECT reader_id FROM subscriptions WHERE list_id = $1)",
    )
    .bind(list)
    .execute(owner)
    .await?;
    let expected: Vec<String> = sqlx::query_scalar(
        "SELECT lower(r.email) FROM readers r JOIN subscriptions s ON s.reader_id = r.id
         WHERE s.list_id = $1 AND r.id % 3 = 0 AND r.id % 2 = 1",
    )
    .bind(list)
    .fetch_all(owner)
    .await?;
    let segment = |name: &str, rule: serde_json::Value| herald_types::SegmentInput {
        name: name.into(),
        definition: serde_json::from_value(serde_json::json!({"match": "all", "rules": [rule]})).unwrap_or_default(),
    };
    let vip =
        segments::create(db, tenant, Role::Owner, &segment("VIP", serde_json::json!({"kind": "tag", "tag_id": tag})))
            .await?;
    let free = segments::create(
        db,
        tenant,
        Role::Owner,
        &segment("Free", serde_json::json!({"kind": "field", "key": "plan", "op": "eq", "value": "Free"})),
    )
    .await?;
    let input = CampaignInput {
        name: "Segment".into(),
        subject: "Segment for {{ reader.name }}".into(),
        from_email: "news@chaos.test".into(),
        from_name: "Chaos".into(),
        segment_ids: vec![vip.id],
        exclude_segment_id: Some(free.id),
        body: "Hello {{ reader.name }}!\n\n[Unsubscribe]({{ unsubscribe_url }})".into(),
        ..Default::default()
    };
    Ok((store::create(db, tenant, Role::Owner, &input).await?.id, expected))
}

/// An A/B test of two subjects on 300 readers of a list of its own, with a test share
/// the round draws: the winner is chosen during the faults, by hand or by the workers'
/// supervisor when the window is made to end.
pub(super) async fn ab_campaign(
    owner: &PgPool,
    db: &Db,
    tenant: TenantId,
    percent: u8,
) -> anyhow::Result<(CampaignId, Vec<String>)> {
    let (list, readers) = insert_list(owner, tenant, "ab", 300).await?;
    let version = |label: &str| format!("AB version {label} for {{{{ reader.name }}}}");
    let input = CampaignInput {
        name: "A/B".into(),
        subject: version("A"),
        from_email: "news@chaos.test".into(),
        from_name: "Chaos".into(),
        list_ids: vec![list.into()],
        body: "Hello {{ reader.name }}!\n\n[Unsubscribe]({{ unsubscribe_url }})".into(),
        ab_test: Some(herald_types::AbTest {
            variants: vec![herald_types::Variant { subject: version("B"), ..Default::default() }],
            test_percent: percent,
            metric: herald_types::AbMetric::Opens,
            window_hours: 1,
        }),
        ..Default::default()
    };
    Ok((store::create(db, tenant, Role::Owner, &input).await?.id, readers))
}

/// More readers on an existing list: `{prefix}{i}@chaos.test`, every third one typed in mixed
/// case under the internationalised domain `Chäos.Test` and stored as Herald stores every
/// address, in its canonical form (`{prefix}{i}@xn--chos-qoa.test`); returns the addresses.
pub(super) async fn insert_list_into(
    owner: &PgPool,
    tenant: TenantId,
    list: Uuid,
    prefix: &str,
    n: usize,
) -> anyhow::Result<(Uuid, Vec<String>)> {
    let addresses = (1..=n)
        .map(|i| {
            let typed = if i % 3 == 0 {
                format!("{}{i}@Chäos.Test", prefix.to_uppercase())
            } else {
                format!("{prefix}{i}@chaos.test")
            };
            herald_engine::Email::parse(&typed).map(String::from).map_err(|e| anyhow::anyhow!("{typed}: {e}"))
        })
        .collect::<anyhow::Result<Vec<String>>>()?;
    sqlx::query(
        "WITH r AS (
             INSERT INTO readers (tenant_id, email, name)
             SELECT $1, a, 'Reader ' || ord FROM unnest($3::text[]) WITH ORDINALITY AS x(a, ord)
             RETURNING id
         )
         INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
         SELECT $1, $2, id, 'confirmed', now() FROM r",
    )
    .bind(tenant)
    .bind(list)
    .bind(&addresses)
    .execute(owner)
    .await?;
    Ok((list, addresses))
}

/// Unsubscribes the reader from every list (or suppresses the address by hand); returns the
/// commit time.
pub(super) async fn opt_out(
    owner: &PgPool,
    tenant: TenantId,
    address: &str,
    suppress: bool,
) -> anyhow::Result<DateTime<Utc>> {
    if suppress {
        sqlx::query(
            "INSERT INTO suppressions (tenant_id, email_lower, reason, source) VALUES ($1, $2, 'manual', 'chaos')",
        )
        .bind(tenant)
        .bind(address)
        .execute(owner)
        .await?;
    } else {
        sqlx::query(
            "UPDATE subscriptions SET status = 'unsubscribed', unsubscribed_at = now()
             WHERE tenant_id = $1 AND reader_id = (SELECT id FROM readers WHERE tenant_id = $1 AND lower(email) = $2)",
        )
        .bind(tenant)
        .bind(address)
        .execute(owner)
        .await?;
    }
    Ok(sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(owner).await?)
}

/// A queued transactional message, as `POST /api/v1/messages` leaves it.
pub(super) async fn insert_message(owner: &PgPool, tenant: TenantId, to: &str) -> anyhow::Result<Uuid> {
    let id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO messages (id, tenant_id, idempotency_key, request_hash, to_email, from_email, subject, html, text_body)
         VALUES ($1, $2, $3, 'chaos', $4, 'app@chaos.test', 'Your code', '<p>1234</p>', '1234')",
    )
    .bind(id)
    .bind(tenant)
    .bind(id.to_string())
    .bind(to)
    .execute(owner)
    .await?;
    Ok(id)
}

/// Chooses the A/B test's winner by hand (version B), or makes its window end for the workers'
/// supervisor to choose. False when Postgres was not there to ask, or the fan-out has not
/// started the test yet (the caller tries again).
pub(super) async fn end_ab_test(
    db: &Db,
    jobs: &Jobs,
    owner: &PgPool,
    tenant: TenantId,
    ab: CampaignId,
    by_hand: bool,
) -> bool {
    let done = if by_hand {
        herald_engine::campaigns::ab_test::pick_winner(db, jobs, tenant, Role::Owner, ab, Some(1)).await.map(drop)
    } else {
        // Once the fan-out has started the test: its first chunk sets the window's end.
        match sqlx::query("UPDATE campaigns SET ab_decide_at = now() WHERE id = $1 AND ab_seed IS NOT NULL")
            .bind(ab)
            .execute(owner)
            .await
        {
            Ok(r) if r.rows_affected() == 1 => Ok(()),
            Ok(_) => return false,
            Err(e) => Err(herald_engine::Error::from(e)),
        }
    };
    if let Err(e) = &done {
        eprintln!("chaos: could not end the A/B test yet: {e}");
    }
    done.is_ok()
}
