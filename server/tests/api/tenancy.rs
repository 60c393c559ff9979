//! Isolation: RLS on every tenant-owned table, nothing visible without a tenant, and no server
//! function or endpoint that reaches across workspaces.

use crate::helpers::*;
use herald_app::auth::SwitchWorkspace;
use herald_app::pages::campaigns::editor::{GetCampaign, SaveCampaign};
use herald_app::pages::campaigns::list::{CreateCampaign, ListCampaigns};
use herald_app::pages::campaigns::preview::{PreviewCampaign, TestSendCampaign};
use herald_app::pages::campaigns::progress::{
    CampaignReport, CancelCampaign, PauseCampaign, ResumeCampaign, RetryFailedSends,
};
use herald_app::pages::campaigns::send_panel::{DeleteCampaign, ScheduleCampaign, SendCampaign, UnscheduleCampaign};
use herald_app::pages::campaigns::stats::CampaignStats;
use herald_app::pages::settings::ListIdentities;
use herald_app::pages::settings::api_keys::{CreateApiKey, ListApiKeys, RevokeApiKey};
use herald_app::pages::settings::general::GetWorkspaceSettings;
use herald_app::pages::settings::members::{ChangeMemberRole, InviteMember, ListMembers, RemoveMember, RevokeInvite};
use herald_app::pages::settings::sending::{DeleteIdentity, SaveIdentity, TestIdentity};
use herald_app::pages::settings::webhooks::{ListWebhooks, SaveWebhook};
use herald_app::pages::transactional::message::{CancelMessage, LoadMessage, MessagePage};
use herald_app::pages::transactional::overview::ListMessages;
use herald_app::pages::transactional::template::{SaveTxTemplate, TxTemplateView};
use herald_app::pages::transactional::templates::ListTxTemplates;
use herald_engine::TenantId;
use herald_types::{
    BodyFormat, CampaignInput, CampaignStatus, IdentityInput, MessageId, MessageStatus, Role, TemplateInput,
};
use reqwest::StatusCode;

#[tokio::test]
async fn every_table_with_a_tenant_id_has_forced_row_level_security() {
    let app = spawn_app().await;
    let rows: Vec<(String, bool, bool)> = sqlx::query_as(
        "SELECT c.relname::text, c.relrowsecurity, c.relforcerowsecurity
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
           AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)",
    )
    .fetch_all(&app.owner)
    .await
    .expect("catalog query");
    assert!(rows.len() >= 3, "expected tenant-owned tables, found {rows:?}");
    let unprotected: Vec<_> = rows.iter().filter(|(_, on, forced)| !(*on && *forced)).map(|r| r.0.clone()).collect();
    assert!(
        unprotected.is_empty(),
        "tables with tenant_id but without ENABLE+FORCE ROW LEVEL SECURITY: {unprotected:?}"
    );
    // Every such table has at least one policy.
    let without_policy: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind = 'r'
           AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id')
           AND NOT EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid)",
    )
    .fetch_all(&app.owner)
    .await
    .expect("policy query");
    assert!(without_policy.is_empty(), "{without_policy:?}");
}

#[tokio::test]
async fn the_runtime_role_is_neither_owner_nor_superuser_nor_bypassrls() {
    let app = spawn_app().await;
    let (user, superuser, bypass): (String, bool, bool) =
        sqlx::query_as("SELECT rolname::text, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
            .fetch_one(app.app.db.pool())
            .await
            .expect("role query");
    assert_eq!(user, "herald_app");
    assert!(!superuser && !bypass);
    let owned: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user")
            .fetch_one(app.app.db.pool())
            .await
            .expect("owner query");
    assert_eq!(owned, 0);
}

#[tokio::test]
async fn queries_without_a_tenant_see_nothing() {
    let t = two_tenants().await;
    assert!(t.a.run(CreateApiKey { name: "k".into(), role: None }).await.ok());
    assert!(t.a.run(InviteMember { email: "i@example.com".into(), role: Role::Viewer }).await.ok());
    let db = &t.app.app.db;
    for table in ["tenants", "memberships", "invites", "api_keys"] {
        let owner_sees: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(&t.app.owner)
            .await
            .expect("count");
        assert!(owner_sees > 0, "{table} has rows");
        let mut tx = db.begin().await.expect("tx");
        let runtime_sees: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(&mut *tx)
            .await
            .expect("count");
        assert_eq!(runtime_sees, 0, "{table} leaked rows with no tenant set");
        // Outside a transaction too (set_config is transaction-local, so nothing carries over).
        let pooled: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(db.pool())
            .await
            .expect("count");
        assert_eq!(pooled, 0, "{table} leaked rows on a pooled connection");
    }
}

#[tokio::test]
async fn a_tenant_transaction_sees_and_changes_only_its_own_rows() {
    let t = two_tenants().await;
    let a: TenantId = t.a_id.parse().expect("uuid");
    let b: TenantId = t.b_id.parse().expect("uuid");
    let mut tx = t.app.app.db.tenant_tx(a).await.expect("tx");
    let visible: Vec<String> =
        sqlx::query_scalar("SELECT name FROM tenants").fetch_all(&mut *tx).await.expect("select");
    assert_eq!(visible, vec!["Tenant A".to_string()]);
    let changed = sqlx::query("UPDATE tenants SET name = 'pwned' WHERE id = $1")
        .bind(b)
        .execute(&mut *tx)
        .await
        .expect("update")
        .rows_affected();
    assert_eq!(changed, 0);
    let moved = sqlx::query(
        "INSERT INTO memberships (tenant_id, user_id, role) SELECT $1, user_id, 'owner' FROM memberships LIMIT 1",
    )
    .bind(b)
    .execute(&mut *tx)
    .await;
    assert!(moved.is_err(), "writing a row for another tenant must violate the policy");
}

/// The cross-tenant harness: tenant A's session aims every workspace-scoped server function at
/// tenant B's ids. Later features add their functions to this list.
#[tokio::test]
async fn no_server_function_reaches_another_workspace() {
    let t = two_tenants().await;
    // Give B things to aim at.
    let key = t.b.run(CreateApiKey { name: "b-key".into(), role: None }).await.value();
    assert!(t.b.run(InviteMember { email: "b-invitee@example.com".into(), role: Role::Viewer }).await.ok());
    let b_members = t.b.run(ListMembers {}).await.value();
    let b_owner_id = b_members.members[0].user_id;
    let b_invite_id = b_members.invites[0].id;
    let b_key_id = t.b.run(ListApiKeys {}).await.value()[0].id;

    assert_not_found("switch_workspace", t.a.run(SwitchWorkspace { workspace_id: t.b_id.clone() }).await);
    assert_not_found("change_member_role", t.a.run(ChangeMemberRole { user_id: b_owner_id, role: Role::Viewer }).await);
    assert_not_found("remove_member", t.a.run(RemoveMember { user_id: b_owner_id }).await);
    assert_not_found("revoke_invite", t.a.run(RevokeInvite { invite_id: b_invite_id }).await);
    assert_not_found("revoke_api_key", t.a.run(RevokeApiKey { key_id: b_key_id }).await);
    // A's reads show only A.
    let a_members = t.a.run(ListMembers {}).await.value();
    let a_emails: Vec<&str> = a_members
        .members
        .iter()
        .map(|m| m.email.as_str())
        .chain(a_members.invites.iter().map(|i| i.email.as_str()))
        .collect();
    assert!(
        !a_emails.contains(&"owner-b@example.com") && !a_emails.iter().any(|e| e.contains("b-invitee")),
        "{a_emails:?}"
    );
    assert_eq!(t.a.run(GetWorkspaceSettings {}).await.value().name, "Tenant A");
    assert_eq!(t.a.session().await.expect("logged in").workspaces.len(), 1);

    // B is untouched.
    let after = t.b.run(ListMembers {}).await.value();
    assert_eq!(after.members[0].role, Role::Owner);
    assert_eq!(after.invites.len(), 1);
    let r = reqwest::Client::new()
        .get(format!("{}/api/v1/workspace", t.app.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), StatusCode::OK);
}

/// The harness, for campaigns and sending identities: every campaign and identity function
/// aimed by tenant A at tenant B's ids answers 404 and changes nothing.
#[tokio::test]
async fn no_campaign_or_identity_function_reaches_another_workspace() {
    let t = two_tenants().await;
    let created = t.b.run(CreateCampaign { name: "B's campaign".into() }).await;
    assert!(created.ok(), "{:?}", created.result);
    let c = created.value();
    let saved =
        t.b.run(SaveIdentity {
            id: String::new(),
            identity: IdentityInput {
                name: "B's server".into(),
                smtp_url: "smtp://user:secret@127.0.0.1:2525".into(),
                max_connections: 2,
                rate_per_second: 5.0,
                burst: 5,
                ..IdentityInput::default()
            },
        })
        .await;
    assert!(saved.ok(), "{:?}", saved.result);
    let identities = t.b.run(ListIdentities {}).await.value().identities;
    assert!(!identities.is_empty(), "B has an identity: {identities:?}");
    let identity = identities[0].id;

    assert_not_found("get_campaign", t.a.run(GetCampaign { id: c }).await);
    assert_not_found(
        "save_campaign",
        t.a.run(SaveCampaign {
            id: c,
            input: CampaignInput {
                name: "Taken over".into(),
                body_format: BodyFormat::Markdown,
                ..CampaignInput::default()
            },
        })
        .await,
    );
    assert_not_found("preview_campaign", t.a.run(PreviewCampaign { id: c, reader: None }).await);
    assert_not_found(
        "test_send_campaign",
        t.a.run(TestSendCampaign { id: c, addresses: "a@example.com".into() }).await,
    );
    assert_not_found("send_campaign", t.a.run(SendCampaign { id: c }).await);
    assert_not_found(
        "schedule_campaign",
        t.a.run(ScheduleCampaign { id: c, at: "2099-01-01T09:00:00Z".into(), timezone: "UTC".into() }).await,
    );
    assert_not_found("unschedule_campaign", t.a.run(UnscheduleCampaign { id: c }).await);
    assert_not_found("campaign_report", t.a.run(CampaignReport { id: c }).await);
    assert_not_found("campaign_stats", t.a.run(CampaignStats { id: c }).await);
    assert_not_found(
        "save_webhook",
        t.a.run(SaveWebhook { id: identity, provider: "generic".into(), secret: "taken-over".into() }).await,
    );
    assert_not_found("pause_campaign", t.a.run(PauseCampaign { id: c }).await);
    assert_not_found("resume_campaign", t.a.run(ResumeCampaign { id: c }).await);
    assert_not_found("cancel_campaign", t.a.run(CancelCampaign { id: c }).await);
    assert_not_found("retry_failed_sends", t.a.run(RetryFailedSends { id: c }).await);
    assert_not_found("delete_campaign", t.a.run(DeleteCampaign { id: c }).await);
    assert_not_found("test_identity", t.a.run(TestIdentity { id: identity.to_string() }).await);
    assert_not_found("delete_identity", t.a.run(DeleteIdentity { id: identity }).await);
    assert_not_found(
        "save_identity",
        t.a.run(SaveIdentity {
            id: identity.to_string(),
            identity: IdentityInput {
                name: "Taken over".into(),
                smtp_url: String::new(),
                max_connections: 1,
                rate_per_second: 1.0,
                burst: 1,
                ..IdentityInput::default()
            },
        })
        .await,
    );
    // Nor B's event export.
    let export = t.a.get(&format!("/campaigns/{c}/events.csv")).await;
    assert_eq!(export.status(), StatusCode::NOT_FOUND);
    // A's lists show none of B's; B's are untouched.
    assert_eq!(t.a.run(ListCampaigns { filter: Default::default() }).await.value().campaigns.len(), 0);
    assert_eq!(t.a.run(ListWebhooks {}).await.value().rows.len(), 0);
    assert_eq!(t.a.run(ListIdentities {}).await.value().identities.len(), 0);
    let theirs = t.b.run(GetCampaign { id: c }).await.value();
    assert_eq!((theirs.campaign.name.as_str(), theirs.campaign.status), ("B's campaign", CampaignStatus::Draft));
    let theirs = t.b.run(ListIdentities {}).await.value();
    assert_eq!(theirs.identities[0].name, "B's server");
}

#[tokio::test]
async fn no_transactional_function_reaches_another_workspace() {
    let t = two_tenants().await;
    let template = TemplateInput {
        name: "b-receipt".into(),
        subject: "Hi {{ name }}".into(),
        html: "<p>Hi {{ name }}</p>".into(),
        sample: serde_json::json!({"name": "B"}),
        ..TemplateInput::default()
    };
    let saved = t.b.run(SaveTxTemplate { id: "new".into(), template }).await;
    assert!(saved.ok(), "{:?}", saved.result);
    let template = saved.value();
    let b_api = Api::for_owner(&t.app, &t.b).await;
    t.app.verify_domain(&t.b_id, "b.test").await;
    let (status, message) = b_api
        .send_message(
            "b-1",
            &serde_json::json!({"to": "x@example.com", "from": "b@b.test", "template": "b-receipt",
                                                "variables": {"name": "X"}, "send_at": "2099-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{message}");
    let m: MessageId = message["id"].as_str().unwrap_or_default().parse().expect("message id");
    let overwrite =
        TemplateInput { name: "taken".into(), subject: "x".into(), text_body: "x".into(), ..TemplateInput::default() };
    assert_not_found(
        "save_tx_template",
        t.a.run(SaveTxTemplate { id: template.to_string(), template: overwrite }).await,
    );
    assert_not_found("tx_template_view", t.a.run(TxTemplateView { id: template.to_string() }).await);
    assert_not_found("load_message", t.a.run(LoadMessage { id: m }).await);
    assert_not_found("cancel_message", t.a.run(CancelMessage { id: m }).await);
    let mine = t.a.run(ListMessages { q: String::new(), status: String::new() }).await.value();
    assert_eq!(mine.rows.len(), 0, "{:?}", mine.rows);
    assert_eq!(t.a.run(ListTxTemplates {}).await.value().len(), 0);
    // A's API with B's message id and template name: 404 and 422 (no such template here).
    let a_api = Api::for_owner(&t.app, &t.a).await;
    assert_eq!(a_api.get(&format!("/api/v1/messages/{m}")).await.0, StatusCode::NOT_FOUND);
    let (status, _) = a_api
        .send_message("a-1", &serde_json::json!({"to": "y@example.com", "from": "a@a.test", "template": "b-receipt"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let theirs: MessagePage = t.b.run(LoadMessage { id: m }).await.value();
    assert_eq!(theirs.detail.message.status, MessageStatus::Queued, "B's message untouched");
}

/// A campaign names only its own workspace's sending identity. Naming another's
/// made the runtime fall back to the operator's relay with the own-identity exemption from the
/// verified-domain check (any From).
#[tokio::test]
async fn a_campaign_cannot_name_another_workspaces_identity() -> TestResult {
    let t = two_tenants().await;
    let identity = uuid::Uuid::new_v4();
    sqlx::query(
        "INSERT INTO sending_identities (id, tenant_id, name, smtp_url_sealed, smtp_display)
         VALUES ($1, $2::uuid, 'A relay', 'sealed', 'smtp://a.example')",
    )
    .bind(identity)
    .bind(&t.a_id)
    .execute(&t.app.owner)
    .await?;
    let b = Api::for_owner(&t.app, &t.b).await;
    let (status, body) = b
        .post("/api/v1/campaigns", serde_json::json!({"name": "Spoof", "subject": "s", "identity_id": identity}))
        .await;
    assert_eq!(status, reqwest::StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["identity_id"].as_str().is_some_and(|m| m.contains("does not exist")), "{body}");
    // The key itself refuses it, whoever writes the row.
    let (status, c) = b.post("/api/v1/campaigns", serde_json::json!({"name": "Plain", "subject": "s"})).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{c}");
    let forced = sqlx::query("UPDATE campaigns SET identity_id = $1 WHERE id = $2::uuid")
        .bind(identity)
        .bind(c["id"].as_str().unwrap_or_default())
        .execute(&t.app.owner)
        .await;
    assert!(
        forced.is_err_and(|e| e.to_string().contains("campaigns_identity_id_fkey")),
        "another workspace's identity was stored"
    );
    Ok(())
}

/// Defence in depth inside the database: a definer function answers only for the workspace of
/// the caller's transaction, whatever id it is handed; the operator's view of every account is
/// not the runtime role's; every definer function pins its search path, `pg_temp` last.
#[tokio::test]
async fn definer_functions_answer_only_for_the_callers_workspace_and_pin_their_search_path() -> TestResult {
    let t = two_tenants().await;
    sqlx::query(
        "INSERT INTO media (tenant_id, id, hash, content_type, width, height, bytes, file_name)
         VALUES ($1::uuid, gen_random_uuid(), repeat('b', 64), 'image/png', 1, 1, 4096, 'b.png')",
    )
    .bind(&t.b_id)
    .execute(&t.app.owner)
    .await?;
    let runtime = t.app.app.db.pool();
    let b_id = t.b_id.clone();
    let as_workspace = |tenant: String| {
        let b_id = b_id.clone();
        async move {
            let mut tx = runtime.begin().await?;
            sqlx::query("SELECT set_config('app.tenant_id', $1, true)").bind(&tenant).execute(&mut *tx).await?;
            let media: i64 =
                sqlx::query_scalar("SELECT account_media_bytes($1::uuid)").bind(&b_id).fetch_one(&mut *tx).await?;
            let uploads: i64 =
                sqlx::query_scalar("SELECT account_upload_bytes($1::uuid)").bind(&b_id).fetch_one(&mut *tx).await?;
            tx.commit().await?;
            anyhow::Ok((media, uploads))
        }
    };
    assert_eq!(as_workspace(t.b_id.clone()).await?.0, 4096, "its own workspace's account");
    assert_eq!(as_workspace(t.a_id.clone()).await?, (0, 0), "another workspace's account, asked from A");

    let denied = sqlx::query("SELECT * FROM account_activity(10)").fetch_all(runtime).await;
    assert!(
        denied.as_ref().err().and_then(|e| e.as_database_error()).and_then(|e| e.code()).as_deref() == Some("42501"),
        "the runtime role reads every account's activity: {denied:?}"
    );
    let owner = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&t.app.db_url).await?;
    assert!(
        sqlx::query("SELECT * FROM account_activity(10)").fetch_all(&owner).await.is_ok(),
        "the operator (owner) reads it"
    );

    let unpinned: Vec<String> = sqlx::query_scalar(
        "SELECT p.oid::regprocedure::text FROM pg_proc p
          WHERE p.pronamespace = 'public'::regnamespace AND p.prosecdef
            AND NOT EXISTS (SELECT 1 FROM unnest(coalesce(p.proconfig, '{}')) c
                             WHERE c LIKE 'search_path=%' AND c LIKE '%pg_temp')",
    )
    .fetch_all(&t.app.owner)
    .await?;
    assert!(unpinned.is_empty(), "definer functions without a pinned search path ending in pg_temp: {unpinned:?}");
    Ok(())
}
