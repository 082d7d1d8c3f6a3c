//! `merge`: the peer's step that combines lists (`append`, `match`, `diff`,
//! `combine_by_field`), with its meaning; values are compared by content
//! (the peer compares objects by identity, so two equal objects never match).

use super::{Engine, Failure, RunState};
use crate::format::model::{MergeMode, Step};
use serde_json::{Map, Value};

/// The value at the dotted `path` of `item` (a list's items by index), as
/// the peer reads it; `None` when it is not there.
fn field<'v>(item: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(item, |v, part| match v {
        Value::Object(m) => m.get(part),
        Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

impl Engine {
    pub(super) fn exec_merge(
        &self,
        step: &Step,
        mode: MergeMode,
        sources: &[Value],
        match_field: Option<&str>,
        keep_first: bool,
        st: &RunState,
    ) -> Result<Value, Failure> {
        let mut lists: Vec<Vec<Value>> = Vec::with_capacity(sources.len());
        for (i, source) in sources.iter().enumerate() {
            let index = i.to_string();
            match self.render(step, &["sources", &index], source, st)? {
                Value::Array(a) => lists.push(a),
                other => {
                    let shown = match source {
                        Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    return Err(self.fail(
                        step,
                        step.field_pos(&["sources", &index]),
                        format!(
                            "merge source `{shown}` did not give a list (it gave {})",
                            marktoflow_steps::core::error::type_name(&other)
                        ),
                    ));
                }
            }
        }
        let key = |item: &Value| field(item, match_field.unwrap_or_default()).cloned();
        let result: Vec<Value> = match mode {
            MergeMode::Append => lists.into_iter().flatten().collect(),
            MergeMode::Match => {
                let (first, rest) = lists.split_first().expect("at least two sources");
                first
                    .iter()
                    .filter(|item| {
                        let k = key(item);
                        rest.iter().all(|l| l.iter().any(|o| key(o) == k))
                    })
                    .cloned()
                    .collect()
            }
            MergeMode::Diff => {
                let (first, rest) = lists.split_first().expect("at least two sources");
                first
                    .iter()
                    .filter(|item| {
                        let k = key(item);
                        !rest.iter().flatten().any(|o| key(o) == k)
                    })
                    .cloned()
                    .collect()
            }
            MergeMode::CombineByField => {
                // One group per key in first-seen order; items without the
                // field share the group of "no value", as in the peer.
                let mut groups: Vec<(Option<Value>, Map<String, Value>)> = Vec::new();
                for item in lists.iter().flatten() {
                    let Value::Object(fields) = item else {
                        continue;
                    };
                    let k = key(item);
                    match groups.iter_mut().find(|(g, _)| *g == k) {
                        Some((_, merged)) => {
                            for (name, v) in fields {
                                if !keep_first || !merged.contains_key(name) {
                                    merged.insert(name.clone(), v.clone());
                                }
                            }
                        }
                        None => groups.push((k, fields.clone())),
                    }
                }
                groups.into_iter().map(|(_, m)| Value::Object(m)).collect()
            }
        };
        Ok(Value::Array(result))
    }
}
