//! Lists, the hosted subscribe page, double opt-in, leaving, the consent ledger and suppressions.

use crate::helpers::*;
use herald_app::pages::audience::ListLists;
use herald_app::pages::audience::overview::{DeleteList, SaveList};
use herald_app::pages::audience::reader::{EraseReader, GetReader, UpdateReader};
use herald_app::pages::audience::readers::{AddReader, BulkReaders, FilterForm, SearchReaders};
use herald_app::pages::audience::suppressions::{AddSuppressions, RemoveSuppression, SearchSuppressions};
use herald_types::ListId;
use reqwest::StatusCode;
use std::time::Duration;

/// Creates a list through the UI's server function and returns its id.
pub async fn create_list(b: &Browser, name: &str, slug: &str, opt_in: &str, visibility: &str) -> String {
    let r = b
        .run(SaveList {
            id: String::new(),
            name: name.into(),
            slug: slug.into(),
            description: "A list".into(),
            opt_in: opt_in.parse().expect("opt-in"),
            visibility: visibility.parse().expect("visibility"),
        })
        .await;
    assert!(r.ok(), "save_list: {:?} {:?}", r.status, r.result);
    let lists = b.run(ListLists {}).await.value();
    lists.lists.iter().find(|l| l.list.slug == slug).map(|l| l.list.id.to_string()).expect("list id")
}

/// Posts the hosted form the way a browser without JavaScript does.
pub async fn subscribe(app: &TestApp, ws_slug: &str, email: &str, lists: &[&str]) -> reqwest::Response {
    let mut form: Vec<(&str, &str)> = vec![("email", email), ("name", "Reader"), ("website", "")];
    form.extend(lists.iter().map(|l| ("list", *l)));
    reqwest::Client::new().post(format!("{}/s/{ws_slug}", app.base)).form(&form).send().await.expect("request")
}

/// Posts the hosted form, then clicks the link in the confirmation mail it sends, as the owner
/// of the inbox does: a public form's entry is on its lists only then, on a single opt-in list
/// too.
pub async fn subscribe_confirmed(app: &TestApp, ws_slug: &str, email: &str, lists: &[&str]) {
    assert_eq!(subscribe(app, ws_slug, email, lists).await.status(), StatusCode::OK, "the form took {email}");
    confirm_from_inbox(app, email).await;
}

/// Confirms through the newest confirmation mail to `email`, and takes that mail out of the
/// sink, so a later wait for mail to the address sees only what comes next.
pub async fn confirm_from_inbox(app: &TestApp, email: &str) {
    let mail = app
        .sink
        .wait_for_recipient(email, Duration::from_secs(15))
        .await
        .unwrap_or_else(|| panic!("no confirmation mail to {email}"));
    let token = link(&mail.parse().text.unwrap_or_default(), "/confirm/");
    app.sink.discard(mail.id).await;
    let done = reqwest::Client::new().post(format!("{}/confirm/{token}", app.base)).send().await.expect("post");
    assert_eq!(done.status(), StatusCode::OK, "{email} confirmed");
}

fn link(text: &str, path: &str) -> String {
    let start = text.find(path).expect("link in mail") + path.len();
    text[start..].split_whitespace().next().expect("token").to_string()
}

pub async fn ws_slug(b: &Browser) -> String {
    b.session().await.and_then(|s| s.current).map(|w| w.slug).unwrap_or_default()
}

async fn counts(b: &Browser, list: &str) -> (i64, i64, i64) {
    let view = b.run(ListLists {}).await.value();
    view.lists
        .iter()
        .find(|l| l.list.id.to_string() == list)
        .map(|l| (l.confirmed, l.unconfirmed, l.unsubscribed))
        .unwrap_or((-1, -1, -1))
}

/// The readers search as the page sends it: no status filter, the first page.
fn search(q: &str, list: &str, attribute: &str) -> SearchReaders {
    let filter = FilterForm { q: q.into(), list: list.into(), attribute: attribute.into(), ..FilterForm::default() };
    SearchReaders { filter, before: None }
}

/// An opt-in confirmation is the workspace's mail. Without a verified sender it
/// comes from Herald's address under the workspace's name (not a bare `noreply@localhost`);
/// with a default sender on a domain whose DKIM key is published, from that sender, signed.
#[tokio::test]
async fn opt_in_confirmations_come_from_the_workspace() -> TestResult {
    use herald_app::pages::settings::general::UpdateWorkspaceSettings;
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("sender-author@example.com", "Garden Notes").await;
    let slug = ws_slug(&owner).await;
    let list = create_list(&owner, "Weekly", "weekly", "double", "public").await;
    let header = |m: &herald_devtools::smtp_sink::ParsedMail, name: &str| {
        m.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone()).unwrap_or_default()
    };

    assert!(subscribe(&app, &slug, "first@example.com", &[&list]).await.status().is_success());
    let first = app.sink.wait_for_recipient("first@example.com", Duration::from_secs(15)).await.expect("mail").parse();
    let from = header(&first, "From");
    assert!(from.contains("Garden Notes via Herald") && from.contains("noreply@localhost"), "{from}");

    let r = owner
        .run(UpdateWorkspaceSettings {
            name: "Garden Notes".into(),
            postal_address: "1 Main Street".into(),
            default_from_name: "The Gardener".into(),
            default_from_email: "notes@garden.test".into(),
            time_zone: None,
        })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    app.verify_domain(&ws, "garden.test").await;
    // Verified but its DKIM key not published yet: still Herald's address.
    assert!(subscribe(&app, &slug, "second@example.com", &[&list]).await.status().is_success());
    let second =
        app.sink.wait_for_recipient("second@example.com", Duration::from_secs(15)).await.expect("mail").parse();
    assert!(header(&second, "From").contains("Garden Notes via Herald"), "{:?}", second.headers);
    sqlx::query("UPDATE sending_domains SET dkim_verified_at = now() WHERE domain = 'garden.test'")
        .execute(&app.owner)
        .await?;
    assert!(subscribe(&app, &slug, "third@example.com", &[&list]).await.status().is_success());
    let third = app.sink.wait_for_recipient("third@example.com", Duration::from_secs(15)).await.expect("mail").parse();
    let from = header(&third, "From");
    assert!(from.contains("The Gardener") && from.contains("notes@garden.test"), "{from}");
    assert!(header(&third, "DKIM-Signature").contains("d=garden.test"), "{:?}", third.headers);
    Ok(())
}

#[tokio::test]
async fn double_opt_in_happy_path_writes_the_ledger() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("author@example.com", "Weekly News").await;
    let slug = ws_slug(&owner).await;
    let list = create_list(&owner, "Weekly", "weekly", "double", "public").await;

    let page = reqwest::get(format!("{}/s/{slug}", app.base)).await.expect("page").text().await.unwrap_or_default();
    assert!(page.contains("Subscribe to Weekly News") && page.contains("name=\"website\""));
    let r = subscribe(&app, &slug, "Reader@Example.com", &[&list]).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap_or_default().contains("Check your inbox"));
    assert_eq!(counts(&owner, &list).await, (0, 1, 0));

    let text = app.mail_text_to("reader@example.com").await;
    let token = link(&text, "/confirm/");
    // GET only shows what will happen (mail scanners prefetch links).
    let preview =
        reqwest::get(format!("{}/confirm/{token}", app.base)).await.expect("get").text().await.unwrap_or_default();
    assert!(preview.contains("Confirm subscription") && preview.contains("Weekly"));
    assert_eq!(counts(&owner, &list).await, (0, 1, 0));
    let done = reqwest::Client::new().post(format!("{}/confirm/{token}", app.base)).send().await.expect("post");
    assert_eq!(done.status(), StatusCode::OK);
    assert!(done.text().await.unwrap_or_default().contains("You are subscribed"));
    assert_eq!(counts(&owner, &list).await, (1, 0, 0));

    // Reused link.
    let again = reqwest::Client::new().post(format!("{}/confirm/{token}", app.base)).send().await.expect("post");
    assert_eq!(again.status(), StatusCode::BAD_REQUEST);

    let actions: Vec<(String, String)> = sqlx::query_as("SELECT action, source FROM consent_events ORDER BY id")
        .fetch_all(&app.owner)
        .await
        .expect("ledger");
    assert_eq!(actions.iter().map(|a| a.0.as_str()).collect::<Vec<_>>(), ["subscribe_requested", "confirm"]);
    let wording: Option<String> =
        sqlx::query_scalar("SELECT wording FROM consent_events WHERE action = 'subscribe_requested'")
            .fetch_one(&app.owner)
            .await
            .expect("wording");
    assert!(wording.unwrap_or_default().contains("Weekly News may email you"));
}

#[tokio::test]
async fn forged_expired_and_other_workspace_tokens_are_4xx() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("a@example.com", "Tokens").await;
    let slug = ws_slug(&owner).await;
    let list = create_list(&owner, "L", "l1", "double", "public").await;
    subscribe(&app, &slug, "t@example.com", &[&list]).await;
    let token = link(&app.mail_text_to("t@example.com").await, "/confirm/");
    let client = reqwest::Client::new();
    for bad in ["x", "a.b", &format!("{token}x"), &token[1..]] {
        for path in ["confirm", "u"] {
            let r = client
                .post(format!("{}/{path}/{bad}", app.base))
                .body("List-Unsubscribe=One-Click")
                .send()
                .await
                .expect("post");
            assert!(r.status().is_client_error(), "{path}/{bad} → {}", r.status());
        }
    }
    // A confirmation token is not an unsubscribe token.
    let r = client.get(format!("{}/u/{token}", app.base)).send().await.expect("get");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // Expired: signed with the right key but a past expiry.
    let signer = &app.app.signer;
    let expired = signer.sign("confirm", Some(1), &serde_json::json!({"t": uuid::Uuid::nil(), "r": 1, "l": []}));
    let r = client.post(format!("{}/confirm/{expired}", app.base)).send().await.expect("post");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap_or_default().contains("expired"));
}

#[tokio::test]
async fn the_form_never_reveals_known_addresses_and_does_not_mail_bomb() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("b@example.com", "Enum").await;
    let slug = ws_slug(&owner).await;
    let list = create_list(&owner, "L", "l2", "double", "public").await;
    let first = subscribe(&app, &slug, "victim@example.com", &[&list]).await.text().await.unwrap_or_default();
    let second = subscribe(&app, &slug, "victim@example.com", &[&list]).await.text().await.unwrap_or_default();
    let fresh = subscribe(&app, &slug, "new@example.com", &[&list]).await.text().await.unwrap_or_default();
    assert_eq!(first, second);
    assert_eq!(first, fresh);
    app.mail_text_to("new@example.com").await;
    app.jobs_idle().await;
    let to_victim =
        app.sink.messages().await.iter().filter(|m| m.rcpt_to.iter().any(|r| r == "victim@example.com")).count();
    assert_eq!(to_victim, 1, "one confirmation per address per list per window");
    // Honeypot: filled in → same answer, nothing stored.
    let r = reqwest::Client::new()
        .post(format!("{}/s/{slug}", app.base))
        .form(&[("email", "bot@example.com"), ("list", list.as_str()), ("website", "http://spam")])
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    let bots: i64 = sqlx::query_scalar("SELECT count(*) FROM readers WHERE email = 'bot@example.com'")
        .fetch_one(&app.owner)
        .await
        .unwrap_or(-1);
    assert_eq!(bots, 0);
    // Bad input is a clear 422 on the form, nothing stored.
    let r = subscribe(&app, &slug, "not an email", &[&list]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap_or_default().contains("not a valid email"));
}

#[tokio::test]
async fn the_public_form_is_rate_limited_per_ip() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("c@example.com", "Rate").await;
    let slug = ws_slug(&owner).await;
    let list = create_list(&owner, "L", "l3", "single", "public").await;
    let mut limited = false;
    for i in 0..40 {
        let r = subscribe(&app, &slug, &format!("r{i}@example.com"), &[&list]).await;
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = true;
            break;
        }
    }
    assert!(limited);
}

#[tokio::test]
async fn one_click_unsubscribe_and_the_preference_center() {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("d@example.com", "Leave").await;
    let slug = ws_slug(&owner).await;
    let news = create_list(&owner, "News", "news", "single", "public").await;
    let deals = create_list(&owner, "Deals", "deals", "single", "public").await;
    subscribe_confirmed(&app, &slug, "leaver@example.com", &[&news, &deals]).await;
    assert_eq!(counts(&owner, &news).await, (1, 0, 0));
    let reader: i64 = sqlx::query_scalar("SELECT id FROM readers WHERE email = 'leaver@example.com'")
        .fetch_one(&app.owner)
        .await
        .expect("reader");
    let tenant: herald_engine::TenantId = ws.parse().expect("uuid");
    let news_id: herald_engine::ListId = news.parse().expect("uuid");
    let url =
        herald_engine::audience::subscribe::unsubscribe_url(&app.app.signer, &app.base, tenant, reader, Some(news_id));

    let page = reqwest::get(&url).await.expect("get").text().await.unwrap_or_default();
    assert!(page.contains("Unsubscribe from News") && page.contains("Unsubscribe from everything"));
    // RFC 8058: one POST, no page, takes effect at once.
    let r = reqwest::Client::new()
        .post(&url)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("List-Unsubscribe=One-Click")
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(counts(&owner, &news).await, (0, 0, 1));
    assert_eq!(counts(&owner, &deals).await, (1, 0, 0));

    // Preference center: off Deals at once; back on News only through a fresh confirmation
    // mail (whoever holds a mailed link, or saw it, cannot subscribe the reader).
    let r = reqwest::Client::new()
        .post(&url)
        .form(&[("action", "preferences"), ("list", news.as_str())])
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(counts(&owner, &news).await, (0, 1, 0), "pending until the reader confirms");
    assert_eq!(counts(&owner, &deals).await, (0, 0, 1));
    let token = link(&app.mail_text_to("leaver@example.com").await, "/confirm/");
    let done = reqwest::Client::new().post(format!("{}/confirm/{token}", app.base)).send().await.expect("post");
    assert_eq!(done.status(), StatusCode::OK);
    assert_eq!(counts(&owner, &news).await, (1, 0, 0));

    // Everything: reader leaves, suppression recorded.
    let r = reqwest::Client::new().post(&url).form(&[("action", "all")]).send().await.expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    let status: String = sqlx::query_scalar("SELECT status FROM readers WHERE id = $1")
        .bind(reader)
        .fetch_one(&app.owner)
        .await
        .expect("status");
    assert_eq!(status, "unsubscribed");
    let reason: String = sqlx::query_scalar("SELECT reason FROM suppressions WHERE email_lower = 'leaver@example.com'")
        .fetch_one(&app.owner)
        .await
        .expect("suppression");
    assert_eq!(reason, "unsubscribed_all");
    let ledger: Vec<String> =
        sqlx::query_scalar("SELECT action || ':' || source FROM consent_events WHERE reader_id = $1 ORDER BY id")
            .bind(reader)
            .fetch_all(&app.owner)
            .await
            .expect("ledger");
    assert!(ledger.contains(&"unsubscribe:one_click".to_string()), "{ledger:?}");
    assert!(ledger.contains(&"subscribe_requested:unsubscribe_link".to_string()), "{ledger:?}");
    assert!(!ledger.contains(&"subscribe:unsubscribe_link".to_string()), "the link subscribed: {ledger:?}");
    assert!(ledger.contains(&"unsubscribe_all:unsubscribe_link".to_string()), "{ledger:?}");

    // After "everything", ticking lists again lifts nothing: the suppression stays until the
    // reader confirms from their inbox.
    let r = reqwest::Client::new()
        .post(&url)
        .form(&[("action", "preferences"), ("list", news.as_str()), ("list", deals.as_str())])
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    let suppressed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM suppressions WHERE email_lower = 'leaver@example.com'")
            .fetch_one(&app.owner)
            .await
            .expect("suppression");
    assert_eq!(suppressed, 1, "the preference page lifted the suppression");
    assert_eq!(counts(&owner, &news).await.0, 0);
    assert_eq!(counts(&owner, &deals).await.0, 0);
}

/// A preview shows no reader's real unsubscribe link (it would hand every viewer a
/// never-expiring token to that reader's preferences); the link it shows does nothing.
#[tokio::test]
async fn a_preview_carries_a_link_that_does_nothing() {
    use herald_app::pages::campaigns::preview::PreviewCampaign;
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("p@example.com", "Previews").await;
    let slug = ws_slug(&owner).await;
    let news = create_list(&owner, "News", "news", "single", "public").await;
    subscribe_confirmed(&app, &slug, "previewed@example.com", &[&news]).await;
    let reader: i64 = sqlx::query_scalar("SELECT id FROM readers WHERE email = 'previewed@example.com'")
        .fetch_one(&app.owner)
        .await
        .expect("reader");
    let api = Api::for_owner(&app, &owner).await;
    let (status, c) = api
        .post(
            "/api/v1/campaigns",
            serde_json::json!({"name": "P", "subject": "Hi", "body": "Hello", "list_ids": [news]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["id"].as_str().expect("id").parse().expect("campaign id");
    let viewer = app.add_member(&ws, "viewer@example.com", "viewer").await;
    let shown = viewer.run(PreviewCampaign { id, reader: Some(reader) }).await.value();
    let preview_link = format!("{}/u/{}", app.base, herald_engine::audience::subscribe::PREVIEW_UNSUBSCRIBE_TOKEN);
    assert!(shown.html.contains(&preview_link), "{}", shown.html);
    let real = herald_engine::audience::subscribe::unsubscribe_url(
        &app.app.signer,
        &app.base,
        ws.parse().expect("uuid"),
        reader,
        Some(news.parse().expect("uuid")),
    );
    assert!(!shown.html.contains(&real) && !shown.text.contains(&real), "the preview showed the reader's real link");
    for post in [true, false] {
        let client = reqwest::Client::new();
        let r = if post {
            client.post(&preview_link).body("List-Unsubscribe=One-Click").send().await.expect("post")
        } else {
            client.get(&preview_link).send().await.expect("get")
        };
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.text().await.unwrap_or_default().contains("This is a preview"));
    }
    assert_eq!(counts(&owner, &news).await, (1, 0, 0), "the preview link unsubscribed someone");
}

#[tokio::test]
async fn suppressions_are_per_workspace_and_bounces_need_confirmation_to_remove() {
    let t = two_tenants().await;
    let r = t.a.run(AddSuppressions { emails: "x@example.com\nnot-an-email, y@example.com".into() }).await;
    assert!(r.ok(), "{:?}", r.result);
    assert!(r.value().contains("2 addresses suppressed"));
    assert_eq!(t.a.run(SearchSuppressions { q: String::new() }).await.value().rows.len(), 2);
    assert_eq!(t.b.run(SearchSuppressions { q: String::new() }).await.value().rows.len(), 0);
    // A suppressed address in A can still subscribe in B.
    let b_slug = t.b.session().await.and_then(|s| s.current).map(|w| w.slug).unwrap_or_default();
    let b_list = create_list(&t.b, "B list", "b-list", "single", "public").await;
    subscribe_confirmed(&t.app, &b_slug, "x@example.com", &[&b_list]).await;
    assert_eq!(counts(&t.b, &b_list).await, (1, 0, 0));
    // …but not in A.
    let a_slug = t.a.session().await.and_then(|s| s.current).map(|w| w.slug).unwrap_or_default();
    let a_list = create_list(&t.a, "A list", "a-list", "single", "public").await;
    let tenant: herald_engine::TenantId = t.a_id.parse().expect("uuid");
    let mut tx = t.app.app.db.tenant_tx(tenant).await.expect("tx");
    herald_engine::audience::suppressions::add_in(
        &mut tx,
        tenant,
        "bounced@example.com",
        herald_types::SuppressionReason::HardBounce,
        "test",
    )
    .await
    .expect("add");
    tx.commit().await.expect("commit");
    subscribe(&t.app, &a_slug, "bounced@example.com", &[&a_list]).await;
    assert_eq!(counts(&t.a, &a_list).await, (0, 0, 0));
    let r = t.a.run(RemoveSuppression { email: "bounced@example.com".into(), confirmed: None }).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        t.a.run(RemoveSuppression { email: "bounced@example.com".into(), confirmed: Some("yes".into()) }).await.ok()
    );
}

#[tokio::test]
async fn readers_are_searched_filtered_paged_and_erased() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("e@example.com", "Readers").await;
    let list = create_list(&owner, "Main", "main", "single", "private").await;
    for i in 0..60 {
        let r = owner
            .run(AddReader {
                email: format!("p{i:02}@example.com"),
                name: format!("Person {i}"),
                list: if i % 2 == 0 { list.clone() } else { String::new() },
            })
            .await;
        assert!(r.ok(), "{:?}", r.result);
    }
    let page1 = owner.run(search("", "", "")).await.value();
    assert_eq!(page1.readers.len(), 50);
    let before = page1.next_before.expect("more pages");
    let page2 = owner.run(SearchReaders { before: Some(before), ..search("", "", "") }).await.value();
    assert_eq!(page2.readers.len(), 10);
    assert!(page2.next_before.is_none());
    let on_list = owner.run(search("", &list, "")).await.value();
    assert_eq!(on_list.readers.len(), 30);
    let by_name = owner.run(search("person 4", "", "")).await.value();
    assert_eq!(by_name.readers.len(), 11);

    // Attributes and the attribute filter.
    let id = by_name.readers[0].id;
    let r = owner
        .run(UpdateReader {
            id,
            name: "Lyonnais".into(),
            attributes: r#"{"city": "Lyon", "plan": "pro"}"#.into(),
            values: Default::default(),
        })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    let lyon = owner.run(search("", "", r#"city = "Lyon""#)).await.value();
    assert_eq!(lyon.readers.len(), 1);
    let plans = owner.run(search("", "", r#"plan in ["pro", "team"]"#)).await.value();
    assert_eq!(plans.readers.len(), 1);
    let bad = owner.run(search("", "", "city Lyon")).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let bad_json =
        owner.run(UpdateReader { id, name: "x".into(), attributes: "{nope".into(), values: Default::default() }).await;
    assert_eq!(bad_json.status, StatusCode::UNPROCESSABLE_ENTITY);

    // Export has the ledger; erase removes the person.
    let detail = owner.run(GetReader { id }).await.value();
    assert!(detail.export_json.contains("consent_history"));
    assert!(owner.run(EraseReader { id }).await.ok());
    assert_eq!(owner.run(GetReader { id }).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn no_audience_function_reaches_another_workspace() {
    let t = two_tenants().await;
    let b_list = create_list(&t.b, "Secret", "secret", "single", "private").await;
    assert!(
        t.b.run(AddReader { email: "b-reader@example.com".into(), name: String::new(), list: b_list.clone() })
            .await
            .ok()
    );
    let b_reader = t.b.run(search("", "", "")).await.value().readers.first().map(|r| r.id).expect("id");
    let b_list_id: ListId = b_list.parse().expect("list id");
    assert_not_found("get_reader", t.a.run(GetReader { id: b_reader }).await);
    assert_not_found(
        "update_reader",
        t.a.run(UpdateReader { id: b_reader, name: "x".into(), attributes: "{}".into(), values: Default::default() })
            .await,
    );
    assert_not_found("erase_reader", t.a.run(EraseReader { id: b_reader }).await);
    assert_not_found("delete_list", t.a.run(DeleteList { id: b_list_id }).await);
    assert_not_found(
        "save_list",
        t.a.run(SaveList {
            id: b_list.clone(),
            name: "x".into(),
            slug: "taken-over".into(),
            description: String::new(),
            opt_in: herald_types::OptIn::Single,
            visibility: herald_types::Visibility::Public,
        })
        .await,
    );
    // Adding A's reader to B's list silently adds nothing.
    assert!(
        t.a.run(AddReader { email: "a-reader@example.com".into(), name: String::new(), list: b_list.clone() })
            .await
            .ok()
    );
    assert_eq!(counts(&t.b, &b_list).await, (1, 0, 0));
    let filtered = t.a.run(search("", &b_list, "")).await.value();
    assert_eq!(filtered.readers.len(), 0);
}

#[tokio::test]
async fn export_streams_the_filtered_readers_with_formulas_neutralised() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("x@example.com", "Export").await;
    assert!(
        owner
            .run(AddReader {
                email: "evil@example.com".into(),
                name: "=HYPERLINK(\"http://x\")".into(),
                list: String::new(),
            })
            .await
            .ok()
    );
    assert!(
        owner
            .run(AddReader { email: "plain@example.com".into(), name: "Plain, Person".into(), list: String::new() })
            .await
            .ok()
    );
    let csv = owner.get("/audience/readers/export.csv?q=&list=&status=&attribute=").await;
    assert_eq!(csv.status(), StatusCode::OK);
    assert!(csv.headers()["content-type"].to_str().unwrap_or_default().starts_with("text/csv"));
    let body = csv.text().await.unwrap_or_default();
    assert!(body.starts_with("email,name,status,created_at,lists,attributes\r\n"), "{body}");
    assert!(body.contains("evil@example.com,\"'=HYPERLINK(\"\"http://x\"\")\""), "{body}");
    assert!(body.contains("\"Plain, Person\""));
    let filtered = owner.get("/audience/readers/export.csv?q=plain").await.text().await.unwrap_or_default();
    assert_eq!(filtered.lines().count(), 2, "{filtered}");
    // Logged out: no data.
    assert_eq!(app.browser().get("/audience/readers/export.csv").await.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn bulk_actions_apply_to_a_selection_or_a_whole_filter() {
    let t = two_tenants().await;
    let owner = &t.a;
    let list = create_list(owner, "Bulk", "bulk", "single", "private").await;
    for i in 0..10 {
        let email = format!("{}{i}@example.com", if i < 4 { "lyon" } else { "paris" });
        assert!(owner.run(AddReader { email, name: String::new(), list: String::new() }).await.ok());
    }
    let all = owner.run(search("", "", "")).await.value();
    let ids: Vec<String> = all.readers.iter().take(2).map(|r| r.id.to_string()).collect();
    let bulk = |scope: &'static str, ids: String, q: &'static str, action: &'static str, target: String| {
        let owner = &t.a;
        // The UI sends either "filter" or "ids:1,2,3".
        let scope = if scope == "selected" { format!("ids:{ids}") } else { scope.to_string() };
        async move {
            owner
                .run(BulkReaders {
                    scope,
                    filter: FilterForm { q: q.into(), ..FilterForm::default() },
                    action: action.into(),
                    target_list: target,
                    tag: String::new(),
                })
                .await
        }
    };
    // Everyone matching "lyon" onto the list.
    let r = bulk("filter", String::new(), "lyon", "add_to_list", list.clone()).await;
    assert!(r.ok(), "{:?}", r.result);
    assert_eq!(counts(owner, &list).await, (4, 0, 0));
    // Two selected readers off it, then everything for them.
    let r = bulk("selected", ids.join(","), "", "unsubscribe_all", String::new()).await;
    assert!(r.ok(), "{:?}", r.result);
    let suppressed: i64 = sqlx::query_scalar("SELECT count(*) FROM suppressions WHERE reason = 'unsubscribed_all'")
        .fetch_one(&t.app.owner)
        .await
        .expect("count");
    assert_eq!(suppressed, 2);
    // Tenant B's filter-wide delete touches nothing of A's.
    let delete = |scope: String| BulkReaders {
        scope,
        filter: FilterForm::default(),
        action: "delete".into(),
        target_list: String::new(),
        tag: String::new(),
    };
    let rb = t.b.run(delete("filter".into())).await;
    assert!(rb.ok());
    assert_eq!(rb.value(), "Done: 0 readers changed.");
    // A's ids through B's session change nothing either.
    let rb = t.b.run(delete(format!("ids:{}", ids.join(",")))).await;
    assert_eq!(rb.value(), "Done: 0 readers changed.");
    // Delete by filter in A.
    let r = bulk("filter", String::new(), "paris", "delete", String::new()).await;
    assert_eq!(r.value(), "Done: 6 readers changed.");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM readers").fetch_one(&t.app.owner).await.expect("count");
    assert_eq!(left, 4);
    // Bad input is a clear error.
    assert_eq!(
        bulk("selected", String::new(), "", "delete", String::new()).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        bulk("filter", String::new(), "", "add_to_list", String::new()).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
}

#[tokio::test]
async fn a_stranger_cannot_undo_an_unsubscribe_through_a_single_opt_in_form() {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("f@example.com", "Undo").await;
    let slug = ws_slug(&owner).await;
    let list = create_list(&owner, "Open", "open", "single", "public").await;
    subscribe_confirmed(&app, &slug, "left@example.com", &[&list]).await;
    let reader: i64 = sqlx::query_scalar("SELECT id FROM readers WHERE email = 'left@example.com'")
        .fetch_one(&app.owner)
        .await
        .expect("reader");
    let tenant: herald_engine::TenantId = ws.parse().expect("uuid");
    let url = herald_engine::audience::subscribe::unsubscribe_url(&app.app.signer, &app.base, tenant, reader, None);
    let r = reqwest::Client::new().post(&url).form(&[("action", "all")]).send().await.expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(counts(&owner, &list).await, (0, 0, 1));
    // Someone types their address into the public form again: nothing changes until the owner
    // of the inbox confirms.
    subscribe(&app, &slug, "left@example.com", &[&list]).await;
    assert_eq!(counts(&owner, &list).await, (0, 1, 0));
    let text = app.mail_text_to("left@example.com").await;
    assert!(text.contains("/confirm/"), "{text}");
    let status: String = sqlx::query_scalar("SELECT status FROM readers WHERE id = $1")
        .bind(reader)
        .fetch_one(&app.owner)
        .await
        .expect("status");
    assert_eq!(status, "unsubscribed");
}

/// Erasing a reader (or a workspace of a million) must not scan the ledger or the send log once
/// per reader: every foreign key to `readers` that cascades or sets NULL has an index leading
/// with its column, so the cascade is an index lookup.
#[tokio::test]
async fn every_cascade_from_readers_is_served_by_an_index() {
    let app = spawn_app().await;
    let unindexed: Vec<String> = sqlx::query_scalar(
        "SELECT c.conrelid::regclass::text || '.' || a.attname
         FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
         WHERE c.contype = 'f' AND c.confrelid = 'readers'::regclass AND c.confdeltype IN ('c', 'n')
           AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1])
         ORDER BY 1",
    )
    .fetch_all(&app.owner)
    .await
    .expect("catalog query");
    assert!(unindexed.is_empty(), "cascades from readers without a leading index: {unindexed:?}");
}

/// The preference center of a workspace without public lists says so in a box of its own,
/// instead of ending at the unsubscribe buttons.
#[tokio::test]
async fn the_preference_center_says_when_there_is_nothing_to_choose() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("prefs@example.com", "Quiet Shop").await;
    let list = create_list(&owner, "Internal", "internal", "single", "private").await;
    let r = owner.run(AddReader { email: "quiet@example.com".into(), name: String::new(), list: list.clone() }).await;
    assert!(r.ok(), "{:?}", r.result);
    let (tenant, reader): (herald_types::TenantId, i64) = sqlx::query_as(
        "SELECT w.id, r.id FROM tenants w JOIN readers r ON r.tenant_id = w.id \
         WHERE w.name = 'Quiet Shop' AND r.email = 'quiet@example.com'",
    )
    .fetch_one(&app.owner)
    .await
    .expect("the reader");
    let list_id: ListId = list.parse().expect("a list id");
    let url =
        herald_engine::audience::subscribe::unsubscribe_url(&app.app.signer, &app.base, tenant, reader, Some(list_id));
    let page = reqwest::get(url).await.expect("get").text().await.unwrap_or_default();
    assert!(page.contains("Unsubscribe from Internal"), "{page}");
    assert!(page.contains("Quiet Shop has no other lists to choose from."), "{page}");
    assert!(!page.contains("Choose what you receive"));
}
