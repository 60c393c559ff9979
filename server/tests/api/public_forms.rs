//! Public forms (the hosted page, embedded forms): an entry waits for the click in its
//! confirmation mail whatever the list's opt-in setting, so a welcome automation greets only an
//! address that proved itself; past a list's budget an entry needs a solved proof-of-work
//! challenge, and a solution counts once; the name typed with an entry reaches mail only after
//! the click, and only escaped.
//!
//! The budgets and the used solutions live in Postgres (`rate_buckets`, `public_entry_solutions`),
//! which is what makes every web process share them; the tests cannot start two `TestApp`s on
//! one database, so they check the behaviour through one process and rely on where it is kept.

use std::time::Duration;

use base64::Engine as _;
use chrono::Utc;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::automations::create_live;
use crate::campaigns_api::workspace_with_readers;
use crate::helpers::*;

const WELCOME: &str = "Welcome aboard";

/// A live welcome automation on `list`: one email, at once, greeting the reader by name.
async fn welcome_on(api: &Api, list: &str) {
    create_live(
        api,
        json!({"name": "Welcome", "trigger": {"kind": "list_confirmed", "list_id": list},
               "steps": [{"action": {"kind": "email", "subject": WELCOME,
                                     "body": "Hello {{ reader.name }}, glad you are here."}}]}),
    )
    .await;
}

/// The slug of the workspace `list` belongs to.
async fn slug_of(app: &TestApp, list: &str) -> String {
    sqlx::query_scalar("SELECT t.slug FROM tenants t JOIN lists l ON l.tenant_id = t.id WHERE l.id = $1::uuid")
        .bind(list)
        .fetch_one(&app.owner)
        .await
        .expect("the workspace's slug")
}

/// One entry as a form sends it (the honeypot left empty).
fn entry<'a>(email: &'a str, name: &'a str, list: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![("email", email), ("name", name), ("website", ""), ("list", list)]
}

/// Posts a form to the workspace's page: as a browser without JavaScript does, or (`json`) as
/// an embedded form's script does.
async fn post_form(app: &TestApp, slug: &str, form: &[(&str, &str)], json: bool) -> reqwest::Response {
    let mut req = reqwest::Client::new().post(format!("{}/s/{slug}", app.base)).form(form);
    if json {
        req = req.header("Accept", "application/json");
    }
    req.send().await.expect("request")
}

/// The token of the confirmation link in the newest mail to `to`.
async fn confirmation_token(app: &TestApp, to: &str) -> String {
    let text = app.mail_text_to(to).await;
    let start = text.find("/confirm/").expect("a confirmation link") + "/confirm/".len();
    text[start..].split_whitespace().next().expect("token").to_string()
}

/// Mails whose subject is `subject`, by recipient.
async fn mails_titled(app: &TestApp, subject: &str) -> Vec<String> {
    app.sink.messages().await.into_iter().filter(|m| m.parse().subject == subject).flat_map(|m| m.rcpt_to).collect()
}

async fn count(app: &TestApp, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(&app.owner).await.expect("count")
}

#[tokio::test]
async fn a_single_opt_in_form_welcomes_only_the_address_that_clicked() -> TestResult {
    let app = spawn_app().await;
    // A single opt-in public list, with a reader the API put there (confirmed at once, as
    // single opt-in still means for the API) before the automation existed.
    let (api, list) = workspace_with_readers(&app, "forms@example.com", 1).await;
    welcome_on(&api, &list).await;
    let slug = slug_of(&app, &list).await;

    // Five addresses typed into the form: five confirmation mails, nobody on the list.
    let typed: Vec<String> = (1..=5).map(|i| format!("typed{i}@example.com")).collect();
    for address in &typed {
        let r = post_form(&app, &slug, &entry(address, "Typed", &list), false).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.text().await?.contains("Check your inbox"));
    }
    for address in &typed {
        let mail = app.sink.wait_for_recipient(address, Duration::from_secs(15)).await.expect("a mail").parse();
        assert!(mail.subject.starts_with("Please confirm your subscription"), "{}", mail.subject);
    }
    // However often the scheduler runs, no typed address has entered the automation.
    scheduler_tick(&app).await;
    app.jobs_idle().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(count(&app, "SELECT count(*) FROM automation_runs").await, 0);
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM subscriptions s JOIN readers r ON r.id = s.reader_id
                     WHERE r.email LIKE 'typed%' AND s.status = 'unconfirmed'"
        )
        .await,
        5
    );
    assert!(mails_titled(&app, WELCOME).await.is_empty(), "a welcome went to a typed address");
    for address in &typed {
        let to_it = app.sink.messages().await.into_iter().filter(|m| m.rcpt_to.contains(address)).count();
        assert_eq!(to_it, 1, "{address} got more than its confirmation");
    }

    // A mail scanner fetching the link confirms nothing; the reader's click does.
    let token = confirmation_token(&app, &typed[0]).await;
    let preview = reqwest::get(format!("{}/confirm/{token}", app.base)).await?;
    assert_eq!(preview.status(), StatusCode::OK);
    assert_eq!(count(&app, "SELECT count(*) FROM automation_runs").await, 0);
    let done = reqwest::Client::new().post(format!("{}/confirm/{token}", app.base)).send().await?;
    assert_eq!(done.status(), StatusCode::OK);
    scheduler_tick(&app).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while mails_titled(&app, WELCOME).await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no welcome after the click");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    scheduler_tick(&app).await;
    app.jobs_idle().await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(mails_titled(&app, WELCOME).await, vec![typed[0].clone()], "exactly one welcome, to the clicker");
    assert_eq!(count(&app, "SELECT count(*) FROM automation_runs").await, 1);

    // The ledger (and the reader's record, as the GDPR export shows it): asked, then confirmed.
    let reader: i64 =
        sqlx::query_scalar("SELECT id FROM readers WHERE email = $1").bind(&typed[0]).fetch_one(&app.owner).await?;
    let (status, detail) = api.get(&format!("/api/v1/readers/{reader}")).await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    let history: Vec<(String, String)> = detail["consent"]
        .as_array()
        .expect("consent history")
        .iter()
        .rev()
        .map(|e| (e["action"].as_str().unwrap_or("").into(), e["source"].as_str().unwrap_or("").into()))
        .collect();
    let want = [("subscribe_requested", "embedded_form"), ("confirm", "confirmation_link")];
    assert_eq!(history, want.map(|(a, s)| (a.to_string(), s.to_string())), "{detail}");
    let not_clicked: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT e.action FROM consent_events e JOIN readers r ON r.id = e.reader_id
         WHERE r.email IN ('typed2@example.com', 'typed3@example.com', 'typed4@example.com', 'typed5@example.com')",
    )
    .fetch_all(&app.owner)
    .await?;
    assert_eq!(not_clicked, vec!["subscribe_requested".to_string()]);
    Ok(())
}

/// The name is a stranger's words until the inbox's owner clicks: the confirmation mail shows
/// none of it, the reader's record gets it only with the click, and mail shows it escaped.
#[tokio::test]
async fn a_name_typed_into_a_form_reaches_mail_only_escaped_and_after_the_click() -> TestResult {
    const NAME: &str = r#"<a href="https://evil.test">win</a>"#;
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "names@example.com", 1).await;
    welcome_on(&api, &list).await;
    let slug = slug_of(&app, &list).await;
    let r = post_form(&app, &slug, &entry("named@example.com", NAME, &list), false).await;
    assert_eq!(r.status(), StatusCode::OK);

    let confirmation =
        app.sink.wait_for_recipient("named@example.com", Duration::from_secs(15)).await.expect("a mail").parse();
    let (html, text) = (confirmation.html.unwrap_or_default(), confirmation.text.unwrap_or_default());
    for part in [&html, &text, &confirmation.subject] {
        assert!(!part.contains("evil.test"), "the confirmation shows the name: {part}");
    }
    let name: String =
        sqlx::query_scalar("SELECT name FROM readers WHERE email = 'named@example.com'").fetch_one(&app.owner).await?;
    assert_eq!(name, "", "the typed name was stored before the click");

    let token = confirmation_token(&app, "named@example.com").await;
    let done = reqwest::Client::new().post(format!("{}/confirm/{token}", app.base)).send().await?;
    assert_eq!(done.status(), StatusCode::OK);
    let name: String =
        sqlx::query_scalar("SELECT name FROM readers WHERE email = 'named@example.com'").fetch_one(&app.owner).await?;
    assert_eq!(name, NAME);

    scheduler_tick(&app).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let welcome = loop {
        let found = app.sink.messages().await.into_iter().map(|m| m.parse()).find(|m| m.subject == WELCOME);
        if let Some(m) = found {
            break m;
        }
        assert!(tokio::time::Instant::now() < deadline, "no welcome after the click");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let html = welcome.html.unwrap_or_default();
    // Shown as text (the quotes need no escaping in text), never as a link.
    assert!(!html.contains("<a href=\"https://evil.test\""), "{html}");
    assert!(html.contains("&lt;a href=") && html.contains("&lt;/a&gt;"), "the name is not in the mail escaped: {html}");
    Ok(())
}

/// What the form's script does: solves the challenge and encodes it with its solution as the
/// `altcha` field.
fn solve(challenge: &altcha::Challenge) -> String {
    let solution = altcha::solve_challenge(altcha::SolveChallengeOptions::new(challenge))
        .expect("a challenge Herald can solve")
        .expect("solved in time");
    base64::engine::general_purpose::STANDARD.encode(json!({"challenge": challenge, "solution": solution}).to_string())
}

/// The challenge the re-rendered form carries (HTML-escaped in its `data-entry-check`).
fn challenge_in(page: &str) -> altcha::Challenge {
    const ATTRIBUTE: &str = "data-entry-check=\"";
    let start = page.find(ATTRIBUTE).expect("the form carries a challenge") + ATTRIBUTE.len();
    let end = start + page[start..].find('"').expect("the attribute ends");
    let json = page[start..end]
        .replace("&quot;", "\"")
        .replace("&#x2f;", "/")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).expect("a challenge")
}

#[tokio::test]
async fn past_its_budget_a_form_asks_for_work_and_takes_each_solution_once() -> TestResult {
    let app = spawn_app_with(&[
        ("HERALD_PUBLIC_ENTRIES_PER_LIST_PER_HOUR", "2"),
        ("HERALD_PUBLIC_ENTRY_CHALLENGE_COST", "10"),
        ("HERALD_PUBLIC_ENTRY_CHALLENGE_MAX_COUNTER", "50"),
    ])
    .await;
    let (owner, _) = app.owner_with_workspace("budget@example.com", "Budget").await;
    let slug = crate::audience::ws_slug(&owner).await;
    let list = crate::audience::create_list(&owner, "Open", "open", "single", "public").await;
    let readers = |email: &'static str| {
        let owner = app.owner.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM readers WHERE email = $1")
                .bind(email)
                .fetch_one(&owner)
                .await
                .expect("count")
        }
    };

    for address in ["b1@example.com", "b2@example.com"] {
        assert_eq!(post_form(&app, &slug, &entry(address, "B", &list), false).await.status(), StatusCode::OK);
    }
    // The third: the form again, with what was typed, a challenge and the script that solves it
    // (under this response's CSP nonce); nothing stored, nothing mailed.
    let r = post_form(&app, &slug, &entry("b3@example.com", "Bea Three", &list), false).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let csp = r.headers().get("content-security-policy").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let page = r.text().await?;
    assert!(page.contains("value=\"b3@example.com\"") && page.contains("value=\"Bea Three\""), "{page}");
    assert!(page.contains(&format!("value=\"{list}\" checked")), "{page}");
    let nonce = csp.split("'nonce-").nth(1).and_then(|rest| rest.split('\'').next()).expect("a CSP nonce");
    assert!(page.contains(&format!("<script nonce=\"{nonce}\">")), "{page}");
    assert!(page.contains("name=\"altcha\""), "{page}");
    assert_eq!(readers("b3@example.com").await, 0);

    // Solved as the page's script does: the entry goes through.
    let solved = solve(&challenge_in(&page));
    let mut form = entry("b3@example.com", "Bea Three", &list);
    form.push(("altcha", &solved));
    let r = post_form(&app, &slug, &form, false).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await?.contains("Check your inbox"));
    app.sink.wait_for_recipient("b3@example.com", Duration::from_secs(15)).await.expect("b3's confirmation");

    // The same solution again: refused, with a fresh challenge.
    let mut replay = entry("b4@example.com", "", &list);
    replay.push(("altcha", &solved));
    let r = post_form(&app, &slug, &replay, true).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let body: Value = r.json().await?;
    assert_eq!(body["challenge_required"], true, "{body}");
    assert!(body["challenge"]["signature"].is_string(), "{body}");
    assert_eq!(readers("b4@example.com").await, 0);

    // A script's form: the challenge as JSON, solved, accepted.
    let r = post_form(&app, &slug, &entry("b4@example.com", "", &list), true).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: Value = r.json().await?;
    assert_eq!((body["ok"].clone(), body["challenge_required"].clone()), (json!(false), json!(true)), "{body}");
    assert_eq!(body["challenge_url"], format!("{}/s/{slug}/challenge.json", app.base));
    let solved = solve(&serde_json::from_value(body["challenge"].clone())?);
    let mut form = entry("b4@example.com", "", &list);
    form.push(("altcha", &solved));
    let r = post_form(&app, &slug, &form, true).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await?["ok"], true);

    // One fetched ahead from the challenge address works the same; one for another workspace
    // does not count here.
    let r = reqwest::get(format!("{}/s/{slug}/challenge.json", app.base)).await?;
    assert_eq!(r.status(), StatusCode::OK);
    let solved = solve(&r.json().await?);
    let (other, _) = app.owner_with_workspace("other-budget@example.com", "Elsewhere").await;
    let other_slug = crate::audience::ws_slug(&other).await;
    let foreign = solve(&reqwest::get(format!("{}/s/{other_slug}/challenge.json", app.base)).await?.json().await?);
    let mut form = entry("b5@example.com", "", &list);
    form.push(("altcha", &foreign));
    assert_eq!(post_form(&app, &slug, &form, true).await.status(), StatusCode::FORBIDDEN);
    let mut form = entry("b5@example.com", "", &list);
    form.push(("altcha", &solved));
    assert_eq!(post_form(&app, &slug, &form, true).await.status(), StatusCode::OK);

    // Each went through as a pending entry: on the list only once its reader clicks.
    assert_eq!(count(&app, "SELECT count(*) FROM subscriptions WHERE status = 'unconfirmed'").await, 5);
    assert_eq!(count(&app, "SELECT count(*) FROM subscriptions WHERE status = 'confirmed'").await, 0);
    assert_eq!(count(&app, "SELECT count(*) FROM public_entry_solutions").await, 3);
    Ok(())
}

/// Runs the automation scheduler now (the app's own runs every second too; a tick is idempotent).
async fn scheduler_tick(app: &TestApp) {
    herald_engine::automations::scheduler::tick(&app.app.db, &app.app.jobs, Utc::now()).await.expect("scheduler tick");
}
