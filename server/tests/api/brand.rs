//! Brand and templates: the brand is checked field by field and dresses every starter
//! layout; a campaign started from a layout, a template or a blank page carries the brand as it
//! was then (changing the brand later leaves it alone); saved templates are checked like a
//! campaign's body, unique by name, and never reachable from another workspace.

use herald_app::pages::campaigns::editor::GetCampaign;
use herald_app::pages::campaigns::list::CreateCampaign;
use herald_app::pages::campaigns::templates::{SaveCampaignTemplate, StartCampaign};
use herald_types::{Block, BlockDocument, BodyFormat, CampaignTemplateInput, Layout};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::*;

fn brand(accent: &str, logo: &str) -> Value {
    json!({
        "theme": {"accent": accent, "background": "#fafaf9", "text": "#111111", "font": "serif"},
        "logo_src": logo,
        "logo_width": 120,
        "footer_text": "Tulip Weekly: for people who grow things."
    })
}

#[tokio::test]
async fn the_brand_is_checked_and_dresses_every_layout_and_new_campaign() -> TestResult {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("brand@example.com", "Tulips").await;
    let api = Api::for_owner(&app, &owner).await;
    let (other, _) = app.owner_with_workspace("brand-other@example.com", "Other").await;
    let other_api = Api::for_owner(&app, &other).await;

    // Herald's default until one is saved.
    let (status, start) = api.get("/api/v1/brand").await;
    assert_eq!(status, StatusCode::OK, "{start}");
    assert_eq!((start["theme"]["accent"].as_str(), start["logo_src"].as_str()), (Some("#2563eb"), Some("")));

    // Refused: a colour that is not #rrggbb (it would go into a style attribute), a logo that
    // is not a web address, a width outside 16–600. Nothing is saved.
    let (status, body) = api.put("/api/v1/brand", brand("red;background:url(x)", "")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let mut bad = brand("#be123c", "javascript:alert(1)");
    bad["logo_width"] = json!(4);
    let (status, body) = api.put("/api/v1/brand", bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["logo_src"].is_string() && body["fields"]["logo_width"].is_string(), "{body}");
    // Footer text is copied into every campaign started after: a merge-tag mistake is refused
    // now, beside its field, rather than found in each of them.
    let mut broken = brand("#be123c", "");
    broken["footer_text"] = json!("Hi {{ reader.name");
    let (status, body) = api.put("/api/v1/brand", broken).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["footer_text"].as_str().is_some_and(|m| m.contains("merge-tag mistake")), "{body}");
    assert_eq!(api.get("/api/v1/brand").await.1, start, "nothing was saved");

    let logo = format!("{}/media/logo.png", app.base);
    let (status, saved) = api.put("/api/v1/brand", brand("#BE123C", &logo)).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(saved["theme"]["accent"], "#be123c", "stored lowercase");
    assert_eq!(api.get("/api/v1/brand").await.1, saved);
    // The other workspace still has the default.
    assert_eq!(other_api.get("/api/v1/brand").await.1, start);

    // Every layout wears it: the theme, the logo (not on the plain letter), the footer text
    // above the standard footer; each is a valid document a campaign can be made from.
    let (status, layouts) = api.get("/api/v1/layouts").await;
    assert_eq!(status, StatusCode::OK, "{layouts}");
    let layouts = layouts.as_array().expect("a list").clone();
    assert_eq!(layouts.len(), 3);
    for l in &layouts {
        let doc: BlockDocument = serde_json::from_value(l["body"].clone())?;
        doc.validate().map_err(|e| anyhow::anyhow!("{}: {e}", l["layout"]))?;
        assert_eq!(doc.theme.accent.as_str(), "#be123c", "{}", l["layout"]);
        let has_logo = doc.blocks.iter().any(|b| matches!(b, Block::Image { src, .. } if *src == logo));
        assert_eq!(has_logo, l["layout"] != "letter", "{}", l["layout"]);
        let Some(Block::Footer { text }) = doc.blocks.last() else { panic!("{}: no footer", l["layout"]) };
        assert!(text.starts_with("Tulip Weekly") && text.contains("{{ unsubscribe_url }}"), "{text}");
        let (status, made) = api
            .post("/api/v1/campaigns", json!({"name": l["name"], "body_format": "blocks", "body": doc.to_json()}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
    }

    // In the app: a new campaign (blank or from a layout) starts in the brand; changing the
    // brand afterwards leaves it as it was.
    let blank = owner.run(CreateCampaign { name: String::new() }).await.value();
    let letter = owner.run(StartCampaign { layout: Some(Layout::Letter), template: None }).await.value();
    let (status, _) = api.put("/api/v1/brand", brand("#047857", "")).await;
    assert_eq!(status, StatusCode::OK);
    for (id, logo_expected) in [(blank, true), (letter, false)] {
        let c = owner.run(GetCampaign { id }).await.value().campaign;
        assert_eq!(c.body_format, BodyFormat::Blocks);
        let doc = BlockDocument::parse(&c.body).map_err(|e| anyhow::anyhow!("{e}"))?;
        assert_eq!(doc.theme.accent.as_str(), "#be123c", "the brand as it was when the campaign started");
        assert_eq!(doc.blocks.iter().any(|b| matches!(b, Block::Image { .. })), logo_expected);
    }
    let letter = owner.run(GetCampaign { id: letter }).await.value().campaign;
    assert_eq!(letter.name, "Plain letter");
    Ok(())
}

#[tokio::test]
async fn campaign_templates_are_checked_named_once_and_private_to_their_workspace() -> TestResult {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("templates@example.com", "Templates").await;
    let api = Api::for_owner(&app, &owner).await;
    let (other, _) = app.owner_with_workspace("templates-other@example.com", "Other").await;
    let other_api = Api::for_owner(&app, &other).await;

    let (status, empty) = api.get("/api/v1/campaign-templates").await;
    assert_eq!((status, empty), (StatusCode::OK, json!([])));

    // A block body is checked block by block, with the field named.
    let broken = json!({"version": 1, "blocks": [{"type": "button", "label": "", "href": "nowhere"}]}).to_string();
    let (status, body) = api
        .post("/api/v1/campaign-templates", json!({"name": "Weekly", "body_format": "blocks", "body": broken}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["body.blocks.0.href"].is_string(), "{body}");
    let (status, body) = api.post("/api/v1/campaign-templates", json!({"name": " ", "body": "Hi"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["name"].is_string(), "{body}");

    let doc = BlockDocument::default().to_json();
    let (status, made) = api
        .post(
            "/api/v1/campaign-templates",
            json!({"name": "Weekly", "subject": "This week", "body_format": "blocks", "body": doc}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["id"].as_str().expect("an id").to_string();
    assert_eq!(made["body"], doc);
    let path = format!("/api/v1/campaign-templates/{id}");
    assert_eq!(api.get(&path).await.1, made);

    // One name once, whatever its case.
    let (status, body) = api.post("/api/v1/campaign-templates", json!({"name": "WEEKLY", "body": "Hi"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["name"].as_str().is_some_and(|m| m.contains("Another template")), "{body}");

    // Updated, listed.
    let (status, updated) = api
        .put(
            &path,
            json!({"name": "Weekly digest", "subject": "This week", "body_format": "markdown", "body": "Hello"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!((updated["name"].as_str(), updated["body_format"].as_str()), (Some("Weekly digest"), Some("markdown")));
    let (_, list) = api.get("/api/v1/campaign-templates").await;
    assert_eq!(list.as_array().map(Vec::len), Some(1));

    // Another workspace sees none of it and can change none of it.
    assert_eq!(other_api.get("/api/v1/campaign-templates").await.1, json!([]));
    for method in [Method::GET, Method::PUT, Method::DELETE] {
        let body = (method == Method::PUT).then(|| json!({"name": "Mine", "body": "x"}));
        let (status, answer) = other_api.send(method.clone(), &path, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {answer}");
    }
    assert_eq!(api.get(&path).await.1["name"], "Weekly digest");

    // From the editor: saved as shown; a campaign started from it has its content.
    let saved = owner
        .run(SaveCampaignTemplate {
            input: CampaignTemplateInput {
                name: "From the editor".into(),
                subject: "Hello {{ reader.name }}".into(),
                preheader: "A preheader".into(),
                body_format: BodyFormat::Blocks,
                body: doc.clone(),
            },
        })
        .await
        .value();
    let started = owner.run(StartCampaign { layout: None, template: Some(saved.id) }).await.value();
    let c = owner.run(GetCampaign { id: started }).await.value().campaign;
    assert_eq!(
        (c.name.as_str(), c.subject.as_str(), c.preheader.as_str()),
        ("From the editor", "Hello {{ reader.name }}", "A preheader")
    );
    assert_eq!(c.body, doc);
    // Another workspace cannot start from it.
    let refused = other.run(StartCampaign { layout: None, template: Some(saved.id) }).await;
    assert_not_found("start_campaign", refused);

    let (status, _) = api.send(Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(api.get(&path).await.0, StatusCode::NOT_FOUND);
    Ok(())
}
