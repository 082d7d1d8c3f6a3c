//! Reading a request and answering in the API's shape: bearer tokens and
//! HMAC signatures, bodies and query strings, errors as JSON.

use super::ServerState;
use crate::format::inputs;
use axum::body::{to_bytes, Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

/// Whether `headers` carry `Authorization: Bearer <token>` (compared in
/// constant time).
pub fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let given = bearer(headers).unwrap_or("");
    constant_time_eq(given.as_bytes(), token.as_bytes())
}

/// The token of `Authorization: Bearer <token>`, when the header has one.
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme is case-insensitive (RFC 9110 §11.1).
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
}

pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks `X-Hub-Signature-256: sha256=<hex>` (or `X-Signature: <hex>`) of the raw body.
pub(super) fn signature_ok(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    let given = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("sha256="))
        .or_else(|| headers.get("x-signature").and_then(|v| v.to_str().ok()));
    let Some(given) = given else { return false };
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    let expected = hex(&mac.finalize().into_bytes());
    constant_time_eq(
        expected.as_bytes(),
        given.trim().to_ascii_lowercase().as_bytes(),
    )
}

/// A request's body within the server's size and time limits: a declared
/// length over the limit is answered at once, not waited for, and a body
/// sent too slowly does not hold the connection for ever.
pub(super) async fn read_body(
    s: &ServerState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, Response> {
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {} bytes", s.config.max_body),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > s.config.max_body as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(s.config.request_timeout, to_bytes(body, s.config.max_body)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(_)) => Err(too_large()),
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body did not arrive within {}s",
                s.config.request_timeout.as_secs()
            ),
        )),
    }
}

/// `400` for inputs that do not fit: every problem, and each by input.
pub(super) fn bad_inputs(errs: &[inputs::InputError]) -> Response {
    let fields: Vec<Value> = errs
        .iter()
        .map(|e| json!({"input": e.name, "message": e.message, "hint": e.request_hint()}))
        .collect();
    let msg = errs
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": msg, "fields": fields})),
    )
        .into_response()
}

/// Waits for a store commit's answer.
pub(super) async fn committed(
    rx: tokio::sync::oneshot::Receiver<Result<(), crate::store::StoreError>>,
) -> Result<(), crate::store::StoreError> {
    rx.await.map_err(|_| crate::store::StoreError::Closed)?
}

pub(super) fn url_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

pub(super) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_and_paths() {
        let mut h = HeaderMap::new();
        // echo -n '{"a":1}' | openssl dgst -sha256 -hmac s3cret
        h.insert(
            "x-hub-signature-256",
            "sha256=d0b9e2ba0c1a9b5d7f5c7a1f2ed60b9a5e0c0d6b6f0a7b0e7d8b6cf0d3f5f6a9"
                .parse()
                .unwrap(),
        );
        assert!(
            !signature_ok("s3cret", &h, b"{\"a\":1}"),
            "a wrong signature is refused"
        );
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(b"{\"a\":1}");
        let good = format!("sha256={}", hex(&mac.finalize().into_bytes()));
        h.insert("x-hub-signature-256", good.parse().unwrap());
        assert!(signature_ok("s3cret", &h, b"{\"a\":1}"));
        assert!(!signature_ok("s3cret", &h, b"{\"a\":2}"));
        assert!(!signature_ok("s3cret", &HeaderMap::new(), b""));
        let v = json!({"a": {"b": [1, {"c": "x"}]}});
        assert_eq!(
            super::super::routes::dotted(&v, "payload.a.b.1.c"),
            Some(&json!("x"))
        );
        assert_eq!(
            url_pairs("q=a+b%20c&async=true"),
            vec![
                ("q".into(), "a b c".into()),
                ("async".into(), "true".into())
            ]
        );
    }
}
