//! CSV import: upload, mapping, the background job, bad rows reported by line, re-runs.

use crate::helpers::*;
use herald_app::pages::audience::import::{DiscardImport, GetImport, StartImport};
use herald_app::pages::audience::suppressions::AddSuppressions;
use herald_types::{Existing, Import, ImportId, ImportMode, ImportStatus};
use reqwest::StatusCode;
use std::time::Duration;

/// Uploads `bytes` as a multipart file and returns the import id (from the redirect).
pub async fn upload(b: &Browser, name: &str, bytes: Vec<u8>) -> String {
    let part = reqwest::multipart::Part::bytes(bytes).file_name(name.to_string()).mime_str("text/csv").expect("mime");
    let form = reqwest::multipart::Form::new().part("file", part);
    let r = b
        .client
        .post(format!("{}/audience/imports/upload", b.base))
        .header("Origin", &b.base)
        .multipart(form)
        .send()
        .await
        .expect("upload");
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{:?}", r.text().await);
    let location = r.headers()["location"].to_str().expect("location").to_string();
    location.rsplit('/').next().expect("id").to_string()
}

/// Polls the import until it is done or failed, and returns it.
pub async fn wait_import(b: &Browser, id: ImportId) -> Import {
    for _ in 0..6000 {
        let d = b.run(GetImport { id }).await.value();
        if matches!(d.status, ImportStatus::Done | ImportStatus::Failed) {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("import {id} did not finish");
}

/// `wait_import` for an id as `upload` returns it.
pub async fn wait_done(b: &Browser, id: &str) -> Import {
    wait_import(b, id.parse().expect("import id")).await
}

/// `start_import` with one mapping entry per column, as the mapping form sends it.
/// No lists means "Add them to no list", ticked.
pub fn start(id: ImportId, mapping: &[&str], lists: &str, mode: ImportMode, existing: Existing) -> StartImport {
    let mapping = mapping.iter().map(|m| m.to_string()).collect();
    let no_list = lists.is_empty().then(|| "on".to_string());
    StartImport { id, mapping, lists: lists.into(), no_list, mode, existing }
}

fn messy_csv() -> Vec<u8> {
    // BOM, `;` delimiter, a quoted newline, a duplicate (different case), a bad email,
    // a wrong column count, and a line that is not UTF-8.
    let mut bytes = "\u{feff}Email;Name;City\r\n".as_bytes().to_vec();
    bytes.extend_from_slice(b"ann@example.com;Ann;Lyon\r\n");
    bytes.extend_from_slice(b"bob@example.com;\"Bob\nBuilder\";Paris\r\n");
    bytes.extend_from_slice(b"ANN@example.com;;Lille\r\n");
    bytes.extend_from_slice(b"not-an-email;Nope;Nowhere\r\n");
    bytes.extend_from_slice(b"cat@example.com;Cat\r\n");
    bytes.extend_from_slice(b"dan@example.com;D\xe9sir\xe9e;Nice\r\n");
    bytes.extend_from_slice(b"eve@example.com;Eve;=cmd\r\n");
    bytes
}

#[tokio::test]
async fn a_messy_csv_imports_what_it_can_and_reports_the_rest_by_line() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("imp@example.com", "Import").await;
    let list = crate::audience::create_list(&owner, "Imported", "imported", "double", "private").await;
    let id: ImportId = upload(&owner, "people.csv", messy_csv()).await.parse().expect("import id");

    let d = owner.run(GetImport { id }).await.value();
    assert_eq!(d.status, ImportStatus::Uploaded);
    assert_eq!(d.columns, ["Email", "Name", "City"]);
    assert_eq!(d.mapping, ["email", "name", "attributes.city"]);
    assert_eq!(d.preview[1][1], "Bob\nBuilder");

    let r = owner
        .run(start(id, &["email", "name", "attributes.city"], &list, ImportMode::Confirmed, Existing::Update))
        .await;
    assert!(r.ok(), "{:?} {:?}", r.status, r.result);
    let d = wait_import(&owner, id).await;
    assert_eq!(d.status, ImportStatus::Done, "{d:?}");
    assert_eq!(d.percent(), 100, "{d:?}");
    assert_eq!(d.rows_read, 7);
    // ann, bob, eve; ann's second row updated her (not "skipped" while changing her).
    assert_eq!((d.created, d.updated, d.skipped), (3, 1, 0), "{d:?}");
    assert_eq!(d.invalid, 3, "{d:?}");

    let errors = owner.get(&format!("/audience/imports/{id}/errors.csv")).await.text().await.unwrap_or_default();
    let lines: Vec<&str> = errors.lines().collect();
    assert_eq!(lines[0], "line,reason,row");
    // Row numbers as a spreadsheet shows them (the header is row 1; Bob's two-line cell is one row).
    assert!(lines.iter().any(|l| l.starts_with("5,") && l.contains("not a valid email")), "{errors}");
    assert!(lines.iter().any(|l| l.starts_with("6,") && l.contains("expected 3 columns, found 2")), "{errors}");
    assert!(lines.iter().any(|l| l.starts_with("7,") && l.contains("UTF-8")), "{errors}");

    let ann: (String, serde_json::Value) =
        sqlx::query_as("SELECT name, attributes FROM readers WHERE lower(email) = 'ann@example.com'")
            .fetch_one(&app.owner)
            .await
            .expect("ann");
    assert_eq!(ann.0, "Ann");
    assert_eq!(ann.1["city"], "Lille", "the later row's attributes win");
    let bob: String = sqlx::query_scalar("SELECT name FROM readers WHERE email = 'bob@example.com'")
        .fetch_one(&app.owner)
        .await
        .expect("bob");
    assert_eq!(bob, "Bob Builder", "line breaks in a quoted name become a space");
    let confirmed: i64 = sqlx::query_scalar("SELECT count(*) FROM subscriptions WHERE status = 'confirmed'")
        .fetch_one(&app.owner)
        .await
        .expect("subs");
    assert_eq!(confirmed, 3);
    let ledger: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM consent_events WHERE source = 'import' AND wording LIKE '%people.csv%'",
    )
    .fetch_one(&app.owner)
    .await
    .expect("ledger");
    assert_eq!(ledger, 3);
    // The file is gone once imported.
    let chunks: i64 =
        sqlx::query_scalar("SELECT count(*) FROM import_chunks").fetch_one(&app.owner).await.expect("chunks");
    assert_eq!(chunks, 0);
}

#[tokio::test]
async fn a_re_run_resumes_after_the_checkpoint_without_duplicates() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("rerun@example.com", "Rerun").await;
    let mut csv = b"email,name\n".to_vec();
    for i in 0..12_000 {
        csv.extend_from_slice(format!("r{i}@example.com,Reader {i}\n").as_bytes());
    }
    let id: ImportId = upload(&owner, "big.csv", csv.clone()).await.parse().expect("import id");
    // As if a worker had committed the first 5,000 rows (lines 2–5001) and then died.
    let first = start(id, &["email", "name"], "", ImportMode::Confirmed, Existing::Update);
    sqlx::query("UPDATE imports SET status = 'failed', checkpoint_line = 5001, rows_read = 5000 WHERE id = $1::uuid")
        .bind(id.to_string())
        .execute(&app.owner)
        .await
        .expect("simulate a crash");
    assert!(owner.run(first).await.ok());
    let d = wait_import(&owner, id).await;
    assert_eq!(d.status, ImportStatus::Done);
    assert_eq!(d.rows_read, 12_000);
    assert_eq!(d.created, 7_000, "only the rows after the checkpoint were processed");
    // Importing the same file again creates nobody new.
    let again: ImportId = upload(&owner, "big.csv", csv).await.parse().expect("import id");
    let start2 = start(again, &["email", "name"], "", ImportMode::Confirmed, Existing::Skip);
    assert!(owner.run(start2.clone()).await.ok());
    let d = wait_import(&owner, again).await;
    assert_eq!((d.created, d.skipped), (5_000, 7_000), "{d:?}");
    let readers: i64 = sqlx::query_scalar("SELECT count(*) FROM readers").fetch_one(&app.owner).await.expect("count");
    assert_eq!(readers, 12_000);
    // A finished import cannot be started twice.
    assert_eq!(owner.run(start2).await.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn imports_are_per_workspace_and_need_an_email_column() {
    let t = two_tenants().await;
    let id: ImportId =
        upload(&t.a, "a.csv", b"email,name\nx@example.com,X\n".to_vec()).await.parse().expect("import id");
    assert_eq!(t.b.run(GetImport { id }).await.status, StatusCode::NOT_FOUND);
    assert_eq!(t.b.get(&format!("/audience/imports/{id}/errors.csv")).await.status(), StatusCode::NOT_FOUND);
    let no_email = start(id, &["name", "name"], "", ImportMode::Confirmed, Existing::Update);
    assert_eq!(t.a.run(no_email).await.status, StatusCode::UNPROCESSABLE_ENTITY);
    // No list, unless "Add them to no list" is ticked: nothing starts.
    let mut nowhere = start(id, &["email", "name"], "", ImportMode::Confirmed, Existing::Update);
    nowhere.no_list = None;
    let r = t.a.run(nowhere).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.result);
    assert!(format!("{:?}", r.result).contains("Add them to no list"), "{:?}", r.result);
    assert_eq!(t.a.run(GetImport { id }).await.value().status, ImportStatus::Uploaded);
    let ok = start(id, &["email", "name"], "", ImportMode::Confirmed, Existing::Update);
    assert_eq!(t.b.run(ok).await.status, StatusCode::NOT_FOUND);
    // Viewers cannot upload.
    let viewer = t.app.add_member(&t.a_id, "viewer-imp@example.com", "viewer").await;
    let part = reqwest::multipart::Part::bytes(b"email\nv@example.com\n".to_vec()).file_name("v.csv");
    let r = viewer
        .client
        .post(format!("{}/audience/imports/upload", viewer.base))
        .header("Origin", &viewer.base)
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .expect("upload");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn an_opt_in_import_mails_each_reader_a_confirmation() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("optin@example.com", "Opt In").await;
    let list = crate::audience::create_list(&owner, "News", "news", "double", "public").await;
    assert!(owner.run(AddSuppressions { emails: "blocked@example.com".into() }).await.ok());
    let id: ImportId = upload(
        &owner,
        "optin.csv",
        b"email,name\nfirst@example.com,First\nsecond@example.com,Second\nblocked@example.com,B\n".to_vec(),
    )
    .await
    .parse()
    .expect("import id");
    let no_list = start(id, &["email", "name"], "", ImportMode::OptIn, Existing::Update);
    assert_eq!(owner.run(no_list).await.status, StatusCode::UNPROCESSABLE_ENTITY);
    let with_list = start(id, &["email", "name"], &list, ImportMode::OptIn, Existing::Update);
    assert!(owner.run(with_list).await.ok());
    let d = wait_import(&owner, id).await;
    assert_eq!(d.status, ImportStatus::Done, "{d:?}");
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM subscriptions WHERE status = 'unconfirmed'")
        .fetch_one(&app.owner)
        .await
        .expect("count");
    assert_eq!(pending, 2, "the suppressed address is not asked");
    let text = app.mail_text_to("second@example.com").await;
    app.mail_text_to("first@example.com").await;
    let token = text[text.find("/confirm/").expect("link") + "/confirm/".len()..]
        .split_whitespace()
        .next()
        .expect("token")
        .to_string();
    let r = reqwest::Client::new().post(format!("{}/confirm/{token}", app.base)).send().await.expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    let confirmed: i64 = sqlx::query_scalar("SELECT count(*) FROM subscriptions WHERE status = 'confirmed'")
        .fetch_one(&app.owner)
        .await
        .expect("count");
    assert_eq!(confirmed, 1);
    app.jobs_idle().await;
    assert!(app.sink.messages().await.iter().all(|m| !m.rcpt_to.iter().any(|r| r == "blocked@example.com")));
}

/// One workspace's uploads that are not imported yet hold at most
/// `HERALD_IMPORT_STORAGE_PER_WORKSPACE`; an upload past it is refused and leaves nothing
/// behind, and discarding a pending upload frees its room. Other workspaces are unaffected.
#[tokio::test]
async fn pending_uploads_are_capped_per_workspace_and_can_be_discarded() -> TestResult {
    let cap = 3 * 1024 * 1024;
    let app = spawn_app_with(&[("HERALD_IMPORT_STORAGE_PER_WORKSPACE", &cap.to_string())]).await;
    let (a, _) = app.owner_with_workspace("store-a@example.com", "Store A").await;
    let (b, _) = app.owner_with_workspace("store-b@example.com", "Store B").await;
    // About 2 MB of CSV.
    let csv = |n: usize| {
        let mut s = String::from("email,name\n");
        for i in 0..n {
            s.push_str(&format!("reader-{i:07}@example.com,Reader number {i:07} with a long name\n"));
        }
        s.into_bytes()
    };
    let two_mb = csv(34_000);
    assert!(two_mb.len() > 2 * 1024 * 1024 && two_mb.len() < cap);
    let first: ImportId = upload(&a, "first.csv", two_mb.clone()).await.parse().expect("import id");
    let stored = || async {
        sqlx::query_as::<_, (i64, i64)>(
            "SELECT (SELECT count(*) FROM imports i JOIN tenants t ON t.id = i.tenant_id WHERE t.name = 'Store A'),
                    (SELECT count(*) FROM import_chunks c JOIN tenants t ON t.id = c.tenant_id WHERE t.name = 'Store A')",
        )
        .fetch_one(&app.owner)
        .await
    };
    let before = stored().await?;
    assert_eq!(before.0, 1);

    let post = |b: &Browser, bytes: Vec<u8>| {
        let part = reqwest::multipart::Part::bytes(bytes).file_name("second.csv").mime_str("text/csv").expect("mime");
        b.client
            .post(format!("{}/audience/imports/upload", b.base))
            .header("Origin", &b.base)
            .multipart(reqwest::multipart::Form::new().part("file", part))
            .send()
    };
    let r = post(&a, two_mb.clone()).await?;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(r.text().await?.contains("Import or discard them"));
    assert_eq!(stored().await?, before, "the refused upload left nothing behind");

    // Another workspace has its own room.
    upload(&b, "theirs.csv", two_mb.clone()).await;

    // Discarding the pending upload frees it; a running or finished import cannot be discarded.
    let r = a.run(DiscardImport { id: first }).await;
    assert!(r.ok(), "{:?}", r.result);
    assert_eq!(a.run(GetImport { id: first }).await.status, StatusCode::NOT_FOUND);
    let second: ImportId = upload(&a, "second.csv", two_mb).await.parse().expect("import id");
    let started = a.run(start(second, &["email", "name"], "", ImportMode::Confirmed, Existing::Update)).await;
    assert!(started.ok(), "{:?}", started.result);
    assert_eq!(wait_import(&a, second).await.status, ImportStatus::Done);
    let r = a.run(DiscardImport { id: second }).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.result);
    // Another workspace's upload is not there to discard.
    let theirs: String = sqlx::query_scalar(
        "SELECT i.id::text FROM imports i JOIN tenants t ON t.id = i.tenant_id WHERE t.name = 'Store B'",
    )
    .fetch_one(&app.owner)
    .await?;
    let theirs: ImportId = theirs.parse().expect("import id");
    assert_eq!(a.run(DiscardImport { id: theirs }).await.status, StatusCode::NOT_FOUND);
    Ok(())
}

/// Upload storage counts per account too, so a second workspace of the same account
/// buys no more room; another account's workspace has its own.
#[tokio::test]
async fn pending_uploads_are_capped_per_account_too() -> TestResult {
    use herald_app::auth::CreateWorkspace;
    let (per_workspace, per_account) = (3 * 1024 * 1024, 3 * 1024 * 1024);
    let app = spawn_app_with(&[
        ("HERALD_IMPORT_STORAGE_PER_WORKSPACE", &per_workspace.to_string()),
        ("HERALD_IMPORT_STORAGE_PER_ACCOUNT", &per_account.to_string()),
    ])
    .await;
    let two_mb: Vec<u8> = {
        let mut s = String::from("email,name\n");
        for i in 0..34_000 {
            s.push_str(&format!("reader-{i:07}@example.com,Reader number {i:07} with a long name\n"));
        }
        s.into_bytes()
    };
    let (owner, _) = app.owner_with_workspace("uploads@example.com", "Uploads One").await;
    upload(&owner, "first.csv", two_mb.clone()).await;
    assert!(owner.run(CreateWorkspace { name: "Uploads Two".into(), slug: String::new() }).await.ok());
    let part = reqwest::multipart::Part::bytes(two_mb.clone()).file_name("second.csv").mime_str("text/csv")?;
    let r = owner
        .client
        .post(format!("{}/audience/imports/upload", owner.base))
        .header("Origin", &owner.base)
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE, "a second workspace bought more room");
    assert!(r.text().await?.contains("across your account's workspaces"));
    let (other, _) = app.owner_with_workspace("uploads-other@example.com", "Other").await;
    upload(&other, "theirs.csv", two_mb).await;
    Ok(())
}
