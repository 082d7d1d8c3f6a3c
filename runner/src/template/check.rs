//! Static checks of a template before anything runs: syntax, and filters,
//! tests and functions that do not exist (minijinja only finds those when
//! the failing line is reached, after earlier steps and their paid calls).

use super::regexp::REGEXP_FN;
use super::{
    has_tags, line_col, prepare_expression, prepare_template, suggest_filter, TemplateError,
    Templates,
};
use minijinja::machinery::{get_compiled_template, Instruction, Instructions};
use minijinja::ErrorKind;
use std::collections::BTreeSet;

/// Names a template may call without defining them.
const CALLABLE: &[&str] = &["caller", "super", "loop", "self", "varargs", "kwargs"];

impl Templates {
    /// Problems in `src`, a template (or, with `expr`, a bare expression as
    /// conditions are written), with line and column inside `src` where
    /// known. Empty when it compiles and names only what exists.
    pub fn check(&self, src: &str, expr: bool) -> Vec<TemplateError> {
        if expr && !has_tags(src) {
            // A condition: as the engine reads it, JavaScript operators included.
            let translated = match prepare_expression(src, true) {
                Ok(t) => t,
                Err(e) => return vec![e],
            };
            let text = translated.as_ref().map_or(src, |t| t.text.as_str());
            let wrapped = format!("{{{{ {text} }}}}");
            let map = |o: usize| {
                let o = o.saturating_sub(3).min(text.len());
                translated.as_ref().map_or(o, |t| t.source_offset(o))
            };
            return self.check_text(&wrapped, src, &map);
        }
        if !has_tags(src) {
            return Vec::new();
        }
        let prepared = match prepare_template(src) {
            Ok(p) => p,
            Err(e) => return vec![e],
        };
        let text = prepared.as_ref().map_or(src, |t| t.text.as_str());
        let map = |o: usize| prepared.as_ref().map_or(o, |t| t.source_offset(o));
        self.check_text(text, src, &map)
    }

    fn check_text(
        &self,
        text: &str,
        src: &str,
        map: &dyn Fn(usize) -> usize,
    ) -> Vec<TemplateError> {
        let tmpl = match self.env.template_from_str(text) {
            Ok(t) => t,
            Err(e) => return vec![TemplateError::from_mj(&e, text, src, map)],
        };
        let compiled = get_compiled_template(&tmpl);
        let all: Vec<&Instructions> = std::iter::once(&compiled.instructions)
            .chain(compiled.blocks.values())
            .collect();
        let mut locals: BTreeSet<&str> = BTreeSet::new();
        for instrs in &all {
            for (_, i) in each(instrs) {
                if let Instruction::StoreLocal(n) | Instruction::BuildMacro(n, ..) = i {
                    locals.insert(n);
                }
            }
        }
        let globals: BTreeSet<String> = self.env.globals().map(|(n, _)| n.to_string()).collect();
        let mut out = Vec::new();
        for instrs in &all {
            for (idx, i) in each(instrs) {
                let message = match i {
                    // A regular-expression literal: its pattern is known now.
                    Instruction::CallFunction(name, Some(2)) if name == &REGEXP_FN => {
                        let constant =
                            |back: u32| match idx.checked_sub(back).and_then(|j| instrs.get(j)) {
                                Some(Instruction::LoadConst(v)) => v.as_str().map(str::to_string),
                                _ => None,
                            };
                        let (Some(source), Some(flags)) = (constant(2), constant(1)) else {
                            continue;
                        };
                        match super::regexp::new_regexp(&source, Some(&flags)) {
                            Ok(_) => continue,
                            Err(e) => e
                                .detail()
                                .unwrap_or("invalid regular expression")
                                .to_string(),
                        }
                    }
                    Instruction::ApplyFilter(name, ..) if !self.has_filter(name) => {
                        let mut m = format!("unknown filter: filter {name} is unknown");
                        if let Some(h) = suggest_filter(name) {
                            m.push_str(&format!(" (did you mean `{h}`?)"));
                        }
                        m
                    }
                    Instruction::PerformTest(name, ..) if !self.has_test(name) => {
                        let mut m = format!("unknown test: test {name} is unknown");
                        if let Some(h) = self.suggest_test(name) {
                            m.push_str(&format!(" (did you mean `{h}`?)"));
                        }
                        m
                    }
                    Instruction::CallFunction(name, ..)
                        if !globals.contains(*name)
                            && !locals.contains(name)
                            && !CALLABLE.contains(name) =>
                    {
                        let mut m = format!("unknown function: `{name}` is not a function");
                        // The same rule as filters and tests: the fewest edits.
                        let near = super::nearest_name(name, globals.iter().map(String::as_str));
                        if let Some(h) = near {
                            m.push_str(&format!(" (did you mean `{h}`?)"));
                        }
                        m
                    }
                    _ => continue,
                };
                let mut err = TemplateError::new(message);
                if let Some(span) = instrs.get_span(idx) {
                    let (line, col) = line_col(src, map(span.start_offset as usize));
                    err.line = Some(line);
                    err.col = Some(col);
                } else if let Some(line) = instrs.get_line(idx) {
                    err.line = Some(line);
                }
                if !out.contains(&err) {
                    out.push(err);
                }
            }
        }
        out
    }

    /// Whether a filter of this name exists (asked of the environment itself,
    /// so the answer cannot drift from what rendering does).
    fn has_filter(&self, name: &str) -> bool {
        let probe = format!("{{{{ none | {name} }}}}");
        !matches!(self.env.render_str(&probe, ()), Err(e) if e.kind() == ErrorKind::UnknownFilter)
    }

    /// The test `name` is most likely a misspelling of, among those this
    /// environment has.
    fn suggest_test(&self, name: &str) -> Option<&'static str> {
        super::nearest_name(
            name,
            TEST_NAMES.iter().copied().filter(|c| self.has_test(c)),
        )
    }

    fn has_test(&self, name: &str) -> bool {
        let probe = format!("{{{{ none is {name} }}}}");
        !matches!(self.env.render_str(&probe, ()), Err(e) if e.kind() == ErrorKind::UnknownTest)
    }
}

/// Test names to suggest from (minijinja's and ours); only those the
/// environment has are offered.
const TEST_NAMES: &[&str] = &[
    "defined",
    "undefined",
    "none",
    "nullish",
    "null",
    "truthy",
    "falsy",
    "callable",
    "safe",
    "escaped",
    "odd",
    "even",
    "divisibleby",
    "number",
    "integer",
    "float",
    "string",
    "sequence",
    "iterable",
    "mapping",
    "startingwith",
    "endingwith",
    "true",
    "false",
    "boolean",
    "lower",
    "upper",
    "sameas",
    "in",
    "eq",
    "equalto",
    "ne",
    "lt",
    "lessthan",
    "le",
    "gt",
    "greaterthan",
    "ge",
    "filter",
    "test",
];

fn each<'a, 's>(instrs: &'a Instructions<'s>) -> impl Iterator<Item = (u32, &'a Instruction<'s>)> {
    (0u32..).map_while(move |i| instrs.get(i).map(|x| (i, x)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(src: &str, expr: bool) -> Vec<String> {
        Templates::new()
            .check(src, expr)
            .into_iter()
            .map(|e| {
                format!(
                    "{}:{} {}",
                    e.line.unwrap_or(0),
                    e.col.unwrap_or(0),
                    e.message
                )
            })
            .collect()
    }

    #[test]
    fn finds_unknown_names_with_positions() {
        assert_eq!(
            msgs("a\n{{ items | lenght }}", false),
            ["2:12 unknown filter: filter lenght is unknown (did you mean `length`?)"]
        );
        assert_eq!(
            msgs("{% if x is evn %}y{% endif %}", false),
            ["1:12 unknown test: test evn is unknown (did you mean `even`?)"]
        );
        // A swap of neighbours is one edit: `titel` is `title`, `jion` `join`.
        assert_eq!(
            msgs("{{ 'a b' | titel }}{{ ['a'] | jion(',') }}", false),
            [
                "1:12 unknown filter: filter titel is unknown (did you mean `title`?)",
                "1:31 unknown filter: filter jion is unknown (did you mean `join`?)"
            ]
        );
        assert_eq!(
            msgs("{{ nowz() }}", false),
            ["1:4 unknown function: `nowz` is not a function (did you mean `now`?)"]
        );
        assert_eq!(msgs("x | uper", true).len(), 1);
        assert_eq!(msgs("{{ x", false).len(), 1);
        // A regular-expression literal's pattern, at the literal.
        assert_eq!(
            msgs("ok\n{{ s.replace(r/(/g, '') }}", false),
            ["2:14 invalid regular expression `(`: unclosed group"]
        );
        assert_eq!(
            msgs("r/[0-9/.test(s)", true),
            ["1:1 invalid regular expression `[0-9`: unclosed character class"]
        );
        assert!(msgs("{{ s.replace(r/[0-9]+/g, '') }}", false).is_empty());
    }

    #[test]
    fn accepts_what_renders() {
        for ok in [
            "{{ items | length }} {{ range(3) | list }} {{ now() }}",
            "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1) }}",
            "{% for k, v in m %}{{ k }}{% endfor %}",
            "{% if a %}1{% elseif b %}2{% endif %}",
            "{{ x | default('none') | upper }} {{ x is defined }} {{ x is nullish }}",
            "plain text",
        ] {
            assert!(msgs(ok, false).is_empty(), "{ok}: {:?}", msgs(ok, false));
        }
        assert!(msgs("a && !b || c == null", true).is_empty());
    }
}
