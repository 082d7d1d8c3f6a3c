//! Runs that wait for a person (`type: wait`, `mode: form | approval`):
//! on the real binary, over the CLI, the run API and signed links, through
//! a `kill -9`, under racing answers, and past a deadline.

use crate::support::{cmd, http, post, repo, run, serve, tempdir, wait_for, Server};
use serde_json::{json, Value};
use std::time::Duration;

/// A project folder holding `examples/approval.md` and the test fixtures.
fn project() -> tempfile::TempDir {
    let d = tempdir();
    std::fs::create_dir(d.path().join(".marktoflow")).unwrap();
    std::fs::copy(
        repo().join("examples/approval.md"),
        d.path().join("approval.md"),
    )
    .unwrap();
    for f in [
        "two.md",
        "timeout.md",
        "peer-approval-workflow.md",
        "long.md",
        "event.md",
    ] {
        std::fs::copy(
            repo().join("tests/fixtures/approvals").join(f),
            d.path().join(f),
        )
        .unwrap();
    }
    d
}

fn run_of(s: &Server, id: &str) -> Value {
    http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json()
}

/// Starts a refund through the webhook; it stops at `review`.
fn waiting_refund(s: &Server, amount: u32) -> String {
    let r = post(
        &s.addr,
        "/hooks/refund",
        json!({"amount": amount, "customer": "Bob"}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let v = r.json();
    assert_eq!(v["status"], "waiting", "{v}");
    // What the caller of the webhook gets never holds the link to approve.
    assert!(!r.body.contains("/answer/"), "{}", r.body);
    v["run_id"].as_str().unwrap().to_string()
}

/// Starts `long.md` through its webhook without waiting for it: its id.
fn start_long(s: &Server) -> String {
    let r = http(
        &s.addr,
        "POST",
        "/hooks/long",
        &[
            ("Prefer", "respond-async"),
            ("Content-Type", "application/json"),
        ],
        b"{}",
    );
    assert_eq!(r.status, 202, "{}", r.body);
    r.json()["run_id"].as_str().unwrap().to_string()
}

fn link_of(s: &Server, id: &str, step: &str) -> String {
    let run = run_of(s, id);
    let step = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == step && x["status"] == "waiting")
        .unwrap_or_else(|| panic!("no waiting step: {run}"))
        .clone();
    let link = step["output"]["link"].as_str().unwrap();
    // The path part: the test talks to the server's address.
    link.split_once("/answer/")
        .map(|(_, t)| format!("/answer/{t}"))
        .unwrap()
}

#[test]
fn a_cli_run_waits_then_a_checked_answer_continues_it_once() {
    let d = project();
    let r = run(cmd(d.path()).args([
        "run",
        "approval.md",
        "--input",
        "amount=250",
        "--json",
        "--quiet",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(
        (
            v["status"].clone(),
            v["waiting"]["step_id"].clone(),
            v["waiting"]["mode"].clone()
        ),
        (json!("waiting"), json!("review"), json!("approval"))
    );
    let id = v["run_id"].as_str().unwrap().to_string();
    let short = &id[id.len() - 8..];
    let h = run(cmd(d.path()).args(["history", "--json"]));
    assert_eq!(h.json()["runs"][0]["status"], "waiting", "{h:?}");

    // A value that does not fit its field: refused where the field is declared.
    let bad = run(cmd(d.path()).args(["answer", short, "--approve", "--input", "refund=lots"]));
    assert_eq!(bad.code, 2, "{bad:?}");
    assert_eq!(
        bad.stderr.lines().next().unwrap(),
        format!(
            "{}:73:3: error: field `refund`: expected a number, got `lots`",
            d.path().join("approval.md").display()
        )
    );
    let none = run(cmd(d.path()).args(["answer", short, "--input", "refund=1"]));
    assert_eq!(
        (none.code, none.stderr.trim()),
        (
            2,
            "error: this step asks for an approval: add `--approve` or `--reject`"
        )
    );
    let unknown = run(cmd(d.path()).args(["answer", short, "--approve", "--input", "tip=1"]));
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert!(
        unknown
            .stderr
            .contains("field `tip`: this step has no such field"),
        "{unknown:?}"
    );

    let ok = run(cmd(d.path()).args([
        "answer",
        short,
        "review",
        "--approve",
        "--input",
        "refund=200",
        "--comment",
        "partial",
        "--as",
        "ann",
        "--json",
        "--quiet",
    ]));
    assert_eq!(ok.code, 0, "{ok:?}");
    let done = ok.json();
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["outputs"],
        json!({"status": "approved", "refunded": 200, "reviewer": "ann"})
    );
    let review = done["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "review")
        .unwrap();
    assert_eq!(review["output"]["comment"], "partial");
    assert_eq!(review["output"]["approvals"][0]["by"], "ann");

    let again = run(cmd(d.path()).args(["answer", short, "--reject"]));
    assert_eq!(again.code, 2, "{again:?}");
    assert_eq!(
        again.stderr.trim(),
        format!("error: run `{id}` is not waiting for an answer (it is completed)")
    );
}

#[test]
fn a_waiting_run_survives_kill_9_and_one_of_racing_answers_wins() {
    let d = project();
    let store = d.path().join("runs.db");
    let env = [("MARKTOFLOW_STORE", store.to_str().unwrap())];
    let s = serve(d.path(), &["approval.md"], &env);
    let id = waiting_refund(&s, 300);
    // Killed while the run waits: nothing holds it but its row.
    drop(s);
    let s = serve(d.path(), &["approval.md"], &env);
    let waits = http(&s.addr, "GET", "/waits", &[], b"").json();
    assert_eq!(waits["waits"].as_array().unwrap().len(), 1, "{waits}");
    assert_eq!(waits["waits"][0]["run_id"], json!(id));
    assert_eq!(waits["waits"][0]["title"], "Refund 300 EUR to Bob?");
    let metrics = http(&s.addr, "GET", "/metrics", &[], b"").body;
    assert!(
        metrics.contains("\nmarktoflow_runs_waiting_for_answer 1\n"),
        "{metrics}"
    );

    let path = format!("/runs/{id}/steps/review/answer");
    let answers: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let (addr, path) = (s.addr.clone(), path.clone());
                scope.spawn(move || {
                    let decision = if i % 2 == 0 { "approve" } else { "reject" };
                    let r = post(
                        &addr,
                        &path,
                        json!({"decision": decision, "refund": 100 + i}),
                    );
                    (r.status, r.json())
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let won: Vec<&(u16, Value)> = answers.iter().filter(|(c, _)| *c == 202).collect();
    assert_eq!(won.len(), 1, "exactly one answer wins: {answers:?}");
    assert!(
        answers.iter().all(|(c, _)| *c == 202 || *c == 409),
        "{answers:?}"
    );
    let decision = won[0].1["decision"].as_str().unwrap().to_string();
    wait_for("the run completes", || {
        run_of(&s, &id)["status"] == "completed"
    });
    let run = run_of(&s, &id);
    assert_eq!(
        run["outputs"]["status"],
        if decision == "approved" {
            "approved"
        } else {
            "rejected"
        }
    );
    let reviews = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["id"] == "review" && x["status"] == "completed")
        .count();
    assert_eq!(reviews, 1, "{run}");
    assert!(http(&s.addr, "GET", "/waits", &[], b"").json()["waits"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn a_link_answers_once_and_a_forged_or_expired_one_is_refused() {
    let d = project();
    let store = d.path().join("runs.db");
    let env = [("MARKTOFLOW_STORE", store.to_str().unwrap())];
    let s = serve(d.path(), &["approval.md", "timeout.md"], &env);
    let id = waiting_refund(&s, 500);
    let link = link_of(&s, &id, "review");
    let form = http(&s.addr, "GET", &link, &[], b"");
    assert_eq!(form.status, 200);
    assert!(
        form.body.contains("<h1>Refund 500 EUR to Bob?</h1>"),
        "{}",
        form.body
    );
    assert!(form.body.contains(
        r#"<input id="f-refund" name="refund" type="number" step="any" min="0" max="10000">"#
    ));
    assert_eq!(form.header("cache-control"), Some("no-store"));
    let post_form = |path: &str, body: &str| {
        http(
            &s.addr,
            "POST",
            path,
            &[("Content-Type", "application/x-www-form-urlencoded")],
            body.as_bytes(),
        )
    };
    let bad = post_form(&link, "refund=-3&decision=approve");
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(
        bad.body
            .contains("field `refund`: must be at least 0 (got -3)"),
        "{}",
        bad.body
    );
    // Another run's link under this signature: refused.
    let (payload, mac) = link.trim_start_matches("/answer/").split_once('.').unwrap();
    // The claim changed by one character, the signature kept.
    let mut changed: Vec<char> = payload.chars().collect();
    let last = changed.len() - 2;
    changed[last] = if changed[last] == 'A' { 'B' } else { 'A' };
    let forged = format!("/answer/{}.{mac}", changed.into_iter().collect::<String>());
    assert_eq!(http(&s.addr, "GET", &forged, &[], b"").status, 403);
    assert_eq!(post_form(&forged, "decision=approve").status, 403);

    let ok = post_form(&link, "refund=120&comment=half+of+it&decision=approve");
    assert_eq!(ok.status, 202, "{}", ok.body);
    assert!(ok.body.contains("Your answer is recorded"), "{}", ok.body);
    let used = post_form(&link, "decision=reject");
    assert_eq!(used.status, 409, "{}", used.body);
    assert!(used.body.contains("the link is used up"), "{}", used.body);
    wait_for("the run completes", || {
        run_of(&s, &id)["status"] == "completed"
    });
    assert_eq!(
        run_of(&s, &id)["outputs"],
        json!({"status": "approved", "refunded": 120, "reviewer": "link"})
    );

    // A link of a wait that expired (`link_ttl: 1s`): gone.
    let r = post(&s.addr, "/hooks/ask", json!({}));
    let ask = r.json()["run_id"].as_str().unwrap().to_string();
    let expiring = link_of(&s, &ask, "ask");
    std::thread::sleep(Duration::from_millis(1100));
    let gone = http(&s.addr, "GET", &expiring, &[], b"");
    assert_eq!(gone.status, 410, "{}", gone.body);
    assert!(gone.body.contains("this link expired"));
}

#[test]
fn an_unanswered_wait_takes_its_timeout_default() {
    let d = project();
    let store = d.path().join("runs.db");
    let env = [("MARKTOFLOW_STORE", store.to_str().unwrap())];
    let s = serve(d.path(), &["timeout.md"], &env);
    let r = post(&s.addr, "/hooks/ask", json!({}));
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(run_of(&s, &id)["status"], "waiting");
    wait_for("the deadline passes and the run goes on", || {
        run_of(&s, &id)["status"] == "completed"
    });
    assert_eq!(
        run_of(&s, &id)["outputs"],
        json!({"size": "small", "timed_out": true})
    );
    // Answering after the deadline changes nothing.
    let late = post(
        &s.addr,
        &format!("/runs/{id}/steps/ask/answer"),
        json!({"size": "large"}),
    );
    assert_eq!(late.status, 409, "{}", late.body);
}

#[test]
fn two_approvals_need_two_people_and_the_requester_is_not_one() {
    let d = project();
    let store = d.path().join("runs.db");
    let env = [("MARKTOFLOW_STORE", store.to_str().unwrap())];
    let s = serve(d.path(), &["two.md", "--identity-header", "X-User"], &env);
    let r = post(&s.addr, "/hooks/deploy", json!({"who": "erin"}));
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let path = format!("/runs/{id}/steps/review/answer");
    let as_ = |who: &str, decision: &str| {
        let r = http(
            &s.addr,
            "POST",
            &path,
            &[("Content-Type", "application/json"), ("X-User", who)],
            json!({"decision": decision}).to_string().as_bytes(),
        );
        (r.status, r.json())
    };
    assert_eq!(
        as_("erin", "approve"),
        (
            403,
            json!({"error": "`erin` asked for this and may not answer it (self_approval: false)"})
        )
    );
    let (code, first) = as_("ann", "approve");
    assert_eq!(
        (code, first["status"].clone(), first["approvals"].clone()),
        (202, json!("counted"), json!(1))
    );
    assert_eq!(
        as_("ann", "approve"),
        (
            403,
            json!({"error": "`ann` has answered this step already"})
        )
    );
    assert_eq!(run_of(&s, &id)["status"], "waiting");
    let (code, second) = as_("bob", "approve");
    assert_eq!(
        (code, second["status"].clone()),
        (202, json!("resumed")),
        "{second}"
    );
    wait_for("the run completes", || {
        run_of(&s, &id)["status"] == "completed"
    });
    assert_eq!(
        run_of(&s, &id)["outputs"],
        json!({"verdict": "approved by ann and bob"})
    );
    // A waiting run cancelled: its wait closes, an answer then changes nothing.
    let r = post(&s.addr, "/hooks/deploy", json!({"who": "erin"}));
    let other = r.json()["run_id"].as_str().unwrap().to_string();
    let c = post(&s.addr, &format!("/runs/{other}/cancel"), json!({}));
    assert_eq!(
        (c.status, c.json()),
        (200, json!({"run_id": other, "status": "cancelled"}))
    );
    assert_eq!(run_of(&s, &other)["status"], "cancelled");
    let late = post(
        &s.addr,
        &format!("/runs/{other}/steps/review/answer"),
        json!({"decision": "approve"}),
    );
    assert_eq!(late.status, 409, "{}", late.body);
}

#[test]
fn the_peers_approval_workflow_runs_unchanged() {
    let d = project();
    let r = run(cmd(d.path()).args([
        "run",
        "peer-approval-workflow.md",
        "--input",
        "employee_name=Sam",
        "--input",
        "amount=42",
        "--input",
        "category=travel",
        "--json",
        "--quiet",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let fields: Vec<Value> = r.json()["waiting"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| json!([f["name"], f["type"], f["required"], f["choices"]]))
        .collect();
    assert_eq!(
        fields,
        [
            json!(["decision", "string", true, ["Approved", "Rejected"]]),
            json!(["comments", "string", false, null]),
            json!(["reviewer_name", "string", true, null]),
        ]
    );
    let ok = run(cmd(d.path()).args([
        "answer",
        &id,
        "--input",
        "decision=Rejected",
        "--input",
        "reviewer_name=Dana",
        "--input",
        "comments=no receipt",
        "--json",
        "--quiet",
    ]));
    assert_eq!(ok.code, 0, "{ok:?}");
    assert_eq!(
        ok.json()["outputs"],
        json!({"approval_status": "rejected", "reviewer_comments": "no receipt", "reviewer_name": "Dana"})
    );
}

#[test]
fn a_running_run_paused_from_outside_waits_and_resumes_where_it_stopped() {
    let d = project();
    let store = d.path().join("runs.db");
    let env = [("MARKTOFLOW_STORE", store.to_str().unwrap())];
    let s = serve(d.path(), &["long.md"], &env);
    let id = start_long(&s);
    let p = post(&s.addr, &format!("/runs/{id}/pause"), json!({}));
    assert_eq!(
        (p.status, p.json()["status"].clone()),
        (202, json!("pausing"))
    );
    wait_for("the run pauses", || run_of(&s, &id)["status"] == "waiting");
    let waits = http(&s.addr, "GET", "/waits", &[], b"").json();
    assert_eq!(waits["waits"][0]["mode"], "pause", "{waits}");
    assert!(waits["waits"][0]["title"]
        .as_str()
        .unwrap()
        .starts_with("Paused before "));
    // Only a running run pauses.
    let again = post(&s.addr, &format!("/runs/{id}/pause"), json!({}));
    assert_eq!(again.status, 409, "{}", again.body);
    // Resumed from the command line: it goes on in that process.
    let r = run(cmd(d.path()).args([
        "resume",
        &id,
        "--as",
        "ops",
        "--json",
        "--quiet",
        "--store",
        store.to_str().unwrap(),
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        (r.json()["status"].clone(), r.json()["outputs"].clone()),
        (json!("completed"), json!({"done": true}))
    );
    // Paused and resumed through the API this time.
    let id = start_long(&s);
    assert_eq!(
        post(&s.addr, &format!("/runs/{id}/pause"), json!({})).status,
        202
    );
    wait_for("the run pauses", || run_of(&s, &id)["status"] == "waiting");
    let r = post(&s.addr, &format!("/runs/{id}/resume"), json!({}));
    assert_eq!(
        (r.status, r.json()["status"].clone()),
        (202, json!("resumed"))
    );
    wait_for("the run completes", || {
        run_of(&s, &id)["status"] == "completed"
    });
    assert_eq!(run_of(&s, &id)["outputs"], json!({"done": true}));
    let not = post(&s.addr, &format!("/runs/{id}/resume"), json!({}));
    assert_eq!(not.status, 409, "{}", not.body);
}

#[test]
fn an_event_signed_with_the_waits_secret_resumes_the_run_with_its_key() {
    use hmac::Mac as _;
    let d = project();
    let store = d.path().join("runs.db");
    let env = [
        ("MARKTOFLOW_STORE", store.to_str().unwrap()),
        ("PAYMENTS_SECRET", "s3cret"),
    ];
    let s = serve(d.path(), &["event.md", "--host", "0.0.0.0"], &env);
    // Off loopback without an API token: only the event's own secret counts.
    let r = post(&s.addr, "/hooks/order", json!({"order": "A7"}));
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let body = json!({"amount": 42}).to_string();
    let sign = |secret: &str| {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body.as_bytes());
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("sha256={hex}")
    };
    let send = |key: &str, signature: &str| {
        http(
            &s.addr,
            "POST",
            &format!("/events/{key}"),
            &[
                ("Content-Type", "application/json"),
                ("X-Hub-Signature-256", signature),
            ],
            body.as_bytes(),
        )
    };
    let wrong = send("order-A7", &sign("guess"));
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    // An unknown key is not told apart from a wrong signature.
    assert_eq!(send("order-B9", &sign("s3cret")).status, 401);
    assert_eq!(run_of(&s, &id)["status"], "waiting");
    let ok = send("order-A7", &sign("s3cret"));
    assert_eq!(ok.status, 202, "{}", ok.body);
    assert_eq!(ok.json()["runs"][0]["run_id"], json!(id));
    wait_for("the run completes", || {
        run_of(&s, &id)["status"] == "completed"
    });
    assert_eq!(run_of(&s, &id)["outputs"], json!({"shipped": "A7 for 42"}));
    assert_eq!(
        send("order-A7", &sign("s3cret")).status,
        401,
        "answered: nothing waits"
    );
}

#[test]
fn marktoflow_pause_pauses_a_run_whichever_process_runs_it() {
    let d = project();
    let store = d.path().join("runs.db");
    let db = store.to_str().unwrap();
    let pause = |id: &str| run(cmd(d.path()).args(["pause", id, "--as", "ops", "--store", db]));
    let paused = |id: &str| {
        format!(
            "run {id} pauses before its next step; `marktoflow resume {}` continues it\n",
            &id[id.len() - 8..]
        )
    };
    let status = |id: &str| {
        run(cmd(d.path()).args(["show", id, "--json", "--store", db])).json()["status"].clone()
    };

    // A run a server executes, paused from a terminal.
    let s = serve(d.path(), &["long.md"], &[("MARKTOFLOW_STORE", db)]);
    let id = start_long(&s);
    let p = pause(&id);
    assert_eq!(
        (p.code, p.stdout.as_str(), p.stderr.as_str()),
        (0, paused(&id).as_str(), "")
    );
    wait_for("the served run pauses", || {
        run_of(&s, &id)["status"] == "waiting"
    });
    let waits = http(&s.addr, "GET", "/waits", &[], b"").json();
    assert_eq!(
        (&waits["waits"][0]["mode"], &waits["waits"][0]["title"]),
        (&json!("pause"), &json!("Paused before Finish"))
    );
    let again = pause(&id);
    assert_eq!(
        (again.code, again.stdout.as_str(), again.stderr),
        (
            2,
            "",
            format!("error: run `{id}` is waiting: only a queued or running run can be paused\n")
        )
    );
    let r = post(&s.addr, &format!("/runs/{id}/resume"), json!({}));
    assert_eq!(r.status, 202, "{}", r.body);
    wait_for("the served run completes", || {
        run_of(&s, &id)["status"] == "completed"
    });
    drop(s);

    // A run of `marktoflow run` in another terminal, paused from this one.
    let child = cmd(d.path())
        .args(["run", "long.md", "--store", db])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut id = String::new();
    wait_for("the terminal's run is recorded", || {
        let h =
            run(cmd(d.path()).args(["history", "--json", "--status", "running", "--store", db]));
        match h.json()["runs"]
            .as_array()
            .and_then(|runs| runs.first().cloned())
        {
            Some(r) => {
                id = r["run_id"].as_str().unwrap().to_string();
                true
            }
            None => false,
        }
    });
    let p = pause(&id);
    assert_eq!(
        (p.code, p.stdout.as_str()),
        (0, paused(&id).as_str()),
        "{}",
        p.stderr
    );
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    let short = &id[id.len() - 8..];
    assert_eq!(out.status.code(), Some(0), "{said}");
    // What the terminal says: how to go on.
    assert!(
        said.contains(&format!(
            "\nrun {short} is paused (Paused before Finish); go on with:\n  marktoflow resume {short}\n"
        )),
        "{said}"
    );
    assert_eq!(status(&id), "waiting");
    let r = run(cmd(d.path()).args(["resume", &id, "--json", "--quiet", "--store", db]));
    assert_eq!(
        (r.code, &r.json()["status"], &r.json()["outputs"]),
        (0, &json!("completed"), &json!({"done": true}))
    );
    // Each step ran once: the pause came between `work` and `finish`.
    let steps =
        run(cmd(d.path()).args(["show", &id, "--json", "--store", db])).json()["steps"].clone();
    let ran: Vec<(&str, &str)> = steps
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        ran,
        [
            ("prepare", "completed"),
            ("work", "completed"),
            ("finish", "completed")
        ]
    );
}

/// `marktoflow ARGS` in `dir` with the fake LLM as Anthropic.
fn with_llm(
    dir: &std::path::Path,
    llm: &crate::fake_llm::FakeLlm,
    args: &[&str],
) -> crate::support::Run {
    run(cmd(dir)
        .args(args)
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "k"))
}

/// An agent with an HTTP tool whose POSTs over 100 need a person: the LLM
/// (fake, on 127.0.0.1) looks the order up, then refunds it; the payments
/// API is another local server recording what it was sent.
#[test]
fn an_agents_http_call_over_the_amount_waits_and_is_made_once_approved() {
    use crate::fake_llm::{FakeLlm, RAW};
    let d = project();
    let payments = FakeLlm::start(std::sync::Arc::new(|req| {
        (RAW, json!({"path": req.path, "ok": true}).to_string())
    }));
    // Each request: the tool calls so far decide the next one.
    let llm = FakeLlm::start(std::sync::Arc::new(|req| {
        let msgs = req.body["messages"].as_array().unwrap();
        let order = if msgs[0]["content"].to_string().contains("order 7") {
            7
        } else {
            8
        };
        let results: Vec<&Value> = msgs
            .iter()
            .flat_map(|m| m["content"].as_array().into_iter().flatten())
            .filter(|b| b["type"] == "tool_result")
            .collect();
        let use_tool = |name: &str, input: Value| {
            (
                RAW,
                json!({"content": [{"type": "tool_use", "id": format!("tu_{}", results.len()), "name": name, "input": input}], "stop_reason": "tool_use"})
                    .to_string(),
            )
        };
        match (order, results.len()) {
            (7, 0) => use_tool("payments__get", json!({"url": "/orders/7"})),
            (7, 1) => use_tool(
                "payments__post",
                json!({"url": "/refunds", "json": {"order": 7, "amount": 250}}),
            ),
            // Order 8: a URL off the tool's host first (refused), then a
            // refund under the amount.
            (8, 0) => use_tool(
                "payments__get",
                json!({"url": "http://169.254.169.254/latest/meta-data"}),
            ),
            (8, 1) => use_tool(
                "payments__post",
                json!({"url": "/refunds", "json": {"order": 8, "amount": 50}}),
            ),
            _ => {
                let all: Vec<String> = results
                    .iter()
                    .map(|r| r["content"].as_str().unwrap_or_default().to_string())
                    .collect();
                (200, format!("Done: {}", all.join(" | ")))
            }
        }
    }));
    let wf = format!(
        "---\nworkflow: {{id: refunds}}\ninputs: {{order: {{type: integer, required: true}}}}\ntools:\n  payments:\n    sdk: http\n    options:\n      base_url: {}\n      headers: {{Authorization: Bearer sk-test}}\n      approval: {{methods: [POST], over: {{amount: 100}}}}\n  llm: {{sdk: anthropic, options: {{model: fake-model}}}}\n---\n\n```yaml\nid: refund\naction: llm.run\ninputs: {{prompt: 'Refund order {{{{ inputs.order }}}}', tools: [payments]}}\n```\n",
        payments.base
    );
    std::fs::write(d.path().join("refunds.md"), wf).unwrap();
    let go = |args: &[&str]| with_llm(d.path(), &llm, args);
    let r = go(&[
        "run",
        "refunds.md",
        "--input",
        "order=7",
        "--json",
        "--quiet",
    ]);
    assert_eq!(
        (r.code, &r.json()["status"]),
        (0, &json!("waiting")),
        "{r:?}"
    );
    let w = &r.json()["waiting"];
    assert_eq!(w["title"], "Allow `payments.post`?");
    assert_eq!(
        w["fields"][0]["default"],
        json!({"url": "/refunds", "json": {"order": 7, "amount": 250}})
    );
    // The lookup was made; the refund waits.
    let paths = |p: &FakeLlm| {
        p.requests()
            .iter()
            .map(|r| r.path.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(paths(&payments), ["/orders/7"]);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let ok = go(&[
        "answer",
        &id,
        "--approve",
        "--as",
        "ann",
        "--json",
        "--quiet",
    ]);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert_eq!(
        ok.json()["steps"][0]["output"],
        "Done: {\"status\":200,\"body\":{\"path\":\"/orders/7\",\"ok\":true}} | {\"status\":200,\"body\":{\"path\":\"/refunds\",\"ok\":true}}"
    );
    // The refund was made once, as approved, with the tool's credentials
    // and a key that makes it once.
    assert_eq!(paths(&payments), ["/orders/7", "/refunds"]);
    let post = &payments.requests()[1];
    assert_eq!(post.body, json!({"order": 7, "amount": 250}));
    assert_eq!(post.header("authorization"), Some("Bearer sk-test"));
    assert!(post
        .header("idempotency-key")
        .is_some_and(|k| k.contains(&id)));

    // Under the amount: no wait. A URL off the tool's host: refused, and
    // the model told so; nothing sent there.
    let r = go(&[
        "run",
        "refunds.md",
        "--input",
        "order=8",
        "--json",
        "--quiet",
    ]);
    assert_eq!(
        (r.code, &r.json()["status"]),
        (0, &json!("completed")),
        "{r:?}"
    );
    let payments_host = payments
        .base
        .trim_start_matches("http://")
        .split(':')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        r.json()["steps"][0]["output"],
        format!("Done: payments.get calls {payments_host} only: give a path under its base URL | {{\"status\":200,\"body\":{{\"path\":\"/refunds\",\"ok\":true}}}}")
    );
    assert_eq!(paths(&payments), ["/orders/7", "/refunds", "/refunds"]);
}

/// A workflow file as an agent's tool, its larger calls approved first.
#[test]
fn an_agent_calls_a_workflow_as_a_tool_and_a_large_call_waits_for_approval() {
    use crate::fake_llm::{FakeLlm, RAW};
    let d = project();
    std::fs::write(
        d.path().join("refund.md"),
        "---\nworkflow: {id: refund, description: Refunds an order.}\ninputs: {order: {type: integer, required: true}, amount: {type: number, required: true, max: 1000}}\noutputs: {refunded: {type: number}}\n---\n\n```yaml\naction: core.set\ninputs: {refunded: '{{ inputs.amount }}'}\n```\n",
    )
    .unwrap();
    let llm = FakeLlm::start(std::sync::Arc::new(|req| {
        let msgs = req.body["messages"].as_array().unwrap();
        let amount = if msgs[0]["content"].to_string().contains("order 7") {
            250
        } else {
            50
        };
        let last = &msgs.last().unwrap()["content"][0];
        match last["type"].as_str() {
            Some("tool_result") => (200, format!("Done: {}", last["content"].as_str().unwrap())),
            _ => (
                RAW,
                json!({"content": [{"type": "tool_use", "id": "tu_1", "name": "refund", "input": {"order": 7, "amount": amount}}], "stop_reason": "tool_use"})
                    .to_string(),
            ),
        }
    }));
    std::fs::write(
        d.path().join("desk.md"),
        "---\nworkflow: {id: desk}\ninputs: {order: {type: integer, required: true}}\ntools:\n  llm: {sdk: anthropic, options: {model: fake-model}}\n---\n\n```yaml\nid: help\naction: llm.run\ninputs:\n  prompt: 'Refund order {{ inputs.order }}'\n  tools: [refund.md]\n  approval: {refund.md: {over: {amount: 100}}}\n```\n",
    )
    .unwrap();
    let go = |args: &[&str]| with_llm(d.path(), &llm, args);
    // The model saw the workflow as a tool with its inputs' schema.
    let r = go(&["run", "desk.md", "--input", "order=7", "--json", "--quiet"]);
    assert_eq!(
        (r.code, &r.json()["status"]),
        (0, &json!("waiting")),
        "{r:?}"
    );
    let offered = &llm.requests()[0].body["tools"][0];
    assert_eq!(
        (
            &offered["name"],
            &offered["description"],
            &offered["input_schema"]["required"]
        ),
        (
            &json!("refund"),
            &json!("Refunds an order."),
            &json!(["order", "amount"])
        )
    );
    assert_eq!(r.json()["waiting"]["title"], "Allow `refund.md`?");
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let ok = go(&[
        "answer",
        &id,
        "--approve",
        "--as",
        "ann",
        "--json",
        "--quiet",
    ]);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert_eq!(ok.json()["steps"][0]["output"], "Done: {\"refunded\":250}");
    // Under the amount: run at once.
    let r = go(&["run", "desk.md", "--input", "order=8", "--json", "--quiet"]);
    assert_eq!(
        (r.code, &r.json()["status"], &r.json()["steps"][0]["output"]),
        (0, &json!("completed"), &json!("Done: {\"refunded\":50}")),
        "{r:?}"
    );
}
