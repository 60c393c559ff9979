//! Sending domains (issue 15 §3): mail From a domain the workspace has not verified is refused
//! at every door (campaign send, test send, transactional API), verification is a real DNS TXT
//! lookup against a DNS server the test runs on 127.0.0.1, and a verified domain's DKIM key signs
//! the mail once its public half is published.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

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
        .call(
            "update_workspace_settings",
            &[
                ("name", "Brand"),
                ("postal_address", "1 Main Street"),
                ("default_from_name", "Brand"),
                ("default_from_email", "news@brand.test"),
            ],
        )
        .await;
    assert!(r.ok(), "{:?}", r.body);
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

async fn domains(owner: &Browser) -> Vec<Value> {
    let r = owner.call("list_sending_domains", &[]).await;
    assert!(r.ok(), "{:?}", r.body);
    r.body["domains"].as_array().cloned().unwrap_or_default()
}

fn record<'a>(domain: &'a Value, label: &str) -> &'a Value {
    domain["records"].as_array().and_then(|rs| rs.iter().find(|r| r["label"] == label)).expect("record")
}

fn statuses(domain: &Value) -> Vec<String> {
    domain["records"]
        .as_array()
        .map(|rs| rs.iter().map(|r| r["status"].as_str().unwrap_or_default().to_string()).collect())
        .unwrap_or_default()
}

async fn check(owner: &Browser, id: &str) -> Value {
    let r = owner.call("check_sending_domain", &[("domain_id", id)]).await;
    assert!(r.ok(), "{:?}", r.body);
    domains(owner).await.into_iter().find(|d| d["id"] == id).expect("domain")
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
    let r = owner.call("test_send_campaign", &[("id", &campaign), ("addresses", "me@example.com")]).await;
    assert!(!r.ok() && r.message().contains("brand.test"), "{:?}", r.body);
    let (status, body) = api.send_message("k1", &transactional("noreply@brand.test")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(app.sink.messages().await.len(), 0);

    // Added: the records to publish, none checked yet.
    let r = owner.call("add_sending_domain", &[("domain", " Brand.TEST. ")]).await;
    assert!(r.ok(), "{:?}", r.body);
    let d = domains(&owner).await.pop().expect("the domain");
    assert_eq!(d["domain"], "brand.test");
    assert_eq!(d["verified_by"], Value::Null);
    assert_eq!(statuses(&d), ["unchecked"; 4]);
    let id = d["id"].as_str().expect("id").to_string();
    let ownership = record(&d, "Ownership")["value"].as_str().expect("token").to_string();
    let dkim = record(&d, "DKIM")["value"].as_str().expect("dkim").to_string();
    assert_eq!(record(&d, "DKIM")["host"], "herald._domainkey.brand.test");
    assert_eq!(record(&d, "SPF")["value"], format!("v=spf1 include:{SPF_INCLUDE} ~all"));

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
    assert_eq!(statuses(&d), ["wrong"; 4], "{d}");
    assert!(record(&d, "SPF")["detail"].as_str().unwrap_or_default().contains(SPF_INCLUDE));
    assert_eq!(d["verified_by"], Value::Null);

    // Everything as shown: verified by DNS, signing on, and the campaign goes out signed.
    dns.set("_herald-challenge.brand.test", &[ownership.as_str(), "google-site-verification=x"]);
    dns.set("brand.test", &["v=spf1 mx include:_spf.herald.test -all"]);
    dns.set("_dmarc.brand.test", &["v=DMARC1; p=none"]);
    dns.set("herald._domainkey.brand.test", &[dkim.as_str()]);
    let d = check(&owner, &id).await;
    assert_eq!(statuses(&d), ["found"; 4], "{d}");
    assert_eq!(d["verified_by"], "dns");
    assert_eq!(d["signing"], true);
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
    assert_eq!(d["verified_by"], "dns");
    assert_eq!(d["signing"], false);
    assert_eq!(record(&d, "DKIM")["status"], "missing");
    Ok(())
}

#[tokio::test]
async fn a_workspace_cannot_send_as_a_domain_another_workspace_verified() -> TestResult {
    let (app, dns) = app_with_dns().await;
    let (a, _, _, _) = workspace(&app, "dom-a@example.com").await;
    let (b, _, api_b, campaign_b) = workspace(&app, "dom-b@example.com").await;
    assert!(a.call("add_sending_domain", &[("domain", "brand.test")]).await.ok());
    let da = domains(&a).await.pop().expect("A's domain");
    dns.set("_herald-challenge.brand.test", &[record(&da, "Ownership")["value"].as_str().unwrap_or_default()]);
    let da = check(&a, da["id"].as_str().unwrap_or_default()).await;
    assert_eq!(da["verified_by"], "dns");

    // B sees none of A's domains, and its own claim to the domain is checked against its own token.
    assert!(domains(&b).await.is_empty());
    let r = b.call("check_sending_domain", &[("domain_id", da["id"].as_str().unwrap_or_default())]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
    assert!(b.call("add_sending_domain", &[("domain", "brand.test")]).await.ok());
    let db = domains(&b).await.pop().expect("B's domain");
    assert_ne!(record(&db, "Ownership")["value"], record(&da, "Ownership")["value"]);
    let db = check(&b, db["id"].as_str().unwrap_or_default()).await;
    assert_eq!(record(&db, "Ownership")["status"], "wrong");
    assert_eq!(db["verified_by"], Value::Null);
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
        let r = owner.call("add_sending_domain", &[("domain", bad)]).await;
        assert!(!r.ok(), "{bad:?} accepted");
    }
    let author = app.add_member(&ws, "dom-author@example.com", "author").await;
    let r = author.call("add_sending_domain", &[("domain", "brand.test")]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.body);
    assert!(owner.call("add_sending_domain", &[("domain", "brand.test")]).await.ok());
    // Authors see the domains (so they know what they may send as) but cannot check or remove.
    let listed = author.call("list_sending_domains", &[]).await;
    assert!(listed.ok());
    assert_eq!(listed.body["can_edit"], false);
    let id = listed.body["domains"][0]["id"].as_str().unwrap_or_default().to_string();
    let r = author.call("delete_sending_domain", &[("domain_id", &id)]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(owner.call("delete_sending_domain", &[("domain_id", &id)]).await.ok());
    assert!(domains(&owner).await.is_empty());
    Ok(())
}

#[tokio::test]
async fn an_own_identity_sends_from_any_address_only_when_an_operator_allows_it() -> TestResult {
    let app = spawn_app().await;
    let (owner, ws, api, campaign) = workspace(&app, "dom-own@example.com").await;
    let r = owner
        .call(
            "save_identity",
            &[
                ("id", ""),
                ("identity[name]", "Own relay"),
                ("identity[smtp_url]", "smtp://127.0.0.1:587"),
                ("identity[max_connections]", "1"),
                ("identity[rate_per_second]", "1"),
                ("identity[burst]", "1"),
            ],
        )
        .await;
    assert!(r.ok(), "{:?}", r.body);
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
    assert_eq!(d["verified_by"], "operator");
    assert_eq!(d["signing"], false, "no DKIM record has been seen");
    let (status, body) = api.post(&format!("/api/v1/campaigns/{campaign}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (ok, _, err) =
        crate::cli::herald(&app, &["admin", "verify-domain", "--workspace", "nope", "--domain", "x.test"], "");
    assert!(!ok && err.contains("no workspace with slug nope"), "{err}");
    Ok(())
}
