//! Per-reader data fetched from the author's URL for an edition with `feed = url`: one GET per
//! reader, `{email}` and `{reader_id}` replaced in the URL, a few at a time per delivery loop,
//! each with a timeout. 200 with a JSON object is the data; 404, 204, `null` or `{}` mean "no
//! data for this edition" (the reader is skipped, not sent an empty email); anything else is
//! retried later like a 4xx from SMTP.
//!
//! The URL is the author's choice, so it goes through the egress policy ([`crate::infra::egress`]):
//! addresses inside the operator's network are refused, redirects included, and the reasons the
//! author sees say nothing about what is there.

use futures::StreamExt;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// The skip reason for an edition's reader without data (the editions report counts it).
pub(crate) const NO_DATA: &str = "no data for this edition";

/// Requests in flight per delivery loop.
pub const CONCURRENCY: usize = 8;
pub const TIMEOUT: Duration = Duration::from_secs(10);
const MAX_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub enum Fetched {
    Data(Value),
    NoData,
    /// Try again later; the text says why.
    Failed(String),
}

pub fn client(egress: &crate::infra::egress::Egress) -> reqwest::Client {
    egress.http_client(TIMEOUT, 3, "Herald feed fetcher")
}

/// The URL for one reader.
pub fn url_for(template: &str, email: &str, reader_id: i64) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(email.as_bytes()).collect();
    template.trim().replace("{email}", &encoded).replace("{reader_id}", &reader_id.to_string())
}

/// `client` must come from [`client`] (it applies the egress policy to every name it resolves);
/// a URL naming an address directly is checked here.
#[tracing::instrument(skip_all)]
pub async fn fetch(client: &reqwest::Client, egress: &crate::infra::egress::Egress, url: &str) -> Fetched {
    const UNREACHABLE: &str = "the feed URL could not be reached";
    match url::Url::parse(url) {
        Ok(u) if egress.permits_url(&u) => {}
        _ => return Fetched::Failed(UNREACHABLE.into()),
    }
    let mut res = match client.get(url).header("accept", "application/json").send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => {
            return Fetched::Failed(format!("the feed URL did not answer within {}s", TIMEOUT.as_secs()));
        }
        Err(_) => return Fetched::Failed(UNREACHABLE.into()),
    };
    match res.status().as_u16() {
        404 | 204 => return Fetched::NoData,
        200 => {}
        // Which status is not the author's business past "not 200": it would map the inside.
        _ => return Fetched::Failed("the feed URL did not answer 200 with JSON".into()),
    }
    // Read while counting: a huge answer is refused at 256 KB, not after it is all in memory.
    let mut body = Vec::new();
    loop {
        match res.chunk().await {
            Ok(Some(chunk)) if body.len() + chunk.len() <= MAX_BYTES => body.extend_from_slice(&chunk),
            Ok(Some(_)) => return Fetched::Failed("the feed's answer is larger than 256 KB".into()),
            Ok(None) => break,
            Err(_) => return Fetched::Failed("the feed's answer was cut off".into()),
        }
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Null) => Fetched::NoData,
        Ok(Value::Object(m)) if m.is_empty() => Fetched::NoData,
        Ok(v @ Value::Object(_)) => Fetched::Data(v),
        Ok(_) => Fetched::Failed("the feed's answer is not a JSON object".into()),
        Err(_) => Fetched::Failed("the feed's answer is not JSON".into()),
    }
}

/// Fetches for several readers at once (`CONCURRENCY` in flight); keyed by the caller's id.
#[tracing::instrument(skip_all)]
pub async fn fetch_all(
    client: &reqwest::Client,
    egress: &crate::infra::egress::Egress,
    requests: Vec<(i64, String)>,
) -> HashMap<i64, Fetched> {
    futures::stream::iter(requests)
        .map(|(key, url)| async move { (key, fetch(client, egress, &url).await) })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_in_the_reader() {
        assert_eq!(
            url_for("https://x.test/feed?e={email}&id={reader_id}", "a+b@c.test", 7),
            "https://x.test/feed?e=a%2Bb%40c.test&id=7"
        );
    }
}
