//! Link rewriting. Each distinct http(s) URL in a campaign's rendered body is registered once
//! in `campaign_links`; the message carries `/c/{token}` instead, and the click endpoint
//! redirects only to the registered URL.

use std::collections::HashMap;

use crate::domain::{CampaignId, TenantId};
use crate::error::Result;
use crate::infra::db::Db;

/// Personalised URLs (one per reader) would register a link per reader; past this many links a
/// campaign's further URLs are left as they are.
pub const MAX_LINKS_PER_CAMPAIGN: usize = 500;

/// A delivery loop's view of its campaign's registered links.
#[derive(Debug, Default)]
pub struct LinkRegistry {
    ids: HashMap<String, i64>,
    full: bool,
}

impl LinkRegistry {
    /// Registers the URLs not seen yet (one round trip for all of them) and returns nothing;
    /// look ids up with [`LinkRegistry::id`].
    #[tracing::instrument(skip_all, fields(%tenant))]
    pub async fn ensure(&mut self, db: &Db, tenant: TenantId, campaign: CampaignId, urls: &[String]) -> Result<()> {
        let missing: Vec<&String> = urls.iter().filter(|u| !self.ids.contains_key(*u)).collect();
        if missing.is_empty() || self.full {
            return Ok(());
        }
        let mut tx = db.tenant_tx(tenant).await?;
        let count: i64 =
            sqlx::query_scalar("SELECT count(*) FROM campaign_links WHERE tenant_id = $1 AND campaign_id = $2")
                .bind(tenant)
                .bind(campaign)
                .fetch_one(&mut *tx)
                .await?;
        let room = MAX_LINKS_PER_CAMPAIGN.saturating_sub(count as usize);
        if missing.len() > room {
            self.full = true;
        }
        let take: Vec<&String> = missing.into_iter().take(room).collect();
        // The no-op update makes RETURNING yield rows registered earlier (or by another loop).
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "INSERT INTO campaign_links (tenant_id, campaign_id, url) SELECT $1, $2, u FROM unnest($3::text[]) AS u
             ON CONFLICT (campaign_id, url) DO UPDATE SET url = excluded.url
             RETURNING url, id",
        )
        .bind(tenant)
        .bind(campaign)
        .bind(take.iter().map(|s| s.as_str()).collect::<Vec<_>>())
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        self.ids.extend(rows);
        Ok(())
    }

    pub fn id(&self, url: &str) -> Option<i64> {
        self.ids.get(url).copied()
    }
}

/// The http(s) link targets in `html` that should be tracked: not our own pages
/// (`own_prefix`, e.g. unsubscribe links), not marked `data-no-track`. Entity-decoded.
pub fn trackable_urls(html: &str, own_prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_href(html, |url, _| {
        if is_trackable(url, own_prefix) && !out.iter().any(|u| u == url) {
            out.push(url.to_string());
        }
    });
    out
}

/// Rewrites each trackable link for which `replacement` returns a URL.
pub fn rewrite(html: &str, own_prefix: &str, mut replacement: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(html.len() + 256);
    let mut copied = 0;
    for_each_href(html, |url, span| {
        if !is_trackable(url, own_prefix) {
            return;
        }
        if let Some(new) = replacement(url) {
            out.push_str(&html[copied..span.start]);
            out.push_str(&new.replace('&', "&amp;").replace('"', "&quot;"));
            copied = span.end;
        }
    });
    out.push_str(&html[copied..]);
    out
}

fn is_trackable(url: &str, own_prefix: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://"))
        && (own_prefix.is_empty() || !url.starts_with(own_prefix))
}

/// Calls `f(decoded_url, value_span)` for the `href` of every `<a>` tag, where the span is the
/// attribute value's bytes (inside the quotes).
fn for_each_href(html: &str, mut f: impl FnMut(&str, std::ops::Range<usize>)) {
    let bytes = html.as_bytes();
    let mut i = 0;
    while let Some(pos) = find_ci(bytes, b"<a", i) {
        let after = pos + 2;
        i = after;
        if !bytes.get(after).is_some_and(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let end = tag_end(bytes, after);
        let tag = &html[after..end];
        i = end;
        if find_ci(tag.as_bytes(), b"data-no-track", 0).is_some() {
            continue;
        }
        if let Some((start, stop)) = href_value(tag) {
            let raw = &tag[start..stop];
            let url = raw.replace("&amp;", "&");
            f(url.trim(), after + start..after + stop);
        }
    }
}

/// The first `n` (ASCII, any case) in `h` at or after `from`. Jumps between occurrences of its
/// first byte with `memchr` rather than comparing at every position: this runs over every
/// message's whole HTML.
fn find_ci(h: &[u8], n: &[u8], from: usize) -> Option<usize> {
    let (&first, _) = n.split_first()?;
    let hay = h.get(from..)?;
    memchr::memchr2_iter(first.to_ascii_lowercase(), first.to_ascii_uppercase(), hay)
        .map(|i| from + i)
        .find(|&i| h.get(i..i + n.len()).is_some_and(|w| w.eq_ignore_ascii_case(n)))
}

/// The index just past the `>` that ends the tag, honouring quotes.
fn tag_end(bytes: &[u8], from: usize) -> usize {
    let mut quote = None;
    for (k, &b) in bytes[from..].iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b'>' => return from + k + 1,
            None => {}
        }
    }
    bytes.len()
}

/// The byte range of a quoted `href` value in a tag's attribute text.
fn href_value(tag: &str) -> Option<(usize, usize)> {
    let b = tag.as_bytes();
    let mut from = 0;
    while let Some(p) = find_ci(b, b"href", from) {
        from = p + 4;
        // Must be a whole attribute name: preceded by whitespace.
        if p == 0 || !b[p - 1].is_ascii_whitespace() {
            continue;
        }
        let mut k = p + 4;
        while k < b.len() && b[k].is_ascii_whitespace() {
            k += 1;
        }
        if b.get(k) != Some(&b'=') {
            continue;
        }
        k += 1;
        while k < b.len() && b[k].is_ascii_whitespace() {
            k += 1;
        }
        let q = *b.get(k)?;
        if q != b'"' && q != b'\'' {
            let start = k;
            while k < b.len() && !b[k].is_ascii_whitespace() && b[k] != b'>' {
                k += 1;
            }
            return Some((start, k));
        }
        let start = k + 1;
        let stop = start + tag[start..].find(char::from(q))?;
        return Some((start, stop));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_rewrites_only_trackable_links() {
        let html = r#"<p><a href="https://a.example/x?y=1&amp;z=2">A</a> <A class="b" HREF='http://b.example/'>B</A>
            <a href="mailto:x@y.z">m</a> <a href="https://herald.test/u/tok">unsub</a>
            <a data-no-track href="https://c.example/">c</a> <abbr href="https://no.example/">x</abbr>
            <a href="https://a.example/x?y=1&amp;z=2">again</a></p>"#;
        let urls = trackable_urls(html, "https://herald.test/");
        assert_eq!(urls, vec!["https://a.example/x?y=1&z=2".to_string(), "http://b.example/".to_string()]);
        let out = rewrite(html, "https://herald.test/", |u| Some(format!("https://t.test/c/{}", u.len())));
        assert_eq!(out.matches("https://t.test/c/").count(), 3);
        assert!(
            out.contains("mailto:x@y.z")
                && out.contains("https://herald.test/u/tok")
                && out.contains("https://c.example/")
        );
        assert!(!out.contains("a.example") && !out.contains("b.example"));
        // Nothing outside href values changed.
        assert!(out.contains(r#"<A class="b" HREF='https://t.test/c/17'>B</A>"#));
    }

    #[test]
    fn leaves_html_untouched_without_replacements() {
        let html = "<a href=\"https://a.example/\">a</a><a href=https://b.example/>b</a><a";
        assert_eq!(rewrite(html, "", |_| None), html);
        assert_eq!(trackable_urls(html, "").len(), 2);
    }
}
