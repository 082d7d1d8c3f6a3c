//! The run console: one page and its script and styles, embedded in the
//! binary (no CDN: it works offline). It holds no data of its own; it
//! reads and drives the run API (`api.rs`) with the same credentials.

use super::ServerState;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/app.js");
const STYLE: &str = include_str!("console/app.css");
const ICON: &str = include_str!("console/icon.svg");

/// Scripts and styles from this server only, no inline code, no framing:
/// a workflow's text or a run's output shown on the page cannot run.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page, with the words the script shows run states and triggers in
/// (a data block, not code: the policy runs no inline script), so that a
/// new state or trigger needs no change to the script.
static PAGE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    use crate::engine::{RunStatus, RunTrigger};
    let mut statuses: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
    // Shown for a queued or running run whose process is gone.
    statuses.push("interrupted");
    let vocabulary = serde_json::json!({
        "statuses": statuses,
        "triggers": RunTrigger::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
    });
    INDEX.replace("{{vocabulary}}", &vocabulary.to_string())
});

pub(super) fn routes() -> Router<Arc<ServerState>> {
    Router::new()
        .route(
            "/console",
            get(|| async { asset(&PAGE, "text/html; charset=utf-8") }),
        )
        .route(
            "/console/",
            get(|| async { asset(&PAGE, "text/html; charset=utf-8") }),
        )
        .route(
            "/console/app.js",
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/console/app.css",
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        )
        .route(
            "/console/icon.svg",
            get(|| async { asset(ICON, "image/svg+xml") }),
        )
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_is_small_and_self_contained() {
        let all = [INDEX, SCRIPT, STYLE, ICON].concat();
        // Well under the 200 KB target even before compression.
        assert!(all.len() < 200 * 1024, "{} bytes", all.len());
        for far in ["http://", "https://", "//cdn", "@import"] {
            let found = all
                .lines()
                .find(|l| l.contains(far) && !l.contains("www.w3.org/2000/svg"));
            assert!(
                found.is_none(),
                "the console loads nothing from elsewhere: {found:?}"
            );
        }
    }
}
