//! Tenants kept apart: tokens that each grant one tenant
//! (`--tenant-token TENANT=VAR`), and the input a workflow marks
//! `tenant: true`, which a request's token fills and no request can set to
//! another tenant. The knowledge-base steps then see that tenant's notes
//! and the shared ones (`kb.*`'s `tenant`).

use super::request::{bearer, constant_time_eq};
use crate::format::inputs::Supplied;
use crate::format::model::Workflow;
use axum::http::HeaderMap;
use serde_json::Value;
use std::collections::BTreeMap;

/// The tokens that grant tenants. Empty: requests name their tenant
/// themselves (a server for one team, or behind a gateway that checks it).
#[derive(Debug, Clone, Default)]
pub struct Tenants {
    /// (tenant, token), in the order given.
    tokens: Vec<(String, String)>,
}

/// Who a request is, as far as tenants go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// Its token grants this tenant: the tenant input is this, whatever it
    /// asks.
    Tenant(String),
    /// No tenant token: it may name a tenant when no tokens are configured
    /// or when the route's own token (the operator's) let it in.
    Open,
}

/// Why a request's tenant was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenantRefused {
    #[error("`{input}` is the tenant: send a tenant's token (`Authorization: Bearer …`); tokens are configured with --tenant-token")]
    NoToken { input: String },
    #[error("`{input}`: the token grants tenant `{granted}`, not `{asked}`")]
    Other {
        input: String,
        granted: String,
        asked: String,
    },
    #[error("`{input}` must be text (the tenant's id)")]
    NotText { input: String },
}

impl Tenants {
    /// From `--tenant-token TENANT=VAR` arguments: each variable must be
    /// set, each token and tenant named once.
    pub fn from_args(args: &[String], env: &BTreeMap<String, String>) -> Result<Tenants, String> {
        let mut tokens: Vec<(String, String)> = Vec::new();
        for a in args {
            let Some((tenant, var)) = a.split_once('=') else {
                return Err(format!(
                    "`--tenant-token {a}`: write TENANT=VAR (the token is read from the variable VAR)"
                ));
            };
            let tenant = tenant.trim();
            let var = var.trim();
            if tenant.is_empty() || tenant.chars().any(char::is_control) {
                return Err(format!("`--tenant-token {a}`: the tenant is empty"));
            }
            let Some(token) = env.get(var).filter(|t| !t.trim().is_empty()) else {
                return Err(format!(
                    "`--tenant-token {a}`: `{var}` is not set; the tenant is not served without its token"
                ));
            };
            if tokens.iter().any(|(t, _)| t.eq_ignore_ascii_case(tenant)) {
                return Err(format!(
                    "`--tenant-token`: tenant `{tenant}` is given twice"
                ));
            }
            if tokens.iter().any(|(_, k)| k == token) {
                return Err(format!(
                    "`--tenant-token {a}`: `{var}` holds the token of another tenant; each tenant needs its own"
                ));
            }
            tokens.push((tenant.to_string(), token.clone()));
        }
        Ok(Tenants { tokens })
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The tenant whose token `headers` carry as `Authorization: Bearer`.
    /// Every token is compared, in constant time, whichever matches.
    pub fn granted(&self, headers: &HeaderMap) -> Option<&str> {
        let given = bearer(headers)?;
        let mut found = None;
        for (tenant, token) in &self.tokens {
            if constant_time_eq(given.as_bytes(), token.as_bytes()) {
                found = Some(tenant.as_str());
            }
        }
        found
    }

    /// What `headers` make of a request.
    pub fn caller(&self, headers: &HeaderMap) -> Caller {
        match self.granted(headers) {
            Some(t) => Caller::Tenant(t.to_string()),
            None => Caller::Open,
        }
    }
}

/// The input `wf` marks as its tenant.
pub fn tenant_input(wf: &Workflow) -> Option<&str> {
    wf.inputs.iter().find(|i| i.tenant).map(|i| i.name.as_str())
}

/// Sets `wf`'s tenant input for `caller` in `supplied`: a granted tenant
/// replaces what the request named (which must be empty or the same
/// tenant); an open caller keeps its own value, unless tenants are
/// configured and `operator` is false, when it is refused.
pub fn apply(
    wf: &Workflow,
    tenants: &Tenants,
    caller: &Caller,
    operator: bool,
    supplied: &mut Vec<(String, Supplied)>,
) -> Result<(), TenantRefused> {
    let Some(input) = tenant_input(wf) else {
        return Ok(());
    };
    let named = supplied.iter().rposition(|(k, _)| k == input);
    match caller {
        Caller::Tenant(granted) => {
            if let Some(i) = named {
                let asked = match &supplied[i].1 {
                    Supplied::Json(Value::String(s)) | Supplied::Text(s) => s.trim().to_string(),
                    Supplied::Json(Value::Null) => String::new(),
                    _ => {
                        return Err(TenantRefused::NotText {
                            input: input.to_string(),
                        })
                    }
                };
                if !asked.is_empty() && !asked.eq_ignore_ascii_case(granted) {
                    return Err(TenantRefused::Other {
                        input: input.to_string(),
                        granted: granted.clone(),
                        asked,
                    });
                }
            }
            supplied.retain(|(k, _)| k != input);
            supplied.push((
                input.to_string(),
                Supplied::Json(Value::String(granted.clone())),
            ));
            Ok(())
        }
        Caller::Open if tenants.is_empty() || operator => Ok(()),
        Caller::Open => Err(TenantRefused::NoToken {
            input: input.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header;

    fn tenants() -> Tenants {
        let env = BTreeMap::from([
            ("A".to_string(), "token-a".to_string()),
            ("B".to_string(), "token-b".to_string()),
        ]);
        Tenants::from_args(&["acme=A".into(), "globex=B".into()], &env).unwrap()
    }

    fn headers(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        h
    }

    #[test]
    fn a_token_grants_its_tenant_and_no_other() {
        let t = tenants();
        assert_eq!(t.granted(&headers("token-a")), Some("acme"));
        assert_eq!(t.granted(&headers("token-b")), Some("globex"));
        assert_eq!(t.granted(&headers("token-c")), None);
        assert_eq!(t.granted(&headers("token-a ")), Some("acme"));
        assert_eq!(t.granted(&HeaderMap::new()), None);
    }

    #[test]
    fn bad_arguments_are_refused_naming_them() {
        let env = BTreeMap::from([
            ("A".to_string(), "same".to_string()),
            ("B".to_string(), "same".to_string()),
        ]);
        let err = |args: &[&str]| {
            Tenants::from_args(
                &args.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                &env,
            )
            .unwrap_err()
        };
        assert_eq!(
            err(&["acme"]),
            "`--tenant-token acme`: write TENANT=VAR (the token is read from the variable VAR)"
        );
        assert_eq!(
            err(&["acme=UNSET"]),
            "`--tenant-token acme=UNSET`: `UNSET` is not set; the tenant is not served without its token"
        );
        assert_eq!(
            err(&["acme=A", "ACME=B"]),
            "`--tenant-token`: tenant `ACME` is given twice"
        );
        assert_eq!(
            err(&["acme=A", "globex=B"]),
            "`--tenant-token globex=B`: `B` holds the token of another tenant; each tenant needs its own"
        );
        assert_eq!(err(&["=A"]), "`--tenant-token =A`: the tenant is empty");
    }
}
