//! Sending domains: mail From a domain the workspace has not verified is refused
//! at every door (campaign send, test send, transactional API), verification is a real DNS TXT
//! lookup against a DNS server the test runs on 127.0.0.1, and a verified domain's DKIM key signs
//! the mail once its public half is published.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

use herald_app::error::AppError;
use herald_app::pages::campaigns::preview::TestSendCampaign;
use herald_app::pages::settings::domains::{
    AddSendingDomain, CheckSendingDomain, DeleteSendingDomain, DomainView, ListSendingDomains, RecordView,
};
use herald_app::pages::settings::general::UpdateWorkspaceSettings;
use herald_app::pages::settings::sending::SaveIdentity;
use herald_types::IdentityInput;

use crate::dns::TestDns;
use crate::helpers::*;

const SPF_INCLUDE: &str = "_spf.herald.test";

async fn app_with_dns() -> (TestApp, TestDns) {
    let dns = TestDns::start().await.expect("dns server");
    let addr = dns.addr.to_string();
    let app = spawn_app_with(&[("HERALD_DNS_SERVER", addr.as_str()), ("HERALD_SPF_INCLUDE", SPF_INCLUDE)]).await;
    (app, dns)
}

/// A workspace whose default sender is `news@brand.test`, with a list of two readers and a
/// draft campaign to it. Returns (owner, workspace id, api, campaign id).
async fn workspace(app: &TestApp, email: &str) -> (Browser, String, Api, String) {
    let (owner, ws) = app.owner_with_workspace(email, &format!("Brand {email}")).await;
    let r = owner
        .run(UpdateWorkspaceSettings {
            name: "Brand".into(),
            postal_address: "1 Main Street".into(),
            default_from_name: "Brand".into(),
            default_from_email: "news@brand.test".into(),
            time_zone: None,
        })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    let api = Api::for_owner(app, &owner).await;
    let (_, list) = api.post("/api/v1/lists", json!({"name": "News", "opt_in": "single"})).await;
    let list = list["id"].as_str().expect("list").to_string();
    let local = email.split('@').next().unwrap_or("r");
    let readers = json!({"readers": [{"email": format!("{local}-1@example.com")}, {"email": format!("{local}-2@example.com")}],
                         "lists": [list]});
    let (status, body) = api.post("/api/v1/readers/bulk", readers).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, c) = api
        .post("/api/v1/campaigns", json!({"name": "Launch", "subject": "Hi", "list_ids": [list], "body": "Hello"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    (owner, ws, api, c["id"].as_str().expect("campaign").to_string())
}

async fn domains(owner: &Browser) -> Vec<DomainView> {
    let r = owner.run(ListSendingDomains {}).await;
    assert!(r.ok(), "{:?}", r.result);
    r.value().domains
}

fn record<'a>(domain: &'a DomainView, label: &str) -> &'a RecordView {
    domain.records.iter().find(|r| r.label == label).expect("record")
}

fn statuses(domain: &DomainView) -> Vec<String> {
    domain.records.iter().map(|r| r.status.clone()).collect()
}

async fn check(owner: &Browser, id: &str) -> DomainView {
    let r = owner.run(CheckSendingDomain { domain_id: id.into() }).await;
    assert!(r.ok(), "{:?}", r.result);
    domains(owner).await.into_iter().find(|d| d.id == id).expect("domain")
}

fn transactional(from: &str) -> Value {
    json!({"to": "someone@example.com", "from": from, "subject": "Code", "text": "1234"})
}

#[tokio::test]
async fn a_domain_is_verified_by_its_dns_records_and_only_then_sends() -> TestResult {
    let (app, dns) = app_with_dns().await;
    let (owner, _, api, campaign) = workspace(&app, "dom-owner@example.com").await;

    // Unverified: every door refuses, with what to do.
    let (status, body) = api.post(&format!("/api/v1/campaigns/{campaign}/send"), json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let said = body.to_string();
    assert!(said.contains("brand.test") && said.contains("Settings → Domains"), "{said}");
    let (status, body) =
        api.post(&format!("/api/v1/campaigns/{campaign}/schedule"), json!({"at": "2099-01-01T00:00:00Z"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let r = owner.run(TestSendCampaign { id: campaign.parse()?, addresses: "me@example.com".into() }).await;
    assert!(!r.ok() && r.message().contains("brand.test"), "{:?}", r.result);
    let (status, body) = api.send_message("k1", &transactional("noreply@brand.test")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(app.sink.messages().await.len(), 0);

    // Added: the records to publish, none checked yet.
    let r = owner.run(AddSendingDomain { domain: " Brand.TEST. ".into() }).await;
    assert!(r.ok(), "{:?}", r.result);
    let d = domains(&owner).await.pop().expect("the domain");
    assert_eq!(d.domain, "brand.test");
    assert_eq!(d.verified_by, None);
    assert_eq!(statuses(&d), ["unchecked"; 4]);
    let id = d.id.clone();
    let ownership = record(&d, "Ownership").value.clone();
    let dkim = record(&d, "DKIM").value.clone();
    assert_eq!(record(&d, "DKIM").host, "herald._domainkey.brand.test");
    assert_eq!(record(&d, "SPF").value, format!("v=spf1 include:{SPF_INCLUDE} ~all"));

    // Checked with nothing published: all missing, still refused.
    let d = check(&owner, &id).await;
    assert_eq!(statuses(&d), ["missing"; 4]);
    let (status, _) = api.send_message("k2", &transactional("noreply@brand.test")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // Someone else's token, an SPF record without Herald, and a DMARC record with no policy.
    dns.set("_herald-challenge.brand.test", &["herald-verification=0123456789abcdef0123456789abcdef"]);
    dns.set("brand.test", &["v=spf1 include:_spf.google.com ~all"]);
    dns.set("_dmarc.brand.test", &["v=DMARC1; rua=mailto:d@brand.test"]);
    dns.set("herald._domainkey.brand.test", &["v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwrong"]);
    let d = check(&owner, &id).await;
    assert_eq!(statuses(&d), ["wrong"; 4], "{d:?}");
    assert!(record(&d, "SPF").detail.contains(SPF_INCLUDE));
    assert_eq!(d.verified_by, None);

    // Everything as shown: verified by DNS, signing on, and the campaign goes out signed.
    dns.set("_herald-challenge.brand.test", &[ownership.as_str(), "google-site-verification=x"]);
    dns.set("brand.test", &["v=spf1 mx include:_spf.herald.test -all"]);
    dns.set("_dmarc.brand.test", &["v=DMARC1; p=none"]);
    dns.set("herald._domainkey.brand.test", &[dkim.as_str()]);
    let d = check(&owner, &id).await;
    assert_eq!(statuses(&d), ["found"; 4], "{d:?}");
    assert_eq!(d.verified_by.as_deref(), Some("dns"));
    assert!(d.signing);
    let (status, body) = api.post(&format!("/api/v1/campaigns/{campaign}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(app.sink.wait_for_count(2, Duration::from_secs(30)).await, "the campaign arrives");
    // Signed with the key whose public half the workspace published, as a receiver checks it.
    let published = herald_devtools::dkim::PublicKey::from_record(&dkim)?;
    for mail in app.sink.messages().await {
        let raw = String::from_utf8_lossy(&mail.raw).to_string();
        let signature = raw.lines().find(|l| l.starts_with("DKIM-Signature:")).unwrap_or_default().to_string();
        assert!(signature.contains("d=brand.test") && signature.contains("s=herald"), "{raw}");
        herald_devtools::dkim::verify(&mail.raw, "herald", &published)?;
        let tampered = raw.replacen("Subject: ", "Subject: Re: ", 1);
        assert!(herald_devtools::dkim::verify(tampered.as_bytes(), "herald", &published).is_err());
    }

    // A subdomain of a verified domain may send; another domain may not.
    let (status, body) = api.send_message("k3", &transactional("alerts@mail.brand.test")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = api.send_message("k4", &transactional("noreply@brand.test.evil")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    // The DKIM record taken down: the domain stays verified, signing stops.
    dns.set("herald._domainkey.brand.test", &[]);
    dns.set("_herald-challenge.brand.test", &[]);
    let d = check(&owner, &id).await;
    assert_eq!(d.verified_by.as_deref(), Some("dns"));
    assert!(!d.signing);
    assert_eq!(record(&d, "DKIM").status, "missing");
    Ok(())
}

#[tokio::test]
async fn a_workspace_cannot_send_as_a_domain_another_workspace_verified() -> TestResult {
    let (app, dns) = app_with_dns().await;
    let (a, _, _, _) = workspace(&app, "dom-a@example.com").await;
    let (b, _, api_b, campaign_b) = workspace(&app, "dom-b@example.com").await;
    assert!(a.run(AddSendingDomain { domain: "brand.test".into() }).await.ok());
    let da = domains(&a).await.pop().expect("A's domain");
    dns.set("_herald-challenge.brand.test", &[record(&da, "Ownership").value.as_str()]);
    let da = check(&a, &da.id).await;
    assert_eq!(da.verified_by.as_deref(), Some("dns"));

    // B sees none of A's domains, and its own claim to the domain is checked against its own token.
    assert!(domains(&b).await.is_empty());
    let r = b.run(CheckSendingDomain { domain_id: da.id.clone() }).await;
    assert!(matches!(r.result, Err(AppError::NotFound)), "{:?}", r.result);
    assert!(b.run(AddSendingDomain { domain: "brand.test".into() }).await.ok());
    let db = domains(&b).await.pop().expect("B's domain");
    assert_ne!(record(&db, "Ownership").value, record(&da, "Ownership").value);
    let db = check(&b, &db.id).await;
    assert_eq!(record(&db, "Ownership").status, "wrong");
    assert_eq!(db.verified_by, None);
    let (status, body) = api_b.post(&format!("/api/v1/campaigns/{campaign_b}/send"), json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, _) = api_b.send_message("b1", &transactional("noreply@brand.test")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    Ok(())
}

#[tokio::test]
async fn only_admins_manage_domains_and_bad_names_are_refused() -> TestResult {
    let (app, _dns) = app_with_dns().await;
    let (owner, ws, _, _) = workspace(&app, "dom-roles@example.com").await;
    for bad in ["localhost", "127.0.0.1", "exa mple.com", "x..com", ""] {
        let r = owner.run(AddSendingDomain { domain: bad.into() }).await;
        assert!(!r.ok(), "{bad:?} accepted");
    }
    let author = app.add_member(&ws, "dom-author@example.com", "author").await;
    let r = author.run(AddSendingDomain { domain: "brand.test".into() }).await;
    assert!(matches!(r.result, Err(AppError::Forbidden)), "{:?}", r.result);
    assert!(owner.run(AddSendingDomain { domain: "brand.test".into() }).await.ok());
    // Authors see the domains (so they know what they may send as) but cannot check or remove.
    let listed = author.run(ListSendingDomains {}).await;
    assert!(listed.ok());
    let listed = listed.value();
    assert!(!listed.can_edit);
    let id = listed.domains.first().map(|d| d.id.clone()).unwrap_or_default();
    let r = author.run(DeleteSendingDomain { domain_id: id.clone() }).await;
    assert_eq!(r.error(), AppError::Forbidden);
    assert!(owner.run(DeleteSendingDomain { domain_id: id.clone() }).await.ok());
    assert!(domains(&owner).await.is_empty());
    Ok(())
}

#[tokio::test]
async fn an_own_identity_sends_from_any_address_only_when_an_operator_allows_it() -> TestResult {
    let app = spawn_app().await;
    let (owner, ws, api, campaign) = workspace(&app, "dom-own@example.com").await;
    let identity = IdentityInput {
        name: "Own relay".into(),
        smtp_url: "smtp://127.0.0.1:587".into(),
        max_connections: 1,
        rate_per_second: 1.0,
        burst: 1,
        ..IdentityInput::default()
    };
    let r = owner.run(SaveIdentity { id: String::new(), identity }).await;
    assert!(r.ok(), "{:?}", r.result);
    let identity: String = sqlx::query_scalar("SELECT id::text FROM sending_identities WHERE tenant_id = $1::uuid")
        .bind(&ws)
        .fetch_one(&app.owner)
        .await?;
    let (_, c) = api.get(&format!("/api/v1/campaigns/{campaign}")).await;
    let edited = json!({"name": c["name"], "subject": c["subject"], "list_ids": c["list_ids"], "body": c["body"],
                        "from_email": c["from_email"], "identity_id": identity});
    let (status, body) = api.put(&format!("/api/v1/campaigns/{campaign}"), edited).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["identity_id"], identity.as_str());
    let (status, body) = api.post(&format!("/api/v1/campaigns/{campaign}/send"), json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "its own identity is no exemption by default: {body}");
    assert!(body.to_string().contains("brand.test"), "{body}");

    let slug: String =
        sqlx::query_scalar("SELECT slug FROM tenants WHERE id = $1::uuid").bind(&ws).fetch_one(&app.owner).await?;
    let (ok, out, err) =
        crate::cli::herald(&app, &["admin", "set-limits", "--workspace", &slug, "--own-identity-any-from", "true"], "");
    assert!(ok, "{out} {err}");
    let (status, body) = api.post(&format!("/api/v1/campaigns/{campaign}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    Ok(())
}

#[tokio::test]
async fn an_operator_verifies_a_domain_from_the_command_line() -> TestResult {
    let app = spawn_app().await;
    let (owner, ws, api, campaign) = workspace(&app, "dom-cli@example.com").await;
    let slug: String =
        sqlx::query_scalar("SELECT slug FROM tenants WHERE id = $1::uuid").bind(&ws).fetch_one(&app.owner).await?;
    let (ok, out, err) =
        crate::cli::herald(&app, &["admin", "verify-domain", "--workspace", &slug, "--domain", "Brand.test"], "");
    assert!(ok, "{out} {err}");
    assert!(out.contains("brand.test is a verified sending domain"), "{out}");
    let d = domains(&owner).await.pop().expect("the domain");
    assert_eq!(d.verified_by.as_deref(), Some("operator"));
    assert!(!d.signing, "no DKIM record has been seen");
    let (status, body) = api.post(&format!("/api/v1/campaigns/{campaign}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (ok, _, err) =
        crate::cli::herald(&app, &["admin", "verify-domain", "--workspace", "nope", "--domain", "x.test"], "");
    assert!(!ok && err.contains("no workspace with slug nope"), "{err}");
    Ok(())
}

/// The same through the API, as an integration sets a workspace up: add, read the records,
/// check them live, and the domain is verified.
#[tokio::test]
async fn a_domain_is_added_checked_and_verified_through_the_api() -> TestResult {
    let (app, dns) = app_with_dns().await;
    let (_owner, _ws, api, _campaign) = workspace(&app, "domains-api@example.com").await;
    let (status, d) = api.post("/api/v1/domains", json!({"domain": "Brand.TEST"})).await;
    assert_eq!(status, StatusCode::CREATED, "{d}");
    assert_eq!((d["domain"].as_str(), d["verified_by"].as_str()), (Some("brand.test"), None));
    let id = d["id"].as_str().expect("id").to_string();
    let value = |d: &serde_json::Value, label: &str| {
        d["records"].as_array().expect("records").iter().find(|r| r["label"] == label).expect("record")["value"]
            .as_str()
            .expect("value")
            .to_string()
    };
    let (status, again) = api.post("/api/v1/domains", json!({"domain": "brand.test"})).await;
    assert!(status.is_success() && again["id"] == d["id"], "added twice is the one domain: {status} {again}");
    dns.set("_herald-challenge.brand.test", &[value(&d, "Ownership").as_str()]);
    dns.set("brand.test", &["v=spf1 include:_spf.herald.test ~all"]);
    dns.set("_dmarc.brand.test", &["v=DMARC1; p=none"]);
    dns.set("herald._domainkey.brand.test", &[value(&d, "DKIM").as_str()]);
    let (status, checked) = api.post(&format!("/api/v1/domains/{id}/check"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{checked}");
    assert_eq!((checked["verified_by"].as_str(), checked["signing"].as_bool()), (Some("dns"), Some(true)), "{checked}");
    let (status, list) = api.get("/api/v1/domains").await;
    assert_eq!((status, list.as_array().map(Vec::len)), (StatusCode::OK, Some(1)));
    let (status, _) = api.send(reqwest::Method::DELETE, &format!("/api/v1/domains/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = api.get(&format!("/api/v1/domains/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    Ok(())
}
