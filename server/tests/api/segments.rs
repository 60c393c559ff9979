//! Saved segments: every condition and engagement window against the readers it must
//! match in a seeded audience (worked out by hand below), the API's checks keyed by place,
//! isolation between workspaces, the plan of indexed conditions, and a campaign sent to a segment
//! with an exclusion reaching exactly the readers it should.

use chrono::{Duration as Days, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

use crate::campaigns_api::wait_for_status;
use crate::helpers::*;
use herald_app::pages::settings::general::UpdateWorkspaceSettings;
use herald_types::TenantId;
use herald_types::segment::Definition;

/// The seeded workspace: its API, id, lists, tags and three campaigns.
struct Audience {
    api: Api,
    tenant: TenantId,
    news: String,
    vip: String,
    campaigns: Vec<String>,
}

/// Six readers (ann … fay) whose lists, tags, fields, sign-up, address and engagement are set so
/// that every condition below matches a different set of them.
async fn seed(app: &TestApp, owner_email: &str) -> Audience {
    let (owner, ws) = app.owner_with_workspace(owner_email, &format!("Segments {owner_email}")).await;
    let r = owner
        .run(UpdateWorkspaceSettings {
            name: "Segments Co".into(),
            postal_address: "1 Main Street, Lyon".into(),
            default_from_name: "Segments Co".into(),
            default_from_email: "news@seg.test".into(),
            time_zone: None,
        })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    app.verify_domain(&ws, "seg.test").await;
    let api = Api::for_owner(app, &owner).await;
    for field in [
        json!({"key": "plan", "label": "Plan", "kind": "choice", "choices": ["Free", "Pro"]}),
        json!({"key": "age", "label": "Age", "kind": "number"}),
        json!({"key": "birthday", "label": "Birthday", "kind": "date"}),
        json!({"key": "city", "label": "City", "kind": "text"}),
        json!({"key": "member", "label": "Member", "kind": "yes_no"}),
    ] {
        let (status, body) = api.post("/api/v1/fields", field).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let list = |name: &str| json!({"name": name, "opt_in": "single"});
    let (_, news) = api.post("/api/v1/lists", list("News")).await;
    let (_, extra) = api.post("/api/v1/lists", list("Extra")).await;
    let (news, extra) =
        (news["id"].as_str().expect("news").to_string(), extra["id"].as_str().expect("extra").to_string());
    // Ann's birthday comes round in three days; Bob's is far from today.
    let soon = (Utc::now() + Days::days(3)).format("1990-%m-%d").to_string();
    let far = (Utc::now() + Days::days(180)).format("2000-%m-%d").to_string();
    let people = [
        (
            "ann@seg.test",
            vec![&news],
            json!({"plan": "Pro", "age": 30, "birthday": soon, "city": "Lyon", "member": true}),
            vec!["vip"],
        ),
        (
            "bob@other.test",
            vec![&news],
            json!({"plan": "Free", "age": 17, "birthday": far, "city": "Paris"}),
            vec!["early"],
        ),
        ("cat@seg.test", vec![&extra], json!({"plan": "Pro", "age": 45, "city": "Lyonnais"}), vec!["vip", "early"]),
        ("dan@seg.test", vec![&news, &extra], json!({}), vec![]),
        ("eve@other.test", vec![], json!({"plan": "Free", "age": 30}), vec![]),
        ("fay@seg.test", vec![&news], json!({}), vec![]),
    ];
    for (email, lists, attributes, tags) in people {
        let (status, body) = api
            .post(
                "/api/v1/readers/bulk",
                json!({"readers": [{"email": email, "attributes": attributes, "tags": tags}], "lists": lists}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let tenant: TenantId = ws.parse().expect("workspace id");
    let id_of = |email: &'static str| {
        let pool = app.owner.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT id FROM readers WHERE email = $1 AND tenant_id = $2")
                .bind(email)
                .bind(tenant)
                .fetch_one(&pool)
                .await
                .expect(email)
        }
    };
    let (ann, bob, cat, dan, eve, fay) = (
        id_of("ann@seg.test").await,
        id_of("bob@other.test").await,
        id_of("cat@seg.test").await,
        id_of("dan@seg.test").await,
        id_of("eve@other.test").await,
        id_of("fay@seg.test").await,
    );
    let (status, body) =
        api.send(reqwest::Method::DELETE, &format!("/api/v1/readers/{fay}/subscriptions/{news}"), None).await;
    assert!(status.is_success(), "{status} {body}");
    // Bob signed up 100 days ago.
    sqlx::query("UPDATE readers SET created_at = now() - interval '100 days' WHERE id = $1")
        .bind(bob)
        .execute(&app.owner)
        .await
        .expect("bob");

    let mut campaigns = Vec::new();
    for name in ["One", "Two", "Three"] {
        let (status, c) =
            api.post("/api/v1/campaigns", json!({"name": name, "subject": name, "list_ids": [news]})).await;
        assert_eq!(status, StatusCode::CREATED, "{c}");
        campaigns.push(c["id"].as_str().expect("id").to_string());
    }
    let campaign = |i: usize| campaigns[i].parse::<uuid::Uuid>().expect("uuid");
    // Sends: Ann got One ten days ago (opened two days ago) and Two and Three yesterday; Fay got
    // all three and opened none; Dan got One.
    let sent = |reader: i64, c: uuid::Uuid, days_ago: i64, opened_days_ago: Option<i64>| {
        let pool = app.owner.clone();
        async move {
            sqlx::query(
                "INSERT INTO sends (tenant_id, campaign_id, reader_id, email, status, sent_at, opened_at)
                 SELECT tenant_id, $2, id, email, 'sent', now() - make_interval(days => $3::int),
                        now() - make_interval(days => $4::int) FROM readers WHERE id = $1",
            )
            .bind(reader)
            .bind(c)
            .bind(days_ago as i32)
            .bind(opened_days_ago.map(|d| d as i32))
            .execute(&pool)
            .await
            .expect("send row");
        }
    };
    sent(ann, campaign(0), 10, Some(2)).await;
    sent(ann, campaign(1), 1, None).await;
    sent(ann, campaign(2), 1, None).await;
    for i in 0..3 {
        sent(fay, campaign(i), 5 - i as i64, None).await;
    }
    sent(dan, campaign(0), 10, None).await;
    // Events, as tracking and webhooks write them: the summary is kept by their trigger.
    let event = |reader: i64, kind: &'static str, prefetch: bool, days_ago: i64| {
        let pool = app.owner.clone();
        let c = campaign(0);
        async move {
            sqlx::query(
                "INSERT INTO events (tenant_id, campaign_id, reader_id, kind, prefetch, at)
                 SELECT tenant_id, $2, id, $3, $4, now() - make_interval(days => $5::int) FROM readers WHERE id = $1",
            )
            .bind(reader)
            .bind(c)
            .bind(kind)
            .bind(prefetch)
            .bind(days_ago as i32)
            .execute(&pool)
            .await
            .expect("event");
        }
    };
    event(ann, "open", false, 2).await;
    event(bob, "open", false, 40).await;
    event(bob, "click", false, 40).await;
    // A privacy proxy's fetch is not an open.
    event(cat, "open", true, 1).await;
    // A click counts as an open (images blocked).
    event(dan, "click", false, 5).await;
    event(eve, "bounce_soft", false, 3).await;
    let _ = (eve, cat);
    let (_, tags) = api.get("/api/v1/tags").await;
    let vip = tags.as_array().expect("tags").iter().find(|t| t["name"] == "vip").expect("vip")["id"]
        .as_str()
        .expect("id")
        .to_string();
    Audience { api, tenant, news, vip, campaigns }
}

/// The readers (their names, the part before `@`) a tree matches, read through the engine's
/// preview, after checking the API's count agrees.
async fn matches(app: &TestApp, a: &Audience, rules: Value) -> BTreeSet<String> {
    let definition = json!({"match": "all", "rules": rules});
    let (status, count) = a.api.post("/api/v1/segments/count", definition.clone()).await;
    assert_eq!(status, StatusCode::OK, "{definition}: {count}");
    let parsed: Definition = serde_json::from_value(definition).expect("definition");
    let (_, readers) =
        herald_engine::audience::segments::preview(&app.app.db, a.tenant, &parsed, 100).await.expect("preview");
    assert_eq!(count["readers"].as_i64(), Some(readers.len() as i64), "the count and the list agree");
    readers.into_iter().map(|r| r.email.split('@').next().unwrap_or_default().to_string()).collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn each_condition_matches_exactly_the_readers_worked_out_by_hand() -> TestResult {
    let app = spawn_app().await;
    let a = seed(&app, "segments-owner@example.com").await;
    let (news, vip) = (a.news.clone(), a.vip.clone());
    let today = Utc::now().date_naive();
    let cases: Vec<(Value, &[&str])> = vec![
        // Lists and their states (Fay left News; Cat and Eve were never on it).
        (json!({"kind": "list", "list_id": news, "state": "subscribed"}), &["ann", "bob", "dan"]),
        (json!({"kind": "list", "list_id": news, "state": "unsubscribed"}), &["fay"]),
        (json!({"kind": "list", "list_id": news, "state": "member"}), &["ann", "bob", "dan", "fay"]),
        (json!({"kind": "list", "list_id": news, "state": "not_member"}), &["cat", "eve"]),
        (json!({"kind": "list", "list_id": news, "state": "pending"}), &[]),
        // Tags.
        (json!({"kind": "tag", "tag_id": vip}), &["ann", "cat"]),
        (json!({"kind": "tag", "tag_id": vip, "has": false}), &["bob", "dan", "eve", "fay"]),
        // Fields of each type: equality (a choice in any case), inequality (readers without the
        // field included), text, ranges, dates, yes/no, set and empty.
        (json!({"kind": "field", "key": "plan", "op": "eq", "value": "pro"}), &["ann", "cat"]),
        (json!({"kind": "field", "key": "plan", "op": "ne", "value": "Pro"}), &["bob", "dan", "eve", "fay"]),
        (json!({"kind": "field", "key": "city", "op": "contains", "value": "LYON"}), &["ann", "cat"]),
        (json!({"kind": "field", "key": "city", "op": "starts_with", "value": "par"}), &["bob"]),
        (json!({"kind": "field", "key": "city", "op": "eq", "value": "Lyon"}), &["ann"]),
        (json!({"kind": "field", "key": "age", "op": "lt", "value": "30"}), &["bob"]),
        (json!({"kind": "field", "key": "age", "op": "gt", "value": "29.5"}), &["ann", "cat", "eve"]),
        (json!({"kind": "field", "key": "age", "op": "eq", "value": "30"}), &["ann", "eve"]),
        (json!({"kind": "field", "key": "age", "op": "between", "value": "18", "value2": "30"}), &["ann", "eve"]),
        (json!({"kind": "field", "key": "age", "op": "is_set"}), &["ann", "bob", "cat", "eve"]),
        (json!({"kind": "field", "key": "age", "op": "is_empty"}), &["dan", "fay"]),
        (json!({"kind": "field", "key": "birthday", "op": "before", "value": "1995-01-01"}), &["ann"]),
        (json!({"kind": "field", "key": "birthday", "op": "after", "value": "1995-01-01"}), &["bob"]),
        (json!({"kind": "field", "key": "birthday", "op": "anniversary_within_days", "days": 7}), &["ann"]),
        (json!({"kind": "field", "key": "birthday", "op": "anniversary_within_days", "days": 2}), &[]),
        (json!({"kind": "field", "key": "member", "op": "eq", "value": "yes"}), &["ann"]),
        // Sign-up date and address.
        (json!({"kind": "signed_up", "op": "within_last_days", "days": 30}), &["ann", "cat", "dan", "eve", "fay"]),
        (json!({"kind": "signed_up", "op": "before", "value": (today - Days::days(50)).to_string()}), &["bob"]),
        (json!({"kind": "email_domain", "domain": "@Other.TEST"}), &["bob", "eve"]),
        (json!({"kind": "email_domain", "domain": "other.test", "is": false}), &["ann", "cat", "dan", "fay"]),
        // Engagement: opens (a click counts, a proxy's fetch does not) in windows, a given
        // campaign, clicks, never, the sunset rule, soft bounces.
        (json!({"kind": "opened", "days": 7}), &["ann", "dan"]),
        (json!({"kind": "opened"}), &["ann", "bob", "dan"]),
        (json!({"kind": "opened", "days": 7, "did": false}), &["bob", "cat", "eve", "fay"]),
        (json!({"kind": "opened", "campaign_id": a.campaigns[0]}), &["ann"]),
        (json!({"kind": "opened", "campaign_id": a.campaigns[0], "days": 1}), &[]),
        // Did not open One: among those it was sent to (Ann opened it; Eve never got it).
        (json!({"kind": "opened", "campaign_id": a.campaigns[0], "did": false}), &["dan", "fay"]),
        (json!({"kind": "clicked", "days": 30}), &["dan"]),
        (json!({"kind": "clicked"}), &["bob", "dan"]),
        (json!({"kind": "never_opened"}), &["cat", "eve", "fay"]),
        (json!({"kind": "unengaged", "campaigns": 3}), &["fay"]),
        (json!({"kind": "unengaged", "campaigns": 2}), &["ann", "fay"]),
        // Dan opened (clicked) after the one campaign he got.
        (json!({"kind": "unengaged", "campaigns": 1}), &["ann", "fay"]),
        (json!({"kind": "soft_bounced", "days": 7}), &["eve"]),
        (json!({"kind": "soft_bounced", "days": 2}), &[]),
        // A group inside the tree.
        (
            json!({"match": "any", "conditions": [
                {"kind": "field", "key": "plan", "op": "eq", "value": "Pro"},
                {"kind": "opened", "days": 7}
            ]}),
            &["ann", "cat", "dan"],
        ),
    ];
    for (rule, want) in cases {
        assert_eq!(matches(&app, &a, json!([rule.clone()])).await, set(want), "{rule}");
    }
    // All of two rules, and any of them.
    let two = json!([{"kind": "list", "list_id": news, "state": "subscribed"}, {"kind": "tag", "tag_id": vip}]);
    assert_eq!(matches(&app, &a, two.clone()).await, set(&["ann"]));
    let (status, count) = a.api.post("/api/v1/segments/count", json!({"match": "any", "rules": two})).await;
    assert_eq!((status, count["readers"].as_i64()), (StatusCode::OK, Some(4)), "{count}");
    Ok(())
}

#[tokio::test]
async fn segments_are_saved_checked_by_place_and_kept_to_their_workspace() -> TestResult {
    let app = spawn_app().await;
    let a = seed(&app, "seg-a@example.com").await;
    let b = seed(&app, "seg-b@example.com").await;
    // Saved, listed, counted, renamed.
    let input = json!({"name": "VIPs", "definition": {"match": "all", "rules": [{"kind": "tag", "tag_id": a.vip}]}});
    let (status, saved) = a.api.post("/api/v1/segments", input.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{saved}");
    let id = saved["id"].as_str().expect("id").to_string();
    let (status, count) = a.api.get(&format!("/api/v1/segments/{id}/count")).await;
    assert_eq!((status, count["readers"].as_i64()), (StatusCode::OK, Some(2)), "{count}");
    let (status, again) =
        a.api.post("/api/v1/segments", json!({"name": "vips", "definition": input["definition"]})).await;
    assert_eq!(
        (status, again["fields"]["name"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("Another segment has this name."))
    );
    // Problems come back keyed by the condition's place.
    let bad = json!({"name": "Bad", "definition": {"match": "all", "rules": [
        {"kind": "field", "key": "age", "op": "gt", "value": "old"},
        {"match": "any", "conditions": [{"kind": "tag", "tag_id": b.vip}, {"kind": "soft_bounced", "days": 0}]},
        {"kind": "field", "key": "plan", "op": "lt", "value": "1"}
    ]}});
    let (status, err) = a.api.post("/api/v1/segments", bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    let keys: BTreeSet<&str> = err["fields"].as_object().expect("fields").keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["rules.0.value", "rules.1.conditions.0.tag_id", "rules.1.conditions.1.days", "rules.2.op"]
            .into_iter()
            .collect(),
        "another workspace's tag is not this one's: {err}"
    );
    // Another workspace sees none of it, and its own identical readers never match A's tree.
    let (status, _) = b.api.get(&format!("/api/v1/segments/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = b.api.get(&format!("/api/v1/segments/{id}/count")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, listed) = b.api.get("/api/v1/segments").await;
    assert_eq!(listed, json!([]));
    // Every reader of A's whole workspace, counted in A: six, never B's six as well.
    let everyone = json!({"match": "all", "rules": [{"kind": "signed_up", "op": "within_last_days", "days": 3650}]});
    let (_, count) = a.api.post("/api/v1/segments/count", everyone).await;
    assert_eq!(count["readers"].as_i64(), Some(6), "{count}");
    // A campaign still to send keeps its segment from being deleted.
    let (status, c) =
        a.api.post("/api/v1/campaigns", json!({"name": "To VIPs", "subject": "Hi", "segment_ids": [id]})).await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let (status, err) = a.api.send(reqwest::Method::DELETE, &format!("/api/v1/segments/{id}"), None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    let (status, err) = b.api.post("/api/v1/campaigns", json!({"name": "Theirs", "segment_ids": [id]})).await;
    assert_eq!((status, err["fields"]["segment_ids"].is_string()), (StatusCode::UNPROCESSABLE_ENTITY, true), "{err}");
    let (status, _) = a
        .api
        .send(reqwest::Method::DELETE, &format!("/api/v1/campaigns/{}", c["id"].as_str().expect("id")), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = a.api.send(reqwest::Method::DELETE, &format!("/api/v1/segments/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // A field deleted and made again with another type: the segment that compared it as a
    // number is refused with the place named, and a send to it stops before it starts.
    let adults = json!({"name": "Adults", "definition": {"match": "all", "rules": [{"kind": "field", "key": "age", "op": "gt", "value": "20"}]}});
    let (status, adults) = a.api.post("/api/v1/segments", adults).await;
    assert_eq!(status, StatusCode::CREATED, "{adults}");
    let adults = adults["id"].as_str().expect("id").to_string();
    let (_, draft) =
        a.api.post("/api/v1/campaigns", json!({"name": "To adults", "subject": "Hi", "segment_ids": [adults]})).await;
    let (status, _) = a.api.send(reqwest::Method::DELETE, "/api/v1/fields/age", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = a.api.post("/api/v1/fields", json!({"key": "age", "label": "Age", "kind": "text"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, err) = a.api.get(&format!("/api/v1/segments/{adults}/count")).await;
    assert_eq!((status, err["fields"]["rules.0.op"].is_string()), (StatusCode::UNPROCESSABLE_ENTITY, true), "{err}");
    let (status, err) =
        a.api.post(&format!("/api/v1/campaigns/{}/send", draft["id"].as_str().expect("id")), json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert!(err["message"].as_str().unwrap_or_default().contains("“Adults”"), "{err}");
    Ok(())
}

#[tokio::test]
async fn indexed_conditions_are_planned_on_their_indexes_outside_row_security() -> TestResult {
    let app = spawn_app().await;
    let a = seed(&app, "seg-plan@example.com").await;
    // Enough readers that scanning them all would cost more than the index.
    sqlx::query(
        "INSERT INTO readers (tenant_id, email, attributes)
         SELECT $1, 'filler' || g || '@filler' || (g % 50) || '.test', jsonb_build_object('plan', 'Free', 'age', g % 90)
         FROM generate_series(1, 20000) g",
    )
    .bind(a.tenant)
    .execute(&app.owner)
    .await?;
    sqlx::query("ANALYZE readers").execute(&app.owner).await?;
    // A choice and a range joined: merged, never a nested loop, which rescans one side per row of the
    // other (with stale statistics it ran for over ten minutes at 1M readers). Checked before the values'
    // table is analysed: the planner still believes it empty.
    let mut tx = app.app.db.tenant_tx(a.tenant).await?;
    let pair: Vec<String> = sqlx::query_scalar("SELECT segment_plan($1)")
        .bind(json!({"match": "all", "rules": [
            {"kind": "field", "key": "plan", "op": "eq", "value": "Free"},
            {"kind": "field", "key": "age", "op": "between", "value": "20", "value2": "30"}]}))
        .fetch_all(&mut *tx)
        .await?;
    drop(tx);
    let pair = pair.join("\n");
    assert!(!pair.contains("Nested Loop") && pair.contains("Merge Join"), "the sets are merged:\n{pair}");
    sqlx::query("ANALYZE field_values").execute(&app.owner).await?;
    let plan = |rule: Value| {
        let db = app.app.db.clone();
        let tenant = a.tenant;
        async move {
            let mut tx = db.tenant_tx(tenant).await.expect("tx");
            let lines: Vec<String> = sqlx::query_scalar("SELECT segment_plan($1)")
                .bind(json!({"match": "all", "rules": [rule]}))
                .fetch_all(&mut *tx)
                .await
                .expect("plan");
            lines.join("\n")
        }
    };
    let pro = plan(json!({"kind": "field", "key": "plan", "op": "eq", "value": "Pro"})).await;
    assert!(pro.contains("field_values_value_idx"), "a choice's equality uses the typed values' index:\n{pro}");
    assert!(!pro.contains("readers"), "and reads no reader's row:\n{pro}");
    let range = plan(json!({"kind": "field", "key": "age", "op": "between", "value": "20", "value2": "30"})).await;
    assert!(range.contains("field_values_value_idx"), "a number range uses the typed values' index:\n{range}");
    let lyon = plan(json!({"kind": "field", "key": "city", "op": "eq", "value": "Lyon"})).await;
    assert!(lyon.contains("readers_attributes_idx"), "a text's equality uses the attributes index:\n{lyon}");
    let domain = plan(json!({"kind": "email_domain", "domain": "seg.test"})).await;
    assert!(domain.contains("readers_tenant_domain_idx"), "the domain uses its index:\n{domain}");
    let recent = plan(json!({"kind": "signed_up", "op": "before", "value": "2020-01-01"})).await;
    assert!(recent.contains("readers_tenant_created_idx"), "the sign-up date uses its index:\n{recent}");
    // And the filler, in this workspace, is counted: 6 + 20,000 readers, 2 of them Pro.
    let (_, count) = a
        .api
        .post(
            "/api/v1/segments/count",
            json!({"match": "all", "rules": [{"kind": "field", "key": "plan", "op": "eq", "value": "Pro"}]}),
        )
        .await;
    assert_eq!(count["readers"].as_i64(), Some(2), "{count}");
    Ok(())
}

#[tokio::test]
async fn a_campaign_to_a_segment_with_an_exclusion_reaches_exactly_its_readers() -> TestResult {
    let app = spawn_app().await;
    let a = seed(&app, "seg-send@example.com").await;
    // VIPs or anyone at other.test (Ann, Cat, Bob, Eve), less the Free plan (Bob, Eve). Eve is on
    // no list, so a segment could not reach her anyway: consent comes from lists.
    let segment = |name: &str, rules: Value| {
        let api = &a.api;
        let body = json!({"name": name, "definition": {"match": "any", "rules": rules}});
        async move {
            let (status, s) = api.post("/api/v1/segments", body).await;
            assert_eq!(status, StatusCode::CREATED, "{s}");
            s["id"].as_str().expect("id").to_string()
        }
    };
    let wide = segment(
        "VIP or other",
        json!([{"kind": "tag", "tag_id": a.vip}, {"kind": "email_domain", "domain": "other.test"}]),
    )
    .await;
    let free = segment("Free plan", json!([{"kind": "field", "key": "plan", "op": "eq", "value": "Free"}])).await;
    let (status, draft) = a
        .api
        .post(
            "/api/v1/campaigns",
            json!({"name": "Segmented", "subject": "Hello {{ reader.fields.plan }}", "segment_ids": [wide],
                   "exclude_segment_id": free, "body": "Hi"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{draft}");
    let id = draft["id"].as_str().expect("id").to_string();
    let (status, audience) = a.api.get(&format!("/api/v1/campaigns/{id}/audience")).await;
    assert_eq!((status, audience), (StatusCode::OK, json!({"eligible": 2, "skipped": 0})));
    let (status, body) = a.api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stats = wait_for_status(&a.api, &id, "sent", Duration::from_secs(60)).await;
    assert_eq!(stats["sent"], 2, "{stats}");
    let got: BTreeSet<String> =
        app.sink.deliveries().await.into_iter().map(|d| d.rcpt_to).filter(|r| r.ends_with(".test")).collect();
    assert_eq!(got, set(&["ann@seg.test", "cat@seg.test"]));
    // The tree the send used is fixed on the campaign: editing the segment now changes nothing.
    let tree: Option<Value> = sqlx::query_scalar("SELECT audience FROM campaigns WHERE id = $1::uuid")
        .bind(&id)
        .fetch_one(&app.owner)
        .await?;
    assert!(tree.is_some_and(|t| t.to_string().contains("\"not\"")), "the exclusion is in the stored tree");
    Ok(())
}

/// A workspace whose sending campaign has nothing due for a year (every row deferred) must not
/// keep another workspace's campaign on the same default server from going out: its idle
/// loops held all four of the server's connection slots, for as long as its rows waited.
#[tokio::test]
async fn a_deferred_send_in_one_workspace_does_not_hold_up_another() -> TestResult {
    let app = spawn_app().await;
    let stuck = seed(&app, "seg-stuck@example.com").await;
    let (status, c) = stuck
        .api
        .post("/api/v1/campaigns", json!({"name": "Deferred", "subject": "Later", "list_ids": [stuck.news]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let deferred = c["id"].as_str().expect("id").to_string();
    sqlx::query(
        "INSERT INTO sends (tenant_id, campaign_id, reader_id, email, status, next_attempt_at)
         SELECT tenant_id, $2::uuid, id, email, 'queued', now() + interval '365 days' FROM readers WHERE tenant_id = $1",
    )
    .bind(stuck.tenant)
    .bind(&deferred)
    .execute(&app.owner)
    .await?;
    sqlx::query(
        "UPDATE campaigns SET status = 'sending', fanout_done = true, fanout_cursor = 9223372036854775807,
                started_at = now(), recipients = 6 WHERE id = $1::uuid",
    )
    .bind(&deferred)
    .execute(&app.owner)
    .await?;
    // Let the supervisor find it and start loops for it a few times.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let other = seed(&app, "seg-other@example.com").await;
    let (_, c) = other
        .api
        .post("/api/v1/campaigns", json!({"name": "Now", "subject": "Now", "list_ids": [other.news], "body": "Hi"}))
        .await;
    let id = c["id"].as_str().expect("id").to_string();
    let (status, body) = other.api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The deferred send holds none of the default server's connection slots now.
    let held: i64 =
        sqlx::query_scalar("SELECT count(*) FROM leases WHERE campaign_id = $1::uuid AND expires_at > now()")
            .bind(&deferred)
            .fetch_one(&app.owner)
            .await?;
    assert_eq!(held, 0, "an idle send gave its slots back");
    let stats = wait_for_status(&other.api, &id, "sent", Duration::from_secs(60)).await;
    assert_eq!(stats["sent"], 3, "{stats}");
    Ok(())
}
