//! One reader's campaign message, from the campaign to the bytes on the wire: the unsubscribe
//! link, the personalised parts (rendered a batch at a time in the template sandbox), tracked
//! links and the open pixel, layout and text version, headers, MIME and DKIM.
//!
//! Nothing here touches the database: delivery registers a campaign's tracked links first
//! ([`crate::tracking::links::LinkRegistry`]) and passes their ids in. The send benchmark's
//! no-database ceiling (`herald bench send`) composes with this same code, so the ceiling it
//! reports is the one of the engine's own work.

use serde_json::Value;

use super::store::{Campaign, TrackingMode};
use crate::audience::subscribe::campaign_unsubscribe_url;
use crate::domain::{ListId, TenantId};
use crate::error::Result;
use crate::infra::tokens::Signer;
use crate::sending::message::{
    self, CompiledCampaign, DkimSigner, Envelope, MessageContext, Recipient, RenderedBody, TemplateError,
};
use crate::tracking::links;
use crate::tracking::{Target, TrackingKeys, WorkspaceMac};

/// One reader's personalised parts, or why they could not be rendered.
pub type RenderedParts = std::result::Result<RenderedBody, TemplateError>;

/// The reader a message goes to.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    pub id: i64,
    pub email: &'a str,
    pub name: &'a str,
    /// Custom attributes (a JSON object).
    pub attributes: &'a Value,
    /// This reader's data for a recurring edition, or the event that let them into an automation.
    pub feed: Option<&'a Value>,
    /// An automation step's run number (0 for a campaign): a reader who goes through an
    /// automation again gets a new Message-ID, so receivers do not drop it as a duplicate.
    pub entry: i32,
    /// The reader id the Message-ID names when it is not `id` (`sends.message_reader_id`): a
    /// row that was in flight when its reader was merged into this one may already have
    /// arrived under the merged reader's id, and a re-send must carry the same Message-ID so
    /// that the receiver drops it as a duplicate.
    pub message_reader: Option<i64>,
}

/// Everything of a campaign that is the same for every reader, prepared once per delivery loop.
pub struct Composer {
    compiled: CompiledCampaign,
    tenant: TenantId,
    campaign: Campaign,
    signer: Signer,
    /// Without a trailing slash.
    base_url: String,
    /// The one list a single-list campaign's unsubscribe link and `List-Id` name.
    list: Option<ListId>,
    /// `campaign-uuid.reader-id@domain` needs the sender's domain.
    domain: String,
    list_id: String,
    feedback_id: String,
    tracking: Option<Tracking>,
    dkim: Option<DkimSigner>,
}

struct Tracking {
    keys: TrackingKeys,
    mac: WorkspaceMac,
    anonymous: bool,
    /// `{base_url}/`: links to our own pages (unsubscribe) are never rewritten.
    own_prefix: String,
}

impl Composer {
    pub fn new(
        compiled: CompiledCampaign,
        tenant: TenantId,
        campaign: Campaign,
        workspace_slug: &str,
        signer: Signer,
        base_url: &str,
        dkim: Option<DkimSigner>,
    ) -> Self {
        let base_url = base_url.trim_end_matches('/').to_string();
        let domain =
            campaign.from_email.rsplit_once('@').map(|(_, d)| d.to_string()).unwrap_or_else(|| "herald".into());
        // A segment may bring a reader in through any list: leaving means leaving them all.
        let list = if campaign.list_ids.len() == 1 && campaign.segment_ids.is_empty() {
            campaign.list_ids.first().copied()
        } else {
            None
        };
        let tracking = (campaign.tracking != TrackingMode::Off).then(|| {
            let keys = TrackingKeys::new(&signer);
            Tracking {
                mac: keys.workspace(tenant),
                keys,
                anonymous: campaign.tracking == TrackingMode::Anonymous,
                own_prefix: format!("{base_url}/"),
            }
        });
        Composer {
            list_id: format!("{}.{workspace_slug}.{domain}", list.map_or(campaign.id.0, |l| l.0)),
            feedback_id: format!("{}:{workspace_slug}:herald", campaign.id.0.simple()),
            compiled,
            tenant,
            campaign,
            signer,
            base_url,
            list,
            domain,
            tracking,
            dkim,
        }
    }

    /// This reader's unsubscribe link for this campaign (one list: that list; several: all).
    pub fn unsubscribe_url(&self, reader: i64) -> String {
        campaign_unsubscribe_url(&self.signer, &self.base_url, self.tenant, reader, self.list, Some(self.campaign.id))
    }

    /// This reader's web version, when the mail links it (signing a token per message costs
    /// nothing otherwise).
    pub fn web_version_url(&self, reader: i64) -> String {
        if self.compiled.uses_web_version() {
            super::web_version::url(&self.signer, &self.base_url, self.tenant, self.campaign.id, reader)
        } else {
            String::new()
        }
    }

    /// Renders every reader of a batch in one round trip to the template sandbox, in order.
    /// `unsubscribe[i]` is reader i's [`Self::unsubscribe_url`].
    #[tracing::instrument(skip_all)]
    pub async fn render(&self, readers: &[Reader<'_>], unsubscribe: &[String]) -> crate::Result<Vec<RenderedParts>> {
        let recipients: Vec<Recipient<'_>> =
            readers.iter().map(|r| Recipient { email: r.email, name: r.name, attributes: r.attributes }).collect();
        let web: Vec<String> = readers.iter().map(|r| self.web_version_url(r.id)).collect();
        let contexts: Vec<MessageContext<'_>> = unsubscribe
            .iter()
            .zip(&web)
            .map(|(u, w)| MessageContext { unsubscribe_url: u, web_version_url: w })
            .collect();
        let batch: Vec<_> = readers.iter().enumerate().map(|(i, r)| (&recipients[i], &contexts[i], r.feed)).collect();
        Ok(self.compiled.render_bodies(&batch).await?)
    }

    /// The links of `parts` that tracking would rewrite (none when the campaign does not track):
    /// what has to be registered before [`Self::message`].
    pub fn trackable_urls(&self, parts: &RenderedBody) -> Vec<String> {
        match &self.tracking {
            Some(t) => links::trackable_urls(&parts.body, &t.own_prefix),
            None => Vec::new(),
        }
    }

    /// The message on the wire (dot-safe, signed when the identity has a key). `link_id` gives
    /// a registered link's id; a link without one is left as it is.
    pub fn message(
        &self,
        reader: &Reader<'_>,
        parts: RenderedBody,
        unsubscribe: String,
        link_id: impl Fn(&str) -> Option<i64>,
    ) -> Result<Vec<u8>> {
        let c = &self.campaign;
        // Rendering is done: the layout only needs the unsubscribe link (for the footer).
        let ctx = MessageContext { unsubscribe_url: &unsubscribe, web_version_url: "" };
        let rendered = match &self.tracking {
            None => self.compiled.assemble(parts, &ctx, None),
            Some(t) => {
                let mut parts = parts;
                let target =
                    Target { tenant: self.tenant, campaign: c.id.0, reader: (!t.anonymous).then_some(reader.id) };
                let base = &self.base_url;
                parts.body = links::rewrite(&parts.body, &t.own_prefix, |url| {
                    link_id(url).map(|id| format!("{base}/c/{}", t.keys.click_token(&t.mac, &target, id)))
                });
                let pixel = format!("{base}/o/{}", t.keys.open_token(&t.mac, &target));
                self.compiled.assemble(parts, &ctx, Some(&pixel))
            }
        };
        let envelope = Envelope {
            from_name: c.from_name.clone(),
            from_email: c.from_email.clone(),
            reply_to: (!c.reply_to.is_empty()).then(|| c.reply_to.clone()),
            to_email: reader.email.to_string(),
            to_name: reader.name.to_string(),
            message_id: match (reader.entry, reader.message_reader.unwrap_or(reader.id)) {
                (0, named) => format!("{}.{named}@{}", c.id, self.domain),
                (entry, named) => format!("{}.{named}.{entry}@{}", c.id, self.domain),
            },
            list_unsubscribe_url: unsubscribe,
            list_unsubscribe_mailto: None,
            list_id: self.list_id.clone(),
            feedback_id: self.feedback_id.clone(),
        };
        message::build_message(&rendered, &envelope, self.dkim.as_ref())
    }
}

/// A campaign's composers, one per A/B test version (one without a test): each claimed row is
/// composed as the version its send-log row names.
pub struct Versions(Vec<Composer>);

impl Versions {
    /// `composers[v]` composes version `v`; at least one.
    pub fn new(composers: Vec<Composer>) -> Self {
        assert!(!composers.is_empty(), "a campaign has at least its own version");
        Versions(composers)
    }

    fn index(&self, variant: Option<i16>) -> usize {
        variant.map_or(0, |v| v.max(0) as usize).min(self.0.len() - 1)
    }

    /// The composer of a row's version (none: the campaign's own).
    pub fn of(&self, variant: Option<i16>) -> &Composer {
        &self.0[self.index(variant)]
    }

    /// [`Composer::render`] for a batch whose rows may be of several versions: one sandbox round
    /// trip per version present, the results in the batch's order.
    #[tracing::instrument(skip_all)]
    pub async fn render(
        &self,
        readers: &[Reader<'_>],
        variants: &[Option<i16>],
        unsubscribe: &[String],
    ) -> crate::Result<Vec<RenderedParts>> {
        if self.0.len() == 1 {
            return self.0[0].render(readers, unsubscribe).await;
        }
        let mut out: Vec<Option<RenderedParts>> = (0..readers.len()).map(|_| None).collect();
        for (v, composer) in self.0.iter().enumerate() {
            let rows: Vec<usize> = (0..readers.len()).filter(|&i| self.index(variants[i]) == v).collect();
            if rows.is_empty() {
                continue;
            }
            let batch: Vec<Reader<'_>> = rows.iter().map(|&i| readers[i]).collect();
            let urls: Vec<String> = rows.iter().map(|&i| unsubscribe[i].clone()).collect();
            for (i, parts) in rows.into_iter().zip(composer.render(&batch, &urls).await?) {
                out[i] = Some(parts);
            }
        }
        out.into_iter()
            .map(|p| p.ok_or_else(|| crate::Error::Unexpected(anyhow::anyhow!("a row of the batch was not rendered"))))
            .collect()
    }
}
