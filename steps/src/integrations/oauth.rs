//! OAuth 2 for integrations that need it (Google's): the tool's refresh
//! token exchanged for an access token at the service's token endpoint,
//! kept until shortly before it expires.

use super::decl::OAuthDecl;
use super::values::ToolValues;
use crate::core::action::Call;
use crate::core::error::ActionError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// (token URL, client id, refresh token).
type Grant = (String, String, String);

/// Access tokens by grant, with when to stop using them.
static TOKENS: Mutex<Option<HashMap<Grant, (String, Instant)>>> = Mutex::new(None);

/// A valid access token for the tool's refresh token.
pub(super) async fn access_token(
    call: &Call<'_>,
    o: &OAuthDecl,
    values: &ToolValues,
    url: &str,
) -> Result<String, ActionError> {
    let need = |key: &str| {
        values
            .get(key)
            .ok_or_else(|| ActionError::Input(format!("the tool needs `auth.{key}` (OAuth)")))
    };
    let url = url.to_string();
    let (client_id, secret, refresh) = (
        need(&o.client_id)?,
        need(&o.client_secret)?,
        need(&o.refresh_token)?,
    );
    let key = (url.clone(), client_id.clone(), refresh.clone());
    if let Some((token, until)) = TOKENS
        .lock()
        .ok()
        .and_then(|t| t.as_ref().and_then(|m| m.get(&key).cloned()))
    {
        if Instant::now() < until {
            return Ok(token);
        }
    }
    let parsed = reqwest::Url::parse(&url)
        .map_err(|e| ActionError::Input(format!("the OAuth token URL: {e}")))?;
    call.check_host(&parsed)?;
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "refresh_token")
        .append_pair("client_id", &client_id)
        .append_pair("client_secret", &secret)
        .append_pair("refresh_token", &refresh)
        .finish();
    let client = crate::core::net::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ActionError::failed(e.to_string()))?;
    let resp = client
        .post(parsed)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| {
            ActionError::failed(format!(
                "OAuth token refresh: {}",
                crate::core::net::describe_reqwest(e)
            ))
        })?;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let Some(token) = body.get("access_token").and_then(Value::as_str) else {
        let why = body
            .get("error_description")
            .or_else(|| body.get("error"))
            .and_then(Value::as_str)
            .unwrap_or("no access_token in the reply");
        return Err(ActionError::failed(format!(
            "OAuth token refresh failed (HTTP {}): {why}",
            status.as_u16()
        )));
    };
    let lasts = body
        .get("expires_in")
        .and_then(Value::as_u64)
        .unwrap_or(3600);
    // A minute early: a token never expires in flight.
    let until = Instant::now() + Duration::from_secs(lasts.saturating_sub(60));
    if let Ok(mut t) = TOKENS.lock() {
        t.get_or_insert_with(HashMap::new)
            .insert(key, (token.to_string(), until));
    }
    Ok(token.to_string())
}
