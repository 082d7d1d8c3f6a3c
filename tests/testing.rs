//! `marktoflow test` on the real binary: cases pass and fail with the
//! step, the expected and the actual value; mocks stand in for HTTP and
//! record what was sent; unmocked calls are refused; a test file that does
//! not fit is refused with its position; JUnit XML is written.

use crate::support::{cmd, run, tempdir};

/// Notifies a channel when an order is big, then answers.
const SHOP: &str = "---\nworkflow: {id: shop}\ninputs: {amount: {type: number, required: true}}\noutputs: {big: {type: boolean}, sent: {type: number}}\n---\n\n## Notify\n\n```yaml\nid: notify\ncondition: inputs.amount > 100\naction: http.post\ninputs:\n  url: https://chat.example/hooks/orders\n  json: {text: 'Big order: {{ inputs.amount }}'}\n```\n\n## Answer\n\n```yaml\naction: workflow.set_outputs\ninputs:\n  big: '{{ inputs.amount > 100 }}'\n  sent: \"{{ steps.notify.output.status if steps.notify.output else 0 }}\"\n```\n";

const TESTS: &str = "# Shop\n\n## A big order is announced\n\n```yaml\ninputs: {amount: 250}\nmocks:\n  - action: http.post\n    when: {url: https://chat.example/hooks/orders}\n    returns: {status: 201, body: {}}\nexpect:\n  outputs: {big: true, sent: 201}\n  steps: {notify: completed}\n  assert:\n    - \"calls.notify[0].json.text == 'Big order: 250'\"\n```\n\n## A small one is not\n\n```yaml\ninputs: {amount: 20}\nexpect:\n  outputs: {big: false}\n  steps: {notify: skipped}\n```\n\n## Expecting the wrong thing fails\n\n```yaml\ninputs: {amount: 20}\nexpect:\n  outputs: {big: true}\n  steps: {notify: completed}\n```\n\n## An unmocked request is refused\n\n```yaml\ninputs: {amount: 500}\nexpect:\n  outputs: {big: true}\n```\n";

#[test]
fn cases_pass_or_fail_saying_what_was_expected_and_what_came() {
    let d = tempdir();
    std::fs::write(d.path().join("shop.md"), SHOP).unwrap();
    std::fs::write(d.path().join("shop.test.md"), TESTS).unwrap();
    let r = run(cmd(d.path()).args(["test", ".", "--junit", "out.xml"]));
    assert_eq!(r.code, 1, "{r:?}");
    let shown: Vec<String> = r
        .stdout
        .lines()
        .map(|l| match l.rfind(" (") {
            // The times vary: left out.
            Some(i) if l.ends_with(" ms)") => l[..i].to_string(),
            _ => l.to_string(),
        })
        .collect();
    let (body, summary) = shown.split_at(shown.len() - 1);
    assert_eq!(
        body.join("\n"),
        "shop.test.md\n  ✓ A big order is announced\n  ✓ A small one is not\n  ✗ Expecting the wrong thing fails\n      output `big`: expected true, got false\n      step `notify`: expected completed, got skipped\n  ✗ An unmocked request is refused\n      status: expected completed, got failed (step `Notify` failed: `http.post` at step `notify` is not mocked: a test makes no model, network or program call unless `--live` (add `mocks: [{step: notify, returns: …}]`))\n      output `big`: expected true, got null\n"
    );
    assert!(
        summary[0].starts_with("2 passed, 2 failed (4 cases in 1 file) in "),
        "{summary:?}"
    );
    let xml = std::fs::read_to_string(d.path().join("out.xml")).unwrap();
    assert!(
        xml.contains("<testsuite name=\"shop.test.md\" tests=\"4\" failures=\"2\""),
        "{xml}"
    );
    assert!(
        xml.contains("<failure message=\"output `big`: expected true, got false\">"),
        "{xml}"
    );
    // `validate` checks a test file as one: its cases, and its workflow.
    let v = run(cmd(d.path()).args(["validate", "shop.test.md"]));
    assert_eq!(
        (v.code, v.stdout.as_str(), v.stderr.as_str()),
        (0, "shop.test.md: ok (4 cases of shop.md)\n", "")
    );
}

#[test]
fn a_test_file_that_does_not_fit_is_refused_where_it_is() {
    let d = tempdir();
    std::fs::write(d.path().join("shop.md"), SHOP).unwrap();
    std::fs::write(
        d.path().join("shop.test.md"),
        "## Typo\n\n```yaml\ninputs: {amount: 1}\nexpects: {status: completed}\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path()).args(["test"]));
    assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{}", r.stderr);
    assert!(
        r.stderr.starts_with(
            "shop.test.md:3:1: error: unknown key `expects` in case `Typo`: did you mean `expect`?"
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.ends_with("marktoflow: nothing was tested\n"),
        "{}",
        r.stderr
    );
    let v = run(cmd(d.path()).args(["validate", "shop.test.md"]));
    assert_eq!(
        (v.code, v.stdout.as_str()),
        (2, "shop.test.md: 1 error\n"),
        "{}",
        v.stderr
    );
    assert!(
        v.stderr
            .starts_with("shop.test.md:3:1: error: unknown key `expects` in case `Typo`"),
        "{}",
        v.stderr
    );
}

#[test]
fn a_recorded_run_replays_offline_and_a_change_shows_where_it_diverges() {
    use crate::fake_llm::{FakeLlm, RAW};
    let d = tempdir();
    let chat = FakeLlm::start(std::sync::Arc::new(|_| (RAW, "{\"ok\": true}".into())));
    let shop = SHOP.replace("https://chat.example", &chat.base);
    std::fs::write(d.path().join("shop.md"), &shop).unwrap();
    let store = d.path().join("runs.db");
    let db = store.to_str().unwrap();
    let r = run(cmd(d.path()).args([
        "run",
        "shop.md",
        "--input",
        "amount=300",
        "--json",
        "--quiet",
        "--store",
        db,
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let rec = run(cmd(d.path()).args(["test", "--record", &id, "--store", db]));
    assert_eq!(rec.code, 0, "{rec:?}");
    let tests = d.path().join("shop.test.md");
    let text = std::fs::read_to_string(&tests).unwrap();
    let short = &id[id.len() - 8..];
    let case = &text[text.find("## Recorded run").unwrap()..];
    assert!(
        case.starts_with(&format!(
            "## Recorded run {short}\n\n```yaml\ninputs:\n  amount: 300\nmocks:\n- step: notify\n  when:\n    url: {}/hooks/orders\n    json:\n      text: 'Big order: 300'\n  returns:\n    status: 200\n",
            chat.base
        )),
        "{text}"
    );
    assert!(
        case.ends_with(
            "expect:\n  status: completed\n  outputs:\n    big: true\n    sent: 200\n```\n"
        ),
        "{text}"
    );
    assert_eq!(
        rec.stdout,
        format!("recorded run {short} as a case of shop.test.md; `marktoflow test shop.test.md` runs it\n")
    );
    // Offline: the receiver is gone, the mock stands in.
    drop(chat);
    let t = run(cmd(d.path()).args(["test", "shop.test.md"]));
    assert_eq!(t.code, 0, "{t:?}");
    let same = run(cmd(d.path()).args(["replay", &id, "--store", db]));
    assert_eq!(
        (same.code, same.stdout.lines().next().unwrap_or_default()),
        (
            0,
            format!("replay of run {short} (shop.md), offline: the same").as_str()
        ),
        "{same:?}"
    );
    // A change the recorded run does not match is shown as such.
    std::fs::write(d.path().join("shop.md"), shop.replace("> 100", "> 500")).unwrap();
    let t = run(cmd(d.path()).args(["test", "shop.test.md"]));
    assert_eq!(t.code, 1, "{t:?}");
    let changed = run(cmd(d.path()).args(["replay", &id, "--store", db]));
    let lines: Vec<&str> = changed.stdout.lines().collect();
    assert_eq!(
        (changed.code, lines[0]),
        (
            1,
            format!("replay of run {short} (shop.md), offline: diverges at step `notify`").as_str()
        ),
        "{}",
        changed.stdout
    );
    assert!(
        lines[1].starts_with("  ≠ notify           was completed {\"status\":200,")
            && lines[1].ends_with(", now skipped"),
        "{}",
        changed.stdout
    );
    assert_eq!(
        lines.last().copied(),
        Some("outputs: was {\"big\":true,\"sent\":200}, now {\"big\":false,\"sent\":0}")
    );
    assert!(
        t.stdout.contains("      output `big`: expected true, got false\n      output `sent`: expected 200, got 0\n"),
        "{}",
        t.stdout
    );
}

#[test]
fn eval_scores_each_case_and_totals_each_metric() {
    let d = tempdir();
    std::fs::copy(
        crate::support::repo().join("examples/branching.md"),
        d.path().join("branching.md"),
    )
    .unwrap();
    std::fs::write(
        d.path().join("grades.jsonl"),
        "{\"name\": \"pass\", \"inputs\": {\"score\": 72}, \"expected\": {\"verdict\": \"pass\", \"band\": \"B\"}}\n{\"name\": \"wrong band\", \"inputs\": {\"score\": 95}, \"expected\": {\"verdict\": \"pass\", \"band\": \"B\"}}\n{\"name\": \"no band said\", \"inputs\": {\"score\": 10}, \"expected\": {\"verdict\": \"fail\"}}\n",
    )
    .unwrap();
    let args = [
        "eval",
        "branching.md",
        "grades.jsonl",
        "--metric",
        "exact:verdict",
        "--metric",
        "exact:band",
        "--metric",
        "expr:outputs.took_then_branch == (expected.verdict == 'pass')",
    ];
    let r = run(cmd(d.path()).args(args));
    assert_eq!(r.code, 0, "{r:?}");
    let shown: Vec<String> = r
        .stdout
        .lines()
        .map(|l| match l.find(", ") {
            Some(i) if l.ends_with(" ms)") => format!("{})", &l[..i]),
            _ => l.to_string(),
        })
        .collect();
    assert_eq!(
        shown.join("\n"),
        "✓ pass (completed)\n✗ wrong band (completed)\n      exact:band: expected \"B\", got \"A\"\n✓ no band said (completed)\n\nexact:verdict                    3/3 (100%)\nexact:band                       1/2 (50%)\nexpr:outputs.took_then_branch == (expected.verdict == 'pass') 3/3 (100%)"
    );
    // Under the share asked for: exit 1.
    let strict = run(cmd(d.path()).args(args).args(["--min", "0.9", "--json"]));
    assert_eq!(strict.code, 1, "{strict:?}");
    let j = strict.json();
    assert_eq!(
        j["totals"]["exact:band"],
        serde_json::json!({"passed": 1, "counted": 2, "share": 0.5})
    );
    assert_eq!(
        j["cases"][2]["metrics"]["exact:band"]["pass"],
        serde_json::Value::Null
    );
}

#[test]
fn a_staged_run_makes_its_reads_and_lists_the_writes_it_held_back() {
    let d = tempdir();
    std::fs::write(
        d.path().join("save.md"),
        "---\nworkflow: {id: save}\ninputs: {name: {type: string, default: ada}}\n---\n\n```yaml\nid: seen\naction: file.exists\ninputs: {path: save.md}\n```\n\n```yaml\nid: save\naction: file.write\ninputs: {path: out.txt, content: 'hello {{ inputs.name }}'}\n```\n\n```yaml\nid: hook\naction: http.post\ninputs: {url: 'https://hooks.example/x', json: {seen: '{{ steps.seen.output.exists }}'}}\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path()).args([
        "run",
        "save.md",
        "--staged",
        "--allow-write",
        ".",
        "--quiet",
    ]));
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            0,
            "staged: 2 writes held back, none made:\n  file.write at step `save`: {\"path\":\"out.txt\",\"content\":\"hello ada\"}\n  http.post at step `hook`: {\"url\":\"https://hooks.example/x\",\"json\":{\"seen\":true}}\n"
        ),
        "{}",
        r.stderr
    );
    assert!(!d.path().join("out.txt").exists(), "nothing was written");
    // Not recorded: a look before the real run.
    assert!(
        !d.path().join(".marktoflow").exists()
            || run(cmd(d.path()).args(["history", "--json"]))
                .stdout
                .contains("\"runs\": []")
    );
    let j = run(cmd(d.path()).args([
        "run",
        "save.md",
        "--staged",
        "--allow-write",
        ".",
        "--json",
        "--quiet",
    ]))
    .json();
    assert_eq!(j["staged"][0]["step"], "save");
    assert_eq!(j["status"], "completed");
}

/// A fake LLM whose every reply says it took 900 tokens in and 100 out.
pub(crate) fn spending_llm() -> crate::fake_llm::FakeLlm {
    use crate::fake_llm::{FakeLlm, RAW};
    FakeLlm::start(std::sync::Arc::new(|_| {
        (
            RAW,
            serde_json::json!({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 900, "output_tokens": 100}})
            .to_string(),
        )
    }))
}

#[test]
fn a_token_budget_stops_the_run_before_the_call_that_would_pass_it() {
    let d = tempdir();
    let llm = spending_llm();
    std::fs::write(
        d.path().join("two.md"),
        "---\nworkflow: {id: two}\ntools:\n  agent: {sdk: anthropic, options: {model: fake-model}}\nbudget: {tokens: 1010}\n---\n\n```yaml\nid: first\naction: agent.run\ninputs: {prompt: one}\n```\n\n```yaml\nid: second\naction: agent.run\ninputs: {prompt: two}\n```\n",
    )
    .unwrap();
    let go = |extra: &[&str]| {
        run(cmd(d.path())
            .args(["run", "two.md", "--json", "--quiet", "--no-store"])
            .args(extra)
            .env("ANTHROPIC_BASE_URL", &llm.base)
            .env("ANTHROPIC_API_KEY", "k"))
    };
    // 1,000 spent by the first call: the second request itself would pass 1,010.
    let r = go(&[]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["status"], "failed");
    assert_eq!(j["error"]["step"], "second");
    let message = j["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the run's budget of 1010 tokens would be passed: 1000 spent, about "),
        "{message}"
    );
    assert_eq!(
        j["usage"],
        serde_json::json!({"input_tokens": 900, "output_tokens": 100, "calls": 1})
    );

    assert_eq!(llm.requests().len(), 1, "the second request was not made");
    // `--budget` over the file's: both calls made.
    let r = go(&["--budget", "5000"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["usage"]["calls"], 2);
}

#[test]
fn a_servers_metrics_count_its_runs_model_calls_and_tokens() {
    let d = tempdir();
    let llm = spending_llm();
    std::fs::write(
        d.path().join("ask.md"),
        "---\nworkflow: {id: ask}\ntools:\n  agent: {sdk: anthropic, options: {model: fake-model}}\ntriggers:\n  - {type: webhook, path: /ask}\nbudget:\n  prices: {fake-model: {input: 3.0, output: 15.0}}\n---\n\n```yaml\naction: agent.run\ninputs: {prompt: hi}\n```\n",
    )
    .unwrap();
    let s = crate::support::serve(
        d.path(),
        &["ask.md", "--no-store"],
        &[
            ("ANTHROPIC_BASE_URL", &llm.base),
            ("ANTHROPIC_API_KEY", "k"),
        ],
    );
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = crate::support::post(&s.addr, "/ask", serde_json::json!({}));
        assert_eq!(r.status, 200, "{}", r.body);
        ids.push(r.json()["run_id"].as_str().unwrap().to_string());
    }
    // The run API tells what a run and its agent step spent.
    let run = crate::support::http(&s.addr, "GET", &format!("/runs/{}", ids[0]), &[], b"").json();
    let spent = serde_json::json!({"input_tokens": 900, "output_tokens": 100, "calls": 1, "cost_usd": 0.0042});
    assert_eq!(run["usage"], spent, "{run:#}");
    let mut step = spent.clone();
    step["model"] = "fake-model".into();
    assert_eq!(run["steps"][0]["usage"], step, "{run:#}");
    let metrics = crate::support::http(&s.addr, "GET", "/metrics", &[], b"").body;
    let lines: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("marktoflow_model_"))
        .collect();
    assert_eq!(
        lines,
        [
            "marktoflow_model_calls_total 2",
            "marktoflow_model_tokens_total{direction=\"input\"} 1800",
            "marktoflow_model_tokens_total{direction=\"output\"} 200",
            // 1,800 in at $3 and 200 out at $15 a million.
            "marktoflow_model_cost_usd_total 0.0084",
        ]
    );
}

#[test]
fn dollars_and_a_workflows_day_are_budgets_and_the_run_shows_what_it_spent() {
    let d = tempdir();
    let llm = spending_llm();
    // One call a run, 900 tokens in and 100 out: $0.0042 at these prices.
    std::fs::write(
        d.path().join("daily.md"),
        "---\nworkflow: {id: daily}\ntools:\n  agent: {sdk: anthropic, options: {model: house-model}}\nbudget:\n  daily_tokens: 2000\n  prices: {house-model: {input: 3.0, output: 15.0}}\n---\n\n```yaml\nid: ask\naction: agent.run\ninputs: {prompt: one}\n```\n",
    )
    .unwrap();
    let go = |file: &str, extra: &[&str]| {
        run(cmd(d.path())
            .args(["run", file, "--json", "--quiet"])
            .args(extra)
            .env("ANTHROPIC_BASE_URL", &llm.base)
            .env("ANTHROPIC_API_KEY", "k"))
    };
    let first = go("daily.md", &[]);
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(
        first.json()["usage"],
        serde_json::json!({"input_tokens": 900, "output_tokens": 100, "calls": 1, "cost_usd": 0.0042})
    );
    assert_eq!(go("daily.md", &[]).code, 0);
    // The day's two runs spent 2,000 tokens: a third run's call is not made.
    let third = go("daily.md", &[]);
    assert_eq!(third.code, 1, "{third:?}");
    let message = third.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("the workflow's daily budget of 2000 tokens would be passed: 2000 tokens today spent, about "),
        "{message}"
    );
    assert_eq!(llm.requests().len(), 2);
    // `show` tells what a run and each of its steps spent.
    let id = first.json()["run_id"].as_str().unwrap().to_string();
    let shown = run(cmd(d.path()).args(["show", &id]));
    assert_eq!(shown.code, 0, "{shown:?}");
    let lines: Vec<&str> = shown
        .stdout
        .lines()
        .filter(|l| l.contains("tokens"))
        .collect();
    assert_eq!(
        lines,
        [
            "spent     900 tokens in, 100 out (1 model call, $0.0042)",
            "          house-model: 900 tokens in, 100 out (1 model call, $0.0042)"
        ]
    );
    let j = run(cmd(d.path()).args(["show", &id, "--json"])).json();
    assert_eq!(
        j["steps"][0]["usage"],
        serde_json::json!({"input_tokens": 900, "output_tokens": 100, "calls": 1, "cost_usd": 0.0042, "model": "house-model"})
    );
    assert_eq!(j["usage"]["cost_usd"], 0.0042);
    // A budget in dollars: the first call spends $0.0042, so the second
    // would pass $0.004 and is not made.
    std::fs::write(
        d.path().join("two.md"),
        "---\nworkflow: {id: two}\ntools:\n  agent: {sdk: anthropic, options: {model: house-model}}\nbudget:\n  prices: {house-model: {input: 3.0, output: 15.0}}\n---\n\n```yaml\nid: first\naction: agent.run\ninputs: {prompt: one}\n```\n\n```yaml\nid: second\naction: agent.run\ninputs: {prompt: two}\n```\n",
    )
    .unwrap();
    let r = go("two.md", &["--budget", "$0.004"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["error"]["step"], "second");
    assert!(
        j["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the run's budget of $0.004 would be passed: $0.0042 spent, about $0.0"),
        "{j}"
    );
    assert_eq!(llm.requests().len(), 3);
    // A model with no price cannot be held to dollars: said before the call.
    let r = go("two.md", &["--budget", "$1", "--no-store"]);
    assert_eq!(r.code, 0, "{r:?}");
    std::fs::write(
        d.path().join("unpriced.md"),
        "---\nworkflow: {id: unpriced}\ntools:\n  agent: {sdk: anthropic, options: {model: mystery}}\n---\n\n```yaml\nid: ask\naction: agent.run\ninputs: {prompt: one}\n```\n",
    )
    .unwrap();
    let r = go("unpriced.md", &["--budget", "$1", "--no-store"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json()["error"]["message"],
        "the run has a budget in US dollars, and `mystery` has no known price: give it one under `budget.prices` (`mystery: {input: 3.0, output: 15.0}`, dollars per million tokens)"
    );
    let bad = go("unpriced.md", &["--budget", "lots"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains(
            "`lots` is neither a number of tokens (like `50000`) nor US dollars (like `$0.50`)"
        ),
        "{}",
        bad.stderr
    );
}

/// Reads `in/order.json` and writes a receipt beside it.
const RECEIPT: &str = "---\nworkflow: {id: receipt}\n---\n\n```yaml\nid: read\naction: file.read\ninputs: {path: in/order.json}\noutput_variable: order\n```\n\n```yaml\nid: write\naction: file.write\ninputs: {path: out/receipt.txt, create_dirs: true, content: \"{{ (order.content | parse_json).item }} x{{ (order.content | parse_json).qty }}\"}\n```\n";

#[test]
fn a_case_brings_its_files_and_checks_what_the_run_wrote() {
    let d = tempdir();
    std::fs::write(d.path().join("receipt.md"), RECEIPT).unwrap();
    std::fs::write(
        d.path().join("receipt.test.md"),
        "## A receipt is written\n\n```yaml\nfiles:\n  in/order.json: {item: tea, qty: 2}\nexpect:\n  files:\n    out/receipt.txt: tea x2\n    in/order.json: {qty: 2}\n  assert: \"files['out/receipt.txt'] == 'tea x2'\"\n```\n\n## The wrong receipt fails\n\n```yaml\nfiles:\n  in/order.json: '{\"item\": \"jam\", \"qty\": 1}'\nexpect:\n  files:\n    out/receipt.txt: tea x2\n    out/other.txt: anything\n```\n\n## Without its file the read fails\n\n```yaml\nexpect:\n  status: failed\n  files: {out/receipt.txt: null}\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path()).args(["test", "receipt.test.md"]));
    assert_eq!(r.code, 1, "{r:?}");
    let body: Vec<&str> = r.stdout.lines().collect();
    let without_times: Vec<String> = body
        .iter()
        .map(|l| match l.rfind(" (") {
            Some(i) if l.ends_with(" ms)") => l[..i].to_string(),
            _ => l.to_string(),
        })
        .collect();
    assert_eq!(
        without_times[..6].join("\n"),
        "receipt.test.md\n  ✓ A receipt is written\n  ✗ The wrong receipt fails\n      file `out/receipt.txt`: expected \"tea x2\", got \"jam x1\"\n      file `out/other.txt`: expected \"anything\", got no file\n  ✓ Without its file the read fails\n"
            .trim_end(),
        "{}",
        r.stdout
    );
    // Nothing was written where the tests ran: each case had a folder of its own.
    assert!(!d.path().join("out").exists());
    // A fixture outside the case's folder is refused where it is written.
    std::fs::write(
        d.path().join("receipt.test.md"),
        "## Escape\n\n```yaml\nfiles: {../x.txt: no}\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path()).args(["test", "receipt.test.md"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.starts_with("receipt.test.md:3:1: error: case `Escape`: `files`: `../x.txt` must be a path relative to the case's folder, without `..`"),
        "{}",
        r.stderr
    );
}
