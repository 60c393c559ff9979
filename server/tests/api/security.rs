use crate::helpers::*;
use herald_app::auth::Login;
use herald_app::pages::settings::general::GetWorkspaceSettings;
use herald_app::pages::settings::members::InviteMember;
use herald_app::pages::settings::sending::SaveIdentity;
use herald_types::{IdentityInput, Role};
use reqwest::StatusCode;

#[tokio::test]
async fn cross_site_posts_are_refused() {
    let app = spawn_app().await;
    let (b, _) = app.owner_with_workspace("csrf@example.com", "Csrf").await;
    let settings = [("name", "Hacked"), ("postal_address", ""), ("default_from_name", ""), ("default_from_email", "")];
    for origin in [None, Some("https://evil.example"), Some("http://127.0.0.1:1")] {
        // raw: the test is about the Origin header, which `run` always sets to the app's own.
        let r = b.call_with_origin("update_workspace_settings", &settings, origin).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "origin {origin:?}");
    }
    assert_eq!(b.run(GetWorkspaceSettings {}).await.value().name, "Csrf");
    // A same-origin Referer (no Origin header) is accepted.
    let r = b
        .client
        .post(format!("{}/rpc/update_workspace_settings", app.base))
        .header("Referer", format!("{}/settings", app.base))
        .header("Accept", "application/json")
        .form(&settings)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn state_changing_server_functions_refuse_get() {
    let app = spawn_app().await;
    let (b, _) = app.owner_with_workspace("get@example.com", "Get").await;
    for f in ["logout", "update_workspace_settings", "create_api_key", "invite_member", "signup", "login"] {
        let r = b.get(&format!("/rpc/{f}?name=x")).await;
        assert!(!r.status().is_success(), "GET /rpc/{f} answered {}", r.status());
    }
    assert!(b.session().await.is_some(), "still logged in: GET /rpc/logout did nothing");
}

#[tokio::test]
async fn internal_errors_do_not_leak_database_text() {
    let app = spawn_app().await;
    let (b, _) = app.owner_with_workspace("leak@example.com", "Leak").await;
    // Break the database under the app: the next query fails inside Postgres.
    sqlx::query("ALTER TABLE api_keys RENAME TO api_keys_gone").execute(&app.owner).await.expect("rename");
    // raw: the test reads the body's very text for leaked database words, not the decoded error.
    let r = b.call("list_api_keys", &[]).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    // The body is the opaque `Internal` error (shown as "Something went wrong on our side").
    assert_eq!(r.body, serde_json::json!("Internal"));
    let text = r.body.to_string().to_lowercase();
    for leak in ["relation", "api_keys", "sql", "postgres", "does not exist"] {
        assert!(!text.contains(leak), "leaked {leak:?}: {text}");
    }
}

#[tokio::test]
async fn open_redirects_after_login_are_refused() {
    let app = spawn_app().await;
    let b = app.browser();
    let r = app.sign_up_then(&b, "next@example.com", "correct horse battery", Some("//evil.example/x")).await;
    assert!(r.ok(), "{:?}", r.result);
    assert_eq!(r.headers.get("location").and_then(|v| v.to_str().ok()), Some("/"));
    let r = b
        .run(Login {
            email: "next@example.com".into(),
            password: "correct horse battery".into(),
            next: Some("/settings/members".into()),
        })
        .await;
    assert_eq!(r.headers.get("location").and_then(|v| v.to_str().ok()), Some("/settings/members"));
}

/// The login redirect's `next` stays on this site, whatever a browser would make of it.
#[test]
fn login_next_only_follows_same_site_paths() {
    use herald_app::auth::safe_next;
    for ok in ["/", "/campaigns/1?tab=stats", "/%09/still-a-path"] {
        assert_eq!(safe_next(Some(ok)), ok);
    }
    for bad in [
        "//evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
        "/\\evil.example",
        "https://evil.example",
        "/ /evil.example",
        "evil.example",
    ] {
        assert_eq!(safe_next(Some(bad)), "/", "{bad:?}");
    }
    assert_eq!(safe_next(None), "/");
}

/// Pages, the API and errors all carry the security headers; HSTS only under https.
#[tokio::test]
async fn every_response_carries_the_security_headers() {
    let app = spawn_app().await;
    let client = reqwest::Client::new();
    for path in ["/login", "/healthz", "/api/v1/messages", "/no-such-page", "/rpc/session"] {
        let r = client.get(format!("{}{path}", app.base)).send().await.expect("request");
        let h = r.headers();
        let get = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        assert_eq!(get("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(get("x-frame-options"), "SAMEORIGIN", "{path}");
        assert!(get("content-security-policy").contains("frame-ancestors 'self'"), "{path}");
        assert_eq!(get("referrer-policy"), "strict-origin-when-cross-origin", "{path}");
        assert_eq!(get("strict-transport-security"), "", "{path}: no HSTS over http");
    }
}

/// Only scripts with this response's nonce run; every script Leptos writes carries it, and each
/// response has its own.
#[tokio::test]
async fn pages_run_only_scripts_with_the_response_nonce() {
    let app = spawn_app().await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let r = reqwest::get(format!("{}/login", app.base)).await.expect("request");
        let csp = r.headers().get("content-security-policy").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let nonce = csp
            .split("'nonce-")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap_or_else(|| panic!("no nonce in {csp:?}"))
            .to_string();
        assert!(csp.starts_with("script-src 'nonce-") && csp.contains("'strict-dynamic'"), "{csp}");
        let html = r.text().await.expect("body");
        let scripts: Vec<&str> = html.split("<script").skip(1).map(|s| s.split('>').next().unwrap_or("")).collect();
        assert!(scripts.len() >= 2, "hydration and charts scripts expected: {scripts:?}");
        for tag in scripts {
            assert!(tag.contains(&format!("nonce=\"{nonce}\"")), "a script without the nonce: <script{tag}>");
        }
        seen.push(nonce);
    }
    assert_ne!(seen[0], seen[1], "a nonce is used once");
}

#[tokio::test]
async fn https_deployments_send_hsts() {
    let app = spawn_app_with(&[("HERALD_BASE_URL", "https://herald.example")]).await;
    let r = reqwest::get(format!("{}/healthz", app.base)).await.expect("request");
    let hsts = r.headers().get("strict-transport-security").and_then(|v| v.to_str().ok()).unwrap_or("");
    assert!(hsts.starts_with("max-age="), "{hsts:?}");
}

/// Behind the operator's proxy every client has its own limiter budget; a client that is not
/// the proxy cannot pick its own address with `X-Forwarded-For`.
#[tokio::test]
async fn limiters_see_the_client_behind_a_trusted_proxy_only() {
    // The test client connects from 127.0.0.1: it plays the proxy.
    let app = spawn_app_with(&[("HERALD_TRUSTED_PROXIES", "127.0.0.1")]).await;
    let (owner, _) = app.owner_with_workspace("proxy@example.com", "Proxy").await;
    let slug = owner.session().await.and_then(|s| s.current).map(|w| w.slug).unwrap_or_default();
    let post = |ip: &'static str, n: usize| {
        let url = format!("{}/s/{slug}", app.base);
        async move {
            reqwest::Client::new()
                .post(url)
                .header("X-Forwarded-For", format!("203.0.113.9, {ip}"))
                .form(&[("email", format!("r{n}-{ip}@example.com")), ("website", String::new())])
                .send()
                .await
                .expect("request")
                .status()
        }
    };
    let mut limited_at = None;
    for n in 0..40 {
        if post("198.51.100.1", n).await == StatusCode::TOO_MANY_REQUESTS {
            limited_at = Some(n);
            break;
        }
    }
    assert!(limited_at.is_some(), "one client behind the proxy is limited");
    // Another client behind the same proxy still gets through.
    assert_ne!(post("198.51.100.2", 0).await, StatusCode::TOO_MANY_REQUESTS);

    // Without trusted proxies the header is ignored: everyone is the socket's address.
    let direct = spawn_app().await;
    let (owner, _) = direct.owner_with_workspace("direct@example.com", "Direct").await;
    let slug = owner.session().await.and_then(|s| s.current).map(|w| w.slug).unwrap_or_default();
    let mut limited = false;
    for n in 0..40 {
        let status = reqwest::Client::new()
            .post(format!("{}/s/{slug}", direct.base))
            .header("X-Forwarded-For", format!("198.51.100.{n}"))
            .form(&[("email", format!("d{n}@example.com")), ("website", String::new())])
            .send()
            .await
            .expect("request")
            .status();
        if status == StatusCode::TOO_MANY_REQUESTS {
            limited = true;
            break;
        }
    }
    assert!(limited, "a forged X-Forwarded-For does not buy a fresh budget");
}

/// An IPv6 customer holds a whole /64, so limiters count the /64, not the address:
/// rotating the last 64 bits buys no fresh budget; another /64 has its own.
#[tokio::test]
async fn limiters_count_an_ipv6_client_by_its_64() {
    use herald_app::ssr::ClientIp;
    let key = |ip: &str| ClientIp(ip.parse().expect("an address")).limiter_key();
    assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff:ffff:ffff:ffff"));
    assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
    assert_eq!(key("::ffff:198.51.100.7"), key("198.51.100.7"));
    assert_ne!(key("198.51.100.7"), key("198.51.100.8"));

    let app = spawn_app_with(&[("HERALD_TRUSTED_PROXIES", "127.0.0.1")]).await;
    let (owner, _) = app.owner_with_workspace("six@example.com", "Six").await;
    let slug = owner.session().await.and_then(|s| s.current).map(|w| w.slug).unwrap_or_default();
    let post = |ip: String, n: usize| {
        let url = format!("{}/s/{slug}", app.base);
        async move {
            reqwest::Client::new()
                .post(url)
                .header("X-Forwarded-For", ip)
                .form(&[("email", format!("six{n}@example.com")), ("website", String::new())])
                .send()
                .await
                .expect("request")
                .status()
        }
    };
    let mut limited = false;
    for n in 0..40 {
        if post(format!("2001:db8:aa:bb::{n:x}"), n).await == StatusCode::TOO_MANY_REQUESTS {
            limited = true;
            break;
        }
    }
    assert!(limited, "a fresh address in the same /64 bought a fresh budget");
    assert_ne!(
        post("2001:db8:aa:cc::1".into(), 99).await,
        StatusCode::TOO_MANY_REQUESTS,
        "another /64 is another client"
    );
}

#[tokio::test]
async fn the_runtime_role_cannot_create_temporary_tables() -> TestResult {
    let app = spawn_app().await;
    // What `record_hits` (SECURITY DEFINER) once trusted: a scratch table the caller could
    // create first, with triggers of its own.
    let err = sqlx::query("CREATE TEMP TABLE hits_batch (x int)")
        .execute(app.app.db.pool())
        .await
        .expect_err("the runtime role may not create temporary tables");
    assert!(err.to_string().contains("permission denied"), "{err}");
    // `herald migrate` restricted the template this database was copied from, too.
    let template = format!("herald_tpl_{}", std::process::id());
    let can: bool = sqlx::query_scalar("SELECT has_database_privilege('herald_app', $1, 'TEMP')")
        .bind(&template)
        .fetch_one(&app.owner)
        .await?;
    assert!(!can, "{template} still grants TEMP");
    Ok(())
}

/// Invitations and opt-in confirmations are mail Herald sends for a workspace: a stranger's
/// address gets only so many a day however many workspaces ask, and a workspace only so many
/// however many addresses it tries, until the operator raises its limit.
#[tokio::test]
async fn system_mail_is_limited_per_recipient_and_per_workspace() -> TestResult {
    use crate::audience::{create_list, subscribe, ws_slug};
    let app =
        spawn_app_with(&[("HERALD_SYSTEM_MAIL_PER_RECIPIENT", "2"), ("HERALD_SYSTEM_MAIL_PER_WORKSPACE", "3")]).await;
    let (a, _) = app.owner_with_workspace("quota-a@example.com", "Quota A").await;
    let (b, b_id) = app.owner_with_workspace("quota-b@example.com", "Quota B").await;
    let (a_slug, b_slug) = (ws_slug(&a).await, ws_slug(&b).await);
    let a1 = create_list(&a, "One", "one", "double", "public").await;
    let a2 = create_list(&a, "Two", "two", "double", "public").await;
    let b1 = create_list(&b, "News", "news", "double", "public").await;

    // One address, asked for by two workspaces: the third confirmation of the day is refused.
    assert_eq!(subscribe(&app, &a_slug, "victim@example.com", &[&a1]).await.status(), StatusCode::OK);
    assert_eq!(subscribe(&app, &b_slug, "victim@example.com", &[&b1]).await.status(), StatusCode::OK);
    let third = subscribe(&app, &a_slug, "Victim@Example.com", &[&a2]).await;
    assert_eq!(third.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(third.text().await?.contains("already been sent several emails"));
    let to_victim = || async {
        app.sink.messages().await.iter().filter(|m| m.rcpt_to.iter().any(|r| r == "victim@example.com")).count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while to_victim().await < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let to_victim = to_victim().await;
    assert_eq!(to_victim, 2);

    // Workspace B has sent one; two more invitations go, the next is refused.
    for (i, ok) in [(1, true), (2, true), (3, false)] {
        let r = b.run(InviteMember { email: format!("member{i}@example.com"), role: Role::Viewer }).await;
        assert_eq!(r.ok(), ok, "invite {i}: {:?} {:?}", r.status, r.result);
        if !ok {
            assert!(r.message().contains("sent its 3 invitation and confirmation emails"), "{}", r.message());
        }
    }
    // The refused invitation left nothing pending.
    let pending: i64 =
        sqlx::query_scalar("SELECT count(*) FROM invites WHERE email = 'member3@example.com' AND revoked_at IS NULL")
            .fetch_one(&app.owner)
            .await?;
    assert_eq!(pending, 0);
    // The log is counted across workspaces, so no workspace's code may read it.
    let read = sqlx::query("SELECT count(*) FROM system_mail_log").execute(app.app.db.pool()).await;
    assert!(read.is_err_and(|e| e.to_string().contains("permission denied")));
    // The operator raises B's limit (`herald admin set-limits`); A was never affected.
    herald_engine::sending::mail_quota::set_workspace_limit(&app.app.db, b_id.parse()?, Some(10)).await?;
    assert!(b.run(InviteMember { email: "member3@example.com".into(), role: Role::Viewer }).await.ok());
    assert_eq!(subscribe(&app, &a_slug, "someone@example.com", &[&a1]).await.status(), StatusCode::OK);
    Ok(())
}

/// "Send test" is mail too: it skips suppressed addresses and has an hourly allowance per
/// workspace, so it cannot be used to mail a list without a campaign's checks.
#[tokio::test]
async fn test_sends_skip_suppressed_addresses_and_have_an_allowance() -> TestResult {
    use herald_engine::campaigns::preview::{self, TEST_SEND_BURST};
    let app = spawn_app().await;
    let (api, list) = crate::campaigns_api::workspace_with_readers(&app, "tests-owner@example.com", 1).await;
    let (status, body) = api.post("/api/v1/suppressions", serde_json::json!({"emails": ["gone@example.com"]})).await;
    assert!(status.is_success(), "{body}");
    let (_, created) =
        api.post("/api/v1/campaigns", serde_json::json!({"name": "T", "subject": "Hi", "list_ids": [list]})).await;
    let campaign: herald_engine::CampaignId = created["id"].as_str().unwrap_or_default().parse()?;
    let tenant: herald_engine::TenantId = sqlx::query_scalar("SELECT tenant_id FROM campaigns WHERE id = $1")
        .bind(campaign)
        .fetch_one(&app.owner)
        .await?;
    let s = &app.app;
    let member = herald_engine::users::find_by_email(&s.db, "tests-owner@example.com").await?.expect("owner").id;
    let send = |to: Vec<String>| async move {
        preview::test_send(
            &s.db,
            &s.signer,
            &s.base_url,
            &s.default_identity,
            &s.egress,
            tenant,
            member,
            herald_engine::Role::Author,
            campaign,
            &to,
        )
        .await
    };
    let results = send(vec!["Gone@Example.com".into(), "me@example.com".into()]).await?;
    let outcome = |who: &str| results.iter().find(|(a, _)| a.eq_ignore_ascii_case(who)).map(|(_, r)| r.clone());
    assert!(outcome("gone@example.com").is_some_and(|r| r.is_err_and(|e| e.contains("suppressed"))), "{results:?}");
    assert!(outcome("me@example.com").is_some_and(|r| r.is_ok()), "{results:?}");

    // The allowance: one address went above; the rest of the burst goes, then a refusal.
    let batch: Vec<String> = (0..5).map(|i| format!("me{i}@example.com")).collect();
    let mut sent = 1;
    while sent + 5 <= TEST_SEND_BURST as usize {
        send(batch.clone()).await?;
        sent += 5;
    }
    let refused = send(batch.clone()).await.expect_err("past the allowance");
    assert!(refused.to_string().contains("many test emails"), "{refused}");
    Ok(())
}

/// An SMTP identity aimed inside the network, or at a port that is not for mail submission, is
/// refused when it is saved (and, whatever its name resolves to later, at every connect).
#[tokio::test]
async fn smtp_identities_aimed_inside_are_refused_when_saved() {
    // Loopback allowed (the tests' own sinks), but only the submission ports.
    let app = spawn_app_with(&[("HERALD_EGRESS_ALLOW", "127.0.0.0/8")]).await;
    let (owner, _) = app.owner_with_workspace("egress-owner@example.com", "Egress").await;
    let save = |url: &'static str| {
        let owner = &owner;
        async move {
            let identity = IdentityInput {
                name: url.into(),
                smtp_url: url.into(),
                max_connections: 1,
                rate_per_second: 1.0,
                burst: 1,
                ..IdentityInput::default()
            };
            owner.run(SaveIdentity { id: String::new(), identity }).await
        }
    };
    for url in ["smtp://169.254.169.254:587", "smtp://10.1.2.3:587", "smtp://[fd00::1]:465", "smtp://127.0.0.1:2526"] {
        let r = save(url).await;
        assert!(
            !r.ok() && r.message().contains("may not connect to that SMTP server"),
            "{url}: {:?} {:?}",
            r.status,
            r.result
        );
    }
    assert!(save("smtp://127.0.0.1:587").await.ok());
    assert!(save("smtp://relay.example.com:587").await.ok(), "names are checked at connect");
}

/// Identities and team rules through the API: the same checks as the page (an address inside
/// the network is refused as it is saved), the password never shown again, and a key that would
/// require two-factor sign-in must belong to a maker who uses it.
#[tokio::test]
async fn identities_and_team_rules_through_the_api_keep_the_pages_checks() {
    let app = spawn_app_with(&[("HERALD_EGRESS_ALLOW", "127.0.0.0/8")]).await;
    let (owner, _) = app.owner_with_workspace("api-identity@example.com", "Identity API").await;
    let api = Api::for_owner(&app, &owner).await;
    let identity = |url: &str| serde_json::json!({"name": "Relay", "smtp_url": url, "max_connections": 1, "rate_per_second": 5.0, "burst": 5});
    let (status, body) = api.post("/api/v1/identities", identity("smtp://169.254.169.254:587")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, made) = api.post("/api/v1/identities", identity("smtp://relay:s3cret@127.0.0.1:587")).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert!(!made.to_string().contains("s3cret"), "the password is never shown: {made}");
    let id = made["id"].as_str().expect("id").to_string();
    let (status, changed) = api
        .put(
            &format!("/api/v1/identities/{id}"),
            serde_json::json!({"name": "Relay 2", "max_connections": 2, "rate_per_second": 5.0, "burst": 5}),
        )
        .await;
    assert_eq!((status, changed["name"].as_str()), (StatusCode::OK, Some("Relay 2")), "{changed}");
    let (status, checked) = api.post(&format!("/api/v1/identities/{id}/test"), serde_json::json!({})).await;
    assert_eq!((status, checked["ok"].as_bool()), (StatusCode::OK, Some(false)), "nothing listens there: {checked}");
    let (_, list) = api.get("/api/v1/identities").await;
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    let (status, _) = api.send(reqwest::Method::DELETE, &format!("/api/v1/identities/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    let (status, rules) = api.get("/api/v1/team-rules").await;
    assert_eq!(status, StatusCode::OK, "{rules}");
    assert_eq!(rules, serde_json::json!({"require_two_factor": false, "require_send_approval": false}));
    let (status, body) = api
        .put("/api/v1/team-rules", serde_json::json!({"require_two_factor": true, "require_send_approval": true}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "the key's maker has no second factor: {body}");
    let (status, rules) = api
        .put("/api/v1/team-rules", serde_json::json!({"require_two_factor": false, "require_send_approval": true}))
        .await;
    assert_eq!((status, rules["require_send_approval"].as_bool()), (StatusCode::OK, Some(true)), "{rules}");
}
