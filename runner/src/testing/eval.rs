//! `marktoflow eval`: a workflow run on every case of a dataset (JSONL:
//! `{"name"?, "inputs": {…}, "expected": {…}}` a line), each scored by
//! metrics — `exact:OUTPUT`, `contains:OUTPUT` (every expected fact is in
//! it), `schema:OUTPUT=FILE` (valid against a JSON Schema), `expr:COND` (a
//! condition over `outputs`, `expected`, `inputs`, `status`) — with the
//! totals per metric.

use serde_json::{json, Map, Value};

/// One metric, as `--metric` gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// The output equals the expected value of the same name.
    Exact(String),
    /// Every expected fact (text; a list: any one of them) is in the
    /// output's text, in any case.
    Contains(String),
    /// The output is valid against this JSON Schema.
    Schema(String, Value),
    /// A condition holds.
    Expr(String),
}

impl Metric {
    /// `exact:answer`, `contains:answer`, `schema:reply=reply.schema.json`
    /// (`schema` read by `read`), `expr:outputs.found == expected.found`.
    pub fn parse(s: &str, read: impl Fn(&str) -> Result<String, String>) -> Result<Metric, String> {
        let (kind, arg) = s
            .split_once(':')
            .ok_or_else(|| format!("`{s}`: a metric is KIND:ARGUMENT ({})", KINDS.join(", ")))?;
        let arg = arg.trim();
        if arg.is_empty() {
            return Err(format!("`{s}`: name what it measures after `{kind}:`"));
        }
        Ok(match kind {
            "exact" => Metric::Exact(arg.into()),
            "contains" => Metric::Contains(arg.into()),
            "expr" => Metric::Expr(arg.into()),
            "schema" => {
                let (output, file) = arg
                    .split_once('=')
                    .ok_or_else(|| format!("`{s}`: give the schema as `schema:OUTPUT=FILE`"))?;
                let text = read(file)?;
                let schema: Value = serde_json::from_str(&text)
                    .map_err(|e| format!("`{file}` is not JSON: {e}"))?;
                marktoflow_steps::agent::schema::validate_schema(&schema)
                    .map_err(|e| format!("`{file}`: {e}"))?;
                Metric::Schema(output.trim().into(), schema)
            }
            other => {
                return Err(format!(
                    "`{other}` is not a metric: use {}",
                    KINDS.join(", ")
                ))
            }
        })
    }

    /// Its name in reports.
    pub fn name(&self) -> String {
        match self {
            Metric::Exact(o) => format!("exact:{o}"),
            Metric::Contains(o) => format!("contains:{o}"),
            Metric::Schema(o, _) => format!("schema:{o}"),
            Metric::Expr(e) => format!("expr:{e}"),
        }
    }

    /// Whether the case passes it, and why not; None: it does not apply
    /// (the case expects nothing of that output), and is not counted.
    pub fn score(&self, ctx: &Value) -> Option<Result<(), String>> {
        let out = |o: &str| ctx["outputs"].get(o).cloned().unwrap_or(Value::Null);
        let want = |o: &str| ctx["expected"].get(o).cloned();
        Some(match self {
            Metric::Exact(o) => match want(o)? {
                w if w == out(o) => Ok(()),
                w => Err(format!("expected {w}, got {}", out(o))),
            },
            Metric::Contains(o) => {
                let w = want(o)?;
                let got = match out(o) {
                    Value::String(s) => s,
                    other => other.to_string(),
                }
                .to_lowercase();
                let facts = match w {
                    Value::Array(a) => a,
                    one => vec![one],
                };
                let missing: Vec<String> = facts
                    .iter()
                    .filter(|f| !holds_fact(&got, f))
                    .map(|f| f.to_string())
                    .collect();
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(format!("missing {}", missing.join(", ")))
                }
            }
            Metric::Schema(o, schema) => marktoflow_steps::agent::schema::check(schema, &out(o)),
            Metric::Expr(e) => {
                let t = crate::template::Templates::new();
                match t.eval_condition(e, &crate::template::Templates::to_value(ctx)) {
                    Ok(true) => Ok(()),
                    Ok(false) => Err("false".into()),
                    Err(err) => Err(err.to_string()),
                }
            }
        })
    }
}

const KINDS: &[&str] = &["exact", "contains", "schema", "expr"];

/// Whether `text` (lower case) holds a fact: text, or any one of a list.
fn holds_fact(text: &str, fact: &Value) -> bool {
    match fact {
        Value::String(s) => text.contains(&s.to_lowercase()),
        Value::Array(any) => any.iter().any(|f| holds_fact(text, f)),
        other => text.contains(&other.to_string().to_lowercase()),
    }
}

/// One case of a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalCase {
    pub name: String,
    pub inputs: Map<String, Value>,
    pub expected: Map<String, Value>,
}

/// The cases of a JSONL dataset; Err: the line that does not fit, and why.
pub fn cases(text: &str) -> Result<Vec<EvalCase>, (usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| (n, format!("not JSON: {e}")))?;
        let Value::Object(m) = v else {
            return Err((
                n,
                "a case is an object `{\"inputs\": {…}, \"expected\": {…}}`".into(),
            ));
        };
        let obj = |k: &str| match m.get(k) {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(o)) => Ok(o.clone()),
            Some(_) => Err((n, format!("`{k}` must be an object"))),
        };
        out.push(EvalCase {
            name: m
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| format!("line {n}"), str::to_string),
            inputs: obj("inputs")?,
            expected: obj("expected")?,
        });
    }
    Ok(out)
}

/// What the metrics see of a case's run.
pub fn context(case: &EvalCase, status: &str, outputs: &Value) -> Value {
    json!({
        "inputs": case.inputs,
        "expected": case.expected,
        "outputs": outputs,
        "status": status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_file(_: &str) -> Result<String, String> {
        Err("no files here".into())
    }

    #[test]
    fn metrics_score_a_run_against_what_the_case_expects() {
        let case = EvalCase {
            name: "q".into(),
            inputs: Map::new(),
            expected: json!({"answer": ["apollo", ["Dec 15", "15 December"]], "found": true})
                .as_object()
                .unwrap()
                .clone(),
        };
        let ctx = context(
            &case,
            "completed",
            &json!({"answer": "Apollo ships 15 December.", "found": true}),
        );
        let m = |s: &str| Metric::parse(s, no_file).unwrap();
        assert_eq!(m("contains:answer").score(&ctx), Some(Ok(())));
        assert_eq!(m("exact:found").score(&ctx), Some(Ok(())));
        assert_eq!(
            m("expr:outputs.found == expected.found and status == 'completed'").score(&ctx),
            Some(Ok(()))
        );
        // Nothing expected of `reply`: not counted.
        assert_eq!(m("exact:reply").score(&ctx), None);
        let miss = context(
            &case,
            "completed",
            &json!({"answer": "It ships soon.", "found": false}),
        );
        assert_eq!(
            m("contains:answer").score(&miss),
            Some(Err(
                "missing \"apollo\", [\"Dec 15\",\"15 December\"]".into()
            ))
        );
        assert_eq!(
            m("exact:found").score(&miss),
            Some(Err("expected true, got false".into()))
        );
        assert_eq!(
            Metric::parse("close:answer", no_file),
            Err("`close` is not a metric: use exact, contains, schema, expr".into())
        );
    }

    #[test]
    fn a_dataset_line_that_does_not_fit_is_named() {
        assert_eq!(
            cases("{\"inputs\": {\"q\": 1}}\n\n[1]\n"),
            Err((
                3,
                "a case is an object `{\"inputs\": {…}, \"expected\": {…}}`".into()
            ))
        );
        let ok =
            cases("{\"name\": \"a\", \"inputs\": {\"q\": 1}, \"expected\": {\"x\": 2}}\n").unwrap();
        assert_eq!(ok[0].name, "a");
    }
}
