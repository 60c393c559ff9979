//! `herald admin seed-states --owner EMAIL`: fills the owner's workspace with data in every state
//! a page can show, and prints, as JSON, the concrete paths of the app's parameterised routes.
//!
//! The browser crawler (`end2end/tests/crawler.spec.ts`) signs up through the UI, runs this, then
//! loads every route with it. States the engine reaches only with time or faults (a send still
//! going, an import half done, a failed import) are written directly; everything else goes
//! through the engine's own functions, so the data is what users would make.

use std::collections::BTreeMap;

use anyhow::Context;
use serde_json::{Value, json};
use uuid::Uuid;

use herald_engine::audience::{import, lists, readers, suppressions};
use herald_engine::campaigns::lifecycle;
use herald_engine::campaigns::{recurring, store};
use herald_engine::domain::TenantId;
use herald_engine::infra::tokens::Signer;
use herald_engine::tracking::TrackingKeys;
use herald_engine::transactional::{messages, templates};
use herald_engine::{Db, Email, Role, api_keys, invites, users, workspaces};

use crate::config::Config;

/// Route pattern (as the app declares it) → concrete paths, one per state worth seeing; under
/// `public`, the readers' hosted pages (served by the server, not the app).
pub type Paths = BTreeMap<String, Vec<String>>;

/// What the long names are made of (see where they are seeded).
const LONG_NAME: &str = "GardenersQuarterlyTulipsDaffodilsCrocusesAndEverythingElseThatBloomsInSpring";

fn input<T: serde::de::DeserializeOwned>(v: Value) -> anyhow::Result<T> {
    Ok(serde_json::from_value(v)?)
}

fn clear(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

pub async fn run(config: &Config, owner: &str) -> anyhow::Result<Paths> {
    let db = Db::connect(&config.app_database_url, 4).await?;
    let user = users::find_by_email(&db, owner).await.map_err(clear)?.with_context(|| format!("no account {owner}"))?;
    // A demo account: its address counts as confirmed, as an operator's `verify-email` would.
    herald_engine::accounts::mark_email_verified(&db, owner).await.map_err(clear)?;
    let workspace = workspaces::list_for_user(&db, user.id)
        .await
        .map_err(clear)?
        .into_iter()
        .next()
        .with_context(|| format!("{owner} has no workspace"))?;
    let tenant = workspace.id;
    let signer = Signer::new(&config.secret_key);
    let mut paths = Paths::new();
    let mut add = |route: &str, path: String| paths.entry(route.to_string()).or_default().push(path);

    // Webhook endpoints first, so the readers and campaigns below give them events: one that
    // cannot be reached (its deliveries fail and wait for their retries) and one turned off.
    let hooks = herald_engine::outbound_webhooks::Change {
        db: &db,
        signer: &signer,
        egress: &config.egress,
        jobs: &herald_engine::jobs::Jobs::new(&db),
        tenant,
        role: Role::Owner,
        actor: herald_engine::audit::Actor::Operator,
    };
    for (url, enabled) in [("http://127.0.0.1:9/crawler-hooks", true), ("http://127.0.0.1:9/switched-off", false)] {
        let input = herald_types::WebhookEndpointInput {
            url: url.into(),
            description: "Seeded endpoint".into(),
            event_types: vec!["reader.*".into(), "campaign.*".into()],
            enabled,
        };
        let made = herald_engine::outbound_webhooks::create(&hooks, &input).await.map_err(clear)?;
        add("/settings/webhooks/:id", format!("/settings/webhooks/{}", made.endpoint.id));
    }

    // A verified sending domain and a postal address, so campaigns can be scheduled and sent;
    // an identity whose SES webhook is on (the settings pages' filled states).
    herald_engine::sending::domains::mark_verified(&db, &signer, tenant, "crawler.test").await.map_err(clear)?;
    let identity = herald_engine::sending::identities::IdentityInput {
        name: "Crawler relay".into(),
        smtp_url: "smtp://seed:secret@smtp.crawler.test:587".into(),
        max_connections: 2,
        rate_per_second: 10.0,
        burst: 10,
        ..Default::default()
    };
    let identity = herald_engine::sending::identities::save(&db, &signer, tenant, Role::Owner, None, &identity)
        .await
        .map_err(clear)?;
    herald_engine::sending::identities::configure_webhook(&db, &signer, tenant, Role::Owner, identity.id, "ses", "")
        .await
        .map_err(clear)?;
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "UPDATE tenants SET postal_address = '1 Crawler Street, 75001 Paris', default_from_name = 'Crawler',
                default_from_email = 'news@crawler.test' WHERE id = $1",
    )
    .bind(tenant)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;

    // Audience: a list with readers, an empty one, suppressions.
    let list = |name: &str| lists::ListInput {
        name: name.into(),
        slug: None,
        description: format!("{name} (seeded)"),
        opt_in: lists::OptIn::Single,
        visibility: lists::Visibility::Public,
    };
    let news = lists::create(&db, tenant, Role::Owner, &list("Newsletter")).await.map_err(clear)?;
    lists::create(&db, tenant, Role::Owner, &list("Empty list")).await.map_err(clear)?;
    // Custom fields (the fields page and the reader page's typed inputs).
    for (key, label, kind, choices) in [
        ("plan", "Plan", herald_types::FieldKind::Choice, vec!["Free".to_string(), "Pro".to_string()]),
        ("birthday", "Birthday", herald_types::FieldKind::Date, vec![]),
        ("seats", "Seats", herald_types::FieldKind::Number, vec![]),
        ("time_zone", "Time zone", herald_types::FieldKind::Text, vec![]),
    ] {
        let input = herald_types::FieldInput { key: key.into(), label: label.into(), kind, choices };
        herald_engine::audience::fields::create(&db, tenant, Role::Owner, &input).await.map_err(clear)?;
    }
    let origin = herald_engine::audience::consent::Origin::new("admin");
    let mut first_reader = None;
    for (email, name) in [
        ("ada@example.com", "Ada Lovelace"),
        ("grace@example.com", "Grace Hopper"),
        ("alan@example.com", "Alan Turing"),
        ("edsger@example.com", "Edsger Dijkstra"),
    ] {
        let id = readers::add(&db, tenant, Role::Owner, email, name, &[news.id], &origin).await.map_err(clear)?;
        first_reader.get_or_insert(id);
        // Tags on readers (the reader page's and the tags page's filled states).
        let tags = if name.starts_with('A') {
            vec!["vip".to_string(), "early".to_string()]
        } else {
            vec!["early".to_string()]
        };
        herald_engine::audience::tags::add_to_reader(&db, tenant, Role::Owner, id, &tags).await.map_err(clear)?;
    }
    let reader = first_reader.context("no reader")?;
    // Names as long as the forms allow, without a space to break at: every page that shows
    // them must wrap or truncate them, phones and the readers' public pages included.
    let long = |n: usize| LONG_NAME.chars().cycle().take(n).collect::<String>();
    let long_list = lists::create(&db, tenant, Role::Owner, &lists::ListInput { name: long(77), ..list("long") })
        .await
        .map_err(clear)?;
    let long_reader = readers::add(
        &db,
        tenant,
        Role::Owner,
        &format!("{}@example.com", long(60).to_lowercase()),
        &long(77),
        &[news.id, long_list.id],
        &origin,
    )
    .await
    .map_err(clear)?;
    herald_engine::audience::tags::add_to_reader(&db, tenant, Role::Owner, long_reader, &[long(50)])
        .await
        .map_err(clear)?;
    let long_field = herald_types::FieldInput {
        key: "favourite".into(),
        label: long(60),
        kind: herald_types::FieldKind::Text,
        choices: vec![],
    };
    herald_engine::audience::fields::create(&db, tenant, Role::Owner, &long_field).await.map_err(clear)?;
    let long_segment = input::<herald_types::SegmentInput>(json!({
        "name": long(80),
        "definition": {"match": "all", "rules": [{"kind": "list", "list_id": long_list.id, "state": "subscribed"}]}
    }))?;
    herald_engine::audience::segments::create(&db, tenant, Role::Owner, &long_segment).await.map_err(clear)?;
    add("/audience/readers/:id", format!("/audience/readers/{long_reader}"));
    // The readers' own pages, for the crawler's walk of the public pages: the workspace's and the
    // long list's subscribe forms, and the long reader's unsubscribe and preference page.
    add("public", format!("/s/{}", workspace.slug));
    add("public", format!("/s/{}/{}", workspace.slug, long_list.slug));
    let leave =
        herald_engine::audience::subscribe::unsubscribe_url(&signer, "", tenant, long_reader, Some(long_list.id));
    add("public", leave);
    let values = json!({"plan": "Pro", "birthday": "1815-12-10", "seats": 3, "city": "London"});
    readers::update(&db, tenant, Role::Owner, reader, "Ada Lovelace", values, &origin).await.map_err(clear)?;
    add("/audience/readers/:id", format!("/audience/readers/{reader}"));
    // A segment (the segments page's filled state and its editor with a group and a count).
    let segment_input = input::<herald_types::SegmentInput>(json!({
        "name": "Early Pro readers",
        "definition": {"match": "all", "rules": [
            {"kind": "list", "list_id": news.id, "state": "subscribed"},
            {"match": "any", "conditions": [
                {"kind": "field", "key": "plan", "op": "eq", "value": "Pro"},
                {"kind": "opened", "days": 30}
            ]}
        ]}
    }))?;
    let segment =
        herald_engine::audience::segments::create(&db, tenant, Role::Owner, &segment_input).await.map_err(clear)?;
    add("/audience/segments/:id", format!("/audience/segments/{}", segment.id));
    add("/audience/segments/:id", "/audience/segments/new".to_string());
    suppressions::add_many(
        &db,
        tenant,
        Role::Owner,
        &["bounced@example.com".into()],
        suppressions::SuppressionReason::Manual,
        "seed-states",
    )
    .await
    .map_err(clear)?;

    // Imports: one waiting for its mapping, and one in each later state.
    let csv = b"email,name,city\nnew1@example.com,New One,Lyon\nnew2@example.com,New Two,Nantes\n";
    use import::ImportStatus::{Done, Failed, Queued, Running, Uploaded};
    for status in [Uploaded, Queued, Running, Done, Failed] {
        let id = import::begin_upload(&db, tenant, Some(user.id), Role::Owner, &format!("{status}.csv"))
            .await
            .map_err(clear)?;
        import::append_chunk(&db, tenant, id, 0, csv, import::StorageCaps::UNLIMITED).await.map_err(clear)?;
        import::finish_upload(&db, tenant, id, csv.len() as i64).await.map_err(clear)?;
        if status != Uploaded {
            force_import(&db, tenant, id, status).await?;
        }
        add("/audience/imports/:id", format!("/audience/imports/{id}"));
    }

    // Campaigns in every state.
    let draft = |name: &str| {
        input::<store::CampaignInput>(json!({
            "name": name, "subject": format!("{name} for {{{{ reader.name }}}}"), "from_name": "Crawler Co",
            "from_email": "news@crawler.test", "list_ids": [news.id], "body_format": "markdown",
            "body": "Hello {{ reader.name }},\n\nThis is **seeded** content with [a link](https://example.com/).",
        }))
    };
    let campaign = |status: &'static str| {
        let name = format!("Campaign {status}");
        let input = draft(&name);
        let db = db.clone();
        async move {
            let c = store::create(&db, tenant, Role::Owner, &input?).await.map_err(clear)?;
            Ok::<_, anyhow::Error>((c.id, status))
        }
    };
    for status in ["draft", "scheduled", "sending", "paused", "sent", "cancelled"] {
        let (id, status) = campaign(status).await?;
        match status {
            // The editor's settings view too, so the crawler measures its fields.
            "draft" => add("/campaigns/:id", format!("/campaigns/{id}?tab=settings")),
            "scheduled" => {
                let at = chrono::Utc::now() + chrono::Duration::days(30);
                lifecycle::schedule(&db, tenant, Role::Owner, id, at, "Europe/Paris").await.map_err(clear)?;
            }
            other => force_campaign(&db, tenant, id, other).await?,
        }
        add("/campaigns/:id", format!("/campaigns/{id}"));
        add("/campaigns/:id/stats", format!("/campaigns/{id}/stats"));
    }
    // An image in the media library, and a block draft with every kind of block
    // showing it, so the crawler walks the media page and the block editor with data.
    let image = herald_engine::media::prepare(include_bytes!("../../end2end/fixtures/tulips.png")).map_err(clear)?;
    let image = herald_engine::media::save(
        &db,
        &herald_engine::media::MediaStorage::Postgres,
        &config.base_url,
        tenant,
        Some(user.id),
        Role::Owner,
        "tulips.png",
        image,
        herald_engine::media::MediaQuota::default(),
    )
    .await
    .map_err(clear)?;
    let mut blocks = draft("Block issue")?;
    blocks.body_format = herald_types::BodyFormat::Blocks;
    blocks.body = include_str!("../../types/tests/fixtures/blocks_v1.json")
        .replace("https://example.com/tulips.jpg", &image.url)
        .replace("https://example.com/right.png", &image.url);
    let block_draft = store::create(&db, tenant, Role::Owner, &blocks).await.map_err(clear)?;
    add("/campaigns/:id", format!("/campaigns/{}", block_draft.id));
    // A brand with that image as the logo, and a saved template from the block draft, so the
    // brand and templates pages are walked with data.
    let brand = herald_types::Brand {
        theme: herald_types::Theme {
            accent: herald_types::Colour::parse("#be123c").map_err(clear)?,
            ..herald_types::Theme::default()
        },
        logo_src: image.url.clone(),
        logo_width: 120,
        footer_text: "Tulip Weekly: notes for people who grow things.".into(),
    };
    herald_engine::campaigns::brand::update(&db, tenant, Role::Owner, &brand).await.map_err(clear)?;
    let template = herald_types::CampaignTemplateInput {
        name: "Block issue".into(),
        subject: blocks.subject.clone(),
        preheader: blocks.preheader.clone(),
        body_format: blocks.body_format,
        body: blocks.body.clone(),
    };
    herald_engine::campaigns::templates::create_template(&db, tenant, Role::Owner, &template).await.map_err(clear)?;
    // An A/B test part-way: its test share sent or queued with versions, the rest held for the
    // winner (chosen in three hours), and a draft of one (the editor's A/B card filled in).
    let mut ab = draft("Subject test")?;
    ab.ab_test =
        Some(input(json!({"variants": [{"subject": "Version B for {{ reader.name }}"}, {"subject": "Version C"}],
                                   "test_percent": 30, "metric": "clicks", "window_hours": 3}))?);
    let ab_draft = store::create(&db, tenant, Role::Owner, &ab).await.map_err(clear)?;
    add("/campaigns/:id", format!("/campaigns/{}?tab=settings", ab_draft.id));
    let ab_sending = store::create(&db, tenant, Role::Owner, &ab).await.map_err(clear)?;
    force_campaign(&db, tenant, ab_sending.id, "sending").await?;
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "UPDATE sends SET status = CASE WHEN reader_id % 3 = 0 THEN 'held' ELSE status END, ab_rest = reader_id % 3 = 0,
                variant = CASE WHEN reader_id % 3 <> 0 THEN (reader_id % 3)::smallint - 1 END
         WHERE tenant_id = $1 AND campaign_id = $2",
    )
    .bind(tenant)
    .bind(ab_sending.id)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE campaigns SET ab_seed = 1, ab_decide_at = now() + interval '3 hours' WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(ab_sending.id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    add("/campaigns/:id", format!("/campaigns/{}", ab_sending.id));
    add("/campaigns/:id/stats", format!("/campaigns/{}/stats", ab_sending.id));
    // A draft an author asked to send: the approval banner and the list's badge.
    let asked = store::create(&db, tenant, Role::Owner, &draft("Campaign awaiting approval")?).await.map_err(clear)?;
    herald_engine::campaigns::approval::request(&db, tenant, user.id, Role::Author, asked.id, None, "")
        .await
        .map_err(clear)?;
    add("/campaigns/:id", format!("/campaigns/{}", asked.id));
    // A recurring campaign with one edition already sent.
    let mut rec = draft("Weekly digest")?;
    rec.recurrence = Some(input(json!({"every": "week", "weekdays": [1], "time": "09:00", "tz": "Europe/Paris"}))?);
    let parent = store::create(&db, tenant, Role::Owner, &rec).await.map_err(clear)?;
    recurring::start(&db, tenant, Role::Owner, parent.id).await.map_err(clear)?;
    let edition = Uuid::new_v4();
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "INSERT INTO campaigns (id, tenant_id, name, subject, from_name, from_email, list_ids, body_format, body,
                                status, parent_id, edition_slot, fanout_done, started_at, finished_at)
         SELECT $3, tenant_id, name || ' (' || to_char(now() - interval '7 days', 'YYYY-MM-DD') || ')', subject,
                from_name, from_email, list_ids, body_format, body, 'draft', id, now() - interval '7 days', false, NULL, NULL
         FROM campaigns WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(parent.id)
    .bind(edition)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    force_campaign(&db, tenant, edition.into(), "sent").await?;
    add("/campaigns/:id", format!("/campaigns/{}", parent.id));
    add("/campaigns/:id", format!("/campaigns/{edition}"));
    let long_campaign = store::create(&db, tenant, Role::Owner, &draft(&long(120))?).await.map_err(clear)?;
    add("/campaigns/:id", format!("/campaigns/{}", long_campaign.id));
    // The campaign list as it is, filtered, and filtered to nothing.
    add("/campaigns", "/campaigns".to_string());
    add("/campaigns", "/campaigns?q=e&status=sent&from=2020-01-01".to_string());
    add("/campaigns", "/campaigns?q=no+such+campaign".to_string());

    // Automations in every state: a live welcome with readers in it, a paused receipt, an
    // archived sequence and a draft; and the new-automation page.
    let jobs = herald_engine::jobs::Jobs::new(&db);
    let automation = |name: &str, trigger: Value, steps: Value| {
        input::<herald_types::AutomationInput>(json!({"name": name, "trigger": trigger, "steps": steps}))
    };
    let email =
        |subject: &str| json!({"action": {"kind": "email", "subject": subject, "body": "Hello {{ reader.name }}"}});
    let wait = json!({"action": {"kind": "wait", "amount": 2, "unit": "days"}});
    use herald_engine::automations::store as automations;
    let welcome = automation(
        "Welcome",
        json!({"kind": "list_confirmed", "list_id": news.id}),
        json!([email("Welcome to {{ workspace.name }}"), wait, email("Our best issues")]),
    )?;
    let welcome = automations::create(&db, tenant, Role::Owner, &welcome).await.map_err(clear)?;
    automations::start(&db, &jobs, tenant, Role::Owner, welcome.id).await.map_err(clear)?;
    for (email, name) in [("new-reader@example.com", "New Reader"), ("another@example.com", "Another Reader")] {
        let id = readers::add(&db, tenant, Role::Owner, email, name, &[news.id], &origin).await.map_err(clear)?;
        // A reader's page with their path through an automation.
        if email.starts_with("new") {
            add("/audience/readers/:id", format!("/audience/readers/{id}"));
        }
    }
    let receipt =
        automation("Receipt", json!({"kind": "event", "name": "order_placed"}), json!([email("Your order")]))?;
    let receipt = automations::create(&db, tenant, Role::Owner, &receipt).await.map_err(clear)?;
    automations::start(&db, &jobs, tenant, Role::Owner, receipt.id).await.map_err(clear)?;
    automations::pause(&db, tenant, Role::Owner, receipt.id).await.map_err(clear)?;
    let old = automation("Spring drip", json!({"kind": "event", "name": "spring"}), json!([email("Spring")]))?;
    let old = automations::create(&db, tenant, Role::Owner, &old).await.map_err(clear)?;
    automations::start(&db, &jobs, tenant, Role::Owner, old.id).await.map_err(clear)?;
    automations::archive(&db, tenant, Role::Owner, old.id).await.map_err(clear)?;
    let vip = herald_engine::audience::tags::list(&db, tenant).await.map_err(clear)?;
    let vip = vip.iter().find(|t| t.name == "vip").context("no vip tag")?;
    let draft = automation(
        "VIP sequence",
        json!({"kind": "tag_added", "tag_id": vip.id}),
        json!([{"action": {"kind": "wait_until", "weekdays": ["tue", "thu"], "time": "09:00",
                           "zone": "Europe/Berlin", "zone_field": "time_zone"}},
               email("Thank you"),
               {"action": {"kind": "branch", "condition": {"kind": "opened", "step": 1},
                           "if_yes": {"kind": "next"}, "if_no": {"kind": "step", "index": 5}}},
               {"action": {"kind": "branch", "condition": {"kind": "field_is", "field": "plan", "value": "Pro"},
                           "if_yes": {"kind": "next"}, "if_no": {"kind": "exit"}}},
               {"action": {"kind": "remove_tag", "tag_id": vip.id}},
               {"action": {"kind": "subscribe", "list_id": news.id}}, {"action": {"kind": "exit"}}]),
    )?;
    let draft = automations::create(&db, tenant, Role::Owner, &draft).await.map_err(clear)?;
    let long_automation = automation(&long(150), json!({"kind": "event", "name": "long"}), json!([email("Long")]))?;
    let long_automation = automations::create(&db, tenant, Role::Owner, &long_automation).await.map_err(clear)?;
    for id in [welcome.id, receipt.id, old.id, draft.id, long_automation.id] {
        add("/automations/:id", format!("/automations/{id}"));
    }
    add("/automations/:id", "/automations/new".to_string());

    // Transactional: a template, and messages through the outbox (the server's worker sends them).
    let template = templates::create(
        &db,
        tenant,
        Role::Owner,
        &input(json!({
            "name": "password-reset", "description": "Sent when a reader asks for a new password",
            "from_email": "account@crawler.test", "subject": "Reset your password, {{ name }}",
            "html": "<p>Hello {{ name }}, <a href=\"https://example.com/reset\">reset it here</a>.</p>",
            "text_body": "Hello {{ name }}, reset it at https://example.com/reset",
        }))?,
    )
    .await
    .map_err(clear)?;
    add("/transactional/templates/:id", format!("/transactional/templates/{}", template.id));
    let outbox = messages::Outbox {
        db: db.clone(),
        keys: TrackingKeys::new(&signer),
        base_url: config.base_url.clone(),
        wake: Default::default(),
    };
    for (n, to) in ["ada@example.com", "grace@example.com"].into_iter().enumerate() {
        let body = json!({"to": to, "template": "password-reset", "variables": {"name": format!("Reader {n}")}});
        let m = messages::enqueue(&outbox, tenant, Role::Owner, &format!("seed-{n}"), &body).await.map_err(clear)?;
        add("/transactional/messages/:id", format!("/transactional/messages/{}", m.message.id));
    }

    // Members of each role, a pending invite and an API key.
    for role in [Role::Admin, Role::Author, Role::Viewer] {
        let email =
            Email::parse(&format!("{}-{}@example.com", role.as_str(), Uuid::new_v4().simple())).map_err(clear)?;
        let name = format!("A {}", role.as_str());
        let member = users::create_user(&db, &email, &name, "a long seeded password", users::Address::Confirmed)
            .await
            .map_err(clear)?;
        // Through an invite, as a real member joins.
        let invite = invites::create(&db, &signer, tenant, user.id, Role::Owner, &email, role).await.map_err(clear)?;
        invites::accept(&db, &signer, &invite.token, member, email.as_str()).await.map_err(clear)?;
    }
    let invitee = Email::parse("invited@example.com").map_err(clear)?;
    let invite =
        invites::create(&db, &signer, tenant, user.id, Role::Owner, &invitee, Role::Author).await.map_err(clear)?;
    add("/invite/:token", format!("/invite/{}", invite.token));
    // The page a sign-up mail links to, for an address with no account yet.
    let claim = herald_engine::accounts::SignupClaim {
        email: format!("new-author-{}@example.com", Uuid::new_v4().simple()),
        name: "A new author".into(),
        next: "/".into(),
    };
    add("/signup/finish", format!("/signup/finish?token={}", herald_engine::accounts::signup_token(&signer, &claim)));
    api_keys::create(&db, tenant, Some(user.id), Role::Owner, "Crawler key", Role::Admin).await.map_err(clear)?;
    Ok(paths)
}

/// Moves an import to `status` as its job would have (counts included), without running it.
async fn force_import(
    db: &Db,
    tenant: TenantId,
    id: import::ImportId,
    status: import::ImportStatus,
) -> anyhow::Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "UPDATE imports SET status = $3,
                rows_read = CASE WHEN $3 IN ('running', 'done', 'failed') THEN 2 ELSE 0 END,
                created = CASE WHEN $3 = 'done' THEN 2 WHEN $3 = 'running' THEN 1 ELSE 0 END,
                bytes_done = CASE WHEN $3 = 'done' THEN size_bytes WHEN $3 = 'running' THEN size_bytes / 2 ELSE 0 END,
                error = CASE WHEN $3 = 'failed' THEN 'The file stopped making sense at line 3.' END,
                started_at = CASE WHEN $3 <> 'queued' THEN now() - interval '1 minute' END,
                finished_at = CASE WHEN $3 IN ('done', 'failed') THEN now() END
         WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(id)
    .bind(status)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Gives a draft campaign the send log and status of one that reached `status`. A `sending` or
/// `paused` one keeps a queued row due in a year, so the server's workers leave it as it is.
async fn force_campaign(db: &Db, tenant: TenantId, id: herald_engine::CampaignId, status: &str) -> anyhow::Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "INSERT INTO sends (tenant_id, campaign_id, reader_id, email, status, attempts, next_attempt_at, sent_at, smtp_reply, reason)
         SELECT $1, $2, r.id, r.email,
                CASE WHEN $3 = 'sent' OR n = 1 THEN 'sent'
                     WHEN $3 = 'cancelled' THEN 'cancelled'
                     WHEN n = 2 THEN 'failed'
                     ELSE 'queued' END,
                1, now() + interval '365 days',
                CASE WHEN $3 = 'sent' OR n = 1 THEN now() - interval '1 hour' END,
                CASE WHEN $3 = 'sent' OR n = 1 THEN '250 2.0.0 OK' WHEN n = 2 AND $3 <> 'cancelled' THEN '550 5.1.1 user unknown' END,
                CASE WHEN n = 2 AND $3 NOT IN ('sent', 'cancelled') THEN 'the server refused the recipient' END
         FROM (SELECT id, email, row_number() OVER (ORDER BY id) AS n FROM readers WHERE tenant_id = $1) r",
    )
    .bind(tenant)
    .bind(id)
    .bind(status)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE campaigns SET status = $3, fanout_done = true, fanout_cursor = 9223372036854775807,
                recipients = (SELECT count(*) FROM sends WHERE campaign_id = $2),
                started_at = now() - interval '2 hours',
                finished_at = CASE WHEN $3 IN ('sent', 'cancelled') THEN now() - interval '1 hour' END,
                pause_reason = CASE WHEN $3 = 'paused' THEN 'Paused by the crawler seed.' END
         WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(id)
    .bind(status)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
