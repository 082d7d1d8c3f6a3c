//! Service integrations as data: each service (Slack, GitHub, Jira, …) is
//! a YAML declaration — its base URL, how its auth is sent, and its methods
//! as HTTP requests with typed inputs — read into actions at start. The
//! bundled ones cover the peer's examples; a project adds its own as
//! `.marktoflow/integrations/*.yaml` (or in folders named by
//! `MARKTOFLOW_INTEGRATIONS`), with no code: a file whose `sdks` name one
//! already known replaces it.

mod call;
pub mod decl;
mod oauth;
mod openapi;
mod template;
mod values;

pub use call::IntegrationAction;
pub use decl::Service;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// The bundled declarations: (file name, text).
const BUNDLED: &[(&str, &str)] = &[
    ("discord.yaml", include_str!("bundled/discord.yaml")),
    ("docs.yaml", include_str!("bundled/docs.yaml")),
    ("drive.yaml", include_str!("bundled/drive.yaml")),
    ("github.yaml", include_str!("bundled/github.yaml")),
    ("gmail.yaml", include_str!("bundled/gmail.yaml")),
    ("jira.yaml", include_str!("bundled/jira.yaml")),
    ("linear.yaml", include_str!("bundled/linear.yaml")),
    ("notion.yaml", include_str!("bundled/notion.yaml")),
    ("pagerduty.yaml", include_str!("bundled/pagerduty.yaml")),
    ("sheets.yaml", include_str!("bundled/sheets.yaml")),
    ("slack.yaml", include_str!("bundled/slack.yaml")),
    ("telegram.yaml", include_str!("bundled/telegram.yaml")),
];

static USER_DIRS: OnceLock<Vec<PathBuf>> = OnceLock::new();
static LOADED: OnceLock<Loaded> = OnceLock::new();

struct Loaded {
    services: Vec<Arc<Service>>,
    /// Declarations that could not be read: (file, why).
    errors: Vec<(String, String)>,
}

/// The folders whose `*.yaml` files are integrations besides the bundled
/// ones; set once, at the edge, before any workflow loads (later calls
/// change nothing).
pub fn set_user_dirs(dirs: Vec<PathBuf>) {
    let _ = USER_DIRS.set(dirs);
}

fn loaded() -> &'static Loaded {
    LOADED.get_or_init(|| {
        let mut services: Vec<Arc<Service>> = Vec::new();
        let mut errors = Vec::new();
        let mut add = |text: &str,
                       origin: String,
                       dir: Option<&std::path::Path>,
                       errors: &mut Vec<(String, String)>| {
            match decl::parse(text, &origin, dir) {
                Ok(s) => {
                    // A later declaration of the same sdk replaces the earlier.
                    services.retain(|old| !old.sdks.iter().any(|k| s.sdks.contains(k)));
                    services.push(Arc::new(s));
                }
                Err(e) => errors.push((origin, e)),
            }
        };
        for (name, text) in BUNDLED {
            add(text, format!("bundled {name}"), None, &mut errors);
        }
        for dir in USER_DIRS.get().into_iter().flatten() {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut files: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
                .collect();
            files.sort();
            for f in files {
                match std::fs::read_to_string(&f) {
                    // An OpenAPI document beside the declarations is one's source.
                    Ok(text) if is_openapi(&text) => {}
                    Ok(text) => add(&text, f.display().to_string(), Some(dir), &mut errors),
                    Err(e) => errors.push((f.display().to_string(), e.to_string())),
                }
            }
        }
        Loaded { services, errors }
    })
}

/// Whether `text` is an OpenAPI document (not a declaration).
fn is_openapi(text: &str) -> bool {
    serde_yaml::from_str::<serde_json::Value>(text)
        .is_ok_and(|v| v.get("openapi").is_some() && v.get("paths").is_some())
}

/// Every integration known (bundled, then the project's).
pub fn services() -> &'static [Arc<Service>] {
    &loaded().services
}

/// The declarations that could not be read, with why.
pub fn load_errors() -> &'static [(String, String)] {
    &loaded().errors
}

/// The integration a tool's `sdk` names.
pub fn for_sdk(sdk: &str) -> Option<&'static Arc<Service>> {
    services()
        .iter()
        .find(|s| s.sdks.iter().any(|k| k.eq_ignore_ascii_case(sdk)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_declaration_reads() {
        for (name, text) in BUNDLED {
            if let Err(e) = decl::parse(text, name, None) {
                panic!("{name}: {e}");
            }
        }
        let slack = for_sdk("@slack/web-api").unwrap();
        assert_eq!(slack.name, "slack");
        assert!(slack.method("chat.postMessage").is_some());
        assert!(slack.method("chat_postMessage").is_some(), "an alias");
        assert!(for_sdk("@octokit/rest").is_some() && for_sdk("jira-client").is_some());
    }

    #[test]
    fn a_declaration_that_does_not_fit_says_where() {
        let bad = |yaml: &str| decl::parse(yaml, "x.yaml", None).unwrap_err();
        assert!(
            bad("name: x\ntitle: X\nsdks: [x]\nbase_url: ftp://x\nmethods: {}\n")
                .contains("must be an http(s) URL")
        );
        assert!(bad("name: x\ntitle: X\nsdks: [x]\nbase_url: https://x\nmethods:\n  get: {doc: d, request: 'GET /a/{id}'}\n")
            .contains("the path's `{id}` has no input `id`"));
        assert!(bad("name: x\ntitle: X\nsdks: [x]\nbase_url: https://x\nmethods:\n  get: {doc: d, request: GET /a, inputs: {n: {type: int}}}\n")
            .contains("type `int`"));
        assert!(
            bad("name: x\ntitle: X\nsdks: [x]\nbase_url: https://x\nmethod: {}\n")
                .contains("unknown field `method`")
        );
    }
}
