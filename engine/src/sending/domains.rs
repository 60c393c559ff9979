//! Sending domains: the domains a workspace has proved it controls, and so may put in From.
//!
//! A workspace adds a domain; Herald makes a verification token and a DKIM key pair and shows the
//! DNS records to publish (ownership TXT, SPF include, DKIM public key, DMARC). A check asks DNS
//! for each and says found, missing or wrong; the token found verifies the domain. Mail From an
//! unverified domain is refused before it is queued ([`require_verified_sender`]): a campaign
//! send or schedule, a test send and a transactional message are each a 422 that says what to do.
//! A workspace's own SMTP identity is exempt only where an operator allowed it
//! (`tenants.own_identity_any_from`). Operators and scripts verify without DNS
//! ([`mark_verified`], `herald admin verify-domain`).
//!
//! DNS goes through [`DomainChecker`], which asks `HERALD_DNS_SERVER` when set (the tests run a
//! DNS server on 127.0.0.1) or the system's resolvers, never from a cache: a check is live.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use chrono::{DateTime, Utc};
use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;
use uuid::Uuid;

use crate::domain::{Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use crate::infra::sealing;
use crate::infra::tokens::Signer;
use crate::sending::identities::{DkimKey, SmtpIdentity};
use crate::sending::message::DkimSigner;

/// The DKIM selector Herald publishes its keys under (`herald._domainkey.example.com`).
pub const DKIM_SELECTOR: &str = "herald";
/// The ownership record's host, under the domain.
const CHALLENGE_LABEL: &str = "_herald-challenge";
const TOKEN_PREFIX: &str = "herald-verification=";
const MAX_DOMAINS: i64 = 50;

/// A domain as the settings page shows it (no private key).
#[derive(Clone, Debug, Serialize, sqlx::FromRow)]
pub struct SendingDomain {
    pub id: Uuid,
    pub domain: String,
    pub verification_token: String,
    pub dkim_selector: String,
    pub dkim_public_key: String,
    pub verified_at: Option<DateTime<Utc>>,
    pub verified_by: Option<String>,
    pub dkim_verified_at: Option<DateTime<Utc>>,
    pub checked_at: Option<DateTime<Utc>>,
    #[sqlx(json(nullable))]
    pub last_check: Option<Vec<RecordCheck>>,
    pub created_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, domain, verification_token, dkim_selector, dkim_public_key, verified_at, verified_by,
    dkim_verified_at, checked_at, last_check, created_at";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordKind {
    Ownership,
    Spf,
    Dkim,
    Dmarc,
}

impl RecordKind {
    pub const ALL: [RecordKind; 4] = [RecordKind::Ownership, RecordKind::Spf, RecordKind::Dkim, RecordKind::Dmarc];

    pub fn label(self) -> &'static str {
        match self {
            RecordKind::Ownership => "Ownership",
            RecordKind::Spf => "SPF",
            RecordKind::Dkim => "DKIM",
            RecordKind::Dmarc => "DMARC",
        }
    }
}

/// A TXT record to publish.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsRecord {
    pub kind: RecordKind,
    /// Fully qualified, without the trailing dot.
    pub host: String,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "detail", rename_all = "lowercase")]
pub enum RecordStatus {
    Found,
    Missing,
    /// Something is published there, but not what Herald needs; the text says what is wrong.
    Wrong(String),
    /// DNS did not answer (timeout, SERVFAIL): nothing is known.
    Unknown(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordCheck {
    pub record: DnsRecord,
    pub status: RecordStatus,
}

/// Asks DNS for TXT records, live.
#[derive(Clone)]
pub struct DomainChecker {
    resolver: TokioResolver,
    /// What the SPF record must include: the installation's sending servers.
    pub spf_include: String,
}

impl std::fmt::Debug for DomainChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DomainChecker").field("spf_include", &self.spf_include).finish_non_exhaustive()
    }
}

/// Why a TXT lookup gave nothing.
enum LookupFailure {
    /// The name has no TXT records (NXDOMAIN or an empty answer).
    NoRecords,
    Failed(String),
}

impl DomainChecker {
    /// `server` is `HERALD_DNS_SERVER` (`ip:port`); `None` reads the system's resolver
    /// configuration.
    pub fn new(server: Option<SocketAddr>, spf_include: &str) -> Result<Self> {
        let mut builder = match server {
            Some(addr) => {
                let mut ns = NameServerConfig::udp_and_tcp(addr.ip());
                for connection in &mut ns.connections {
                    connection.port = addr.port();
                }
                TokioResolver::builder_with_config(
                    ResolverConfig::from_parts(None, Vec::new(), vec![ns]),
                    TokioRuntimeProvider::default(),
                )
            }
            None => TokioResolver::builder_tokio()
                .map_err(|e| Error::Unexpected(anyhow::anyhow!("cannot read the system's DNS configuration: {e}")))?,
        };
        let options: &mut ResolverOpts = builder.options_mut();
        options.cache_size = 0;
        options.timeout = Duration::from_secs(3);
        options.attempts = 2;
        let resolver =
            builder.build().map_err(|e| Error::Unexpected(anyhow::anyhow!("cannot set up the DNS resolver: {e}")))?;
        Ok(Self { resolver, spf_include: spf_include.trim().to_ascii_lowercase() })
    }

    /// Every TXT record at `host`, each one's strings joined (long DKIM keys come split in
    /// 255-byte strings).
    async fn txt(&self, host: &str) -> std::result::Result<Vec<String>, LookupFailure> {
        match self.resolver.txt_lookup(format!("{host}.")).await {
            Ok(lookup) => Ok(lookup
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::TXT(txt) => {
                        Some(txt.txt_data.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect::<String>())
                    }
                    _ => None,
                })
                .collect()),
            Err(e) if e.is_no_records_found() || e.is_nx_domain() => Err(LookupFailure::NoRecords),
            Err(e) => Err(LookupFailure::Failed(e.to_string())),
        }
    }

    /// Checks every record of `domain` against DNS.
    #[tracing::instrument(skip_all)]
    pub async fn check(&self, domain: &SendingDomain) -> Vec<RecordCheck> {
        let mut checks = Vec::new();
        for record in records(domain, &self.spf_include) {
            let status = match self.txt(&record.host).await {
                Ok(found) => judge(&record, &found, &self.spf_include),
                Err(LookupFailure::NoRecords) => judge(&record, &[], &self.spf_include),
                Err(LookupFailure::Failed(e)) => {
                    tracing::info!(host = %record.host, error = %e, "DNS lookup failed");
                    RecordStatus::Unknown("DNS did not answer; try again in a minute.".into())
                }
            };
            checks.push(RecordCheck { record, status });
        }
        checks
    }
}

/// The records `domain` needs.
pub fn records(domain: &SendingDomain, spf_include: &str) -> Vec<DnsRecord> {
    let d = &domain.domain;
    RecordKind::ALL
        .into_iter()
        .map(|kind| match kind {
            RecordKind::Ownership => DnsRecord {
                kind,
                host: format!("{CHALLENGE_LABEL}.{d}"),
                value: format!("{TOKEN_PREFIX}{}", domain.verification_token),
            },
            RecordKind::Spf => DnsRecord { kind, host: d.clone(), value: format!("v=spf1 include:{spf_include} ~all") },
            RecordKind::Dkim => DnsRecord {
                kind,
                host: format!("{}._domainkey.{d}", domain.dkim_selector),
                value: format!("v=DKIM1; k=rsa; p={}", domain.dkim_public_key),
            },
            RecordKind::Dmarc => DnsRecord {
                kind,
                host: format!("_dmarc.{d}"),
                value: format!("v=DMARC1; p=none; rua=mailto:dmarc@{d}"),
            },
        })
        .collect()
}

/// `k=v; k=v` tags (DKIM, DMARC), keys lowercased, whitespace inside values removed.
fn tags(record: &str) -> Vec<(String, String)> {
    record
        .split(';')
        .filter_map(|part| part.split_once('='))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.chars().filter(|c| !c.is_whitespace()).collect()))
        .collect()
}

/// What the TXT records `found` at a record's host say about it.
fn judge(record: &DnsRecord, found: &[String], spf_include: &str) -> RecordStatus {
    match record.kind {
        RecordKind::Ownership => {
            let tokens: Vec<&String> = found.iter().filter(|t| t.trim().starts_with(TOKEN_PREFIX)).collect();
            if tokens.iter().any(|t| t.trim() == record.value) {
                RecordStatus::Found
            } else if tokens.is_empty() {
                RecordStatus::Missing
            } else {
                RecordStatus::Wrong("The token published is not this workspace's: copy the value shown here.".into())
            }
        }
        RecordKind::Spf => {
            let spf: Vec<&String> =
                found.iter().filter(|t| t.trim().to_ascii_lowercase().starts_with("v=spf1")).collect();
            match spf.as_slice() {
                [] => RecordStatus::Missing,
                [one] => {
                    let wanted = format!("include:{spf_include}");
                    if one.to_ascii_lowercase().split_whitespace().any(|term| term.trim_start_matches('+') == wanted) {
                        RecordStatus::Found
                    } else {
                        RecordStatus::Wrong(format!("Your SPF record does not include {spf_include}: add {wanted}."))
                    }
                }
                _ => RecordStatus::Wrong(
                    "There are several SPF records; receivers ignore them all. Merge them into one.".into(),
                ),
            }
        }
        RecordKind::Dkim => {
            let wanted = tags(&record.value).into_iter().find(|(k, _)| k == "p").map(|(_, v)| v).unwrap_or_default();
            let keys: Vec<String> =
                found.iter().filter_map(|t| tags(t).into_iter().find(|(k, _)| k == "p").map(|(_, v)| v)).collect();
            if keys.contains(&wanted) {
                RecordStatus::Found
            } else if found.is_empty() {
                RecordStatus::Missing
            } else {
                RecordStatus::Wrong(
                    "The published key is not the one Herald signs with: copy the value shown here.".into(),
                )
            }
        }
        RecordKind::Dmarc => {
            let dmarc: Vec<Vec<(String, String)>> = found
                .iter()
                .map(|t| tags(t))
                .filter(|t| t.first().is_some_and(|(k, v)| k == "v" && v.eq_ignore_ascii_case("DMARC1")))
                .collect();
            match dmarc.as_slice() {
                [] if found.is_empty() => RecordStatus::Missing,
                [] => RecordStatus::Wrong("The record there does not start with v=DMARC1.".into()),
                [one] if one.iter().any(|(k, _)| k == "p") => RecordStatus::Found,
                [_] => RecordStatus::Wrong("The DMARC record has no policy (p=none, quarantine or reject).".into()),
                _ => RecordStatus::Wrong("There are several DMARC records; receivers ignore them all.".into()),
            }
        }
    }
}

/// Lowercased, trailing dot removed; letters, digits, dashes, at least two labels, not an
/// address literal.
pub fn normalise_domain(raw: &str) -> Result<String> {
    let d = raw.trim().trim_end_matches('.').to_ascii_lowercase();
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let labels: Vec<&str> = d.split('.').collect();
    let tld_ok = labels.last().is_some_and(|t| t.bytes().any(|b| b.is_ascii_alphabetic()));
    if d.len() > 253 || labels.len() < 2 || !labels.iter().all(|l| label_ok(l)) || !tld_ok {
        return Err(Error::invalid(format!(
            "“{}” is not a domain name; enter one like example.com.",
            crate::domain::truncate(raw.trim(), 80)
        )));
    }
    Ok(d)
}

/// The domain of an address and every parent of it that could be a verified domain:
/// `a@news.example.com` → `news.example.com`, `example.com`.
fn candidate_domains(from_email: &str) -> Vec<String> {
    let domain = from_email.rsplit_once('@').map(|(_, d)| d).unwrap_or_default().trim().to_ascii_lowercase();
    let labels: Vec<&str> = domain.split('.').collect();
    (0..labels.len().saturating_sub(1)).map(|i| labels[i..].join(".")).collect()
}

fn key_pair() -> Result<(String, String)> {
    use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
    let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048)
        .map_err(|e| Error::Unexpected(anyhow::anyhow!("DKIM key generation failed: {e}")))?;
    let private = key
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| Error::Unexpected(anyhow::anyhow!("DKIM key encoding failed: {e}")))?;
    let public = key
        .to_public_key()
        .to_public_key_der()
        .map_err(|e| Error::Unexpected(anyhow::anyhow!("DKIM key encoding failed: {e}")))?;
    Ok((private.to_string(), B64.encode(public.as_bytes())))
}

fn verification_token() -> String {
    let mut bytes = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut bytes);
    hex::encode(bytes)
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId) -> Result<Vec<SendingDomain>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM sending_domains WHERE tenant_id = $1 ORDER BY domain"
    )))
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

async fn get(db: &Db, tenant: TenantId, id: Uuid) -> Result<SendingDomain> {
    let mut tx = db.tenant_tx(tenant).await?;
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM sending_domains WHERE tenant_id = $1 AND id = $2"
    )))
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    row.ok_or(Error::NotFound)
}

/// Adds a domain (admins: it decides what the workspace may send as) with a fresh token and key
/// pair. Adding one already there returns it unchanged.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn add(db: &Db, signer: &Signer, tenant: TenantId, role: Role, domain: &str) -> Result<SendingDomain> {
    role.require(Role::Admin)?;
    insert(db, signer, tenant, &normalise_domain(domain)?).await
}

async fn insert(db: &Db, signer: &Signer, tenant: TenantId, domain: &str) -> Result<SendingDomain> {
    // RSA key generation takes tens of milliseconds of CPU: off the async threads.
    let (private_pem, public_b64) = tokio::task::spawn_blocking(key_pair)
        .await
        .map_err(|e| Error::Unexpected(anyhow::anyhow!("DKIM key generation panicked: {e}")))??;
    let mut tx = db.tenant_tx(tenant).await?;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM sending_domains WHERE tenant_id = $1")
        .bind(tenant)
        .fetch_one(&mut *tx)
        .await?;
    if count >= MAX_DOMAINS {
        return Err(Error::invalid(format!("A workspace can have at most {MAX_DOMAINS} sending domains.")));
    }
    sqlx::query(
        "INSERT INTO sending_domains (id, tenant_id, domain, verification_token, dkim_selector, dkim_key_sealed,
                                      dkim_public_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (tenant_id, domain) DO NOTHING",
    )
    .bind(Uuid::new_v4())
    .bind(tenant)
    .bind(domain)
    .bind(verification_token())
    .bind(DKIM_SELECTOR)
    .bind(sealing::seal(signer, &private_pem))
    .bind(&public_b64)
    .execute(&mut *tx)
    .await?;
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM sending_domains WHERE tenant_id = $1 AND domain = $2"
    )))
    .bind(tenant)
    .bind(domain)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(row)
}

/// Asks DNS for every record and stores what it found. The token found verifies the domain
/// (and it stays verified: the token may be removed afterwards); the DKIM record found turns
/// signing on, and missing turns it off again.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn check(db: &Db, checker: &DomainChecker, tenant: TenantId, role: Role, id: Uuid) -> Result<SendingDomain> {
    role.require(Role::Admin)?;
    let domain = get(db, tenant, id).await?;
    let checks = checker.check(&domain).await;
    let found = |kind: RecordKind| checks.iter().any(|c| c.record.kind == kind && c.status == RecordStatus::Found);
    let dkim_unknown =
        checks.iter().any(|c| c.record.kind == RecordKind::Dkim && matches!(c.status, RecordStatus::Unknown(_)));
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "UPDATE sending_domains SET
             verified_at = CASE WHEN verified_at IS NULL AND $3 THEN now() ELSE verified_at END,
             verified_by = CASE WHEN verified_at IS NULL AND $3 THEN 'dns' ELSE verified_by END,
             dkim_verified_at = CASE WHEN $4 THEN coalesce(dkim_verified_at, now())
                                     WHEN $5 THEN dkim_verified_at ELSE NULL END,
             checked_at = now(), last_check = $6
         WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(id)
    .bind(found(RecordKind::Ownership))
    .bind(found(RecordKind::Dkim))
    .bind(dkim_unknown)
    .bind(sqlx::types::Json(&checks))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    get(db, tenant, id).await
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn delete(db: &Db, tenant: TenantId, role: Role, id: Uuid) -> Result<()> {
    role.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query("DELETE FROM sending_domains WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    if n == 0 { Err(Error::NotFound) } else { Ok(()) }
}

/// The operator's verification without DNS (`herald admin verify-domain`): adds the domain if
/// the workspace has not, and marks it verified.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn mark_verified(db: &Db, signer: &Signer, tenant: TenantId, domain: &str) -> Result<SendingDomain> {
    let domain = normalise_domain(domain)?;
    let row = insert(db, signer, tenant, &domain).await?;
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "UPDATE sending_domains SET verified_at = coalesce(verified_at, now()), verified_by = coalesce(verified_by, 'operator')
         WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(row.id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    get(db, tenant, row.id).await
}

/// The operator's exemption (`herald admin set-limits --own-identity-any-from`): mail through
/// the workspace's own SMTP identity may use any From address.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn set_own_identity_any_from(db: &Db, tenant: TenantId, allowed: bool) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query("UPDATE tenants SET own_identity_any_from = $2 WHERE id = $1")
        .bind(tenant)
        .bind(allowed)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    if n == 0 { Err(Error::NotFound) } else { Ok(()) }
}

/// Refuses a From address whose domain the workspace has not verified, unless the mail goes
/// through the workspace's own identity and an operator allowed any sender there.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn require_verified_sender(
    tx: &mut Tx,
    tenant: TenantId,
    own_identity: bool,
    from_email: &str,
) -> Result<()> {
    let candidates = candidate_domains(from_email);
    let (verified, any_from): (bool, bool) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM sending_domains
                        WHERE tenant_id = $1 AND domain = ANY($2) AND verified_at IS NOT NULL),
                own_identity_any_from
         FROM tenants WHERE id = $1",
    )
    .bind(tenant)
    .bind(&candidates)
    .fetch_one(&mut **tx)
    .await?;
    if verified || (own_identity && any_from) {
        return Ok(());
    }
    let domain = candidates.first().cloned().unwrap_or_default();
    Err(Error::invalid(format!(
        "{} cannot be the sender yet: {domain} is not a verified sending domain of this workspace. \
         An admin adds it in Settings → Domains and publishes the TXT record shown there.",
        crate::domain::truncate(from_email.trim(), 254)
    )))
}

/// What [`require_verified_sender`] would refuse, as a warning to show while the From address is
/// typed (an unverified domain was only reported at send time). `None` when it may send.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn sender_warning(db: &Db, tenant: TenantId, own_identity: bool, from_email: &str) -> Result<Option<String>> {
    if from_email.trim().is_empty() {
        return Ok(None);
    }
    let mut tx = db.tenant_tx(tenant).await?;
    let outcome = require_verified_sender(&mut tx, tenant, own_identity, from_email).await;
    tx.commit().await?;
    match outcome {
        Ok(()) => Ok(None),
        Err(Error::Invalid(why)) => Ok(Some(why.to_string())),
        Err(e) => Err(e),
    }
}

/// What mail From `from_email` through `identity` is signed with: the identity's own key, else
/// the key of the verified domain the address belongs to once its public half is published.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn dkim_signer(
    db: &Db,
    signer: &Signer,
    tenant: TenantId,
    identity: &SmtpIdentity,
    from_email: &str,
) -> Result<Option<DkimSigner>> {
    let key = match &identity.dkim {
        Some(own) => Some(own.clone()),
        None => dkim_key_for(db, signer, tenant, from_email).await?,
    };
    key.map(|k| DkimSigner::new(&k.selector, &k.domain, &k.private_key_pem)).transpose()
}

/// The DKIM key of the verified domain `from_email` belongs to, when its public key is
/// published.
pub(crate) async fn dkim_key_for(
    db: &Db,
    signer: &Signer,
    tenant: TenantId,
    from_email: &str,
) -> Result<Option<DkimKey>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let row: Option<(String, String, String)> = sqlx::query_as(
        "SELECT domain, dkim_selector, dkim_key_sealed FROM sending_domains
         WHERE tenant_id = $1 AND domain = ANY($2) AND verified_at IS NOT NULL AND dkim_verified_at IS NOT NULL
         ORDER BY length(domain) DESC LIMIT 1",
    )
    .bind(tenant)
    .bind(candidate_domains(from_email))
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    row.map(|(domain, selector, sealed)| {
        Ok(DkimKey { domain, selector, private_key_pem: sealing::open(signer, &sealed)? })
    })
    .transpose()
}

/// The domain as the settings page and the API show it: its records, each with the last check's
/// verdict when that check looked at this very record (the SPF include or the key may have
/// changed since).
pub fn view(d: SendingDomain, spf_include: &str) -> herald_types::SendingDomainView {
    let checked = d.last_check.clone().unwrap_or_default();
    let records = records(&d, spf_include)
        .into_iter()
        .map(|r| {
            let (status, detail) = match checked.iter().find(|c| c.record == r).map(|c| &c.status) {
                Some(RecordStatus::Found) => ("found", String::new()),
                Some(RecordStatus::Missing) => ("missing", String::new()),
                Some(RecordStatus::Wrong(why)) => ("wrong", why.clone()),
                Some(RecordStatus::Unknown(why)) => ("unknown", why.clone()),
                None => ("unchecked", String::new()),
            };
            herald_types::DnsRecordView {
                label: r.kind.label().into(),
                host: r.host,
                value: r.value,
                status: status.into(),
                detail,
            }
        })
        .collect();
    herald_types::SendingDomainView {
        id: d.id.to_string(),
        domain: d.domain,
        verified_by: d.verified_at.and(d.verified_by),
        signing: d.dkim_verified_at.is_some(),
        checked_at: d.checked_at.map(|t| t.to_rfc3339()),
        records,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain() -> SendingDomain {
        SendingDomain {
            id: Uuid::nil(),
            domain: "example.com".into(),
            verification_token: "abc".into(),
            dkim_selector: DKIM_SELECTOR.into(),
            dkim_public_key: "MIIBIjAN".into(),
            verified_at: None,
            verified_by: None,
            dkim_verified_at: None,
            checked_at: None,
            last_check: None,
            created_at: Utc::now(),
        }
    }

    fn record(kind: RecordKind) -> DnsRecord {
        records(&domain(), "spf.herald.test").into_iter().find(|r| r.kind == kind).expect("every kind has a record")
    }

    fn judged(kind: RecordKind, found: &[&str]) -> RecordStatus {
        let found: Vec<String> = found.iter().map(|s| s.to_string()).collect();
        judge(&record(kind), &found, "spf.herald.test")
    }

    #[test]
    fn the_records_to_publish() {
        let r = records(&domain(), "spf.herald.test");
        assert_eq!(r[0].host, "_herald-challenge.example.com");
        assert_eq!(r[0].value, "herald-verification=abc");
        assert_eq!(r[1].value, "v=spf1 include:spf.herald.test ~all");
        assert_eq!(r[2].host, "herald._domainkey.example.com");
        assert_eq!(r[2].value, "v=DKIM1; k=rsa; p=MIIBIjAN");
        assert_eq!(r[3].host, "_dmarc.example.com");
    }

    #[test]
    fn ownership_is_the_exact_token() {
        assert_eq!(judged(RecordKind::Ownership, &[]), RecordStatus::Missing);
        assert_eq!(judged(RecordKind::Ownership, &["google-site-verification=x"]), RecordStatus::Missing);
        assert!(matches!(judged(RecordKind::Ownership, &["herald-verification=abd"]), RecordStatus::Wrong(_)));
        assert_eq!(
            judged(RecordKind::Ownership, &["herald-verification=zzz", "herald-verification=abc"]),
            RecordStatus::Found
        );
    }

    #[test]
    fn spf_needs_one_record_with_the_include() {
        assert_eq!(judged(RecordKind::Spf, &["something else"]), RecordStatus::Missing);
        assert_eq!(judged(RecordKind::Spf, &["v=spf1 mx include:spf.herald.test -all"]), RecordStatus::Found);
        assert_eq!(judged(RecordKind::Spf, &["V=SPF1 +include:SPF.herald.test ~all"]), RecordStatus::Found);
        assert!(matches!(judged(RecordKind::Spf, &["v=spf1 include:other.test ~all"]), RecordStatus::Wrong(_)));
        assert!(matches!(
            judged(RecordKind::Spf, &["v=spf1 include:spf.herald.test ~all", "v=spf1 mx -all"]),
            RecordStatus::Wrong(_)
        ));
        // A longer name that merely starts with the include is not the include.
        assert!(matches!(
            judged(RecordKind::Spf, &["v=spf1 include:spf.herald.test.evil ~all"]),
            RecordStatus::Wrong(_)
        ));
    }

    #[test]
    fn dkim_compares_the_key_whatever_the_spacing() {
        assert_eq!(judged(RecordKind::Dkim, &[]), RecordStatus::Missing);
        assert_eq!(judged(RecordKind::Dkim, &["v=DKIM1;k=rsa;  p=MIIB IjAN"]), RecordStatus::Found);
        assert!(matches!(judged(RecordKind::Dkim, &["v=DKIM1; k=rsa; p=MIIBOTHER"]), RecordStatus::Wrong(_)));
    }

    #[test]
    fn dmarc_needs_a_policy() {
        assert_eq!(judged(RecordKind::Dmarc, &[]), RecordStatus::Missing);
        assert_eq!(judged(RecordKind::Dmarc, &["v=DMARC1; p=reject"]), RecordStatus::Found);
        assert!(matches!(judged(RecordKind::Dmarc, &["v=DMARC1; rua=mailto:x@y.z"]), RecordStatus::Wrong(_)));
        assert!(matches!(judged(RecordKind::Dmarc, &["hello"]), RecordStatus::Wrong(_)));
    }

    #[test]
    fn domains_are_normalised_or_refused() -> Result<()> {
        assert_eq!(normalise_domain(" News.Example.COM. ")?, "news.example.com");
        for bad in ["", "localhost", "exa mple.com", "-x.com", "x..com", "127.0.0.1", "a@b.com", "x_y.com"] {
            assert!(normalise_domain(bad).is_err(), "{bad:?} must be refused");
        }
        Ok(())
    }

    #[test]
    fn a_sender_matches_its_domain_and_parents_but_not_the_suffix_alone() {
        assert_eq!(candidate_domains("a@News.Example.com"), vec!["news.example.com", "example.com"]);
        assert_eq!(candidate_domains("a@example.com"), vec!["example.com"]);
        assert!(candidate_domains("nobody").is_empty());
    }

    #[test]
    fn a_generated_key_signs_and_its_public_half_is_published() -> Result<()> {
        let (private, public) = key_pair()?;
        DkimSigner::new(DKIM_SELECTOR, "example.com", &private)?;
        let der = B64.decode(&public).map_err(|e| Error::Unexpected(e.into()))?;
        assert!(der.len() > 256, "an RSA-2048 SubjectPublicKeyInfo");
        Ok(())
    }
}
