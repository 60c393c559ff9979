//! A sending domain as the settings page and the API show it: the DNS records to publish, each
//! with what the last check found.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SendingDomainView {
    pub id: String,
    pub domain: String,
    /// "dns" or "operator" once verified.
    pub verified_by: Option<String>,
    /// The DKIM record was found with Herald's key: mail From this domain is signed.
    pub signing: bool,
    /// RFC 3339, when the records were last checked.
    pub checked_at: Option<String>,
    pub records: Vec<DnsRecordView>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct DnsRecordView {
    pub label: String,
    pub host: String,
    pub value: String,
    /// found, missing, wrong, unknown or unchecked.
    pub status: String,
    pub detail: String,
}
