//! A campaign's web version: `{{ web_version_url }}` in a mail ("View in your
//! browser", in the block editor's starter footer) is a signed link to that reader's own copy,
//! rendered again from the campaign as stored, with their name, fields and unsubscribe link.
//!
//! The token names the workspace, the campaign and the reader, signed with the server's key for
//! this purpose only, so it cannot be forged or used as another kind of link. A reader erased
//! since, or a campaign deleted, is a 404. An A/B test's reader sees the main version.
//!
//! Link scanners (Safe Links, Mimecast) open every link of every message, so a campaign to a
//! company is opened here thousands of times in minutes: the compiled campaign (the MJML
//! render and the template parse) is kept per campaign version, and each hit only renders.

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use super::preview::load_context;
use super::store;
use crate::audience::subscribe::campaign_unsubscribe_url;
use crate::domain::{CampaignId, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::infra::tokens::Signer;
use crate::sending::message::{CompiledCampaign, MessageContext, Recipient};
use crate::sending::template_sandbox::Turn;

/// Compiled campaigns by (campaign, last change): a sent campaign does not change, and an edit
/// makes a new key.
pub struct CompiledCache(quick_cache::sync::Cache<(CampaignId, chrono::DateTime<chrono::Utc>), Arc<CompiledCampaign>>);

impl Default for CompiledCache {
    fn default() -> Self {
        CompiledCache(quick_cache::sync::Cache::new(64))
    }
}

const PURPOSE: &str = "web-version";

#[derive(Serialize, Deserialize)]
struct Claim {
    t: TenantId,
    c: CampaignId,
    r: i64,
}

/// The reader's web version of the campaign.
pub fn url(signer: &Signer, base_url: &str, tenant: TenantId, campaign: CampaignId, reader: i64) -> String {
    let token = signer.sign(PURPOSE, None, &Claim { t: tenant, c: campaign, r: reader });
    format!("{}/v/{token}", base_url.trim_end_matches('/'))
}

/// The HTML of the copy `token` names, or `NotFound` for a token that is not one (forged,
/// truncated, another kind) or names what no longer exists.
#[tracing::instrument(skip_all)]
pub async fn render(db: &Db, signer: &Signer, base_url: &str, token: &str) -> Result<String> {
    let claim: Claim = signer.verify(PURPOSE, token).map_err(|_| Error::NotFound)?;
    let campaign = store::get(db, claim.t, claim.c).await?;
    // The reader the link names, or the one it was merged into since (same mailbox): links in
    // mail sent before the merge keep working.
    let (workspace, reader) = load_context(db, claim.t, Some(claim.r)).await?;
    let reader_id = reader.id.unwrap_or(claim.r);
    // One list: leaving that list, as the mail's own link does; several: leaving them all.
    let list = if campaign.list_ids.len() == 1 && campaign.segment_ids.is_empty() {
        campaign.list_ids.first().copied()
    } else {
        None
    };
    let unsubscribe = campaign_unsubscribe_url(signer, base_url, claim.t, reader_id, list, Some(campaign.id));
    let this = url(signer, base_url, claim.t, campaign.id, reader_id);
    let cache = db.shared::<CompiledCache>();
    let key = (campaign.id, campaign.updated_at);
    let compiled = match cache.0.get(&key) {
        Some(compiled) => compiled,
        None => {
            let compiled = CompiledCampaign::compile(&store::content(&campaign), &workspace, Turn::request(claim.t))
                .await?
                .map_err(|e| Error::Unexpected(anyhow::anyhow!("campaign {} does not compile: {e}", campaign.id)))?;
            let compiled = Arc::new(compiled);
            cache.0.insert(key, compiled.clone());
            compiled
        }
    };
    let recipient = Recipient { email: &reader.email, name: &reader.name, attributes: &reader.attributes };
    let ctx = MessageContext { unsubscribe_url: &unsubscribe, web_version_url: &this };
    compiled.render(&recipient, &ctx).await?.map(|rendered| rendered.html).map_err(|e| {
        Error::Unexpected(anyhow::anyhow!("the web version of campaign {} did not render: {e}", campaign.id))
    })
}
