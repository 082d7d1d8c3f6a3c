//! `/mcp` under `marktoflow serve`: the MCP server over Streamable HTTP,
//! behind a bearer token when one is configured.

use super::server::McpOperator;
use super::McpServer;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use std::time::Duration;

/// How long an `/mcp` session may stay idle before it is closed.
pub const SESSION_IDLE: Duration = Duration::from_secs(60);

/// The most `/mcp` sessions open at once.
pub const MAX_SESSIONS: usize = 256;

/// A router serving `server` at `/mcp`. With `token`, every request must
/// carry `Authorization: Bearer <token>` (compared in constant time).
/// `allowed_hosts` are the `Host` values accepted (DNS-rebinding guard).
pub fn mcp_router(server: McpServer, token: Option<String>, allowed_hosts: Vec<String>) -> Router {
    let tenants = Arc::new(server.tenants().clone());
    let mut config = StreamableHttpServerConfig::default();
    // A page of another site may not drive the tools (as the run API
    // refuses it): on loopback, a request with an `Origin` must come from a
    // loopback page; one without (a non-browser client) passes.
    config.allowed_origins = allowed_hosts
        .iter()
        .flat_map(|h| {
            let h = if h.contains(':') {
                format!("[{h}]")
            } else {
                h.clone()
            };
            [format!("http://{h}:*"), format!("https://{h}:*")]
        })
        .collect();
    config.allowed_hosts = allowed_hosts;
    // Plain JSON answers for calls that send no progress in between.
    config.json_response = true;
    // Sessions nobody uses are dropped sooner than rmcp's 5 minutes, and a
    // session that never initializes after 10 s.
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    sessions.session_config.init_timeout = Some(Duration::from_secs(10));
    let sessions = Arc::new(sessions);
    let service = StreamableHttpService::new(move || Ok(server.clone()), sessions.clone(), config);
    // A request that would open a session past the cap is answered 503:
    // each session holds a worker and its buffers until it idles out.
    let router = Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(move |req: Request<Body>, next: Next| {
            let sessions = sessions.clone();
            async move {
                let opens = req.method() == axum::http::Method::POST
                    && !req.headers().contains_key("mcp-session-id");
                if opens && sessions.sessions.read().await.len() >= MAX_SESSIONS {
                    return (
                        StatusCode::SERVICE_UNAVAILABLE,
                        [(header::RETRY_AFTER, "60")],
                        format!("{MAX_SESSIONS} MCP sessions are open; close one (DELETE /mcp) or retry later"),
                    )
                        .into_response();
                }
                next.run(req).await
            }
        }));
    match token {
        None => router,
        Some(token) => {
            let token = Arc::new(token);
            router.layer(axum::middleware::from_fn(
                move |mut req: Request<Body>, next: Next| {
                    let token = token.clone();
                    let tenants = tenants.clone();
                    async move {
                        if crate::serve::bearer_matches(req.headers(), &token) {
                            req.extensions_mut().insert(McpOperator);
                            next.run(req).await
                        } else if tenants.granted(req.headers()).is_some() {
                            // A tenant's token: its calls are for its tenant.
                            next.run(req).await
                        } else {
                            (
                                StatusCode::UNAUTHORIZED,
                                [(header::WWW_AUTHENTICATE, "Bearer")],
                                "missing or invalid bearer token",
                            )
                                .into_response()
                        }
                    }
                },
            ))
        }
    }
}
