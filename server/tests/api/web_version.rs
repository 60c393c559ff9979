//! "View in your browser": each reader's mail links their own copy of a sent block
//! campaign, rendered with their name and their unsubscribe link, served in a sandbox; a forged,
//! altered or other kind of token is a 404, and the link in a preview or test says what it is.

use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

use crate::campaigns_api::{wait_for_status, workspace_with_readers};
use crate::helpers::*;

/// The link that follows "View in your browser" in a text part: `… (https://…/v/…)`.
fn web_link(text: &str) -> String {
    let at = text.find("View in your browser (").map(|i| i + "View in your browser (".len()).expect("the link's label");
    text[at..].split(')').next().unwrap_or_default().to_string()
}

#[tokio::test]
async fn every_reader_gets_a_link_to_their_own_web_version() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "webv@example.com", 2).await;
    let mut doc = herald_types::BlockDocument::default();
    doc.blocks[0] = herald_types::Block::Heading { text: "Spring for {{ reader.name }}".into(), level: 1 };
    let (status, campaign) = api
        .post(
            "/api/v1/campaigns",
            json!({"name": "Spring", "subject": "Spring", "list_ids": [list], "body_format": "blocks", "body": doc.to_json()}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{campaign}");
    let id = campaign["id"].as_str().expect("id").to_string();
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &id, "sent", Duration::from_secs(60)).await;

    let client = reqwest::Client::new();
    let mut links = Vec::new();
    for (i, name) in [(1, "R1"), (2, "R2")] {
        let text = app.mail_text_to(&format!("webv-r{i}@example.com")).await;
        let link = web_link(&text);
        assert!(link.starts_with(&format!("{}/v/", app.base)), "{link}");
        let res = client.get(&link).send().await?;
        assert_eq!(res.status(), StatusCode::OK);
        let csp = res.headers()["content-security-policy"].to_str()?.to_string();
        assert!(
            csp.starts_with("sandbox") && !csp.contains("allow-scripts") && !csp.contains("allow-same-origin"),
            "{csp}"
        );
        let html = res.text().await?;
        assert!(html.contains(&format!("Spring for {name}")), "their own copy: {html}");
        assert!(html.contains(&format!("{}/u/", app.base)), "with their unsubscribe link");
        links.push(link);
    }
    assert_ne!(links[0], links[1]);

    // Altered, truncated, another kind of token (an unsubscribe link's), nonsense: 404.
    let token = links[0].rsplit('/').next().unwrap_or_default().to_string();
    let mut altered = token.clone().into_bytes();
    let last = altered.len() - 3;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    let unsubscribe_token = {
        let text = app.mail_text_to("webv-r1@example.com").await;
        let at = text.find("/u/").expect("an unsubscribe link") + 3;
        text[at..].split(|c: char| c == ')' || c.is_whitespace()).next().unwrap_or_default().to_string()
    };
    for bad in [String::from_utf8(altered)?, token[..token.len() / 2].to_string(), unsubscribe_token, "nonsense".into()]
    {
        let res = client.get(format!("{}/v/{bad}", app.base)).send().await?;
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{bad}");
    }
    // In a preview the link goes to a page that says so.
    let res = client.get(format!("{}/v/preview", app.base)).send().await?;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.text().await?.contains("This is a preview"));
    Ok(())
}
