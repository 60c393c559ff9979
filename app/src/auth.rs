//! Sign-up, login, logout, and the session summary every page's shell reads.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::AppError;
use herald_types::Role;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceItem {
    pub id: String,
    pub name: String,
    pub slug: String,
    pub role: Role,
}

impl WorkspaceItem {
    pub fn can_administer(&self) -> bool {
        self.role.can_administer()
    }
    pub fn can_author(&self) -> bool {
        self.role.can_author()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub email: String,
    pub name: String,
    pub workspaces: Vec<WorkspaceItem>,
    pub current: Option<WorkspaceItem>,
    pub dev_mode: bool,
    /// False until the link mailed at sign-up is opened: the shell shows a banner.
    pub email_verified: bool,
    /// The current workspace requires two-factor and this account has not turned it on: the
    /// shell shows what to do instead of the page.
    pub two_factor_required: bool,
}

/// Only same-site relative paths are followed after login (no open redirect). Browsers drop
/// tabs and line breaks from a URL and read `\` as `/`, so `/\t/evil.example` or
/// `/\\evil.example` would become `//evil.example`, another site: a path with any control
/// character, space or backslash is refused, not cleaned.
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && n.chars().all(|c| !c.is_control() && !c.is_whitespace() && c != '\\') =>
        {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

#[server(prefix = "/rpc", endpoint = "session")]
pub async fn get_session_info() -> Result<Option<SessionInfo>, AppError> {
    use crate::ssr::*;
    use herald_engine::{users, workspaces};
    let state = state()?;
    let session = session().await?;
    let Some(user_id) = session_user(&session).await? else { return Ok(None) };
    let user = match users::get_user(&state.db, user_id).await {
        Ok(u) => u,
        Err(herald_engine::Error::NotFound) => {
            log_out(&session).await?;
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let list = workspaces::list_for_user(&state.db, user_id).await?;
    let items: Vec<WorkspaceItem> = list
        .iter()
        .map(|w| WorkspaceItem { id: w.id.to_string(), name: w.name.clone(), slug: w.slug.clone(), role: w.role })
        .collect();
    let wanted = session.get::<herald_engine::TenantId>(SESSION_TENANT).await.ok().flatten().map(|t| t.to_string());
    let current = items.iter().find(|w| Some(&w.id) == wanted.as_ref()).or(items.first()).cloned();
    // Remember the fallback choice so later calls agree with what this page showed.
    if let Some(w) = current
        .as_ref()
        .filter(|c| wanted.as_ref() != Some(&c.id))
        .and_then(|c| list.iter().find(|w| w.id.to_string() == c.id))
    {
        set_session_tenant(&session, w.id).await?;
    }
    let two_factor_required = match current.as_ref().and_then(|c| c.id.parse().ok()) {
        Some(tenant) => {
            matches!(workspaces::access(&state.db, tenant, user_id).await, Err(herald_engine::Error::Refused(_)))
        }
        None => false,
    };
    Ok(Some(SessionInfo {
        email: user.email,
        name: user.name,
        workspaces: items,
        current,
        dev_mode: state.dev_mode,
        email_verified: user.email_verified,
        two_factor_required,
    }))
}

/// The first step of sign-up: mails the address a link to finish (or, when it has an account,
/// a note saying so). The answer is the same either way and comes before the look-up, so the
/// form does not tell anyone which addresses have accounts; the account is made by
/// whoever opens the link (`/signup/finish`).
#[server(prefix = "/rpc", endpoint = "signup")]
pub async fn signup(email: String, name: String, next: Option<String>) -> Result<(), AppError> {
    use crate::ssr::*;
    use herald_engine::{Email, accounts, users};
    let state = state()?;
    if !state.auth_ip_limiter.check(&format!("signup:{}", client_limiter_key().await)) {
        return Err(AppError::RateLimited.respond());
    }
    let email = Email::parse(&email)?;
    let claim = accounts::SignupClaim {
        email: email.as_str().to_string(),
        name: users::check_name(&name)?.to_string(),
        next: safe_next(next.as_deref()),
    };
    tokio::spawn(async move {
        let (db, jobs, signer, base) = (&state.db, &state.jobs, &state.signer, &state.base_url);
        if let Err(e) = accounts::start_signup(db, jobs, signer, base, &email, &claim).await {
            tracing::error!(error = ?e, "sign-up mail not queued");
        }
    });
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "login")]
pub async fn login(email: String, password: String, next: Option<String>) -> Result<(), AppError> {
    use crate::ssr::*;
    use herald_engine::users;
    let state = state()?;
    let ip_ok = state.auth_ip_limiter.check(&format!("login:{}", client_limiter_key().await));
    let account_ok = state.auth_account_limiter.check(&email.trim().to_lowercase());
    if !ip_ok || !account_ok {
        return Err(AppError::RateLimited.respond());
    }
    match users::authenticate(&state.db, &email, &password).await {
        Ok(user) if herald_engine::two_factor::is_enabled(&state.db, user).await? => {
            // Half logged in: the password was right; the code comes next, on its own page.
            let session = session().await?;
            start_second_factor(&session, user, safe_next(next.as_deref())).await?;
            leptos_axum::redirect("/login/two-factor");
            Ok(())
        }
        Ok(user) => {
            let session = session().await?;
            log_in(&session, user).await?;
            leptos_axum::redirect(&safe_next(next.as_deref()));
            Ok(())
        }
        // One message for unknown email and wrong password.
        Err(herald_engine::Error::Unauthenticated) => {
            Err(AppError::invalid("That email and password do not match an account.").respond())
        }
        Err(e) => Err(e.into()),
    }
}

/// The second step of a login for an account with two-factor on: a code from the authenticator
/// app or a recovery code.
#[server(prefix = "/rpc", endpoint = "login_second_factor")]
pub async fn login_second_factor(code: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let state = state()?;
    if !state.auth_ip_limiter.check(&format!("2fa:{}", client_limiter_key().await)) {
        return Err(AppError::RateLimited.respond());
    }
    let session = session().await?;
    let Some((user, next)) = pending_second_factor(&session).await? else {
        return Err(AppError::invalid("Your login has timed out. Log in again.").respond());
    };
    if !state.auth_account_limiter.check(&format!("2fa:{user}")) {
        return Err(AppError::RateLimited.respond());
    }
    match herald_engine::two_factor::check(&state.db, &state.signer, user, &code, chrono::Utc::now()).await {
        Ok(_) => {
            log_in(&session, user).await?;
            leptos_axum::redirect(&safe_next(Some(&next)));
            Ok(())
        }
        Err(herald_engine::Error::RateLimited) => Err(AppError::invalid(
            "Too many wrong codes: two-factor login is locked for a few minutes. Try again later.",
        )
        .respond()),
        Err(e) => Err(e.into()),
    }
}

/// Mails a new confirmation link to the logged-in user.
#[server(prefix = "/rpc", endpoint = "resend_verification")]
pub async fn resend_verification() -> Result<(), AppError> {
    use crate::ssr::*;
    let (state, _, user) = require_user().await?;
    if !state.auth_account_limiter.check(&format!("verify:{user}")) {
        return Err(AppError::RateLimited.respond());
    }
    herald_engine::accounts::send_verification(&state.db, &state.jobs, &state.signer, &state.base_url, user).await?;
    Ok(())
}

/// Confirms the address with the mailed link (the `/verify-email` page's button posts it).
#[server(prefix = "/rpc", endpoint = "verify_email")]
pub async fn verify_email(token: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let state = state()?;
    herald_engine::accounts::verify_email(&state.db, &state.signer, &token).await?;
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "logout")]
pub async fn logout() -> Result<(), AppError> {
    use crate::ssr::*;
    let session = session().await?;
    log_out(&session).await?;
    leptos_axum::redirect("/login");
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "switch_workspace")]
pub async fn switch_workspace(workspace_id: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let (state, session, user) = require_user().await?;
    let tenant: herald_engine::TenantId = workspace_id.parse()?;
    if herald_engine::workspaces::role_of(&state.db, tenant, user).await?.is_none() {
        return Err(AppError::NotFound.respond());
    }
    set_session_tenant(&session, tenant).await?;
    leptos_axum::redirect("/");
    Ok(())
}

#[server(prefix = "/rpc", endpoint = "create_workspace")]
pub async fn create_workspace(name: String, slug: String) -> Result<(), AppError> {
    use crate::ssr::*;
    let (state, session, user) = require_user().await?;
    let slug = Some(slug.as_str()).filter(|s| !s.trim().is_empty());
    let ws = herald_engine::workspaces::create(&state.db, user, &name, slug).await?;
    set_session_tenant(&session, ws.id).await?;
    leptos_axum::redirect("/");
    Ok(())
}
