//! The one way the API pages a collection that grows without bound (readers, messages, the audit
//! log, suppressions, campaigns, imports, automation runs, webhook deliveries): `?cursor=&limit=`
//! in, `{"data": […], "next_cursor": "…"}` out, `next_cursor` absent on the last page.
//!
//! A cursor is the last item's place in the collection's order (its keyset), opaque to clients:
//! a page never skips or repeats an item while others are added before it, which offsets would.
//! Collections a workspace keeps few of (lists, tags, segments, templates, fields, identities,
//! domains, members) come whole.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// `?cursor=&limit=` on a paged collection.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct PageQuery {
    /// The previous page's `next_cursor`; leave out for the first page.
    pub cursor: Option<String>,
    /// How many items per page (each collection states its range and default).
    pub limit: Option<i64>,
}

impl PageQuery {
    /// The page size: `default` when absent, refused outside `1..=max` (a silent clamp would
    /// let a client believe it got what it asked for).
    pub fn limit(&self, default: i64, max: i64) -> Result<i64, herald_engine::Error> {
        match self.limit {
            None => Ok(default),
            Some(l) if (1..=max).contains(&l) => Ok(l),
            Some(_) => Err(herald_engine::Error::Invalid(herald_types::Invalid::field(
                "limit",
                format!("Ask for 1 to {max} items per page."),
            ))),
        }
    }

    /// The cursor's keyset, read by `parse` from the text [`Page::new`] encoded.
    pub fn after<K>(&self, parse: impl FnOnce(&str) -> Option<K>) -> Result<Option<K>, herald_engine::Error> {
        let Some(cursor) = self.cursor.as_deref().map(str::trim).filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        URL_SAFE_NO_PAD
            .decode(cursor)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .and_then(|text| text.strip_prefix(VERSION).map(str::to_owned))
            .and_then(|keyset| parse(&keyset))
            .map(Some)
            .ok_or_else(|| {
                herald_engine::Error::Invalid(herald_types::Invalid::field(
                    "cursor",
                    "Not a cursor this list gave out: pass a page's next_cursor as it is, or leave it out to start again.",
                ))
            })
    }
}

/// Cursors carry a version, so their keyset can change without old ones being misread.
const VERSION: &str = "1:";

/// One page of a collection.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    pub data: Vec<T>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// `fetched` holds up to `limit + 1` items in the collection's order: the extra one says a
    /// next page exists, and `keyset` writes the last shown item's place as the cursor.
    pub fn new(mut fetched: Vec<T>, limit: i64, keyset: impl FnOnce(&T) -> String) -> Self {
        let limit = usize::try_from(limit).unwrap_or(0);
        let more = fetched.len() > limit;
        fetched.truncate(limit);
        let next_cursor = more.then(|| fetched.last().map(|last| encode(&keyset(last)))).flatten();
        Self { data: fetched, next_cursor }
    }

    /// A page whose source already knows the next keyset (its own paging).
    pub fn with_next(data: Vec<T>, next: Option<String>) -> Self {
        Self { data, next_cursor: next.map(|k| encode(&k)) }
    }
}

fn encode(keyset: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{VERSION}{keyset}"))
}

/// A keyset of a time and a tie-breaking id, as `<RFC 3339>|<id>`.
pub fn time_and_id(at: DateTime<Utc>, id: impl std::fmt::Display) -> String {
    format!("{}|{id}", at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
}

/// Reads [`time_and_id`].
pub fn parse_time_and_id<I: std::str::FromStr>(keyset: &str) -> Option<(DateTime<Utc>, I)> {
    let (at, id) = keyset.split_once('|')?;
    Some((DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc), id.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_as_the_keyset_it_was_made_from() {
        let page = Page::new(vec![30i64, 20, 10], 2, |id| id.to_string());
        assert_eq!(page.data, vec![30, 20]);
        let next = PageQuery { cursor: page.next_cursor, limit: None };
        assert_eq!(next.after(|k| k.parse::<i64>().ok()).expect("a cursor"), Some(20));
        let last = Page::new(vec![10i64], 2, |id| id.to_string());
        assert_eq!(last.next_cursor, None);
    }

    #[test]
    fn a_forged_cursor_is_refused_by_name() {
        for forged in ["20", "not base64!", &URL_SAFE_NO_PAD.encode("2:20"), &URL_SAFE_NO_PAD.encode("1:x")] {
            let q = PageQuery { cursor: Some(forged.into()), limit: None };
            match q.after(|k| k.parse::<i64>().ok()) {
                Err(herald_engine::Error::Invalid(e)) => {
                    assert_eq!(e.errors[0].field.as_deref(), Some("cursor"), "{forged}")
                }
                other => panic!("{forged}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_time_keyset_keeps_its_microseconds() {
        let at = DateTime::parse_from_rfc3339("2026-11-29T10:00:00.123456Z").expect("time").with_timezone(&Utc);
        assert_eq!(parse_time_and_id::<i64>(&time_and_id(at, 7)), Some((at, 7)));
    }

    #[test]
    fn a_limit_outside_its_range_is_refused() {
        let q = |l| PageQuery { cursor: None, limit: Some(l) };
        assert_eq!(q(5).limit(100, 500).ok(), Some(5));
        assert!(q(0).limit(100, 500).is_err());
        assert!(q(501).limit(100, 500).is_err());
        assert_eq!(PageQuery::default().limit(100, 500).ok(), Some(100));
    }
}
