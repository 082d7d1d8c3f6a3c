//! When an agent's call of a declared tool waits for a person: the tool's
//! `approval:` — `required` (every call), a list of tool names, or a rule
//! whose conditions a call must all meet (which tools, which HTTP methods,
//! which hosts, an argument over an amount).

use serde_json::{Map, Value};

/// A tool's `approval:`, checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ApprovalRule {
    /// `approval: required` (or `true`): every call.
    Every,
    /// `approval: [names]`: every call of these tools.
    Named(Vec<String>),
    /// `approval: {tools, methods, hosts, over}`: the calls that meet every
    /// condition given.
    When(Conditions),
}

/// The conditions of a rule; one not given holds for every call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conditions {
    /// Tool names (an MCP server's tools; `get`, `post`… of an HTTP tool).
    pub tools: Option<Vec<String>>,
    /// HTTP methods, upper case.
    pub methods: Option<Vec<String>>,
    /// Hosts: `api.example.com`, or `*.example.com` for it and its subdomains.
    pub hosts: Option<Vec<String>>,
    /// Arguments (dotted paths) whose value over the number needs approval.
    pub over: Vec<(String, f64)>,
}

/// A call as the rule sees it.
pub struct CallFacts<'a> {
    /// The tool's name (`refund`; `post` for an HTTP tool).
    pub name: &'a str,
    /// An HTTP call's method (upper case) and host.
    pub method: Option<&'a str>,
    pub host: Option<&'a str>,
    /// The arguments the model gave.
    pub args: &'a Map<String, Value>,
}

// Amounts are compared by their bits: a rule is equal to itself, and a
// declared tool (its rule with it) keys the MCP sessions it shares.
impl Eq for Conditions {}

impl std::hash::Hash for Conditions {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.tools.hash(state);
        self.methods.hash(state);
        self.hosts.hash(state);
        for (path, limit) in &self.over {
            path.hash(state);
            limit.to_bits().hash(state);
        }
    }
}

const KEYS: &[&str] = &["tools", "methods", "hosts", "over"];

impl ApprovalRule {
    /// The rule `approval:` gives; None: no call needs one.
    pub fn parse(v: &Value) -> Result<Option<ApprovalRule>, String> {
        let names = |v: &Value, what: &str| -> Result<Vec<String>, String> {
            let field = if what.is_empty() {
                "approval".to_string()
            } else {
                format!("approval.{what}")
            };
            match v {
                Value::String(s) => Ok(vec![s.clone()]),
                Value::Array(a) => a
                    .iter()
                    .map(|x| {
                        x.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| format!("`{field}` must be a list of strings"))
                    })
                    .collect(),
                _ => Err(format!("`{field}` must be a list of strings")),
            }
        };
        Ok(match v {
            Value::Null | Value::Bool(false) => None,
            Value::Bool(true) => Some(ApprovalRule::Every),
            Value::String(s) if s == "required" => Some(ApprovalRule::Every),
            Value::Array(_) => Some(ApprovalRule::Named(names(v, "")?)),
            Value::Object(m) => {
                if let Some(k) = m.keys().find(|k| !KEYS.contains(&k.as_str())) {
                    return Err(format!(
                        "`approval.{k}` is not a condition; use {}",
                        KEYS.join(", ")
                    ));
                }
                let mut c = Conditions {
                    tools: m.get("tools").map(|v| names(v, "tools")).transpose()?,
                    methods: m
                        .get("methods")
                        .map(|v| names(v, "methods"))
                        .transpose()?
                        .map(|l| l.iter().map(|x| x.to_ascii_uppercase()).collect()),
                    hosts: m
                        .get("hosts")
                        .map(|v| names(v, "hosts"))
                        .transpose()?
                        .map(|l| l.iter().map(|x| x.to_ascii_lowercase()).collect()),
                    over: Vec::new(),
                };
                match m.get("over") {
                    None => {}
                    Some(Value::Object(o)) => {
                        for (path, limit) in o {
                            let Some(n) = limit.as_f64() else {
                                return Err(format!("`approval.over.{path}` must be a number"));
                            };
                            c.over.push((path.clone(), n));
                        }
                    }
                    Some(_) => {
                        return Err(
                            "`approval.over` must map arguments to amounts, such as `{amount: 100}`"
                                .into(),
                        )
                    }
                }
                Some(ApprovalRule::When(c))
            }
            _ => {
                return Err(
                    "`approval` must be `required`, a list of tools, or a rule `{tools, methods, hosts, over}`"
                        .into(),
                )
            }
        })
    }

    /// Whether `call` waits for a person's approval.
    pub fn applies(&self, call: &CallFacts) -> bool {
        match self {
            ApprovalRule::Every => true,
            ApprovalRule::Named(names) => names
                .iter()
                .any(|n| n == "*" || n.eq_ignore_ascii_case(call.name)),
            ApprovalRule::When(c) => {
                let listed = |l: &Option<Vec<String>>, v: Option<&str>| match (l, v) {
                    (None, _) => true,
                    // A method or host the call does not have (an MCP
                    // tool) does not match a rule that names some.
                    (Some(_), None) => false,
                    (Some(l), Some(v)) => l.iter().any(|x| x == v),
                };
                let host = |h: &str| match &c.hosts {
                    None => true,
                    Some(l) => l.iter().any(|p| match p.strip_prefix("*.") {
                        Some(suffix) => h == suffix || h.ends_with(&format!(".{suffix}")),
                        None => p == h,
                    }),
                };
                let named = c
                    .tools
                    .as_ref()
                    .is_none_or(|l| l.iter().any(|t| t.eq_ignore_ascii_case(call.name)));
                named
                    && listed(&c.methods, call.method)
                    && call.host.map_or(c.hosts.is_none(), host)
                    && c.over
                        .iter()
                        .all(|(path, limit)| over(call.args, path, *limit))
            }
        }
    }
}

/// Whether the argument at `path` is over `limit`: a number (or numeric
/// text) above it, or a value that is no number at all (what cannot be
/// read is asked about). A call without that argument is not over. (An
/// HTTP call is asked about its JSON body and its query: see the agent's
/// tools.)
fn over(args: &Map<String, Value>, path: &str, limit: f64) -> bool {
    let found = {
        let mut parts = path.split('.');
        parts
            .next()
            .and_then(|first| args.get(first))
            .and_then(|first| parts.try_fold(first, |v, p| v.get(p)))
            .cloned()
    };
    match found {
        None | Some(Value::Null) => false,
        Some(Value::Number(n)) => n.as_f64().is_none_or(|n| n > limit),
        Some(Value::String(s)) => s.trim().parse::<f64>().map_or(true, |n| n > limit),
        Some(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts<'a>(
        name: &'a str,
        method: Option<&'a str>,
        host: Option<&'a str>,
        args: &'a Map<String, Value>,
    ) -> CallFacts<'a> {
        CallFacts {
            name,
            method,
            host,
            args,
        }
    }

    fn rule(v: Value) -> ApprovalRule {
        ApprovalRule::parse(&v).unwrap().unwrap()
    }

    #[test]
    fn required_lists_and_nothing() {
        let none = Map::new();
        assert!(rule(json!("required")).applies(&facts("x", None, None, &none)));
        let named = rule(json!(["refund"]));
        assert!(named.applies(&facts("refund", None, None, &none)));
        assert!(!named.applies(&facts("lookup", None, None, &none)));
        assert_eq!(ApprovalRule::parse(&json!(false)), Ok(None));
    }

    #[test]
    fn a_rule_holds_when_every_condition_given_does() {
        let r = rule(
            json!({"methods": ["post", "DELETE"], "hosts": ["*.stripe.com"], "over": {"amount": 100}}),
        );
        // What an HTTP call sends (its JSON body): the agent's tools pass it.
        let body = |v: Value| v.as_object().unwrap().clone();
        let big = body(json!({"amount": 250}));
        let small = body(json!({"amount": 50}));
        let text = body(json!({"amount": "120.5"}));
        let odd = body(json!({"amount": "a lot"}));
        let without = body(json!({"note": "x"}));
        let at = |m, h, a| r.applies(&facts("post", Some(m), Some(h), a));
        assert!(at("POST", "api.stripe.com", &big));
        assert!(at("POST", "stripe.com", &big));
        assert!(at("POST", "api.stripe.com", &text));
        assert!(
            at("POST", "api.stripe.com", &odd),
            "what cannot be read is asked about"
        );
        assert!(!at("POST", "api.stripe.com", &small));
        assert!(!at("POST", "api.stripe.com", &without));
        assert!(!at("GET", "api.stripe.com", &big));
        assert!(!at("POST", "evilstripe.com", &big));
        // An MCP tool has no method or host: a rule naming some passes it by.
        assert!(!r.applies(&facts("refund", None, None, &big)));
        // Names in any case (`POST` names the `post` of an HTTP tool).
        assert!(rule(json!(["POST"])).applies(&facts("post", Some("POST"), None, &big)));
        let mcp = rule(json!({"tools": ["refund"], "over": {"order.total": 10}}));
        let args = json!({"order": {"total": 12}}).as_object().unwrap().clone();
        assert!(mcp.applies(&facts("refund", None, None, &args)));
        assert!(!mcp.applies(&facts("lookup", None, None, &args)));
    }

    #[test]
    fn a_rule_that_does_not_fit_is_refused_with_why() {
        for (v, want) in [
            (json!({"amounts": 3}), "`approval.amounts` is not a condition; use tools, methods, hosts, over"),
            (json!({"over": {"amount": "100"}}), "`approval.over.amount` must be a number"),
            (json!({"over": 100}), "`approval.over` must map arguments to amounts, such as `{amount: 100}`"),
            (json!({"hosts": [1]}), "`approval.hosts` must be a list of strings"),
            (json!(3), "`approval` must be `required`, a list of tools, or a rule `{tools, methods, hosts, over}`"),
        ] {
            assert_eq!(ApprovalRule::parse(&v), Err(want.to_string()));
        }
    }
}
