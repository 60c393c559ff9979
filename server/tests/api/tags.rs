//! Tags: through the API (one reader, the bulk endpoint), the readers list's bulk
//! action over a filter, an import column, rename and delete with counts, and isolation: a
//! workspace never sees, names or changes another's tags or readers.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::*;
use crate::imports::{start, upload, wait_done};
use herald_app::pages::audience::readers::{BulkReaders, FilterForm};
use herald_app::pages::audience::tags::{DeleteTag, ListTags, RenameTag};
use herald_types::{Existing, ImportMode};

fn names(v: &Value) -> Vec<String> {
    v["tags"].as_array().map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// `(name, readers)` of the workspace's tags, by name.
async fn counts(api: &Api) -> Vec<(String, i64)> {
    let (status, list) = api.get("/api/v1/tags").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list.as_array()
        .map(|a| {
            a.iter()
                .map(|t| (t["name"].as_str().unwrap_or_default().to_string(), t["readers"].as_i64().unwrap_or(-1)))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn tags_are_added_removed_counted_renamed_and_deleted_through_the_api() -> TestResult {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("tagger@example.com", "Tags").await;
    let api = Api::for_owner(&app, &owner).await;
    // The bulk endpoint tags the readers it creates or updates.
    let (status, out) = api
        .post(
            "/api/v1/readers/bulk",
            json!({"readers": [
                {"email": "ann@example.com", "tags": ["VIP", "early"]},
                {"email": "bob@example.com", "tags": ["vip"]},
                {"email": "cat@example.com"},
                {"email": "dan@example.com", "tags": ["bad,name"]},
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!((out["created"].as_u64(), out["invalid"][0]["index"].as_u64()), (Some(3), Some(3)), "{out}");
    // "vip" is the tag "VIP", whatever its case.
    assert_eq!(counts(&api).await, vec![("early".into(), 1), ("VIP".into(), 2)]);

    let (_, page) = api.get("/api/v1/readers?q=cat").await;
    let cat = page["data"][0]["id"].as_i64().expect("cat");
    let (status, after) = api.post(&format!("/api/v1/readers/{cat}/tags"), json!({"tags": ["Early", "new one"]})).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(names(&after), ["early", "new one"]);
    let (status, after) =
        api.send(Method::DELETE, &format!("/api/v1/readers/{cat}/tags?tags=new%20one,missing"), None).await;
    assert_eq!((status, names(&after)), (StatusCode::OK, vec!["early".to_string()]), "{after}");
    let (_, read) = api.get(&format!("/api/v1/readers/{cat}/tags")).await;
    assert_eq!(names(&read), ["early"]);
    // Bad names are refused, field by field, and change nothing.
    for bad in [json!({"tags": []}), json!({"tags": ["a,b"]}), json!({"tags": ["x".repeat(51)]})] {
        let (status, body) = api.post(&format!("/api/v1/readers/{cat}/tags"), bad.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
        assert!(body["fields"]["tags"].is_string(), "{body}");
    }
    let (status, _) = api.post("/api/v1/readers/999999999/tags", json!({"tags": ["x"]})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Rename (not onto another tag's name) and delete, with the counts after.
    let list = counts(&api).await;
    assert_eq!(
        list.iter().map(|(n, c)| (n.as_str(), *c)).collect::<Vec<_>>(),
        [("early", 2), ("new one", 0), ("VIP", 2)]
    );
    let (_, tags) = api.get("/api/v1/tags").await;
    let id_of = |name: &str| {
        tags.as_array()
            .and_then(|a| a.iter().find(|t| t["name"] == name))
            .map(|t| t["id"].as_str().unwrap_or_default().to_string())
            .expect("tag")
    };
    let (status, body) =
        api.send(Method::PATCH, &format!("/api/v1/tags/{}", id_of("VIP")), Some(json!({"name": "EARLY"}))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, renamed) =
        api.send(Method::PATCH, &format!("/api/v1/tags/{}", id_of("VIP")), Some(json!({"name": "Members"}))).await;
    assert_eq!(
        (status, renamed["name"].as_str(), renamed["readers"].as_i64()),
        (StatusCode::OK, Some("Members"), Some(2))
    );
    let (status, _) = api.send(Method::DELETE, &format!("/api/v1/tags/{}", id_of("early")), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(counts(&api).await, vec![("Members".into(), 2), ("new one".into(), 0)]);
    let (_, read) = api.get(&format!("/api/v1/readers/{cat}/tags")).await;
    assert!(names(&read).is_empty(), "a deleted tag stayed on a reader: {read}");

    // The editor's server functions say the same.
    let tags = owner.run(ListTags {}).await.value();
    assert_eq!(tags.iter().map(|t| (t.name.as_str(), t.readers)).collect::<Vec<_>>(), [("Members", 2), ("new one", 0)]);
    assert!(owner.run(RenameTag { id: tags[1].id, name: "Fresh".into() }).await.ok());
    assert!(owner.run(DeleteTag { id: tags[1].id }).await.ok());
    assert_eq!(owner.run(ListTags {}).await.value().len(), 1);

    // The document names every route with its own operation.
    let (_, doc) = api.get("/api/v1/openapi.json").await;
    let ops: Vec<&str> = [
        ("/api/v1/tags", "get"),
        ("/api/v1/tags/{id}", "patch"),
        ("/api/v1/tags/{id}", "delete"),
        ("/api/v1/readers/{id}/tags", "get"),
        ("/api/v1/readers/{id}/tags", "post"),
        ("/api/v1/readers/{id}/tags", "delete"),
    ]
    .iter()
    .map(|(p, m)| doc["paths"][*p][*m]["operationId"].as_str().unwrap_or_default())
    .collect();
    assert_eq!(ops, ["listTags", "renameTag", "deleteTag", "listReaderTags", "addReaderTags", "removeReaderTags"]);
    Ok(())
}

/// The readers list's bulk action tags everyone matching a filter at once, and takes it off
/// again; an import column of comma-separated names tags each row's reader ("Leave unchanged"
/// leaves an existing reader's tags alone too).
#[tokio::test]
async fn bulk_actions_and_import_columns_tag_many_readers() -> TestResult {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("bulk-tagger@example.com", "Bulk Tags").await;
    let api = Api::for_owner(&app, &owner).await;
    let readers: Vec<Value> = (0..30)
        .map(|i| json!({"email": format!("r{i}@{}.example", if i % 3 == 0 { "three" } else { "other" })}))
        .collect();
    assert_eq!(api.post("/api/v1/readers/bulk", json!({"readers": readers})).await.0, StatusCode::OK);
    let bulk = |action: &str| BulkReaders {
        scope: "filter".into(),
        filter: FilterForm { q: "three.example".into(), ..FilterForm::default() },
        action: action.into(),
        target_list: String::new(),
        tag: "Thirds".into(),
    };
    let r = owner.run(bulk("add_tag")).await;
    assert!(r.ok(), "{:?}", r.result);
    assert_eq!(counts(&api).await, vec![("Thirds".into(), 10)]);
    // The readers list (and the API) filter by tag, any case; a bulk action over that filter
    // reaches exactly them.
    let (_, page) = api.get("/api/v1/readers?tag=thirds&limit=500").await;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(10), "{page}");
    let mut by_tag = bulk("add_tag");
    by_tag.filter = FilterForm { tag: "THIRDS".into(), ..FilterForm::default() };
    by_tag.tag = "Also".into();
    assert!(owner.run(by_tag).await.ok());
    assert_eq!(counts(&api).await, vec![("Also".into(), 10), ("Thirds".into(), 10)]);
    assert!(owner.run(bulk("remove_tag")).await.ok());
    assert_eq!(counts(&api).await, vec![("Also".into(), 10), ("Thirds".into(), 0)]);
    let mut empty = bulk("add_tag");
    empty.tag = " ".into();
    assert!(owner.run(empty).await.result.is_err(), "a tag without a name");

    let csv = "email,name,tags\nr0@three.example,Zero,\"vip, Thirds\"\nnew@example.com,New,vip\nbad@example.com,Bad,\"ok, no\nway\"\n";
    let id = upload(&owner, "tags.csv", csv.as_bytes().to_vec()).await;
    let d = owner.run(herald_app::pages::audience::import::GetImport { id: id.parse()? }).await.value();
    assert_eq!(d.mapping, ["email", "name", "tags"], "a Tags column is guessed");
    let r =
        owner.run(start(id.parse()?, &["email", "name", "tags"], "", ImportMode::Confirmed, Existing::Update)).await;
    assert!(r.ok(), "{:?}", r.result);
    let d = wait_done(&owner, &id).await;
    // A tag name with a line break makes its row invalid (reported by line), not a broken tag.
    assert_eq!((d.created, d.updated, d.invalid), (1, 1, 1), "{d:?}");
    assert_eq!(counts(&api).await, vec![("Also".into(), 10), ("Thirds".into(), 1), ("vip".into(), 2)]);
    let (_, page) = api.get("/api/v1/readers?q=bad%40example.com").await;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(0), "{page}");
    Ok(())
}

/// Another workspace's readers and tags are out of reach: its reader ids answer 404, its tags
/// are not listed, counted, renamed or deleted, and a same-named tag is a tag of its own.
#[tokio::test]
async fn tags_stay_in_their_workspace() -> TestResult {
    let t = two_tenants().await;
    let a = Api::for_owner(&t.app, &t.a).await;
    let b = Api::for_owner(&t.app, &t.b).await;
    assert_eq!(
        a.post("/api/v1/readers/bulk", json!({"readers": [{"email": "x@example.com", "tags": ["shared"]}]})).await.0,
        StatusCode::OK
    );
    assert_eq!(
        b.post("/api/v1/readers/bulk", json!({"readers": [{"email": "y@example.com", "tags": ["Shared"]}]})).await.0,
        StatusCode::OK
    );
    let (_, page) = a.get("/api/v1/readers").await;
    let a_reader = page["data"][0]["id"].as_i64().expect("reader");
    let (_, a_tags) = a.get("/api/v1/tags").await;
    let a_tag = a_tags[0]["id"].as_str().expect("tag").to_string();

    assert_eq!(b.get(&format!("/api/v1/readers/{a_reader}/tags")).await.0, StatusCode::NOT_FOUND);
    assert_eq!(
        b.post(&format!("/api/v1/readers/{a_reader}/tags"), json!({"tags": ["mine"]})).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        b.send(Method::DELETE, &format!("/api/v1/readers/{a_reader}/tags?tags=shared"), None).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        b.send(Method::PATCH, &format!("/api/v1/tags/{a_tag}"), Some(json!({"name": "stolen"}))).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(b.send(Method::DELETE, &format!("/api/v1/tags/{a_tag}"), None).await.0, StatusCode::NOT_FOUND);
    assert_eq!(counts(&a).await, vec![("shared".into(), 1)]);
    assert_eq!(counts(&b).await, vec![("Shared".into(), 1)]);
    // A bulk action with another workspace's reader ids changes nothing there.
    let r =
        t.b.run(BulkReaders {
            scope: format!("ids:{a_reader}"),
            filter: FilterForm::default(),
            action: "add_tag".into(),
            target_list: String::new(),
            tag: "intruder".into(),
        })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    let (_, a_tags) = a.get(&format!("/api/v1/readers/{a_reader}/tags")).await;
    assert_eq!(names(&a_tags), ["shared"]);
    Ok(())
}
