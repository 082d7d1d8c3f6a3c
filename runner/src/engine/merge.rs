//! `merge`: the peer's step that combines lists (`append`, `match`, `diff`,
//! `combine_by_field`), with its meaning; values are compared by content
//! (the peer compares objects by identity, so two equal objects never match).

use super::{Engine, Failure, RunState};
use crate::format::model::{MergeMode, Step};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

/// An item's key, compared as JSON values are (by content, a mapping's keys
/// in any order) and hashed the same way: `match`, `diff` and
/// `combine_by_field` look keys up instead of comparing every pair (a 1 MB
/// request of items took 30 s).
#[derive(Clone, Copy)]
struct Key<'v>(Option<&'v Value>);

impl PartialEq for Key<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Key<'_> {}

impl Hash for Key<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match self.0 {
            None => 0u8.hash(h),
            Some(v) => hash_value(v, h),
        }
    }
}

fn hash_value<H: Hasher>(v: &Value, h: &mut H) {
    match v {
        Value::Null => 1u8.hash(h),
        Value::Bool(b) => (2u8, b).hash(h),
        Value::Number(n) => (3u8, n).hash(h),
        Value::String(s) => (4u8, s).hash(h),
        Value::Array(a) => {
            (5u8, a.len()).hash(h);
            a.iter().for_each(|x| hash_value(x, h));
        }
        Value::Object(m) => {
            // Equal mappings may hold their keys in other orders.
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            (6u8, m.len()).hash(h);
            for k in keys {
                k.hash(h);
                hash_value(&m[k], h);
            }
        }
    }
}

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
        let key = |item| Key(field(item, match_field.unwrap_or_default()));
        let result: Vec<Value> = match mode {
            MergeMode::Append => lists.into_iter().flatten().collect(),
            MergeMode::Match => {
                let (first, rest) = lists.split_first().expect("at least two sources");
                let others: Vec<HashSet<Key>> =
                    rest.iter().map(|l| l.iter().map(key).collect()).collect();
                first
                    .iter()
                    .filter(|item| others.iter().all(|keys| keys.contains(&key(item))))
                    .cloned()
                    .collect()
            }
            MergeMode::Diff => {
                let (first, rest) = lists.split_first().expect("at least two sources");
                let others: HashSet<Key> = rest.iter().flatten().map(key).collect();
                first
                    .iter()
                    .filter(|item| !others.contains(&key(item)))
                    .cloned()
                    .collect()
            }
            MergeMode::CombineByField => {
                // One group per key in first-seen order; items without the
                // field share the group of "no value", as in the peer.
                let mut groups: Vec<Map<String, Value>> = Vec::new();
                let mut group_of: HashMap<Key, usize> = HashMap::new();
                for item in lists.iter().flatten() {
                    let Value::Object(fields) = item else {
                        continue;
                    };
                    match group_of.get(&key(item)) {
                        Some(&g) => {
                            let merged = &mut groups[g];
                            for (name, v) in fields {
                                if !keep_first || !merged.contains_key(name) {
                                    merged.insert(name.clone(), v.clone());
                                }
                            }
                        }
                        None => {
                            group_of.insert(key(item), groups.len());
                            groups.push(fields.clone());
                        }
                    }
                }
                groups.into_iter().map(Value::Object).collect()
            }
        };
        Ok(Value::Array(result))
    }
}
