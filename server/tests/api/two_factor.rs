//! Two-factor login (TOTP, RFC 6238): enrolment with a confirming code, the second
//! step of a login, codes on a controllable clock (previous window, reuse, wrong codes locking
//! the step), single-use recovery codes, turning it off, and a workspace rule that requires it.

use chrono::{DateTime, Duration as TimeDelta, Utc};
use herald_app::auth::LoginSecondFactor;
use herald_app::error::AppError;
use herald_app::pages::account::overview::{ChangePassword, ListSessions};
use herald_app::pages::account::two_factor::{ConfirmTwoFactor, DisableTwoFactor, LoadTwoFactorStatus, StartTwoFactor};
use herald_app::pages::settings::members::{ListMembers, SaveTeamRules};
use reqwest::StatusCode;

use crate::helpers::*;

const PASSWORD: &str = "correct horse battery";

/// Enrols the browser's account through the account page's server functions; returns the
/// secret (as the page shows it) and the recovery codes.
async fn enrol(b: &Browser) -> (String, Vec<String>) {
    let wrong = b.run(StartTwoFactor { current_password: "not the password".into() }).await;
    assert!(
        matches!(wrong.result, Err(AppError::Invalid(_))),
        "enrolment needs the password: {} {:?}",
        wrong.status,
        wrong.result
    );
    let start = b.run(StartTwoFactor { current_password: PASSWORD.into() }).await.value();
    let secret = start.secret_base32.clone();
    assert!(start.qr_svg.starts_with("<svg"), "{start:?}");
    assert!(start.otpauth_url.starts_with("otpauth://totp/Herald:"), "{start:?}");
    // A wrong code does not turn it on.
    let wrong = b.run(ConfirmTwoFactor { code: "000000".into() }).await;
    if herald_engine::two_factor::code_at(&secret, Utc::now()).ok().as_deref() != Some("000000") {
        assert!(matches!(wrong.result, Err(AppError::Invalid(_))), "{} {:?}", wrong.status, wrong.result);
    }
    let code = herald_engine::two_factor::code_at(&secret, Utc::now()).expect("code");
    let codes = b.run(ConfirmTwoFactor { code }).await.value();
    assert_eq!(codes.len(), 10);
    (secret, codes)
}

/// The code of the step after the current one: accepted (clock drift), and never the one the
/// enrolment just used.
fn next_code(secret: &str) -> String {
    herald_engine::two_factor::code_at(secret, Utc::now() + TimeDelta::seconds(30)).expect("code")
}

#[tokio::test]
async fn login_asks_for_a_code_after_the_password_and_recovery_codes_work_once() -> TestResult {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("totp@example.com", "Second Factor").await;
    let (secret, codes) = enrol(&owner).await;
    let status = owner.run(LoadTwoFactorStatus {}).await.value();
    assert!(status.enabled_at.is_some() && status.recovery_codes_left == 10, "{status:?}");

    // The password alone logs nobody in.
    let phone = app.browser();
    let r = phone.login("totp@example.com", PASSWORD).await;
    assert!(r.ok(), "{:?}", r.result);
    assert!(phone.session().await.is_none(), "half logged in is not logged in");
    assert_eq!(phone.run(ListSessions {}).await.error(), AppError::Unauthenticated);
    // A wrong code, then the right one.
    let wrong = phone.run(LoginSecondFactor { code: "12345x".into() }).await;
    assert!(matches!(wrong.result, Err(AppError::Invalid(_))), "{} {:?}", wrong.status, wrong.result);
    let r = phone.run(LoginSecondFactor { code: next_code(&secret) }).await;
    assert!(r.ok(), "{:?}", r.result);
    assert_eq!(phone.session().await.expect("logged in").email, "totp@example.com");

    // A login waiting for its code ends with the account's other sessions (a password change).
    let half = app.browser();
    assert!(half.login("totp@example.com", PASSWORD).await.ok());
    let r = owner
        .run(ChangePassword { current_password: PASSWORD.into(), new_password: "a brand new password".into() })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    let r = half.run(LoginSecondFactor { code: codes[2].clone() }).await;
    assert!(!r.ok() && r.message().contains("timed out"), "{:?}", r.result);
    let r = owner
        .run(ChangePassword { current_password: "a brand new password".into(), new_password: PASSWORD.into() })
        .await;
    assert!(r.ok(), "{:?}", r.result);

    // Without a password step first, a code leads nowhere.
    let stranger = app.browser();
    let r = stranger.run(LoginSecondFactor { code: codes[0].clone() }).await;
    assert!(!r.ok() && r.message().contains("timed out"), "{:?}", r.result);

    // A recovery code, typed loosely, works once.
    let lost_phone = app.browser();
    assert!(lost_phone.login("totp@example.com", PASSWORD).await.ok());
    let typed = format!(" {} ", codes[0].to_uppercase());
    assert!(lost_phone.run(LoginSecondFactor { code: typed }).await.ok());
    assert!(lost_phone.session().await.is_some());
    let again = app.browser();
    assert!(again.login("totp@example.com", PASSWORD).await.ok());
    let r = again.run(LoginSecondFactor { code: codes[0].clone() }).await;
    assert!(matches!(r.result, Err(AppError::Invalid(_))), "a used recovery code: {} {:?}", r.status, r.result);
    assert!(again.session().await.is_none());
    assert_eq!(owner.run(LoadTwoFactorStatus {}).await.value().recovery_codes_left, 9);

    // Turning it off needs the password and a code.
    let r = owner.run(DisableTwoFactor { current_password: "wrong password!".into(), code: codes[1].clone() }).await;
    assert!(!r.ok() && r.message().contains("password"), "{:?}", r.result);
    let r = owner.run(DisableTwoFactor { current_password: PASSWORD.into(), code: "999999x".into() }).await;
    assert!(matches!(r.result, Err(AppError::Invalid(_))), "{} {:?}", r.status, r.result);
    let r = owner.run(DisableTwoFactor { current_password: PASSWORD.into(), code: codes[1].clone() }).await;
    assert!(r.ok(), "{:?}", r.result);
    let plain = app.browser();
    assert!(plain.login("totp@example.com", PASSWORD).await.ok());
    assert!(plain.session().await.is_some(), "no second step any more");
    Ok(())
}

#[tokio::test]
async fn codes_on_a_controllable_clock_previous_window_reuse_and_lockout() -> TestResult {
    use herald_engine::two_factor::{self, Proof};
    let app = spawn_app().await;
    let (_b, _) = app.owner_with_workspace("clock@example.com", "Clockwork").await;
    let user = herald_engine::users::find_by_email(&app.app.db, "clock@example.com").await?.expect("user").id;
    let (db, signer) = (&app.app.db, &app.app.signer);
    let t0: DateTime<Utc> = DateTime::from_timestamp(2_000_000_010, 0).expect("time");
    let at = |s: i64| t0 + TimeDelta::seconds(s);

    let e = two_factor::start_enrolment(db, signer, user, PASSWORD).await?;
    let code = |t: DateTime<Utc>| two_factor::code_at(&e.secret_base32, t).expect("code");
    // A code two windows old does not confirm enrolment; the current one does.
    assert!(two_factor::confirm_enrolment(db, signer, user, &code(at(-60)), t0).await.is_err());
    two_factor::confirm_enrolment(db, signer, user, &code(t0), t0).await?;

    // The code just used is refused (reuse), even inside its window.
    assert!(two_factor::check(db, signer, user, &code(t0), at(5)).await.is_err());
    // Ninety seconds later: the previous window's code still works (a slow typist)…
    assert_eq!(two_factor::check(db, signer, user, &code(at(60)), at(90)).await?, Proof::Code);
    // …but never one older than the last accepted one, nor one two windows back.
    assert!(two_factor::check(db, signer, user, &code(at(30)), at(90)).await.is_err());
    assert!(two_factor::check(db, signer, user, &code(at(120)), at(185)).await.is_err());

    // A right code resets the count of wrong ones (the two refused above were wrong ones)…
    assert_eq!(two_factor::check(db, signer, user, &code(at(240)), at(240)).await?, Proof::Code);
    // …and the fifth wrong code in a row locks the step, so even the right code is refused…
    for i in 0..5 {
        let r = two_factor::check(db, signer, user, "000000", at(300 + i)).await;
        assert!(matches!(r, Err(herald_engine::Error::Invalid(_))), "attempt {i}: {r:?}");
    }
    let locked = two_factor::check(db, signer, user, &code(at(310)), at(310)).await;
    assert!(matches!(locked, Err(herald_engine::Error::RateLimited)), "{locked:?}");
    // …until the lock passes.
    assert_eq!(two_factor::check(db, signer, user, &code(at(700)), at(700)).await?, Proof::Code);

    // Twenty wrong codes at once: the lock is claimed before each check, so at most five are
    // even looked at.
    let attempts = (0..20).map(|i| two_factor::check(db, signer, user, "000000", at(800 + i % 3)));
    let results = futures::future::join_all(attempts).await;
    let checked = results.iter().filter(|r| matches!(r, Err(herald_engine::Error::Invalid(_)))).count();
    let refused = results.iter().filter(|r| matches!(r, Err(herald_engine::Error::RateLimited))).count();
    assert_eq!((checked, refused), (5, 15), "{results:?}");
    Ok(())
}

#[tokio::test]
async fn a_workspace_can_require_two_factor_of_every_member() -> TestResult {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("strict@example.com", "Strict").await;
    let author = app.add_member(&ws, "lax@example.com", "author").await;
    let rules = |on: bool| SaveTeamRules { two_factor: on.then(|| "on".to_string()), send_approval: None };

    // The owner must have it first.
    let r = owner.run(rules(true)).await;
    assert!(!r.ok() && r.message().contains("your own account first"), "{:?}", r.result);
    let (secret, _) = enrol(&owner).await;
    assert!(owner.run(rules(true)).await.ok());
    let members = owner.run(ListMembers {}).await.value();
    assert!(members.require_two_factor, "{members:?}");
    let badges: Vec<bool> = members.members.iter().map(|m| m.two_factor).collect();
    assert_eq!(badges, [true, false]);

    // The author without it: every workspace call is refused with what to do; the session says so.
    let r = author.run(ListMembers {}).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(r.message().contains("requires two-factor"), "{:?}", r.result);
    assert!(author.session().await.expect("logged in").two_factor_required);
    // Their account page still works, and enrolling lets them in.
    enrol(&author).await;
    assert!(author.run(ListMembers {}).await.ok());
    assert!(!author.session().await.expect("logged in").two_factor_required);

    // While the workspace requires it, the owner cannot turn theirs off.
    let r = owner.run(DisableTwoFactor { current_password: PASSWORD.into(), code: next_code(&secret) }).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.result);
    assert!(r.message().contains("Strict"), "{:?}", r.result);
    Ok(())
}
