//! Password rules and argon2id hashing at OWASP parameters (19 MiB, 2 iterations, 1 lane).
//! Hashing takes tens of milliseconds of CPU, so it runs on the blocking pool, never on the async
//! runtime's worker threads.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

use crate::error::{Error, Result};

pub const MIN_LEN: usize = 10;
pub const MAX_LEN: usize = 128;

/// The rules, as shown next to the password field.
pub const RULES: &str = "At least 10 characters (up to 128). A passphrase of a few words works well.";

pub fn check_rules(password: &str) -> Result<()> {
    let n = password.chars().count();
    if n < MIN_LEN {
        return Err(Error::invalid(format!("The password needs at least {MIN_LEN} characters.")));
    }
    if n > MAX_LEN {
        return Err(Error::invalid(format!("The password can have at most {MAX_LEN} characters.")));
    }
    Ok(())
}

fn hasher() -> Argon2<'static> {
    #[allow(clippy::unwrap_used)] // constant, valid parameters
    let params = Params::new(19 * 1024, 2, 1, None).unwrap();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

pub async fn hash(password: String) -> Result<String> {
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut rand::rngs::OsRng);
        hasher()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| Error::Unexpected(anyhow::anyhow!("argon2 hash: {e}")))
    })
    .await
    .map_err(|e| Error::Unexpected(e.into()))?
}

/// Verifies `password` against a PHC string. With `None` it verifies against a dummy hash, so an
/// unknown email costs as much time as a wrong password (no account enumeration by timing).
pub async fn verify(password: String, phc: Option<String>) -> Result<bool> {
    tokio::task::spawn_blocking(move || {
        let phc = phc.unwrap_or_else(|| DUMMY_HASH.to_string());
        let parsed = PasswordHash::new(&phc).map_err(|e| Error::Unexpected(anyhow::anyhow!("stored hash: {e}")))?;
        Ok(hasher().verify_password(password.as_bytes(), &parsed).is_ok())
    })
    .await
    .map_err(|e| Error::Unexpected(e.into()))?
}

// argon2id(19 MiB, t=2, p=1) of a random string nobody knows.
const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$3Vb8SLqYJzV6LgqXyE8n1tu4mE9RFKXbpL3s1rXbn5c";

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_use_owasp_parameters() -> Result<()> {
        let h = hash("correct horse battery".into()).await?;
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(verify("correct horse battery".into(), Some(h.clone())).await?);
        assert!(!verify("wrong horse battery".into(), Some(h)).await?);
        assert!(!verify("anything at all".into(), None).await?);
        Ok(())
    }

    #[test]
    fn rules_are_enforced() {
        assert!(check_rules("short").is_err());
        assert!(check_rules("long enough pass").is_ok());
        assert!(check_rules(&"x".repeat(129)).is_err());
    }
}
