//! The `Idempotency-Key` header on the API's POST routes (see [`herald_engine::api_requests`]):
//! a client that retries after a lost reply gets the first answer back, marked
//! `Idempotent-Replayed: true`, and the request does not run again.
//!
//! The request runs in its own task, so a client that hangs up mid-request (the usual reason to
//! retry) does not cancel it between doing its work and storing its answer.

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use herald_engine::api_keys::ApiCaller;
use herald_engine::api_requests::{self, Claim, StoredAnswer};
use sha2::{Digest, Sha256};

use super::ApiFailure;
use crate::startup::ServerState;

pub const HEADER: &str = "idempotency-key";
pub const REPLAYED: &str = "idempotent-replayed";

/// Requests and answers read whole are bounded by the server's general body limit.
const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// How long a copy of a running request waits for its answer before saying it is still running.
const WAIT_FOR_RUNNING: Duration = Duration::from_secs(10);

/// How a POST route treats the `Idempotency-Key` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// The first answer is stored and replayed by [`honour_key`].
    Stored,
    /// The handler keeps keys itself, in the transaction that does its work (stronger than
    /// [`Keys::Stored`]: no gap when the process dies mid-request).
    Handler,
    /// A read sent as a POST for its body: nothing to repeat or protect.
    Read,
}

/// Middleware on each [`Keys::Stored`] route.
pub async fn honour_key(State(s): State<ServerState>, req: Request, next: Next) -> Response {
    let Some(key) = req.headers().get(HEADER) else {
        return next.run(req).await;
    };
    let key = match key.to_str().map_err(|_| ()).and_then(|k| api_requests::check_key(k).map_err(|_| ())) {
        Ok(k) => k.to_owned(),
        Err(()) => {
            return ApiFailure::from(herald_engine::Error::Invalid(herald_types::Invalid::field(
                "Idempotency-Key",
                "The Idempotency-Key must be 1–255 printable ASCII characters.",
            )))
            .into_response();
        }
    };
    let (mut parts, body) = req.into_parts();
    // The key belongs to the caller's workspace: authenticate (and check the route's access)
    // first. The handler's own `ApiCaller` takes this one from the extensions.
    let caller = match ApiCaller::from_request_parts(&mut parts, &s).await {
        Ok(c) => c,
        Err(refused) => return refused.into_response(),
    };
    parts.extensions.insert(caller.clone());
    let Ok(body) = axum::body::to_bytes(body, BODY_LIMIT).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let fingerprint = fingerprint(&parts, &body);
    let started = Instant::now();
    loop {
        let claim = match api_requests::claim(&s.app.db, caller.tenant, &key, &fingerprint).await {
            Ok(c) => c,
            Err(e) => return ApiFailure::from(e).into_response(),
        };
        match claim {
            Claim::Claimed => break,
            Claim::Replay(answer) => return replay(answer),
            Claim::Running if started.elapsed() < WAIT_FOR_RUNNING => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Claim::Running => {
                return ApiFailure::from(herald_engine::Error::Busy {
                    message:
                        "The first request with this Idempotency-Key is still running; retry shortly to get its answer."
                            .into(),
                    retry_after_secs: 2,
                })
                .into_response();
            }
            Claim::Unfinished => {
                return ApiFailure::from(herald_engine::Error::Conflict(
                    "The first request with this Idempotency-Key never finished (the server stopped while running it), \
                     so whether it took effect is unknown. Check, then use a new key."
                        .into(),
                ))
                .into_response();
            }
        }
    }
    let req = Request::from_parts(parts, Body::from(body));
    let db = s.app.db.clone();
    let tenant = caller.tenant;
    let run = tokio::spawn(async move {
        let res = next.run(req).await;
        let (parts, body) = res.into_parts();
        let body = axum::body::to_bytes(body, BODY_LIMIT).await.unwrap_or_else(|_| Bytes::new());
        let kept = if matches!(parts.status, StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE) {
            api_requests::release(&db, tenant, &key).await
        } else {
            let answer = StoredAnswer {
                status: parts.status.as_u16(),
                content_type: content_type(&parts.headers),
                body: body.to_vec(),
            };
            api_requests::answer(&db, tenant, &key, &answer).await
        };
        // The request's work is done either way; a key left without its answer reads as
        // unfinished to the next copy, which is told so instead of running again.
        if let Err(e) = kept {
            tracing::error!(error = ?e, "could not keep the answer to an Idempotency-Key");
        }
        Response::from_parts(parts, Body::from(body))
    });
    match run.await {
        Ok(res) => res,
        Err(e) => {
            tracing::error!(error = ?e, "an API request with an Idempotency-Key panicked");
            ApiFailure::from(herald_engine::Error::Unexpected(anyhow::anyhow!("request task failed"))).into_response()
        }
    }
}

fn replay(answer: StoredAnswer) -> Response {
    let mut res = Response::new(Body::from(answer.body));
    *res.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Some(v) = answer.content_type.and_then(|ct| HeaderValue::from_str(&ct).ok()) {
        res.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    res.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
    res
}

fn content_type(headers: &HeaderMap) -> Option<String> {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// What makes two requests the same: method, path and query, and the body as its content means
/// it (JSON with its keys sorted and spacing dropped; multipart with its random boundary
/// replaced), so a client's retry that serialises the same thing differently still matches.
fn fingerprint(parts: &axum::http::request::Parts, body: &Bytes) -> String {
    let mut h = Sha256::new();
    h.update(parts.method.as_str());
    h.update(b" ");
    h.update(parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or_default());
    h.update(b"\n");
    let ct = content_type(&parts.headers).unwrap_or_default();
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        h.update(canonical_json(&json).as_bytes());
    } else if let Some(boundary) = multipart_boundary(&ct) {
        let marker = format!("--{boundary}");
        let text = body.as_ref();
        let mut rest = text;
        while let Some(at) = find(rest, marker.as_bytes()) {
            h.update(&rest[..at]);
            h.update(b"--boundary");
            rest = &rest[at + marker.len()..];
        }
        h.update(rest);
    } else {
        h.update(body);
    }
    hex::encode(h.finalize())
}

fn multipart_boundary(content_type: &str) -> Option<&str> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (name, value) = p.split_once('=')?;
        name.trim().eq_ignore_ascii_case("boundary").then(|| value.trim().trim_matches('"'))
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// JSON with object keys sorted at every depth and no spacing.
fn canonical_json(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> =
                keys.into_iter().map(|k| format!("{}:{}", Value::String(k.clone()), canonical_json(&map[k]))).collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical_json).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(ct: &str) -> axum::http::request::Parts {
        let (parts, ()) =
            Request::post("/api/v1/lists?x=1").header(header::CONTENT_TYPE, ct).body(()).expect("request").into_parts();
        parts
    }

    #[test]
    fn the_same_json_written_differently_is_the_same_request() {
        let a = fingerprint(&parts("application/json"), &Bytes::from(r#"{"name":"A","tags":[{"b":1,"a":2}]}"#));
        let b = fingerprint(
            &parts("application/json"),
            &Bytes::from("{ \"tags\": [ {\"a\":2, \"b\":1} ],\n \"name\": \"A\" }"),
        );
        let c = fingerprint(&parts("application/json"), &Bytes::from(r#"{"name":"B","tags":[{"b":1,"a":2}]}"#));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn a_multipart_retry_with_a_new_boundary_is_the_same_request() {
        let body = |b: &str| {
            Bytes::from(format!("--{b}\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nPNG\r\n--{b}--\r\n"))
        };
        let a = fingerprint(&parts("multipart/form-data; boundary=xyz1"), &body("xyz1"));
        let b = fingerprint(&parts("multipart/form-data; boundary=\"q9\""), &body("q9"));
        assert_eq!(a, b);
    }
}
