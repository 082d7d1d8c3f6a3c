//! `/mcp` under `marktoflow serve`: the MCP server over Streamable HTTP,
//! behind a bearer token when one is configured.

use super::McpServer;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

/// A router serving `server` at `/mcp`. With `token`, every request must
/// carry `Authorization: Bearer <token>` (compared in constant time).
/// `allowed_hosts` are the `Host` values accepted (DNS-rebinding guard).
pub fn mcp_router(server: McpServer, token: Option<String>, allowed_hosts: Vec<String>) -> Router {
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts = allowed_hosts;
    // Plain JSON answers for calls that send no progress in between.
    config.json_response = true;
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = Router::new().nest_service("/mcp", service);
    match token {
        None => router,
        Some(token) => {
            let token = Arc::new(token);
            router.layer(axum::middleware::from_fn(
                move |req: Request<Body>, next: Next| {
                    let token = token.clone();
                    async move {
                        if crate::serve::bearer_matches(req.headers(), &token) {
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
