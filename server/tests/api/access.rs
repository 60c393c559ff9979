//! Every route and every server function against the access it declares: walked whole, so a new
//! route or function without a declaration, or one that lets a lower role change something,
//! fails here. The declarations live in one place each (`herald_server::routes::api::routes`
//! for the REST API, `herald_app::access` for server functions); these tests read them.

use std::collections::{BTreeMap, BTreeSet};

use crate::helpers::*;
use herald_app::pages::settings::api_keys::CreateApiKey;
use herald_server::config::Config;
use herald_server::routes::api::Declared;
use herald_types::Access;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// Tables that a refused or read-only call may legitimately touch: the session store (a visit
/// moves "last seen"), a key's "last used", rate-limit buckets and the workers' leases.
const MAY_CHANGE: &[&str] = &["api_keys", "rate_buckets", "leases", "priority_demand", "sessions"];

/// What a read the caller may make can leave behind: the audit log's record of an export of
/// personal data, a sending campaign's cached live progress (shared by its views for 2 s), and
/// a cancelled send's figures, frozen per status and per domain by the first look once nothing
/// of it is in flight (`tally::snapshot_final`; whether the walk meets one depends on which
/// campaign its ids pick). A refused call leaves nothing at all.
const READ_TRACES: &[&str] = &["public.audit_log", "public.campaign_stats", "public.campaign_domain_stats"];

/// A digest of every row of every table in the database (but [`MAY_CHANGE`]), per table.
async fn fingerprint(app: &TestApp) -> BTreeMap<String, String> {
    let tables: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_schema::text, table_name::text FROM information_schema.tables
          WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')",
    )
    .fetch_all(&app.owner)
    .await
    .expect("tables");
    let mut out = BTreeMap::new();
    for (schema, table) in tables {
        if MAY_CHANGE.contains(&table.as_str()) {
            continue;
        }
        let sql = format!(
            "SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM \"{schema}\".\"{table}\" t"
        );
        // A table the inspector may not read is not one a request could write through it either.
        if let Ok(digest) = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql)).fetch_one(&app.owner).await {
            out.insert(format!("{schema}.{table}"), digest);
        }
    }
    out
}

fn changed(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    after.iter().filter(|(t, d)| before.get(*t) != Some(d)).map(|(t, _)| t.clone()).collect()
}

/// A workspace filled by the crawler's seed (every state a page can show), its owner's browser,
/// and a member of each lower role.
struct Filled {
    app: TestApp,
    tenant: String,
    owner: Browser,
    admin: Browser,
    author: Browser,
    viewer: Browser,
}

async fn filled_workspace() -> Filled {
    // No workers: nothing but the calls under test may change a row.
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let (owner, tenant) = app.owner_with_workspace("owner@example.com", "Walked").await;
    let config = Config::from_lookup(|k| match k {
        "DATABASE_URL" => Some(app.db_url.clone()),
        "HERALD_ENV" => Some("development".into()),
        "HERALD_SECRET_KEY" => Some("test-secret-key-that-is-long-enough-0123456789".into()),
        _ => None,
    })
    .expect("config");
    herald_server::seed::run(&config, "owner@example.com").await.expect("seed");
    let admin = app.add_member(&tenant, "admin@example.com", "admin").await;
    let author = app.add_member(&tenant, "author@example.com", "author").await;
    let viewer = app.add_member(&tenant, "viewer@example.com", "viewer").await;
    Filled { app, tenant, owner, admin, author, viewer }
}

/// One id of the workspace's rows in `table` (as text), or a well-formed id that names nothing.
async fn some_id(f: &Filled, table: &str, column: &str, fallback: &str) -> String {
    let sql = format!("SELECT {column}::text FROM {table} WHERE tenant_id = $1::uuid ORDER BY 1 LIMIT 1");
    sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql))
        .bind(&f.tenant)
        .fetch_optional(&f.app.owner)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| fallback.to_string())
}

/// `path` with each `{param}` replaced by one of the workspace's ids of the right kind, so a
/// refusal cannot hide behind a malformed id.
async fn concrete(f: &Filled, path: &str) -> String {
    const NIL: &str = "00000000-0000-0000-0000-000000000001";
    let mut out = String::new();
    let mut previous = "";
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        let value = match segment {
            "{list_id}" => some_id(f, "lists", "id", NIL).await,
            "{reader}" => some_id(f, "readers", "id", "1").await,
            "{key}" => some_id(f, "fields", "key", "city").await,
            "{email}" => "someone@example.com".to_string(),
            "{event_id}" => format!("evt_{}", some_id(f, "outbound_events", "id", NIL).await.replace('-', "")),
            s if s.starts_with('{') => match previous {
                "lists" => some_id(f, "lists", "id", NIL).await,
                "readers" => some_id(f, "readers", "id", "1").await,
                "tags" => some_id(f, "tags", "id", "1").await,
                "campaign-templates" => some_id(f, "campaign_templates", "id", NIL).await,
                "segments" => some_id(f, "segments", "id", NIL).await,
                "automations" => some_id(f, "automations", "id", NIL).await,
                "campaigns" => some_id(f, "campaigns", "id", NIL).await,
                "messages" => some_id(f, "messages", "id", NIL).await,
                "templates" => some_id(f, "tx_templates", "id", NIL).await,
                "media" => some_id(f, "media", "id", NIL).await,
                "webhook-endpoints" => some_id(f, "webhook_endpoints", "id", NIL).await,
                "domains" => some_id(f, "sending_domains", "id", NIL).await,
                // An author or viewer: what a key may act on (admins and owners are refused to
                // every key, which is the handler's rule, not the route's access).
                "members" => {
                    let team = "(SELECT * FROM memberships WHERE role IN ('author', 'viewer')) m";
                    some_id(f, team, "user_id", NIL).await
                }
                "invites" => some_id(f, "invites", "id", NIL).await,
                "identities" => some_id(f, "sending_identities", "id", NIL).await,
                "imports" => some_id(f, "imports", "id", NIL).await,
                other => panic!("the walk does not know the ids after /{other}/: teach `concrete`"),
            },
            s => s.to_string(),
        };
        out.push('/');
        out.push_str(&value);
        previous = segment;
    }
    out
}

/// A body each write would accept from a key allowed to make it (for the routes whose refusal
/// matters most: they create readers and mail them); `{}` for the rest, which a refusal answers
/// before reading.
fn body_for(d: &Declared, list: &str) -> Value {
    match (d.method.as_str(), d.path) {
        ("POST", "/api/v1/readers") => json!({"email": "walked@example.com", "lists": [list]}),
        ("POST", "/api/v1/readers/bulk") => {
            json!({"readers": [{"email": "walked-bulk@example.com"}], "lists": [list]})
        }
        ("POST", "/api/v1/readers/{id}/events") => json!({"name": "walked", "data": {"plan": "pro"}}),
        ("POST", "/api/v1/lists") => json!({"name": "Walked"}),
        ("POST", "/api/v1/readers/{id}/subscriptions") => json!({"lists": [list]}),
        ("POST", "/api/v1/readers/{id}/tags") => json!({"tags": ["walked"]}),
        ("POST", "/api/v1/suppressions") => json!({"emails": ["walked-suppressed@example.com"]}),
        ("POST", "/api/v1/campaigns") => json!({"name": "Walked", "subject": "Walked", "list_ids": [list]}),
        ("POST", "/api/v1/fields") => json!({"label": "Walked", "key": "walked", "kind": "text"}),
        ("POST", "/api/v1/templates") => json!({"name": "walked", "subject": "Walked", "html": "<p>Walked</p>"}),
        ("POST", "/api/v1/campaign-templates") => json!({"name": "Walked"}),
        ("POST", "/api/v1/domains") => json!({"domain": "walked.example"}),
        ("POST", "/api/v1/segments") => json!({"name": "Walked", "definition": {"match": "all", "rules": []}}),
        ("POST", "/api/v1/imports/{id}/start") => json!({"lists": [list]}),
        _ => json!({}),
    }
}

async fn key(f: &Filled, role: Role) -> String {
    f.owner.run(CreateApiKey { name: format!("walk {role:?}"), role: Some(role) }).await.value()
}

async fn call_api(f: &Filled, key: &str, d: &Declared, list: &str) -> (StatusCode, String) {
    let path = concrete(f, d.path).await;
    let method = Method::from_bytes(d.method.as_str().as_bytes()).expect("method");
    let mut req = reqwest::Client::new().request(method, format!("{}{path}", f.app.base)).bearer_auth(key);
    if d.method != Method::GET && d.method != Method::DELETE {
        req = req.json(&body_for(d, list));
    }
    let res = req.send().await.expect("request");
    let status = res.status();
    (status, res.text().await.unwrap_or_default())
}

#[tokio::test]
async fn every_api_route_declares_its_access_and_the_document_carries_it() {
    let app = spawn_app().await;
    let doc: Value =
        reqwest::get(format!("{}/api/v1/openapi.json", app.base)).await.expect("doc").json().await.expect("json");
    let declared = herald_server::routes::api::declared();
    let mut in_document = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            if !["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                continue;
            }
            let access = op.get("x-herald-access").and_then(Value::as_str);
            assert!(access.is_some(), "{method} {path} is in the document without x-herald-access");
            in_document.insert((method.to_uppercase(), path.clone(), access.unwrap_or_default().to_string()));
        }
    }
    let served: BTreeSet<(String, String, String)> =
        declared.iter().map(|d| (d.method.to_string(), d.path.to_string(), d.access.name())).collect();
    let undocumented: Vec<_> =
        served.difference(&in_document).filter(|(_, p, _)| p != "/api/v1/openapi.json").collect();
    assert!(undocumented.is_empty(), "served and declared but not in the OpenAPI document: {undocumented:?}");
    let unserved: Vec<_> = in_document.difference(&served).collect();
    assert!(unserved.is_empty(), "in the OpenAPI document but not served with a declaration: {unserved:?}");
    // Each (method, path) is declared once.
    let mut seen = BTreeSet::new();
    for d in &declared {
        assert!(seen.insert((d.method.clone(), d.path)), "{} {} declared twice", d.method, d.path);
    }
}

#[tokio::test]
async fn a_viewer_key_changes_nothing_through_any_route() {
    let f = filled_workspace().await;
    let viewer = key(&f, Role::Viewer).await;
    let list = some_id(&f, "lists", "id", "").await;
    let mut wrong = Vec::new();
    for d in herald_server::routes::api::declared() {
        if d.access == Access::Public {
            continue;
        }
        let before = fingerprint(&f.app).await;
        let (status, body) = call_api(&f, &viewer, &d, &list).await;
        let after = fingerprint(&f.app).await;
        let allowed = d.access.allows(Role::Viewer);
        let touched: Vec<String> =
            changed(&before, &after).into_iter().filter(|t| !(allowed && READ_TRACES.contains(&t.as_str()))).collect();
        if !allowed && status != StatusCode::FORBIDDEN {
            wrong.push(format!("{} {}: {status} (want 403) {body}", d.method, d.path));
        }
        if allowed && (status == StatusCode::FORBIDDEN || status.is_server_error()) {
            wrong.push(format!("{} {}: {status} for a read the viewer may make: {body}", d.method, d.path));
        }
        if !touched.is_empty() {
            wrong.push(format!("{} {} ({status}) changed {touched:?}", d.method, d.path));
        }
    }
    assert!(wrong.is_empty(), "a viewer key:\n{}", wrong.join("\n"));
}

#[tokio::test]
async fn each_key_role_reaches_exactly_the_routes_declared_for_it() {
    let f = filled_workspace().await;
    let list = some_id(&f, "lists", "id", "").await;
    for role in [Role::Author, Role::Admin] {
        let k = key(&f, role).await;
        let mut wrong = Vec::new();
        for d in herald_server::routes::api::declared() {
            if d.access == Access::Public {
                continue;
            }
            let (status, body) = call_api(&f, &k, &d, &list).await;
            let allowed = d.access.allows(role);
            if allowed && (status == StatusCode::FORBIDDEN || status.is_server_error()) {
                wrong.push(format!("{} {} declared {}: {status} {body}", d.method, d.path, d.access.name()));
            }
            if !allowed && status != StatusCode::FORBIDDEN {
                wrong.push(format!("{} {} declared {}: {status} (want 403)", d.method, d.path, d.access.name()));
            }
        }
        assert!(wrong.is_empty(), "a key of role {role:?}:\n{}", wrong.join("\n"));
    }
}

/// Every POST that honours `Idempotency-Key`, called twice with one key by a key allowed to make
/// it: the second call gets the first answer and changes nothing. A new POST route gets this by
/// being declared (see `ApiRoutes::add`); one declared to keep keys itself is held to it here.
#[tokio::test]
async fn every_post_route_answers_a_repeated_idempotency_key_once() {
    use herald_server::routes::api::Keys;
    let f = filled_workspace().await;
    let admin = key(&f, Role::Admin).await;
    let list = some_id(&f, "lists", "id", "").await;
    let mut wrong = Vec::new();
    let mut created = 0;
    for (i, d) in herald_server::routes::api::declared().into_iter().enumerate() {
        let Some(keys @ (Keys::Stored | Keys::Handler)) = d.keys else { continue };
        let path = concrete(&f, d.path).await;
        let idem = format!("walk-{i}");
        let send = || {
            reqwest::Client::new()
                .post(format!("{}{path}", f.app.base))
                .bearer_auth(&admin)
                .header("Idempotency-Key", &idem)
                .json(&body_for(&d, &list))
                .send()
        };
        let first = send().await.expect("first");
        let first_status = first.status();
        let first_body = first.text().await.unwrap_or_default();
        if first_status.is_success() {
            created += 1;
        }
        let before = fingerprint(&f.app).await;
        let again = send().await.expect("again");
        let replayed = again.headers().get("idempotent-replayed").is_some();
        let (status, body) = (again.status(), again.text().await.unwrap_or_default());
        let touched: Vec<String> = changed(&before, &fingerprint(&f.app).await)
            .into_iter()
            .filter(|t| !READ_TRACES.contains(&t.as_str()))
            .collect();
        if status != first_status || body != first_body {
            wrong.push(format!("{} {}: {first_status} {first_body} then {status} {body}", d.method, d.path));
        }
        if keys == Keys::Stored && !replayed {
            wrong.push(format!("{} {}: the repeat is not marked Idempotent-Replayed", d.method, d.path));
        }
        if !touched.is_empty() {
            wrong.push(format!("{} {}: the repeat ({status}) changed {touched:?}", d.method, d.path));
        }
    }
    assert!(wrong.is_empty(), "a repeated Idempotency-Key:\n{}", wrong.join("\n"));
    // The walk means something only if some first calls did their work.
    assert!(created >= 10, "only {created} POST routes accepted the walk's first call");
}

/// Every collection the document says is paged (a GET with a `cursor` parameter) pages one way:
/// walked an item at a time it gives every item once and the same items as pages of two; a
/// forged cursor is a 422 naming `cursor`; and no route pages any other way (`before`,
/// `offset`, `page`).
#[tokio::test]
async fn every_paged_collection_walks_by_cursor_without_skipping_or_repeating() {
    let f = filled_workspace().await;
    let admin = key(&f, Role::Admin).await;
    let doc: Value =
        reqwest::get(format!("{}/api/v1/openapi.json", f.app.base)).await.expect("doc").json().await.expect("json");
    let client = reqwest::Client::new();
    let get = |url: String| {
        let req = client.get(url).bearer_auth(&admin);
        async move {
            let res = req.send().await.expect("request");
            let status = res.status();
            (status, res.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (mut wrong, mut paged, mut several) = (Vec::new(), 0, 0);
    for (template, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let query: Vec<&str> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .filter_map(|p| p["name"].as_str())
                .collect();
            for other in ["before", "after", "offset", "page"] {
                if query.contains(&other) {
                    wrong.push(format!("{method} {template} pages with `{other}`, not `cursor`"));
                }
            }
            if !query.contains(&"cursor") {
                continue;
            }
            if method != "get" || !query.contains(&"limit") {
                wrong.push(format!("{method} {template}: a cursor wants a GET with a `limit`"));
                continue;
            }
            paged += 1;
            let path = concrete(&f, template).await;
            let mut walks = Vec::new();
            for limit in [1, 2] {
                let (mut items, mut cursor) = (Vec::new(), None::<String>);
                for _ in 0..500 {
                    let after = cursor.as_deref().map(|c| format!("&cursor={c}")).unwrap_or_default();
                    let (status, body) = get(format!("{}{path}?limit={limit}{after}", f.app.base)).await;
                    if status != StatusCode::OK || !body["data"].is_array() {
                        wrong.push(format!("GET {template}?limit={limit}: {status} {body}"));
                        break;
                    }
                    items.extend(body["data"].as_array().into_iter().flatten().map(Value::to_string));
                    match body["next_cursor"].as_str() {
                        Some(next) => cursor = Some(next.to_string()),
                        None => break,
                    }
                }
                walks.push(items);
            }
            let distinct: BTreeSet<&String> = walks[0].iter().collect();
            if distinct.len() != walks[0].len() {
                wrong.push(format!("GET {template}: an item came twice in pages of one"));
            }
            if walks[0] != walks[1] {
                wrong.push(format!("GET {template}: pages of one and of two disagree"));
            }
            if walks[0].len() >= 2 {
                several += 1;
            }
            let (status, body) = get(format!("{}{path}?cursor=Zm9yZ2Vk", f.app.base)).await;
            if status != StatusCode::UNPROCESSABLE_ENTITY || !body["fields"]["cursor"].is_string() {
                wrong.push(format!("GET {template} with a forged cursor: {status} {body}"));
            }
        }
    }
    assert!(wrong.is_empty(), "paging:\n{}", wrong.join("\n"));
    assert!(paged >= 8, "only {paged} paged collections in the document");
    // The walk means something only where the seed left more than a page of one.
    assert!(several >= 4, "only {several} paged collections held two items or more");
}

/// Every server function the app registers, with its declaration (`None`: undeclared).
fn server_functions() -> Vec<(String, Option<Access>)> {
    let mut out: Vec<(String, Option<Access>)> = leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| (path.to_string(), herald_app::access::of_path(path)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

#[tokio::test]
async fn every_server_function_declares_its_access() {
    let fns = server_functions();
    assert!(fns.len() > 100, "the app registered only {} server functions", fns.len());
    let undeclared: Vec<&String> = fns.iter().filter(|(_, a)| a.is_none()).map(|(p, _)| p).collect();
    assert!(undeclared.is_empty(), "server functions missing from herald_app::access: {undeclared:?}");
    let registered: BTreeSet<&str> = fns.iter().map(|(p, _)| p.as_str()).collect();
    let stale: Vec<&str> = herald_app::access::SERVER_FNS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !registered.contains(format!("{}{name}", herald_app::access::PREFIX).as_str()))
        .collect();
    assert!(stale.is_empty(), "declared in herald_app::access but not registered: {stale:?}");
}

async fn call_fn(b: &Browser, path: &str) -> (StatusCode, Value) {
    let name = path.strip_prefix(herald_app::access::PREFIX).expect("a server function path");
    let r = b.call(name, &[]).await;
    (r.status, r.body)
}

#[tokio::test]
async fn a_viewer_session_changes_nothing_through_any_server_function_or_upload() {
    let f = filled_workspace().await;
    let mut wrong = Vec::new();
    for (path, access) in server_functions() {
        // Public and own-account functions act on the caller alone (logging out would end
        // the walk's own session); reads and changes of the workspace are what roles guard.
        let Some(access) = access.filter(|a| a.role().is_some()) else { continue };
        let before = fingerprint(&f.app).await;
        let (status, body) = call_fn(&f.viewer, &path).await;
        let allowed = access.allows(Role::Viewer);
        let touched: Vec<String> = changed(&before, &fingerprint(&f.app).await)
            .into_iter()
            .filter(|t| !(allowed && READ_TRACES.contains(&t.as_str())))
            .collect();
        if !allowed && status != StatusCode::FORBIDDEN {
            wrong.push(format!("{path}: {status} (want 403) {body}"));
        }
        if allowed && (status == StatusCode::FORBIDDEN || status.is_server_error()) {
            wrong.push(format!("{path}: {status} for a read the viewer may make: {body}"));
        }
        if !touched.is_empty() {
            wrong.push(format!("{path} ({status}) changed {touched:?}"));
        }
    }
    // The plain routes behind the session: uploads of images and imports.
    for upload in ["/media/upload", "/audience/imports/upload"] {
        let before = fingerprint(&f.app).await;
        let form = reqwest::multipart::Form::new()
            .part("file", reqwest::multipart::Part::bytes(b"email\nx@example.com\n".to_vec()).file_name("a.csv"));
        let res = f
            .viewer
            .client
            .post(format!("{}{upload}", f.app.base))
            .header("Origin", f.app.base.clone())
            .multipart(form)
            .send()
            .await
            .expect("upload");
        let touched = changed(&before, &fingerprint(&f.app).await);
        if res.status() != StatusCode::FORBIDDEN || !touched.is_empty() {
            wrong.push(format!("{upload}: {} (want 403), changed {touched:?}", res.status()));
        }
    }
    assert!(wrong.is_empty(), "a viewer session:\n{}", wrong.join("\n"));
}

#[tokio::test]
async fn each_member_role_reaches_exactly_the_server_functions_declared_for_it() {
    let f = filled_workspace().await;
    for (role, b) in [(Role::Author, &f.author), (Role::Admin, &f.admin), (Role::Owner, &f.owner)] {
        let mut wrong = Vec::new();
        for (path, access) in server_functions() {
            let Some(access) = access.filter(|a| a.role().is_some()) else { continue };
            // Only the refusal is called for real here; an allowed call is sent without its
            // arguments, so it stops at them (422) instead of changing the workspace under the
            // next call.
            let (status, body) = call_fn(b, &path).await;
            let allowed = access.allows(role);
            if allowed && (status == StatusCode::FORBIDDEN || status.is_server_error()) {
                wrong.push(format!("{path} declared {}: {status} {body}", access.name()));
            }
            if !allowed && status != StatusCode::FORBIDDEN {
                wrong.push(format!("{path} declared {}: {status} (want 403)", access.name()));
            }
        }
        assert!(wrong.is_empty(), "a member of role {role:?}:\n{}", wrong.join("\n"));
    }
}
