//! Verified sign-up: an account whose address nobody confirmed (made before sign-up
//! mailed its link first, see `accounts`) sets up its workspace, but sending a campaign,
//! creating an API key and accepting an invite wait for a mailed confirmation link (single-use,
//! signed, expiring), which can be mailed again. Invite acceptance is covered in `invites`.

use herald_app::auth::{CreateWorkspace, ResendVerification, SwitchWorkspace, VerifyEmail};
use herald_app::error::AppError;
use herald_app::pages::campaigns::send_panel::{ScheduleCampaign, SendCampaign};
use herald_app::pages::settings::api_keys::CreateApiKey;
use herald_types::CampaignId;
use reqwest::StatusCode;
use serde_json::json;

use crate::campaigns_api::workspace_with_readers;
use crate::helpers::*;

const PASSWORD: &str = "correct horse battery";

#[tokio::test]
async fn an_unconfirmed_account_sets_up_but_cannot_create_keys_until_it_opens_the_link() -> TestResult {
    let app = spawn_app().await;
    let b = app.browser();
    app.unconfirmed_account(&b, "fresh@example.com", PASSWORD).await;
    assert!(!b.session().await.expect("logged in").email_verified);
    // Its own workspace, at once.
    assert!(b.run(CreateWorkspace { name: "Fresh".into(), slug: String::new() }).await.ok());
    let r = b.run(CreateApiKey { name: "ci".into(), role: None }).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.result);
    assert!(r.message().contains("Confirm your email address"), "{:?}", r.result);

    // "Send the link again" mails a second one; the first still works (both are for this
    // address), once.
    // (Both links are the same token when they were signed within the same second; waiting
    // for a different one hung this test.)
    let first = app.verification_token("fresh@example.com").await;
    assert!(b.run(ResendVerification {}).await.ok());
    let link = app.verification_tokens("fresh@example.com", 2).await.pop().unwrap_or_default();
    let anyone = app.browser();
    let r = anyone.run(VerifyEmail { token: first }).await;
    assert!(r.ok(), "{:?}", r.result);
    let r = anyone.run(VerifyEmail { token: link.clone() }).await;
    assert!(matches!(r.result, Err(AppError::Conflict(_))), "used: {} {:?}", r.status, r.result);
    assert!(r.message().contains("used already"), "{:?}", r.result);
    assert!(b.session().await.expect("logged in").email_verified);
    let r = b.run(CreateApiKey { name: "ci".into(), role: None }).await;
    assert!(r.ok(), "{:?}", r.result);
    // Confirmed: nothing more to send.
    let r = b.run(ResendVerification {}).await;
    assert!(matches!(r.result, Err(AppError::Conflict(_))), "{} {:?}", r.status, r.result);

    // Forged and tampered links.
    let forged = herald_engine::infra::tokens::Signer::new(b"another-key-another-key-another-key").sign(
        "verify-email",
        Some(chrono::Utc::now().timestamp() + 600),
        &("00000000-0000-0000-0000-000000000000", "fresh@example.com"),
    );
    for bad in [forged.as_str(), "garbage", "", &format!("{link}x")] {
        let r = anyone.run(VerifyEmail { token: bad.into() }).await;
        assert!(matches!(r.result, Err(AppError::Invalid(_))), "{bad}: {} {:?}", r.status, r.result);
    }
    // Expired.
    let user = herald_engine::users::find_by_email(&app.app.db, "fresh@example.com").await?.expect("user").id;
    let expired =
        app.app.signer.sign("verify-email", Some(chrono::Utc::now().timestamp() - 1), &(user, "fresh@example.com"));
    let r = anyone.run(VerifyEmail { token: expired }).await;
    assert!(r.message().contains("expired"), "{:?}", r.result);
    Ok(())
}

#[tokio::test]
async fn an_unconfirmed_author_cannot_send_or_schedule_a_campaign() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "verified-owner@example.com", 2).await;
    let (status, c) = api.post("/api/v1/campaigns", json!({"name": "Gate", "subject": "s", "list_ids": [list]})).await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["id"].as_str().expect("id").to_string();
    let campaign: CampaignId = id.parse().expect("campaign id");
    // An author who has not opened the link, added to the workspace.
    let author = app.browser();
    app.unconfirmed_account(&author, "unconfirmed@example.com", PASSWORD).await;
    sqlx::query(
        "INSERT INTO memberships (tenant_id, user_id, role)
         SELECT l.tenant_id, u.id, 'author' FROM lists l, users u WHERE l.id = $1::uuid AND u.email = $2",
    )
    .bind(&list)
    .bind("unconfirmed@example.com")
    .execute(&app.owner)
    .await?;
    let tenant: String = sqlx::query_scalar("SELECT tenant_id::text FROM lists WHERE id = $1::uuid")
        .bind(&list)
        .fetch_one(&app.owner)
        .await?;
    assert!(author.run(SwitchWorkspace { workspace_id: tenant }).await.ok());

    let r = author.run(SendCampaign { id: campaign }).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.result);
    let at = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    let r = author.run(ScheduleCampaign { id: campaign, at, timezone: "UTC".into() }).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.result);
    let (_, stats) = api.get(&format!("/api/v1/campaigns/{id}")).await;
    assert_eq!(stats["status"], "draft");

    let token = app.verification_token("unconfirmed@example.com").await;
    assert!(app.browser().run(VerifyEmail { token }).await.ok());
    let r = author.run(SendCampaign { id: campaign }).await;
    assert!(r.ok(), "{:?}", r.result);
    Ok(())
}

/// A mail scanner that fetches the link confirms nothing (only the page's button,
/// a POST, does), and a password reset, which proves the mailbox, takes an account that never
/// confirmed its address back from a squatter with the squatter's second factor removed. A
/// confirmed account keeps its second factor through a reset.
#[tokio::test]
async fn opening_the_link_confirms_nothing_and_a_reset_removes_a_squatters_second_factor() -> TestResult {
    use herald_app::pages::forgot_password::RequestPasswordReset;
    use herald_app::pages::reset_password::ResetPassword;
    use herald_engine::two_factor;
    let app = spawn_app().await;
    let (db, signer) = (&app.app.db, &app.app.signer);
    let squatter = app.browser();
    app.unconfirmed_account(&squatter, "victim@example.com", PASSWORD).await;
    let token = app.verification_token("victim@example.com").await;
    let scanner = app.browser();
    let page = scanner.get(&format!("/verify-email?token={token}")).await;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await?.contains("Confirm my address"), "the page offers the button");
    assert!(!squatter.session().await.expect("logged in").email_verified, "a GET confirmed the address");

    // A squatter with two-factor on an address nobody proved: enrolment needs a confirmed
    // address now, so the state is made as it was reachable before (confirmed for enrolment,
    // then the confirmation taken back).
    let enrol = |user| async move {
        let e = two_factor::start_enrolment(db, signer, user, PASSWORD).await?;
        let now = chrono::Utc::now();
        two_factor::confirm_enrolment(db, signer, user, &two_factor::code_at(&e.secret_base32, now)?, now).await
    };
    let victim = herald_engine::users::find_by_email(db, "victim@example.com").await?.expect("user").id;
    app.verify_email("victim@example.com").await;
    enrol(victim).await?;
    sqlx::query("UPDATE users SET email_verified_at = NULL WHERE id = $1").bind(victim).execute(&app.owner).await?;
    assert!(two_factor::is_enabled(db, victim).await?);
    let owner = app.browser();
    assert!(owner.run(RequestPasswordReset { email: "victim@example.com".into() }).await.ok());
    let link = crate::account_security::wait_for_links(&app, "victim@example.com", 1).await.remove(0);
    let r = owner.run(ResetPassword { token: link, password: "the owner's own secret".into() }).await;
    assert!(r.ok(), "{:?}", r.result);
    assert!(!two_factor::is_enabled(db, victim).await?, "the squatter's second factor survived the reset");
    assert!(owner.login("victim@example.com", "the owner's own secret").await.ok());
    assert!(owner.session().await.expect("in without a second step").email_verified, "the reset proved the mailbox");

    // A confirmed account's second factor is its owner's: a reset keeps it.
    let (_b, _) = app.owner_with_workspace("careful@example.com", "Careful").await;
    let careful = herald_engine::users::find_by_email(db, "careful@example.com").await?.expect("user").id;
    enrol(careful).await?;
    assert!(owner.run(RequestPasswordReset { email: "careful@example.com".into() }).await.ok());
    let link = crate::account_security::wait_for_links(&app, "careful@example.com", 1).await.remove(0);
    assert!(owner.run(ResetPassword { token: link, password: "another long secret".into() }).await.ok());
    assert!(two_factor::is_enabled(db, careful).await?, "a confirmed account lost its second factor");
    Ok(())
}
