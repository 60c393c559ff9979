//! Limits per account, on top of the per-workspace ones, so that making another
//! workspace (or another API key) buys nothing: workspaces owned, transactional messages a day
//! (warming up), test emails a day, system mail a day; a confirmed address for invitations,
//! test emails and opt-in confirmations; and one address signed up to 50 public lists gets the
//! per-recipient handful of confirmation mails, not 50.

use herald_app::auth::CreateWorkspace;
use herald_app::pages::settings::api_keys::CreateApiKey;
use herald_app::pages::settings::members::InviteMember;
use herald_engine::Role;
use herald_engine::account_limits::{self, Defaults, Limit};
use reqwest::StatusCode;
use serde_json::json;

use crate::audience::{create_list, subscribe, ws_slug};
use crate::campaigns_api::workspace_with_readers;
use crate::helpers::*;

/// Makes a workspace, which becomes the session's current one.
async fn new_workspace(b: &Browser, name: &str) -> Reply<()> {
    b.run(CreateWorkspace { name: name.into(), slug: String::new() }).await
}

#[tokio::test]
async fn an_account_owns_three_workspaces_until_the_operator_raises_it() -> TestResult {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("many@example.com", "First").await;
    assert!(new_workspace(&owner, "Second").await.ok());
    assert!(new_workspace(&owner, "Third").await.ok());
    let fourth = new_workspace(&owner, "Fourth").await;
    assert_eq!(fourth.status, StatusCode::FORBIDDEN, "{:?}", fourth.result);
    assert!(fourth.message().contains("may own 3 workspaces"), "{:?}", fourth.result);
    account_limits::set_limit(&app.app.db, "MANY@example.com", Limit::Workspaces, Some(4)).await?;
    assert!(new_workspace(&owner, "Fourth").await.ok());
    assert_eq!(new_workspace(&owner, "Fifth").await.status, StatusCode::FORBIDDEN);
    // Back to the default: nothing is taken away, nothing more is allowed.
    account_limits::set_limit(&app.app.db, "many@example.com", Limit::Workspaces, None).await?;
    assert_eq!(new_workspace(&owner, "Fifth").await.status, StatusCode::FORBIDDEN);
    Ok(())
}

/// Fresh keys and a second workspace share one account's allowance; a replay costs nothing; the
/// refusal is a 429 with `Retry-After` that says what to do.
#[tokio::test]
async fn transactional_mail_is_counted_per_account_across_workspaces_and_keys() -> TestResult {
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let (api, _) = workspace_with_readers(&app, "volume@example.com", 1).await;
    let limits = account_limits::limits(&app.app.db, owner_id(&app, "volume@example.com").await?).await?;
    assert_eq!(limits.transactional_per_day, Defaults::TRANSACTIONAL_FIRST_DAY, "a new account starts warming up");
    account_limits::set_limit(&app.app.db, "volume@example.com", Limit::TransactionalPerDay, Some(3)).await?;
    let message = |n: usize| json!({"to": format!("r{n}@example.com"), "from": "x@campaign.test", "subject": "Hi", "text": "Hello"});
    for n in 0..3 {
        let (status, body) = api.send_message(&format!("k{n}"), &message(n)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    // A replay of an accepted message is not another message.
    let (status, _) = api.send_message("k0", &message(0)).await;
    assert_eq!(status, StatusCode::OK);
    let refused = api
        .client
        .post(format!("{}/api/v1/messages", api.base))
        .bearer_auth(&api.key)
        .header("Idempotency-Key", "k3")
        .json(&message(3))
        .send()
        .await?;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().get("retry-after").is_some(), "no Retry-After");
    let body: serde_json::Value = refused.json().await?;
    assert!(body["message"].as_str().unwrap_or_default().contains("ask the operator"), "{body}");

    // A fresh key in a second workspace of the same account: the same allowance.
    let owner = app.browser();
    assert!(owner.login("volume@example.com", "correct horse battery").await.ok());
    assert!(new_workspace(&owner, "Volume Two").await.ok());
    let second = owner.session().await.and_then(|s| s.current).expect("current workspace");
    app.verify_domain(&second.id, "campaign.test").await;
    let key = owner.run(CreateApiKey { name: "fresh".into(), role: None }).await.value();
    let fresh = Api { client: reqwest::Client::new(), base: app.base.clone(), key };
    let (status, body) = fresh.send_message("other", &message(9)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "a new workspace bought a new allowance: {body}");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM messages").fetch_one(&app.owner).await?;
    assert_eq!(stored, 3, "a refused message was stored");
    Ok(())
}

async fn owner_id(app: &TestApp, email: &str) -> anyhow::Result<herald_engine::UserId> {
    Ok(herald_engine::users::find_by_email(&app.app.db, email).await?.expect("account").id)
}

/// Test emails: a confirmed address, and a daily allowance per member across workspaces.
#[tokio::test]
async fn test_emails_need_a_confirmed_address_and_have_a_daily_allowance_per_account() -> TestResult {
    use herald_engine::campaigns::preview;
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "tester@example.com", 1).await;
    let (_, created) = api.post("/api/v1/campaigns", json!({"name": "T", "subject": "Hi", "list_ids": [list]})).await;
    let campaign: herald_engine::CampaignId = created["id"].as_str().unwrap_or_default().parse()?;
    let tenant: herald_engine::TenantId = sqlx::query_scalar("SELECT tenant_id FROM campaigns WHERE id = $1")
        .bind(campaign)
        .fetch_one(&app.owner)
        .await?;
    let s = &app.app;
    let send = |member, to: Vec<String>| async move {
        preview::test_send(
            &s.db,
            &s.signer,
            &s.base_url,
            &s.default_identity,
            &s.egress,
            tenant,
            member,
            Role::Author,
            campaign,
            &to,
        )
        .await
    };
    let tester = owner_id(&app, "tester@example.com").await?;
    account_limits::set_limit(&s.db, "tester@example.com", Limit::TestSendsPerDay, Some(3)).await?;
    send(tester, vec!["a@example.com".into(), "b@example.com".into()]).await?;
    let refused =
        send(tester, vec!["c@example.com".into(), "d@example.com".into()]).await.expect_err("past the allowance");
    assert!(matches!(refused, herald_engine::Error::Busy { .. }), "{refused:?}");
    assert!(refused.to_string().contains("3 test emails a day"), "{refused}");
    send(tester, vec!["c@example.com".into()]).await?;

    // A member who never confirmed their address sends none.
    let unconfirmed = app.browser();
    app.unconfirmed_account(&unconfirmed, "unconfirmed-tester@example.com", "correct horse battery").await;
    let id = owner_id(&app, "unconfirmed-tester@example.com").await?;
    let refused = send(id, vec!["e@example.com".into()]).await.expect_err("unconfirmed");
    assert!(matches!(refused, herald_engine::Error::Refused(_)), "{refused:?}");
    Ok(())
}

/// Invitations need a confirmed address, and system mail counts per account across its
/// workspaces.
#[tokio::test]
async fn invitations_need_a_confirmed_address_and_count_per_account() -> TestResult {
    let app = spawn_app_with(&[("HERALD_SYSTEM_MAIL_PER_ACCOUNT", "3")]).await;
    let unconfirmed = app.browser();
    app.unconfirmed_account(&unconfirmed, "phisher@example.com", "correct horse battery").await;
    assert!(new_workspace(&unconfirmed, "Your bank: verify your account at evil.example").await.ok());
    let r = unconfirmed.run(InviteMember { email: "victim@example.com".into(), role: Role::Viewer }).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.result);
    assert!(r.message().contains("Confirm your email address"), "{:?}", r.result);
    app.jobs_idle().await;
    assert!(app.sink.messages().await.iter().all(|m| !m.rcpt_to.iter().any(|r| r == "victim@example.com")));

    let (owner, _) = app.owner_with_workspace("inviter@example.com", "One").await;
    for n in 0..2 {
        assert!(owner.run(InviteMember { email: format!("m{n}@example.com"), role: Role::Viewer }).await.ok());
    }
    assert!(new_workspace(&owner, "Two").await.ok());
    assert!(owner.run(InviteMember { email: "m2@example.com".into(), role: Role::Viewer }).await.ok());
    let r = owner.run(InviteMember { email: "m3@example.com".into(), role: Role::Viewer }).await;
    assert!(!r.ok() && r.message().contains("your account's 3"), "{:?}", r.result);
    Ok(())
}

/// Subscription bombing: one address typed into 50 public lists of 5 workspaces gets the
/// per-recipient handful of confirmation mails in a day, not 50. (The engine's subscribe is
/// called directly: the per-IP form limiter would stop a single client first, and an attacker
/// has many addresses.)
#[tokio::test]
async fn one_address_signed_up_to_fifty_lists_gets_a_handful_of_confirmations() -> TestResult {
    use herald_engine::audience::consent::Origin;
    use herald_engine::audience::subscribe::{self, PublicContext, SubscribeRequest};
    let app = spawn_app().await;
    let s = &app.app;
    let cx = PublicContext { db: &s.db, signer: &s.signer, jobs: &s.jobs, base_url: &s.base_url };
    let per_recipient = herald_engine::sending::mail_quota::SystemMailLimits::default().per_recipient;
    let mut asked = 0;
    for w in 0..5 {
        let (owner, ws) = app.owner_with_workspace(&format!("bomb-ws{w}@example.com"), &format!("Lists {w}")).await;
        for l in 0..10 {
            let list = create_list(&owner, &format!("L{l}"), &format!("l{l}"), "double", "public").await;
            let req = SubscribeRequest {
                email: "target@example.com".into(),
                name: String::new(),
                list_ids: vec![list.parse()?],
                origin: Origin::new("test"),
            };
            let _ = subscribe::subscribe(&cx, ws.parse()?, req).await;
            asked += 1;
        }
        let _ = ws_slug(&owner).await;
    }
    app.jobs_idle().await;
    let mails =
        app.sink.messages().await.into_iter().filter(|m| m.rcpt_to.iter().any(|r| r == "target@example.com")).count();
    assert_eq!(asked, 50);
    assert_eq!(mails, per_recipient as usize, "{mails} confirmation mails to one address in a day");
    // Through the hosted form: the 422 that says the address had its share today, no mail.
    let (owner, _) = app.owner_with_workspace("bomb-form@example.com", "Form").await;
    let list = create_list(&owner, "Form", "form", "double", "public").await;
    let r = subscribe(&app, &ws_slug(&owner).await, "target@example.com", &[&list]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    app.jobs_idle().await;
    let after =
        app.sink.messages().await.iter().filter(|m| m.rcpt_to.iter().any(|r| r == "target@example.com")).count();
    assert_eq!(after, mails);
    Ok(())
}

/// Opt-in confirmations carry the workspace's name to any typed address: a workspace whose
/// account never confirmed its own address sends none.
#[tokio::test]
async fn an_unconfirmed_accounts_forms_send_no_confirmations() -> TestResult {
    let app = spawn_app().await;
    let b = app.browser();
    app.unconfirmed_account(&b, "unconfirmed-forms@example.com", "correct horse battery").await;
    assert!(new_workspace(&b, "Forms").await.ok());
    let list = create_list(&b, "News", "news", "double", "public").await;
    let r = subscribe(&app, &ws_slug(&b).await, "someone-else@example.com", &[&list]).await;
    assert!(!r.status().is_server_error(), "{}", r.status());
    app.jobs_idle().await;
    assert!(
        app.sink.messages().await.iter().all(|m| !m.rcpt_to.iter().any(|r| r == "someone-else@example.com")),
        "an unconfirmed account's form mailed a stranger"
    );
    app.verify_email("unconfirmed-forms@example.com").await;
    let r = subscribe(&app, &ws_slug(&b).await, "someone-else@example.com", &[&list]).await;
    assert!(r.status().is_success(), "{}", r.status());
    app.mail_text_to("someone-else@example.com").await;
    Ok(())
}

/// `herald admin suspend-account`: the account's keys answer 403, its sending campaign pauses
/// (so its delivery loops stop at their next claim), nothing can be started or resumed, queued
/// transactional mail is not claimed, and each workspace's audit log says so; reinstating lifts
/// all but the pause, which a member lifts by resuming.
#[tokio::test]
async fn a_suspended_account_sends_nothing_and_its_keys_answer_403() -> TestResult {
    use herald_engine::transactional::delivery::{Sender, TxDeliveryConfig};
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let (api, list) = workspace_with_readers(&app, "suspect@example.com", 3).await;
    let (_, c) =
        api.post("/api/v1/campaigns", json!({"name": "Spam", "subject": "Hi", "list_ids": [list], "body": "x"})).await;
    let id = c["id"].as_str().expect("campaign id").to_string();
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = api
        .send_message(
            "queued-before",
            &json!({"to": "x@example.com", "from": "a@campaign.test", "subject": "s", "text": "t"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (second, _) = workspace_with_readers(&app, "bystander-ws@example.com", 1).await;
    let (status, body) = second
        .send_message(
            "other-account",
            &json!({"to": "y@example.com", "from": "a@campaign.test", "subject": "s", "text": "t"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let affected = herald_engine::suspension::suspend(&app.app.db, "Suspect@example.com", "sending phishing").await?;
    assert_eq!(affected.len(), 1);
    let (status, body) = api.get("/api/v1/workspace").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("suspended"), "{body}");
    let (status, campaign): (String, Option<String>) =
        sqlx::query_as("SELECT status, pause_reason FROM campaigns WHERE id = $1::uuid")
            .bind(&id)
            .fetch_one(&app.owner)
            .await?;
    assert_eq!(status, "paused");
    assert!(campaign.unwrap_or_default().contains("sending phishing"));

    // The transactional claim passes the suspended workspace by and serves the other one.
    let cx = crate::transactional::tx_context(
        &app,
        TxDeliveryConfig::new("suspended-test".into(), app.app.default_identity.clone()),
    );
    let mut sender = Sender::new(&cx);
    sender.run_once().await?;
    let statuses: Vec<(String, String)> =
        sqlx::query_as("SELECT idempotency_key, status FROM messages ORDER BY idempotency_key")
            .fetch_all(&app.owner)
            .await?;
    assert_eq!(
        statuses,
        vec![("other-account".to_string(), "sent".to_string()), ("queued-before".to_string(), "queued".to_string())]
    );
    let audit: Vec<String> =
        sqlx::query_scalar("SELECT actor || ' ' || action FROM audit_log WHERE action LIKE 'account.%'")
            .fetch_all(&app.owner)
            .await?;
    assert_eq!(audit, vec!["the operator account.suspended".to_string()]);

    herald_engine::suspension::reinstate(&app.app.db, "suspect@example.com").await?;
    let (status, _) = api.get("/api/v1/workspace").await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/resume"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    Ok(())
}

/// The transactional stream's bounce and complaint guard: past 5 % hard bounces of the last 7
/// days (over at least 100 messages) the workspace's queued mail waits, with a reason its admin
/// sees, until the admin resumes.
#[tokio::test]
async fn a_transactional_stream_that_bounces_too_much_is_paused_with_a_reason() -> TestResult {
    use herald_app::pages::transactional::overview::{ResumeTransactional, TransactionalSettings};
    use herald_engine::webhooks::{EventKind, ProviderEvent};
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let (owner, ws) = app.owner_with_workspace("bouncy@example.com", "Bouncy").await;
    let tenant: herald_engine::TenantId = ws.parse()?;
    // 100 messages sent in the last days, 5 of them hard-bounced: at the limit, not past it.
    sqlx::query(
        "INSERT INTO messages (id, tenant_id, idempotency_key, request_hash, to_email, from_email, subject, html, text_body,
                               status, sent_at, bounced_at, next_attempt_at)
         SELECT gen_random_uuid(), $1, 'k' || i, 'h', 'r' || i || '@example.com', 'a@bouncy.test', 's', '', 't',
                'sent', now() - interval '1 hour', CASE WHEN i <= 5 THEN now() END, now()
         FROM generate_series(1, 100) i",
    )
    .bind(tenant)
    .execute(&app.owner)
    .await?;
    let target: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM messages WHERE idempotency_key = 'k50'").fetch_one(&app.owner).await?;
    let ev = |id: &str| ProviderEvent {
        event_id: id.into(),
        kind: EventKind::Bounce { hard: true },
        email: "r50@example.com".into(),
        message_id: Some(format!("msg.{target}@herald.test")),
        provider_id: None,
        at: chrono::Utc::now(),
        detail: "550 no such user".into(),
        delivery_token: None,
    };
    let view = owner.run(TransactionalSettings {}).await.value();
    assert_eq!(view.paused_reason, None);
    herald_engine::feedback::apply(&app.app.db, tenant, "test", &ev("bounce-50")).await?;
    let view = owner.run(TransactionalSettings {}).await.value();
    let why = view.paused_reason.expect("paused past 5 %");
    assert!(why.contains("6 of the 100"), "{why}");
    assert!(owner.run(ResumeTransactional {}).await.ok());
    assert_eq!(owner.run(TransactionalSettings {}).await.value().paused_reason, None);
    Ok(())
}

/// Mail that is not a campaign's goes nowhere from a suspended account either: a campaign's
/// test send, an automation's test, an identity's connection test, a subscribe confirmation
/// and an invite are each refused, and the sink stays empty.
#[tokio::test]
async fn a_suspended_account_sends_no_test_confirmation_or_invite() -> TestResult {
    use herald_app::pages::automations::editor::TestAutomation;
    use herald_app::pages::campaigns::preview::TestSendCampaign;
    use herald_app::pages::settings::sending::TestIdentity;
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "quiet@example.com", 1).await;
    let owner = app.browser();
    assert!(owner.login("quiet@example.com", "correct horse battery").await.ok());
    let (_, c) =
        api.post("/api/v1/campaigns", json!({"name": "Draft", "subject": "Hi", "list_ids": [list], "body": "x"})).await;
    let campaign: herald_types::CampaignId = c["id"].as_str().expect("campaign id").parse()?;
    let (status, a) = api
        .post(
            "/api/v1/automations",
            json!({"name": "Welcome", "trigger": {"kind": "list_confirmed", "list_id": list},
                   "steps": [{"action": {"kind": "email", "subject": "Welcome", "body": "Hello"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{a}");
    let automation: herald_types::AutomationId = a["id"].as_str().expect("automation id").parse()?;
    let (status, l) = api.post("/api/v1/lists", json!({"name": "Double", "opt_in": "double"})).await;
    assert_eq!(status, StatusCode::CREATED, "{l}");
    let double = l["id"].as_str().expect("list id").to_string();
    let slug = ws_slug(&owner).await;
    app.jobs_idle().await;
    let before = app.sink.messages().await.len();

    herald_engine::suspension::suspend(&app.app.db, "quiet@example.com", "under review").await?;
    let refused = |what: &str, r: Result<(), herald_app::error::AppError>| {
        assert!(
            matches!(&r, Err(herald_app::error::AppError::Refused(m)) if m.contains("suspended")),
            "{what} from a suspended account: {r:?}"
        );
    };
    let r = owner.run(TestSendCampaign { id: campaign, addresses: "tester@example.com".into() }).await;
    refused("a test send", r.result.map(|_| ()));
    let r = owner.run(TestAutomation { id: automation, address: "tester@example.com".into() }).await;
    refused("an automation's test", r.result.map(|_| ()));
    let r = owner.run(TestIdentity { id: String::new() }).await;
    refused("an identity's connection test", r.result.map(|_| ()));
    let r = owner.run(InviteMember { email: "newcomer@example.com".into(), role: Role::Author }).await;
    refused("an invite", r.result.map(|_| ()));
    let form = [("email", "stranger@example.com"), ("name", "S"), ("website", ""), ("list", double.as_str())];
    let res = reqwest::Client::new().post(format!("{}/s/{slug}", app.base)).form(&form).send().await?;
    assert!(!res.status().is_server_error(), "the form answers without a 5xx: {}", res.status());

    app.jobs_idle().await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let after: Vec<Vec<String>> = app.sink.messages().await.into_iter().skip(before).map(|m| m.rcpt_to).collect();
    assert!(after.is_empty(), "mail went out from a suspended account: {after:?}");
    Ok(())
}
