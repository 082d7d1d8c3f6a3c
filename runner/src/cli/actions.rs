//! `marktoflow actions`: the action catalog for people (a table) and for
//! tools (`--json`, the same data the schema is built from).

use crate::cli::{EXIT_OK, EXIT_USAGE};
use marktoflow_steps::core::catalog::{Extra, Spec};
use marktoflow_steps::Registry;
use serde_json::{json, Value};

/// Prints every action, or the one named; returns the exit code.
pub fn print(name: Option<&str>, as_json: bool) -> i32 {
    let registry = Registry::standard();
    let catalog = registry.catalog();
    let chosen: Vec<&Spec> = match name {
        None => catalog.clone(),
        Some(n) => match registry.spec(n) {
            Some(s) => vec![s],
            None => {
                let names: Vec<String> = catalog.iter().map(|s| s.name()).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                eprintln!("error: unknown action `{n}`");
                match marktoflow_steps::core::catalog::closest(n, refs.iter().copied()) {
                    Some(c) => eprintln!("  = hint: did you mean `{c}`?"),
                    None => eprintln!("  = hint: `marktoflow actions` lists them"),
                }
                return EXIT_USAGE;
            }
        },
    };
    if as_json {
        let list: Vec<Value> = chosen.iter().map(|s| to_json(s)).collect();
        let out = if name.is_some() {
            list[0].clone()
        } else {
            json!(list)
        };
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return EXIT_OK;
    }
    let text = if name.is_some() {
        detail(chosen[0])
    } else {
        chosen
            .iter()
            .map(|s| summary(s))
            .collect::<Vec<_>>()
            .join("")
    };
    print!("{text}");
    EXIT_OK
}

fn to_json(s: &Spec) -> Value {
    json!({
        "name": s.name(),
        "doc": s.doc,
        "returns": s.returns,
        "any_inputs": s.extra == Extra::Open,
        "inputs": s.input_schema(),
        "traits": {
            "evaluated_by_engine": s.traits.engine_op,
            "sets_outputs": s.traits.sets_outputs,
            "pure": s.traits.pure,
        },
    })
}

fn input_names(s: &Spec) -> String {
    let names: Vec<String> = s
        .canonical()
        .map(|i| {
            if i.required {
                format!("{}*", i.name)
            } else {
                i.name.to_string()
            }
        })
        .collect();
    match (names.is_empty(), s.extra) {
        (_, Extra::Open) => "any mapping".into(),
        (true, _) => "none".into(),
        _ => names.join(", "),
    }
}

/// One action in two lines: name and doc, then its inputs (* required).
fn summary(s: &Spec) -> String {
    format!(
        "{:<20} {}\n{:<20} inputs: {}\n",
        s.name(),
        s.doc,
        "",
        input_names(s)
    )
}

/// One action in full: every input with its type, default, values and doc.
pub fn detail(s: &Spec) -> String {
    let mut out = format!("{} — {}\n\n", s.name(), s.doc);
    if s.extra == Extra::Open {
        out.push_str("inputs: any mapping\n");
    } else if s.inputs.is_empty() {
        out.push_str("inputs: none\n");
    } else {
        out.push_str("inputs:\n");
        let width = s.inputs.iter().map(|i| i.name.len()).max().unwrap_or(0);
        for i in s.canonical() {
            let types: Vec<&str> = i.types.iter().map(|t| t.name()).collect();
            let mut line = format!("  {:<width$}  {}", i.name, types.join(" | "));
            if i.required {
                line.push_str(", required");
            }
            if let Some(d) = i.default {
                line.push_str(&format!(", default {d}"));
            }
            line.push_str(&format!("\n  {:<width$}  {}", "", i.doc));
            if !i.values.is_empty() {
                line.push_str(&format!(" One of: {}.", i.values.join(", ")));
            }
            let aliases: Vec<&str> = s
                .inputs
                .iter()
                .filter(|a| a.alias_of == Some(i.name))
                .map(|a| a.name)
                .collect();
            if !aliases.is_empty() {
                line.push_str(&format!(" Also `{}`.", aliases.join("`, `")));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out.push_str(&format!("returns: {}\n", s.returns));
    out
}

#[cfg(test)]
mod tests {
    use marktoflow_steps::Registry;

    /// docs/reference.md is checked against the catalog: every action is
    /// documented, and every input it declares is named in its section.
    #[test]
    fn the_reference_documents_every_action_and_input() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let start = doc.find("## 8. Actions").expect("the actions chapter");
        let end = doc[start..]
            .find("\n## 9.")
            .map_or(doc.len(), |e| start + e);
        let chapter = &doc[start..end];
        let mut missing = Vec::new();
        for spec in Registry::standard().catalog() {
            let name = format!("`{}`", spec.name());
            // Where it is introduced: a heading or a table row naming it, else
            // its first mention.
            let introduced = chapter.match_indices(&name).map(|(i, _)| i).find(|&i| {
                let line = &chapter[chapter[..i].rfind('\n').map_or(0, |n| n + 1)..];
                line.starts_with("### ") || line.starts_with("| ")
            });
            let Some(at) = introduced.or_else(|| chapter.find(&name)) else {
                missing.push(format!("{name} is not documented"));
                continue;
            };
            // Its section: from the heading before the first mention to the next.
            let from = chapter[..at].rfind("\n### ").unwrap_or(0);
            let to = chapter[at..]
                .find("\n### ")
                .map_or(chapter.len(), |e| at + e);
            let section = &chapter[from..to];
            for input in spec.canonical() {
                if !section.contains(&format!("`{}`", input.name)) {
                    missing.push(format!("{name}: input `{}` is not documented", input.name));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "docs/reference.md §8 misses:\n{}",
            missing.join("\n")
        );
    }
}
