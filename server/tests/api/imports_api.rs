//! `/api/v1/imports`: a CSV import through the API alone — upload (streamed, past the server's
//! general body limit), the guessed mapping, start, progress, the error report — and its
//! `Idempotency-Key`, kept on the import: a retried upload leaves one import, and the same key
//! with another file is refused.

use crate::helpers::*;
use herald_app::pages::settings::api_keys::CreateApiKey;
use herald_types::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// Uploads `bytes` as the multipart field `file`; the status, the JSON answer and whether it
/// was marked a replay.
async fn upload(api: &Api, key: Option<&str>, name: &str, bytes: Vec<u8>) -> (StatusCode, Value, bool) {
    let part = reqwest::multipart::Part::bytes(bytes).file_name(name.to_string()).mime_str("text/csv").expect("mime");
    let mut req = api.client.post(format!("{}/api/v1/imports", api.base)).bearer_auth(&api.key);
    if let Some(key) = key {
        req = req.header("Idempotency-Key", key);
    }
    let res = req.multipart(reqwest::multipart::Form::new().part("file", part)).send().await.expect("upload");
    let status = res.status();
    let replayed = res.headers().get("idempotent-replayed").is_some();
    let text = res.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)), replayed)
}

async fn imports_in(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM imports").fetch_one(&app.owner).await.expect("count")
}

const CSV: &str = "Email,Name,Plan\nann@example.com,Ann,pro\nbob@example.com,Bob,free\nnot-an-address,Nope,free\n";

#[tokio::test]
async fn an_import_runs_through_the_api_alone() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("imports@example.com", "Imports").await;
    let api = Api::for_owner(&app, &owner).await;
    let (_, list) = api.post("/api/v1/lists", json!({"name": "Main", "opt_in": "single"})).await;
    let list = list["id"].as_str().expect("list id").to_string();

    // Uploaded: nothing imported yet, the columns read and the mapping guessed.
    let (status, up, replayed) = upload(&api, Some("upload-1"), "people.csv", CSV.into()).await;
    assert_eq!(status, StatusCode::CREATED, "{up}");
    assert!(!replayed);
    assert_eq!(up["status"], "uploaded");
    assert_eq!(up["columns"], json!(["Email", "Name", "Plan"]));
    assert_eq!(up["mapping"], json!(["email", "name", "attributes.plan"]));
    assert_eq!(up["preview"][0], json!(["ann@example.com", "Ann", "pro"]));
    let id = up["id"].as_str().expect("id").to_string();

    // Started without a mapping: the guessed one. Without a list it says which field is wrong.
    let (status, refused) = api.post(&format!("/api/v1/imports/{id}/start"), json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(refused["fields"]["lists"].is_string(), "{refused}");
    let (status, started) = api.post(&format!("/api/v1/imports/{id}/start"), json!({"lists": [list]})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let done = api.wait_for_status(&format!("/api/v1/imports/{id}"), "done", Duration::from_secs(60)).await;
    assert_eq!((done["created"].as_i64(), done["invalid"].as_i64()), (Some(2), Some(1)), "{done}");
    let (_, readers) = api.get(&format!("/api/v1/readers?list={list}")).await;
    let mut emails: Vec<&str> =
        readers["data"].as_array().expect("data").iter().filter_map(|r| r["email"].as_str()).collect();
    emails.sort();
    assert_eq!(emails, ["ann@example.com", "bob@example.com"]);
    assert!(readers["data"][0]["attributes"]["plan"].is_string(), "{readers}");

    // The rows it could not import, by line.
    let res = api
        .client
        .get(format!("{}/api/v1/imports/{id}/errors.csv", api.base))
        .bearer_auth(&api.key)
        .send()
        .await
        .expect("errors");
    assert_eq!(res.status(), StatusCode::OK);
    let report = res.text().await.expect("csv");
    assert!(report.contains("not-an-address"), "{report}");

    // Done is done: not started again, not discarded.
    let (status, _) = api.post(&format!("/api/v1/imports/{id}/start"), json!({"lists": [list]})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = api.send(reqwest::Method::DELETE, &format!("/api/v1/imports/{id}"), None).await;
    assert_eq!(status, StatusCode::CONFLICT);

    // Listed, a page at a time.
    let (status, second, _) = upload(&api, None, "more.csv", "email\ncat@example.com\n".into()).await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    let (status, page) = api.get("/api/v1/imports?limit=1").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["data"][0]["id"], second["id"], "newest first");
    let cursor = page["next_cursor"].as_str().expect("a second page");
    let (_, next) = api.get(&format!("/api/v1/imports?limit=1&cursor={cursor}")).await;
    assert_eq!(next["data"][0]["id"].as_str(), Some(id.as_str()));
    assert!(next.get("next_cursor").is_none(), "{next}");

    // A viewer's key reads imports and uploads nothing; another workspace sees none of them.
    let viewer =
        Api { key: owner.run(CreateApiKey { name: "v".into(), role: Some(Role::Viewer) }).await.value(), ..api };
    assert_eq!(viewer.get(&format!("/api/v1/imports/{id}")).await.0, StatusCode::OK);
    let before = imports_in(&app).await;
    assert_eq!(upload(&viewer, None, "v.csv", CSV.into()).await.0, StatusCode::FORBIDDEN);
    assert_eq!(imports_in(&app).await, before);
    let (other, _) = app.owner_with_workspace("other@example.com", "Other").await;
    let other = Api::for_owner(&app, &other).await;
    assert_eq!(other.get(&format!("/api/v1/imports/{id}")).await.0, StatusCode::NOT_FOUND);
    assert_eq!(other.get("/api/v1/imports").await.1["data"], json!([]));
}

#[tokio::test]
async fn a_retried_upload_leaves_one_import_and_a_reused_key_is_refused() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("retry@example.com", "Retry").await;
    let api = Api::for_owner(&app, &owner).await;

    let (status, first, _) = upload(&api, Some("k-1"), "people.csv", CSV.into()).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again, replayed) = upload(&api, Some("k-1"), "people.csv", CSV.into()).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, true), "{again}");
    assert_eq!(again["id"], first["id"]);
    assert_eq!(imports_in(&app).await, 1, "the retry's copy is discarded");

    // Another file (or the same bytes under another name) with the key: refused, nothing kept.
    let (status, refused, _) = upload(&api, Some("k-1"), "people.csv", "email\nzed@example.com\n".into()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(refused["fields"]["Idempotency-Key"].is_string(), "{refused}");
    let (status, _, _) = upload(&api, Some("k-1"), "renamed.csv", CSV.into()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(imports_in(&app).await, 1);

    // Copies sent at once: one import, every copy answered with it.
    let copies =
        futures::future::join_all((0..4).map(|_| upload(&api, Some("k-2"), "big.csv", CSV.repeat(2000).into()))).await;
    let ids: std::collections::BTreeSet<String> = copies
        .iter()
        .map(|(s, b, _)| {
            assert_eq!(*s, StatusCode::CREATED, "{b}");
            b["id"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 1, "{copies:?}");
    assert_eq!(imports_in(&app).await, 2);

    // A file that is not CSV with a header row is refused and not kept.
    let (status, refused, _) = upload(&api, Some("k-3"), "empty.csv", Vec::new()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(imports_in(&app).await, 2);
    // No file part at all names the field.
    let res = api
        .client
        .post(format!("{}/api/v1/imports", api.base))
        .bearer_auth(&api.key)
        .multipart(reqwest::multipart::Form::new().text("note", "no file"))
        .send()
        .await
        .expect("upload");
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = res.json().await.expect("json");
    assert!(body["fields"]["file"].is_string(), "{body}");
}

/// The upload streams under its own limit: a file larger than the server's general 16 MiB body
/// limit (which every other API route keeps) is taken.
#[tokio::test]
async fn an_upload_larger_than_the_general_body_limit_is_taken() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("large@example.com", "Large").await;
    let api = Api::for_owner(&app, &owner).await;
    let row = "someone.with.a.long.address@example.com,Some One,a plan with words\n";
    let mut csv = String::from("email,name,plan\n");
    while csv.len() < 17 * 1024 * 1024 {
        csv.push_str(row);
    }
    let size = csv.len() as i64;
    let (status, up, _) = upload(&api, None, "large.csv", csv.into()).await;
    assert_eq!(status, StatusCode::CREATED, "{up}");
    assert_eq!(up["size_bytes"].as_i64(), Some(size));
    // The general limit still holds on the others.
    let big = json!({"name": "x".repeat(17 * 1024 * 1024)});
    assert_eq!(api.post("/api/v1/lists", big).await.0, StatusCode::PAYLOAD_TOO_LARGE);
}
