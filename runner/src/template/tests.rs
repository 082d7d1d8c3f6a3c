//! Tests of the template layer (filters have theirs in `filter_tests`).

use super::*;
use serde_json::json;
use std::sync::Arc;

fn ctx_with(vars: Json) -> Value {
    Templates::context(
        &json!({"query": "What is Apollo?", "max_results": 5, "shadowed": "input"}),
        vars.as_object().expect("object"),
        &json!({"first": {"status": "completed"}}),
        &json!({"HOME": "/home/me"}),
    )
}

fn ctx() -> Value {
    ctx_with(json!({
        "shadowed": "variable",
        "search_results": {
            "found": true,
            "count": 2,
            "results": [
                {"path": "Work/Apollo.md", "score": 30, "content": "Apollo key: 123"},
                {"path": "Notes/misc.md", "score": 10, "content": "Nothing here"}
            ]
        },
        "n": 7,
        "ratio": 0.25,
        "flag": false,
        "nothing": null,
        "obj": {"b": 2, "a": 1},
        "text": "Hello World"
    }))
}

fn render(src: &str) -> String {
    Templates::new()
        .render_str(src, &ctx())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"))
}

fn value(src: &str) -> Json {
    Templates::new()
        .render_value(&json!(src), &ctx())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"))
}

fn err(src: &str) -> TemplateError {
    Templates::new()
        .render_value(&json!(src), &ctx())
        .expect_err(src)
}

#[test]
fn context_layers() {
    assert_eq!(
        render("{{ query }}|{{ inputs.query }}"),
        "What is Apollo?|What is Apollo?"
    );
    assert_eq!(
        render("{{ shadowed }}|{{ inputs.shadowed }}"),
        "variable|input"
    );
    assert_eq!(
        render("{{ steps.first.status }} {{ env.HOME }}"),
        "completed /home/me"
    );
}

#[test]
fn typed_single_expressions() {
    assert_eq!(
        value("{{ search_results.results | map(attribute='path') | list }}"),
        json!(["Work/Apollo.md", "Notes/misc.md"])
    );
    assert_eq!(
        value("{{ search_results.results[0] }}"),
        json!({"path": "Work/Apollo.md", "score": 30, "content": "Apollo key: 123"})
    );
    assert_eq!(value("{{ obj }}"), json!({"b": 2, "a": 1}));
    assert_eq!(value("{{ n }}"), json!(7));
    assert_eq!(value("{{ n * 2 }}"), json!(14));
    assert_eq!(value("{{ ratio }}"), json!(0.25));
    assert_eq!(value("{{ n / 2 }}"), json!(3.5));
    assert_eq!(value("{{ search_results.found }}"), json!(true));
    assert_eq!(value("{{ flag }}"), json!(false));
    assert_eq!(value("{{ nothing }}"), json!(null));
    assert_eq!(value("{{ no_such_thing }}"), json!(null));
    assert_eq!(value("{{ obj.missing }}"), json!(null));
    assert_eq!(value("  {{ max_results }}\n"), json!(5));
    assert_eq!(value("{{- n -}}"), json!(7));
    assert_eq!(
        value("{{ {'a': {'b': [1, 2]}} }}"),
        json!({"a": {"b": [1, 2]}})
    );
    assert_eq!(value("{{ '}}' ~ 'x' }}"), json!("}}x"));
    assert_eq!(value("{{ search_results.results.length }}"), json!(2));
    // not a single expression: text
    assert_eq!(value("{{ n }} items"), json!("7 items"));
    assert_eq!(value("{{ n }}{{ n }}"), json!("77"));
    assert_eq!(value("plain text"), json!("plain text"));
}

#[test]
fn render_value_recurses_and_leaves_keys() {
    let v = json!({
        "{{ n }}": "{{ n }}",
        "list": ["{{ flag }}", 3, null, {"deep": "x{{ n }}"}],
        "num": 1.5
    });
    let out = Templates::new().render_value(&v, &ctx()).unwrap();
    assert_eq!(
        out,
        json!({"{{ n }}": 7, "list": [false, 3, null, {"deep": "x7"}], "num": 1.5})
    );
}

#[test]
fn text_rendering() {
    assert_eq!(render("{{ nothing }}|{{ missing }}|{{ flag }}"), "||false");
    assert_eq!(render("{{ 10 / 4 * 2 }} {{ ratio }}"), "5 0.25");
    // A list inside text prints as JavaScript does; `dump` gives JSON.
    assert_eq!(
        render("{{ obj }} {{ [1, 'a'] }} {{ [1, 'a'] | dump }}"),
        r#"{"b":2,"a":1} 1,a [1,"a"]"#
    );
    assert_eq!(render("{{ '<b>' }}"), "<b>");
    assert_eq!(render("x\n"), "x\n");
    assert_eq!(render("{{ n }}\n"), "7\n");
    assert_eq!(render("{% raw %}{{ n }}{% endraw %}"), "{{ n }}");
    // A string's `.length`, as JavaScript reads it.
    assert_eq!(render("{{ text.length }}"), "11");
}

#[test]
fn seed_prompt_renders_like_nunjucks_trim_blocks() {
    let prompt = "You are the LifeOS Memory.\n\n## User Query\n\"{{ inputs.query }}\"\n\n## Search Results\n\n{% for result in search_results.results %}\n### {{ result.path }} (relevance: {{ result.score }})\n```\n{{ result.content }}\n```\n{% endfor %}\n\n## Instructions\n\n1. Answer\n";
    let expected = "You are the LifeOS Memory.\n\n## User Query\n\"What is Apollo?\"\n\n## Search Results\n\n### Work/Apollo.md (relevance: 30)\n```\nApollo key: 123\n```\n### Notes/misc.md (relevance: 10)\n```\nNothing here\n```\n\n## Instructions\n\n1. Answer\n";
    let t = Templates::new();
    let out = t.render_value(&json!({"prompt": prompt}), &ctx()).unwrap();
    assert_eq!(out["prompt"], json!(expected));

    let empty = ctx_with(json!({"search_results": {"found": false, "count": 0, "results": []}}));
    let out = t.render_str(prompt, &empty).unwrap();
    assert!(
        out.contains("## Search Results\n\n\n## Instructions"),
        "{out}"
    );
}

#[test]
fn block_whitespace_matches_nunjucks() {
    // lstripBlocks strips the indentation before a block tag; trimBlocks eats
    // the newline after it.
    assert_eq!(
        render("a\n    {% if n %}\n  yes\n    {% endif %}\nb"),
        "a\n  yes\nb"
    );
    // an `{% endif %}` at line end joins the lines (the spec's note)
    assert_eq!(render("x{% if n %} (done){% endif %}\ny"), "x (done)y");
    // comments keep the whitespace around them: nunjucks 3.2.4 renders
    // this `a\n  \nb` (trimBlocks and lstripBlocks are for block tags)
    assert_eq!(render("a\n  {# note #}\nb"), "a\n  \nb");
    assert_eq!(render("a\n{%- if n %} b{% endif -%}\n c"), "a bc");
}

#[test]
fn strings_without_tags_are_not_compiled() {
    // Would be a syntax error if compiled.
    assert_eq!(render("a } b { c %} d"), "a } b { c %} d");
    assert_eq!(value("{ not a tag }"), json!("{ not a tag }"));
}

#[test]
fn syntax_error_position_in_multiline_string() {
    let src = "line one\nline two\nthe {{ x + }} end";
    let e = Templates::new().render_str(src, &ctx()).unwrap_err();
    assert!(e.message.starts_with("syntax error"), "{e:?}");
    assert_eq!(e.line, Some(3));
    assert_eq!(e.col, Some(12), "{e:?}");

    let e = Templates::new()
        .render_str("ok\n{% for x in y %}\nno end", &ctx())
        .unwrap_err();
    assert!(e.message.starts_with("syntax error"), "{e:?}");
    assert!(e.line.is_some());
}

#[test]
fn syntax_error_in_single_expression_points_into_the_string() {
    let e = err("  {{ n + }}");
    assert!(e.message.starts_with("syntax error"), "{e:?}");
    // points at the `+` before the unexpected end
    assert_eq!((e.line, e.col), (Some(1), Some(8)));
}

#[test]
fn unknown_filter_is_an_error_with_hint() {
    let e = err("Hi\n  {{ text | uper }}");
    assert!(e.message.contains("unknown filter"), "{e:?}");
    assert!(e.message.contains("did you mean `upper`?"), "{e:?}");
    assert_eq!(e.line, Some(2));
    // points at the filter name
    assert_eq!(e.col, Some(13), "{e:?}");

    let e = err("{{ text | upcase }}");
    assert!(e.message.contains("did you mean `upper`?"), "{e:?}");
    let e = err("{{ text | regexreplace('a', 'b') }}");
    assert!(e.message.contains("did you mean `regexReplace`?"), "{e:?}");
}

#[test]
fn runtime_errors_are_errors() {
    // An attribute of an unset name is undefined, as in Nunjucks (validate
    // warns about the name); arithmetic on it is JavaScript's NaN.
    let t = Templates::new();
    assert_eq!(t.render_str("x {{ missing.field }}", &ctx()).unwrap(), "x ");
    assert_eq!(
        t.render_str("x {{ missing.field * 2 }}", &ctx()).unwrap(),
        "x NaN"
    );
    let e = err("x {{ 1 + missing.field.trim() }}");
    assert!(e.message.contains("undefined"), "{e:?}");
    assert_eq!((e.line, e.col), (Some(1), Some(23)));
    // filter on the wrong type
    let e = err("{{ n | add('abc') }}");
    assert!(e.message.contains("add expects a number"), "{e:?}");
    assert_eq!(e.line, Some(1));
    // error inside a loop, on line 2
    let e = err("{% for r in search_results.results %}\n{{ r.score | divide(0) }}\n{% endfor %}");
    assert!(e.message.contains("division by zero"), "{e:?}");
    assert_eq!(e.line, Some(2));
}

#[test]
fn errors_carry_the_key_path() {
    let v = json!({"messages": [{"role": "user", "content": "{{ n | nope }}"}]});
    let e = Templates::new().render_value(&v, &ctx()).unwrap_err();
    assert_eq!(e.path, ["messages", "0", "content"]);
    let e = Templates::new()
        .render_value(&json!({"prompt": "{{ x + }}"}), &ctx())
        .unwrap_err();
    assert_eq!(e.path, ["prompt"]);
}

#[test]
fn eval_expr_forms() {
    let t = Templates::new();
    assert_eq!(
        t.eval_expr("search_results.results | length", &ctx())
            .unwrap(),
        json!(2)
    );
    assert_eq!(
        t.eval_expr("{{ search_results.count }}", &ctx()).unwrap(),
        json!(2)
    );
    assert_eq!(t.eval_expr("n-{{ n }}", &ctx()).unwrap(), json!("n-7"));
    assert_eq!(
        t.eval_expr(" obj ", &ctx()).unwrap(),
        json!({"b": 2, "a": 1})
    );
    assert_eq!(t.eval_expr("missing", &ctx()).unwrap(), json!(null));
    let e = t.eval_expr("n +", &ctx()).unwrap_err();
    assert_eq!(e.line, Some(1));
}

#[test]
fn fuel_exhaustion_is_an_error() {
    let t = Templates::with_fuel(500);
    let e = t
        .render_str("{% for i in range(100000) %}{{ i }}{% endfor %}", &ctx())
        .unwrap_err();
    assert!(e.message.contains("fuel"), "{e:?}");
    let e = t
        .render_value(
            &json!("{{ range(100000) | map('string') | join(',') }}"),
            &ctx(),
        )
        .unwrap_err();
    assert!(e.message.contains("fuel"), "{e:?}");
    let e = t
        .eval_condition("range(100000) | select('odd') | list | length > 3", &ctx())
        .unwrap_err();
    assert!(e.message.contains("fuel"), "{e:?}");
    // small work fits
    assert_eq!(t.render_str("{{ n + 1 }}", &ctx()).unwrap(), "8");
}

#[test]
fn now_uses_the_clock() {
    let clock = Arc::new(marktoflow_steps::core::time::FixedClock::at(
        1_705_314_600_000,
    ));
    let t = Templates::new();
    let fixed = Templates::clocked(ctx(), clock.clone());
    assert_eq!(
        t.eval_expr("now()", &fixed).unwrap(),
        json!(1_705_314_600_000i64)
    );
    clock.advance(std::time::Duration::from_secs(1));
    assert_eq!(
        t.render_str("{{ now() }}", &fixed).unwrap(),
        "1705314601000"
    );
    assert!(t.eval_expr("now(1)", &fixed).is_err());
    let real = Templates::new().eval_expr("now()", &ctx()).unwrap();
    assert!(real.as_i64().unwrap() > 1_700_000_000_000);
}

#[test]
fn locals_win_over_context() {
    let c = Templates::with_locals(&ctx(), json!({"n": 1, "item": "x"}).as_object().unwrap());
    assert_eq!(
        Templates::new()
            .render_str("{{ n }}{{ item }}{{ query }}", &c)
            .unwrap(),
        "1xWhat is Apollo?"
    );
}

#[test]
fn referenced_names_for_validate() {
    let t = Templates::new();
    assert_eq!(
        t.referenced_names("{% for r in search_results.results %}{{ r.path }}{{ inputs.query }}{% endfor %}{{ now() }}"),
        ["inputs", "search_results"]
    );
    assert_eq!(
        t.referenced_names("a.count >= b.min && !c"),
        ["a", "b", "c"]
    );
    assert_eq!(t.referenced_names("{{ x + }}"), Vec::<String>::new());
}

#[test]
fn single_expression_detection() {
    let s = "  {{ a | f('}}') }} ";
    let r = single_expression(s).unwrap();
    assert_eq!(&s[r], " a | f('}}') ");
    assert!(single_expression("{{ a }} {{ b }}").is_none());
    assert!(single_expression("{{ a }}}").is_none());
    assert!(single_expression("x {{ a }}").is_none());
    assert!(single_expression("{% if a %}{{ a }}{% endif %}").is_none());
    assert_eq!(single_expression("{{-a-}}"), Some(3..4));
}

#[test]
fn new_is_cheap() {
    let start = std::time::Instant::now();
    for _ in 0..100 {
        std::hint::black_box(Templates::new());
    }
    // 100 environments well under the CLI's 10 ms budget (debug build).
    assert!(start.elapsed().as_millis() < 100, "{:?}", start.elapsed());
}

#[test]
fn templates_are_shareable() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Templates>();
}

#[test]
fn context_lists_work_with_builtins() {
    let c = ctx_with(json!({"l": [3, 1, 2], "m": {"k": [1]}}));
    let t = Templates::new();
    let ev = |e: &str| {
        t.eval_expr(e, &c)
            .unwrap_or_else(|err| panic!("{e}: {err:?}"))
    };
    assert_eq!(ev("l + [4]"), json!([3, 1, 2, 4]));
    assert_eq!(ev("l[1:]"), json!([1, 2]));
    assert_eq!(ev("l[-1]"), json!(2));
    assert_eq!(ev("l | last"), json!(2));
    assert_eq!(ev("l | sort(reverse=true)"), json!([3, 2, 1]));
    assert_eq!(ev("2 in l"), json!(true));
    assert_eq!(ev("l == [3, 1, 2]"), json!(true));
    assert_eq!(ev("l | batch(2) | list"), json!([[3, 1], [2]]));
    assert_eq!(ev("l | reverse | list"), json!([2, 1, 3]));
    assert_eq!(ev("m.k.length"), json!(1));
    assert_eq!(t.render_str("{% for x in l %}{{ loop.index }}:{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", &c).unwrap(), "1:3,2:1,3:2");
}

#[test]
fn a_list_that_doubles_is_refused_before_it_is_built() {
    // One unit of fuel a step, so fuel alone let `l + l` in a loop ask for
    // gigabytes (issue 49, item 3).
    let t = Templates::with_fuel(100_000);
    let e = t
        .render_str(
            "{% set ns = namespace(l=[1, 2, 3, 4]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}",
            &ctx(),
        )
        .unwrap_err();
    assert_eq!(
        e.message,
        "invalid operation: +: the result would be over the 1048576 items one template list may hold",
        "{e:?}"
    );
    // Lists under the cap still join.
    assert_eq!(
        t.render_str("{{ ([1, 2] + [3]) | length }}", &ctx())
            .unwrap(),
        "3"
    );
}
