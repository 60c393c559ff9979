//! Every authenticated API request is counted against its key's rate, shared by every process
//! (a bucket in Postgres, [`herald_engine::sending::rate::take_one`]), and answered with the
//! IETF `RateLimit-Policy` and `RateLimit` header fields
//! (draft-ietf-httpapi-ratelimit-headers): the policy (`q` requests per `w` seconds) and what
//! is left (`r` requests, full again in `t` seconds). Past the rate: 429 with `Retry-After`.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use herald_engine::sending::rate;

use super::{ApiFailure, authenticate};
use crate::startup::ServerState;

/// The policy's name in both header fields.
const POLICY: &str = "per-key";

pub async fn meter(State(s): State<ServerState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let caller = match authenticate(&parts, &s).await {
        Ok(c) => c,
        Err(refused) => return refused.into_response(),
    };
    let per_minute = s.api_requests_per_minute.max(1);
    let bucket = format!("api-key:{}", caller.key_id);
    let allowance = match rate::take_one(&s.app.db, &bucket, f64::from(per_minute) / 60.0, per_minute).await {
        Ok(a) => a,
        Err(e) => return ApiFailure::from(e).into_response(),
    };
    let mut res = if allowance.allowed {
        parts.extensions.insert(caller);
        next.run(Request::from_parts(parts, body)).await
    } else {
        let mut res = ApiFailure::from(herald_engine::Error::RateLimited).into_response();
        let wait = allowance.retry_after.as_secs_f64().ceil().max(1.0) as u64;
        res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait));
        res
    };
    let policy = format!("\"{POLICY}\";q={per_minute};w=60");
    let left = format!("\"{POLICY}\";r={};t={}", allowance.remaining, allowance.reset.as_secs_f64().ceil() as u64);
    for (name, value) in [("ratelimit-policy", policy), ("ratelimit", left)] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            res.headers_mut().insert(name, v);
        }
    }
    res
}
