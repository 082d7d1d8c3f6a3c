//! Test files: `NAME.test.md` beside `NAME.md` (or naming it with `test:`
//! in the frontmatter). Each fenced ```yaml block is one case, named by the
//! heading above it: the inputs it runs with, the mocks that stand in for
//! actions, and what it expects.

use crate::diag::{did_you_mean, Diagnostic, Pos, Source};
use crate::engine::RunStatus;
use crate::format::document::{parse_document, Block};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A test file, read and checked.
#[derive(Debug)]
pub struct TestFile {
    pub source: Arc<Source>,
    /// The workflow it tests.
    pub workflow: PathBuf,
    pub cases: Vec<Case>,
}

/// One case: a run of the workflow and what it must show.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    /// The block's opening fence.
    pub pos: Pos,
    pub inputs: Map<String, Value>,
    pub mocks: Vec<Mock>,
    /// Files the case's run finds (path relative to a folder of its own,
    /// which is then its working folder and where it may write) → text.
    pub files: Vec<(String, String)>,
    pub expect: Expect,
}

/// What stands in for an action: at a step (by id) or for an action (by
/// name, `http.*` for a family), when its inputs hold `when`.
#[derive(Debug, Clone, PartialEq)]
pub struct Mock {
    pub step: Option<String>,
    pub action: Option<String>,
    /// Inputs the call must have (each equal, at any depth of an object).
    pub when: Map<String, Value>,
    pub result: Result<Value, String>,
}

/// What a case expects; what it leaves out is not checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expect {
    /// Default: completed.
    pub status: Option<RunStatus>,
    /// Each named output equal (others may be there too).
    pub outputs: Map<String, Value>,
    /// Step id → its status (`completed`, `failed`, `skipped`, `waiting`,
    /// or `not run`).
    pub steps: Map<String, Value>,
    /// Text the run's error must contain.
    pub error: Option<String>,
    /// Conditions over `outputs`, `steps`, `calls`, `status`, `error`,
    /// `files`.
    pub asserts: Vec<String>,
    /// Files in the case's folder after the run: path → its text (JSON
    /// for a mapping or list: compared as JSON), or null: not there.
    pub files: Map<String, Value>,
}

const CASE_KEYS: &[&str] = &["inputs", "mocks", "files", "expect"];
const MOCK_KEYS: &[&str] = &["step", "action", "when", "returns", "fails"];
const EXPECT_KEYS: &[&str] = &["status", "outputs", "steps", "error", "assert", "files"];
const FRONT_KEYS: &[&str] = &["test"];

/// The workflow a test file tests when its frontmatter does not say:
/// `name.test.md` → `name.md`.
pub fn workflow_of(test: &Path) -> Option<PathBuf> {
    let name = test.file_name()?.to_str()?;
    let stem = name.strip_suffix(".test.md")?;
    Some(test.with_file_name(format!("{stem}.md")))
}

/// Whether `path` is a test file.
pub fn is_test_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".test.md"))
}

/// Test file `f` and the workflow it tests, loaded; or every problem found.
pub fn load(
    f: &Path,
    registry: &marktoflow_steps::Registry,
) -> Result<(TestFile, std::sync::Arc<crate::format::model::Workflow>), Vec<Diagnostic>> {
    let text = std::fs::read_to_string(f).map_err(|e| {
        vec![Diagnostic::file_error(
            &f.display().to_string(),
            format!("cannot read: {e}"),
        )]
    })?;
    let t = parse(f, &text)?;
    match crate::check::load::load_file(&t.workflow, registry) {
        Ok(l) => Ok((t, std::sync::Arc::new(l.workflow))),
        Err(d) => {
            let mut all = vec![Diagnostic::file_error(
                &f.display().to_string(),
                format!(
                    "the workflow it tests, `{}`, does not load:",
                    t.workflow.display()
                ),
            )];
            all.extend(d);
            Err(all)
        }
    }
}

/// Reads the test file `path` (`text`): its cases, or every problem found,
/// positioned.
pub fn parse(path: &Path, text: &str) -> Result<TestFile, Vec<Diagnostic>> {
    let source = Source::new(path, text);
    let doc = parse_document(source.clone());
    let mut errors = Vec::new();
    let err = |pos: Pos, msg: String| Diagnostic::error(&source, Some(pos), msg);
    let mut workflow = workflow_of(path);
    if let Some(front) = &doc.frontmatter {
        let at = front.file_pos(1, 1);
        match serde_yaml::from_str::<Value>(&front.text) {
            Ok(Value::Object(m)) => {
                for k in m.keys().filter(|k| !FRONT_KEYS.contains(&k.as_str())) {
                    errors.push(err(at, unknown("the frontmatter", k, FRONT_KEYS)));
                }
                match m.get("test") {
                    None => {}
                    Some(Value::String(w)) => {
                        workflow = Some(path.parent().unwrap_or(Path::new("")).join(w))
                    }
                    Some(_) => errors.push(err(at, "`test` must name the workflow file".into())),
                }
            }
            Ok(Value::Null) => {}
            Ok(_) => errors.push(err(at, "the frontmatter must be a mapping".into())),
            Err(e) => errors.push(err(at, format!("the frontmatter is not YAML: {e}"))),
        }
    }
    let Some(workflow) = workflow else {
        errors.push(Diagnostic::error(
            &source,
            None,
            "name the workflow it tests: `test: workflow.md` in the frontmatter (or name the file `workflow.test.md`)",
        ));
        return Err(errors);
    };
    let mut cases = Vec::new();
    for (i, block) in doc.blocks.iter().enumerate() {
        match case_of(block, i) {
            Ok(c) => cases.push(c),
            Err(msg) => errors.push(err(block.fence, msg)),
        }
    }
    if cases.is_empty() && errors.is_empty() {
        errors.push(Diagnostic::error(
            &source,
            None,
            "no cases: each ```yaml block under a heading is one (`inputs`, `mocks`, `expect`)",
        ));
    }
    if errors.is_empty() {
        Ok(TestFile {
            source,
            workflow,
            cases,
        })
    } else {
        Err(errors)
    }
}

fn unknown(place: &str, key: &str, known: &[&str]) -> String {
    let hint = match did_you_mean(key, known) {
        Some(k) => format!("did you mean `{k}`?"),
        None => format!("use {}", known.join(", ")),
    };
    format!("unknown key `{key}` in {place}: {hint}")
}

/// One block as a case; Err: what does not fit.
fn case_of(block: &Block, i: usize) -> Result<Case, String> {
    let name = match (&block.heading, block.index_under_heading) {
        (Some(h), 0) => h.clone(),
        (Some(h), n) => format!("{h} ({})", n + 1),
        (None, _) => format!("case {}", i + 1),
    };
    let v: Value = serde_yaml::from_str(&block.yaml.text)
        .map_err(|e| format!("case `{name}` is not YAML: {e}"))?;
    let m = match v {
        Value::Object(m) => m,
        Value::Null => Map::new(),
        _ => {
            return Err(format!(
                "case `{name}` must be a mapping of {}",
                CASE_KEYS.join(", ")
            ))
        }
    };
    let place = format!("case `{name}`");
    if let Some(k) = m.keys().find(|k| !CASE_KEYS.contains(&k.as_str())) {
        return Err(unknown(&place, k, CASE_KEYS));
    }
    let inputs = match m.get("inputs") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(i)) => i.clone(),
        Some(_) => return Err(format!("{place}: `inputs` must map input names to values")),
    };
    let mocks = match m.get("mocks") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(j, v)| mock_of(v).map_err(|e| format!("{place}: `mocks[{j}]`: {e}")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(format!("{place}: `mocks` must be a list")),
    };
    let files = match m.get("files") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(f)) => f
            .iter()
            .map(|(path, content)| {
                fixture_path(path).map_err(|e| format!("{place}: `files`: {e}"))?;
                let text = match content {
                    Value::String(s) => s.clone(),
                    other => serde_json::to_string_pretty(other).unwrap_or_default(),
                };
                Ok((path.clone(), text))
            })
            .collect::<Result<_, String>>()?,
        Some(_) => {
            return Err(format!(
                "{place}: `files` must map paths to their text (`notes/a.md: \"# A\"`)"
            ))
        }
    };
    let expect = match m.get("expect") {
        None | Some(Value::Null) => Expect::default(),
        Some(v) => expect_of(v).map_err(|e| format!("{place}: `expect`: {e}"))?,
    };
    for path in expect.files.keys() {
        fixture_path(path).map_err(|e| format!("{place}: `expect.files`: {e}"))?;
    }
    Ok(Case {
        name,
        pos: block.fence,
        inputs,
        mocks,
        files,
        expect,
    })
}

/// A fixture's path: relative, and inside the case's folder.
pub fn fixture_path(path: &str) -> Result<&Path, String> {
    let p = Path::new(path);
    let inside = !path.is_empty()
        && p.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        });
    if inside {
        Ok(p)
    } else {
        Err(format!(
            "`{path}` must be a path relative to the case's folder, without `..`"
        ))
    }
}

fn mock_of(v: &Value) -> Result<Mock, String> {
    let Value::Object(m) = v else {
        return Err("must be a mapping (`step` or `action`, then `returns` or `fails`)".into());
    };
    if let Some(k) = m.keys().find(|k| !MOCK_KEYS.contains(&k.as_str())) {
        return Err(unknown("a mock", k, MOCK_KEYS));
    }
    let text = |k: &str| match m.get(k) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{k}` must be text")),
    };
    let (step, action) = (text("step")?, text("action")?);
    match (&step, &action) {
        (None, None) => {
            return Err("name the `step` (its id) or the `action` it stands in for".into())
        }
        (Some(_), Some(_)) => return Err(
            "name the `step` or the `action`, not both (a step's mock covers whatever it calls)"
                .into(),
        ),
        _ => {}
    }
    let when = match m.get("when") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(w)) => w.clone(),
        Some(_) => return Err("`when` must map inputs to the values the call has".into()),
    };
    let result = match (m.get("returns"), m.get("fails")) {
        (Some(r), None) => Ok(r.clone()),
        (None, Some(Value::String(why))) => Err(why.clone()),
        (None, Some(_)) => return Err("`fails` is the error's message (text)".into()),
        (None, None) => Ok(Value::Null),
        (Some(_), Some(_)) => return Err("give `returns` or `fails`, not both".into()),
    };
    Ok(Mock {
        step,
        action,
        when,
        result,
    })
}

fn expect_of(v: &Value) -> Result<Expect, String> {
    let Value::Object(m) = v else {
        return Err(format!("must be a mapping of {}", EXPECT_KEYS.join(", ")));
    };
    if let Some(k) = m.keys().find(|k| !EXPECT_KEYS.contains(&k.as_str())) {
        return Err(unknown("`expect`", k, EXPECT_KEYS));
    }
    let status = match m.get("status") {
        None => None,
        Some(Value::String(s)) => Some(RunStatus::parse(s).ok_or_else(|| {
            let all: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            format!("`status: {s}`: use {}", all.join(", "))
        })?),
        Some(_) => return Err("`status` must be text".into()),
    };
    let map = |k: &str| match m.get(k) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(o)) => Ok(o.clone()),
        Some(_) => Err(format!("`{k}` must be a mapping")),
    };
    let asserts = match m.get("assert") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or("`assert` must be a list of conditions (text)")
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`assert` must be a list of conditions".into()),
    };
    Ok(Expect {
        status,
        outputs: map("outputs")?,
        steps: map("steps")?,
        error: match m.get("error") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("`error` is text the run's error must contain".into()),
        },
        asserts,
        files: map("files")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FILE: &str = "# Refunds\n\n## A small refund goes through\n\n```yaml\ninputs: {amount: 40}\nmocks:\n  - action: http.post\n    when: {url: https://pay.example/refunds}\n    returns: {status: 200, body: {ok: true}}\n  - step: summarize\n    fails: the model is down\nexpect:\n  status: failed\n  outputs: {refunded: true}\n  steps: {notify: skipped}\n  assert: \"calls['http.post'] | length == 1\"\n```\n";

    #[test]
    fn a_case_has_its_inputs_mocks_and_expectations() {
        let t = parse(Path::new("flows/refund.test.md"), FILE).unwrap();
        assert_eq!(t.workflow, Path::new("flows/refund.md"));
        let c = &t.cases[0];
        assert_eq!(
            (c.name.as_str(), c.pos.line),
            ("A small refund goes through", 5)
        );
        assert_eq!(Value::Object(c.inputs.clone()), json!({"amount": 40}));
        assert_eq!(
            c.mocks,
            [
                Mock {
                    step: None,
                    action: Some("http.post".into()),
                    when: json!({"url": "https://pay.example/refunds"})
                        .as_object()
                        .unwrap()
                        .clone(),
                    result: Ok(json!({"status": 200, "body": {"ok": true}})),
                },
                Mock {
                    step: Some("summarize".into()),
                    action: None,
                    when: Map::new(),
                    result: Err("the model is down".into()),
                },
            ]
        );
        assert_eq!(c.expect.status, Some(RunStatus::Failed));
        assert_eq!(c.expect.asserts, ["calls['http.post'] | length == 1"]);
    }

    #[test]
    fn what_does_not_fit_is_said_where_it_is() {
        let bad = "---\ntest: 3\n---\n\n## One\n\n```yaml\nexpects: {}\n```\n\n## Two\n\n```yaml\nmocks: [{returns: 1}]\n```\n";
        let errs = parse(Path::new("t.test.md"), bad).unwrap_err();
        let shown: Vec<String> = errs
            .iter()
            .map(|d| format!("{}: {}", d.pos.map_or(0, |p| p.line), d.message))
            .collect();
        assert_eq!(
            shown,
            [
                "2: `test` must name the workflow file",
                "7: unknown key `expects` in case `One`: did you mean `expect`?",
                "13: case `Two`: `mocks[0]`: name the `step` (its id) or the `action` it stands in for",
            ]
        );
        let both = "## Both\n\n```yaml\nmocks: [{step: a, action: http.get, returns: 1}]\n```\n";
        let errs = parse(Path::new("t.test.md"), both).unwrap_err();
        assert_eq!(
            errs[0].message,
            "case `Both`: `mocks[0]`: name the `step` or the `action`, not both (a step's mock covers whatever it calls)"
        );
    }
}
