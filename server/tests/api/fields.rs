//! Custom fields: defined per workspace (key, label, type, choices), values typed on
//! every path that writes them (the API's single and bulk writes, the reader page, imports),
//! wrong types refused with the field named, rename and delete, isolation, and the migration
//! that turns existing attributes into fields with guessed types.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::postgres::PgPoolOptions;

use crate::helpers::*;
use crate::imports::{start, upload, wait_done};
use herald_app::pages::audience::reader::{GetReader, UpdateReader};
use herald_engine::infra::migrate;
use herald_types::{Existing, ImportMode};

async fn define(api: &Api) {
    for f in [
        json!({"key": "plan", "label": "Plan", "kind": "choice", "choices": ["Free", "Pro"]}),
        json!({"key": "seats", "label": "Seats", "kind": "number"}),
        json!({"key": "birthday", "label": "Birthday", "kind": "date"}),
        json!({"key": "vip", "label": "VIP", "kind": "yes_no"}),
    ] {
        let (status, body) = api.post("/api/v1/fields", f.clone()).await;
        assert_eq!(status, StatusCode::CREATED, "{f}: {body}");
    }
}

#[tokio::test]
async fn field_values_are_typed_on_every_path_and_wrong_ones_named() -> TestResult {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("fields@example.com", "Fields").await;
    let api = Api::for_owner(&app, &owner).await;
    define(&api).await;
    // Definitions are checked field by field.
    for (bad, field) in [
        (json!({"key": "Plan", "label": "x", "kind": "text"}), "key"),
        (json!({"key": "plan", "label": "Again", "kind": "text"}), "key"),
        (json!({"key": "tier", "label": "Tier", "kind": "choice", "choices": []}), "choices"),
        (json!({"key": "tier", "label": "", "kind": "text"}), "label"),
    ] {
        let (status, body) = api.post("/api/v1/fields", bad.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
        assert!(body["fields"][field].is_string(), "{bad}: {body}");
    }

    // The API: a wrong type is a 422 naming the field; right ones are stored typed.
    let (status, body) =
        api.post("/api/v1/readers", json!({"email": "a@example.com", "attributes": {"seats": "twelve"}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["attributes.seats"].as_str().unwrap_or_default().contains("a number"), "{body}");
    let good = json!({"email": "a@example.com", "attributes": {"seats": "12", "plan": "pro", "birthday": "2000-01-31", "vip": "yes", "city": "Lyon"}});
    let (status, created) = api.post("/api/v1/readers", good).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["reader"]["id"].as_i64().expect("id");
    assert_eq!(
        created["reader"]["attributes"],
        json!({"seats": 12, "plan": "Pro", "birthday": "2000-01-31", "vip": true, "city": "Lyon"})
    );
    let (status, body) = api
        .send(Method::PATCH, &format!("/api/v1/readers/{id}"), Some(json!({"attributes": {"birthday": "31/01/2000"}})))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["attributes.birthday"].as_str().unwrap_or_default().contains("YYYY-MM-DD"), "{body}");
    // The bulk endpoint reports the row.
    let (_, out) = api
        .post("/api/v1/readers/bulk", json!({"readers": [{"email": "b@example.com", "attributes": {"plan": "Team"}}, {"email": "c@example.com", "attributes": {"vip": false}}]}))
        .await;
    assert_eq!((out["created"].as_u64(), out["invalid"][0]["index"].as_u64()), (Some(1), Some(0)), "{out}");
    assert!(out["invalid"][0]["reason"].as_str().unwrap_or_default().contains("one of Free, Pro"), "{out}");

    // The reader page: one input per field, errors beside each, an empty one clears.
    let page = owner.run(GetReader { id }).await.value();
    let shown: Vec<(String, String)> = page.fields.iter().map(|(f, v)| (f.key.clone(), v.clone())).collect();
    assert_eq!(
        shown,
        [
            ("plan".into(), "Pro".into()),
            ("seats".into(), "12".into()),
            ("birthday".into(), "2000-01-31".into()),
            ("vip".into(), "yes".into())
        ]
    );
    assert_eq!(page.attributes_json.replace(char::is_whitespace, ""), r#"{"city":"Lyon"}"#);
    let values = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let r = owner
        .run(UpdateReader {
            id,
            name: "A".into(),
            attributes: r#"{"city": "Lyon"}"#.into(),
            values: values(&[("seats", "x"), ("plan", "nope")]),
        })
        .await;
    let Err(herald_app::error::AppError::Invalid(e)) = &r.result else { panic!("{:?}", r.result) };
    let keys: Vec<_> = e.errors.iter().filter_map(|e| e.field.clone()).collect();
    assert_eq!(keys, ["attributes.plan", "attributes.seats"]);
    let r = owner
        .run(UpdateReader {
            id,
            name: "A".into(),
            attributes: r#"{"city": "Paris"}"#.into(),
            values: values(&[("plan", "Pro"), ("seats", " 3 "), ("birthday", "2000-01-31"), ("vip", "")]),
        })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    let (_, reader) = api.get(&format!("/api/v1/readers/{id}")).await;
    assert_eq!(
        reader["reader"]["attributes"],
        json!({"seats": 3, "plan": "Pro", "birthday": "2000-01-31", "city": "Paris"})
    );

    // Imports: a Field column is parsed by its type; a bad cell lands in the report.
    let csv = "email,seats\nd@example.com,7\ne@example.com,seven\n";
    let import = upload(&owner, "fields.csv", csv.as_bytes().to_vec()).await;
    let r = owner
        .run(start(import.parse()?, &["email", "attributes.seats"], "", ImportMode::Confirmed, Existing::Update))
        .await;
    assert!(r.ok(), "{:?}", r.result);
    let d = wait_done(&owner, &import).await;
    assert_eq!((d.created, d.invalid), (1, 1), "{d:?}");
    let report = owner.get(&format!("/audience/imports/{import}/errors.csv")).await.text().await?;
    assert!(report.contains("Seats takes a number"), "{report}");
    let (_, page) = api.get("/api/v1/readers?q=d%40example.com").await;
    assert_eq!(page["data"][0]["attributes"]["seats"], json!(7));

    // Label and choices change; the type does not; delete takes the values with it.
    let (status, f) = api
        .send(
            Method::PATCH,
            "/api/v1/fields/plan",
            Some(json!({"label": "Tier", "kind": "choice", "choices": ["Free", "Pro", "Team"]})),
        )
        .await;
    assert_eq!((status, f["label"].as_str()), (StatusCode::OK, Some("Tier")), "{f}");
    let (status, body) =
        api.send(Method::PATCH, "/api/v1/fields/plan", Some(json!({"label": "Tier", "kind": "text"}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(api.send(Method::DELETE, "/api/v1/fields/seats", None).await.0, StatusCode::NO_CONTENT);
    let (_, reader) = api.get(&format!("/api/v1/readers/{id}")).await;
    assert!(reader["reader"]["attributes"].get("seats").is_none(), "{reader}");
    let (_, list) = api.get("/api/v1/fields").await;
    let keys: Vec<&str> =
        list.as_array().map(|a| a.iter().filter_map(|f| f["key"].as_str()).collect()).unwrap_or_default();
    assert_eq!(keys, ["plan", "birthday", "vip"]);

    // Every route in the document, with its own operation.
    let (_, doc) = api.get("/api/v1/openapi.json").await;
    let ops: Vec<&str> = [
        ("/api/v1/fields", "get"),
        ("/api/v1/fields", "post"),
        ("/api/v1/fields/{key}", "patch"),
        ("/api/v1/fields/{key}", "delete"),
    ]
    .iter()
    .map(|(p, m)| doc["paths"][*p][*m]["operationId"].as_str().unwrap_or_default())
    .collect();
    assert_eq!(ops, ["listFields", "createField", "updateField", "deleteField"]);
    Ok(())
}

#[tokio::test]
async fn fields_stay_in_their_workspace() -> TestResult {
    let t = two_tenants().await;
    let a = Api::for_owner(&t.app, &t.a).await;
    let b = Api::for_owner(&t.app, &t.b).await;
    define(&a).await;
    let (_, list) = b.get("/api/v1/fields").await;
    assert_eq!(list, json!([]));
    assert_eq!(
        b.send(Method::PATCH, "/api/v1/fields/plan", Some(json!({"label": "x", "kind": "choice", "choices": ["a"]})))
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(b.send(Method::DELETE, "/api/v1/fields/plan", None).await.0, StatusCode::NOT_FOUND);
    // B's readers are not held to A's types.
    let (status, body) =
        b.post("/api/v1/readers", json!({"email": "x@example.com", "attributes": {"seats": "many"}})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (_, list) = a.get("/api/v1/fields").await;
    assert_eq!(list.as_array().map(Vec::len), Some(4));
    Ok(())
}

/// Migration 40, as the ordinary owner: every workspace's existing attributes become fields with
/// a type guessed from all their values, nothing rewritten; keys a merge tag cannot name stay
/// plain attributes.
#[tokio::test]
async fn existing_attributes_become_fields_with_guessed_types() -> TestResult {
    let url = fresh_empty_database().await?;
    let owner = PgPoolOptions::new().max_connections(2).connect(&url).await?;
    let db = url.rsplit('/').next().unwrap_or_default().to_string();
    migrate::run_until(&owner, Some(20261128000039)).await?;
    let inspector = PgPoolOptions::new().max_connections(1).connect(&inspector_url(&db).await).await?;
    let mut tenants = Vec::new();
    for slug in ["one", "two"] {
        let tenant = uuid::Uuid::new_v4();
        sqlx::query("INSERT INTO tenants (id, name, slug) VALUES ($1, $2, $2)")
            .bind(tenant)
            .bind(slug)
            .execute(&inspector)
            .await?;
        tenants.push(tenant);
    }
    let attributes: [(usize, Value); 4] = [
        (0, json!({"seats": 3, "vip": true, "birthday": "2000-01-31", "city": "Lyon", "Bad Key": "x"})),
        (0, json!({"seats": 4.5, "vip": false, "birthday": "1999-12-01", "city": 7})),
        (1, json!({"seats": "many", "note": null})),
        (1, json!({"seats": 2})),
    ];
    for (i, (t, a)) in attributes.iter().enumerate() {
        sqlx::query("INSERT INTO readers (tenant_id, email, attributes) VALUES ($1, $2, $3)")
            .bind(tenants[*t])
            .bind(format!("r{i}@example.com"))
            .bind(a)
            .execute(&inspector)
            .await?;
    }
    migrate::run_on(&owner).await?;
    for (t, want) in [
        (0, vec![("birthday", "date"), ("city", "text"), ("seats", "number"), ("vip", "yes_no")]),
        (1, vec![("seats", "text")]),
    ] {
        let got: Vec<(String, String)> =
            sqlx::query_as("SELECT key, kind FROM fields WHERE tenant_id = $1 ORDER BY key")
                .bind(tenants[t])
                .fetch_all(&inspector)
                .await?;
        let got: Vec<(&str, &str)> = got.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want, "workspace {t}");
    }
    let kept: Value = sqlx::query_scalar("SELECT attributes FROM readers WHERE email = 'r0@example.com'")
        .fetch_one(&inspector)
        .await?;
    assert_eq!(kept, attributes[0].1, "a value was rewritten");
    Ok(())
}
