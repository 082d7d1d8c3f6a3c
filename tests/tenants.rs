//! Tenants kept apart, as a security boundary: notes whose frontmatter
//! names a `tenant_id` are found by that tenant's searches only, through
//! every path — a run by hand, the graph, a webhook, `/mcp` and stdio MCP,
//! the run API — and a request cannot make itself another tenant than the
//! one its token grants (`serve --tenant-token TENANT=VAR`).

use crate::support::{bin, cmd, copy_dir, http, repo, run, tempdir, try_serve};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const ACME: &str = "---\ntenant_id: acme\ntype: docs\ndate: 2026-11-01\n---\n# Acme ledger notes\n\nThe ledger-sync service is owned by Wile Coyote.\nThe ledger-sync service depends on roadrunner-db.\nroadrunner-db depends on canyon-cache.\nAcme rotates the rollout password every Friday.\n";

const GLOBEX: &str = "---\ntenant_id: Globex\ntype: docs\ndate: 2026-11-02\n---\n# Globex ledger notes\n\nThe ledger-sync service is owned by Hank Scorpio.\nThe ledger-sync service depends on doomsday-db.\nGlobex rotates the rollout password every Monday.\n";

/// A note whose `tenant_id` is a list: nobody's, never shown.
const UNCLEAR: &str = "---\ntenant_id: [acme, globex]\n---\n# Shared-looking ledger notes\n\nThe ledger-sync service is owned by Nobody Atall.\nThe rollout password is rotated by Nobody Atall.\n";

/// The ConHub example with the two tenants' notes (and an unclear one).
fn knowledge_base(dir: &Path) -> PathBuf {
    let kb = dir.join("conhub");
    copy_dir(&repo().join("examples/conhub"), &kb);
    std::fs::create_dir_all(kb.join("tenants")).unwrap();
    std::fs::write(kb.join("tenants/acme.md"), ACME).unwrap();
    std::fs::write(kb.join("tenants/globex.md"), GLOBEX).unwrap();
    std::fs::write(kb.join("tenants/unclear.md"), UNCLEAR).unwrap();
    kb
}

/// The notes a memory-search answer's blocks come from.
fn sources(out: &Value) -> Vec<String> {
    let mut s: Vec<String> = out["blocks"]
        .as_array()
        .unwrap_or_else(|| panic!("no blocks: {out}"))
        .iter()
        .map(|b| b["source_id"].as_str().unwrap().to_string())
        .collect();
    s.dedup();
    s
}

/// The tenants' notes among `sources`.
fn tenant_notes(out: &Value) -> Vec<String> {
    sources(out)
        .into_iter()
        .filter(|s| s.starts_with("tenants/"))
        .collect()
}

fn search_by_hand(kb: &Path, query: &str, tenant: &str, strategy: &str) -> Value {
    let mut c = cmd(&repo());
    c.args([
        "run",
        "workflows/conhub/memory-search.md",
        "--quiet",
        "--json",
    ])
    .args(["--input", &format!("query={query}")])
    .args(["--input", &format!("tenant_id={tenant}")])
    .args(["--input", &format!("force_strategy={strategy}")])
    .args(["--input", "today=2026-11-23"])
    .args(["--input", &format!("knowledge_base={}", kb.display())])
    .arg("--allow-read")
    .arg(kb);
    if let Some(m) = std::env::var_os("MARKTOFLOW_EMBED_MODEL") {
        c.env("MARKTOFLOW_EMBED_MODEL", &m)
            .arg("--allow-read")
            .arg(&m);
    }
    let r = run(&mut c);
    assert_eq!(r.code, 0, "{r:?}");
    r.json()["outputs"].clone()
}

#[test]
fn a_search_sees_the_shared_notes_and_its_tenants_only_whatever_the_strategy() {
    let d = tempdir();
    let kb = knowledge_base(d.path());
    let q = "ledger-sync rollout password rotates";
    let mut strategies = vec!["keyword", "recent", "hybrid", "vector_then_graph"];
    if crate::support::embed_model().is_some() {
        strategies.push("semantic");
    }
    for strategy in strategies {
        let acme = search_by_hand(&kb, q, "acme", strategy);
        assert_eq!(
            tenant_notes(&acme),
            ["tenants/acme.md"],
            "{strategy}: {acme}"
        );
        // Tenant ids compare as notes' filters do: case and spaces aside.
        let globex = search_by_hand(&kb, q, " globex ", strategy);
        assert_eq!(
            tenant_notes(&globex),
            ["tenants/globex.md"],
            "{strategy}: {globex}"
        );
        let nobody = search_by_hand(&kb, q, "", strategy);
        assert_eq!(
            tenant_notes(&nobody),
            Vec::<String>::new(),
            "{strategy}: {nobody}"
        );
        assert!(
            !sources(&nobody).is_empty(),
            "{strategy}: the shared notes are found: {nobody}"
        );
        let other = search_by_hand(&kb, q, "initech", strategy);
        assert_eq!(
            tenant_notes(&other),
            Vec::<String>::new(),
            "{strategy}: {other}"
        );
    }
}

#[test]
fn the_graph_answers_from_the_tenants_edges_only() {
    let d = tempdir();
    let kb = knowledge_base(d.path());
    let owner = |tenant: &str| {
        let out = search_by_hand(&kb, "Who owns the ledger-sync service?", tenant, "graph");
        let texts: Vec<String> = out["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                format!(
                    "{} {}",
                    b["id"].as_str().unwrap(),
                    b["text"].as_str().unwrap()
                )
            })
            .collect();
        texts
    };
    assert_eq!(
        owner("acme"),
        ["tenants/acme.md#L8 The ledger-sync service is owned by Wile Coyote"]
    );
    assert_eq!(
        owner("globex"),
        ["tenants/globex.md#L8 The ledger-sync service is owned by Hank Scorpio"]
    );
    // Nobody's edges: the question names nothing the shared notes know,
    // and the keyword search it falls back to finds no tenant's note.
    let none = search_by_hand(&kb, "Who owns the ledger-sync service?", "", "graph");
    assert_eq!(tenant_notes(&none), Vec::<String>::new(), "{none}");

    // Transitively, by `kb.graph` itself; and the names of another
    // tenant's graph are not even suggested.
    std::fs::write(
        d.path().join("deps.md"),
        "---\nworkflow: {id: deps}\ninputs:\n  kb: {type: string}\n  node: {type: string}\n  tenant: {type: string, default: ''}\n---\n```yaml\naction: kb.graph\ninputs:\n  kb: '{{ inputs.kb }}'\n  node: '{{ inputs.node }}'\n  tenant: '{{ inputs.tenant }}'\n  direction: out\n  relation: depends_on\n  depth: 5\noutput_variable: g\n```\n\n```yaml\naction: workflow.set_outputs\ninputs:\n  found: '{{ g.found }}'\n  reached: \"{{ g.nodes | map(attribute='name') | list }}\"\n  suggestions: '{{ g.suggestions }}'\n  notes: '{{ g.graph.notes }}'\n```\n",
    )
    .unwrap();
    let graph = |node: &str, tenant: &str| {
        let r = run(cmd(d.path())
            .args(["run", "deps.md", "--quiet", "--json"])
            .args(["--input", &format!("kb={}", kb.display())])
            .args(["--input", &format!("node={node}")])
            .args(["--input", &format!("tenant={tenant}")]));
        assert_eq!(r.code, 0, "{r:?}");
        r.json()["outputs"].clone()
    };
    let shared = std::fs::read_dir(repo().join("examples/conhub"))
        .unwrap()
        .flat_map(|e| std::fs::read_dir(e.unwrap().path()).into_iter().flatten())
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "md")
        })
        .count();
    let acme = graph("ledger-sync service", "acme");
    assert_eq!(acme["found"], true, "{acme}");
    assert_eq!(
        acme["reached"],
        json!(["roadrunner-db", "canyon-cache"]),
        "{acme}"
    );
    assert_eq!(acme["notes"], json!(shared + 1), "{acme}");
    let globex = graph("ledger-sync service", "GLOBEX");
    assert_eq!(globex["reached"], json!(["doomsday-db"]), "{globex}");
    let asked = graph("doomsday-dc", "acme");
    assert_eq!(asked["found"], false, "{asked}");
    assert_eq!(asked["suggestions"], json!([]), "{asked}");
    let theirs = graph("doomsday-dc", "globex");
    assert_eq!(theirs["suggestions"], json!(["doomsday db"]), "{theirs}");
    let none = graph("ledger-sync service", "");
    assert_eq!(
        (&none["found"], &none["reached"]),
        (&json!(false), &json!([])),
        "{none}"
    );
}

#[test]
fn evidence_reads_a_note_only_as_its_tenants_or_a_shared_one_whatever_hits_it_is_given() {
    let d = tempdir();
    let kb = knowledge_base(d.path());
    // Hits naming every tenant's note, as a stale index or a caller might.
    std::fs::write(
        d.path().join("evidence.md"),
        "---\nworkflow: {id: evidence}\ninputs:\n  kb: {type: string}\n  tenant: {type: string, default: ''}\n---\n```yaml\naction: kb.evidence\ninputs:\n  kb: '{{ inputs.kb }}'\n  tenant: '{{ inputs.tenant }}'\n  question: Who owns the ledger-sync service?\n  hits: [{path: tenants/acme.md}, {path: tenants/globex.md}, {path: tenants/unclear.md}, {path: docs/ownership.md}]\noutput_variable: ev\n```\n\n```yaml\naction: workflow.set_outputs\ninputs:\n  notes: \"{{ ev.evidence | map(attribute='path') | unique | list }}\"\n```\n",
    )
    .unwrap();
    let read = |tenant: &str| {
        let r = run(cmd(d.path())
            .args(["run", "evidence.md", "--quiet", "--json"])
            .args(["--input", &format!("kb={}", kb.display())])
            .args(["--input", &format!("tenant={tenant}")]));
        assert_eq!(r.code, 0, "{r:?}");
        r.json()["outputs"]["notes"].clone()
    };
    assert_eq!(read(""), json!(["docs/ownership.md"]));
    assert_eq!(
        read("Acme"),
        json!(["tenants/acme.md", "docs/ownership.md"])
    );
    assert_eq!(
        read("globex"),
        json!(["tenants/globex.md", "docs/ownership.md"])
    );
}

/// `serve workflows/conhub` with two tenants' tokens and an operator's
/// token for the run API.
fn serve_tenants(kb: &Path, extra: &[&str]) -> crate::support::Server {
    let mut args = vec![
        "workflows/conhub".to_string(),
        "--allow-read".into(),
        kb.display().to_string(),
        "--allow-write".into(),
        kb.display().to_string(),
        "--tenant-token".into(),
        "acme=ACME_TOKEN".into(),
        "--tenant-token".into(),
        "globex=GLOBEX_TOKEN".into(),
        "--api-token-env".into(),
        "API_TOKEN".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    try_serve(
        &repo(),
        &args,
        &[
            ("ACME_TOKEN", "acme-secret"),
            ("GLOBEX_TOKEN", "globex-secret"),
            ("API_TOKEN", "operator-secret"),
            ("MCP_TOKEN", "mcp-secret"),
        ],
    )
    .unwrap()
}

/// A request with acme's token naming globex: refused, and nothing runs.
fn acme_asking_for_globex(answer: (u16, Value)) {
    assert_eq!(
        answer,
        (
            403,
            json!({"error": "`tenant_id`: the token grants tenant `acme`, not `globex`"})
        )
    );
}

fn post(addr: &str, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("Authorization", a));
    }
    let r = http(addr, "POST", path, &headers, body.to_string().as_bytes());
    (r.status, r.json())
}

#[test]
fn a_webhook_request_is_the_tenant_its_token_grants() {
    let d = tempdir();
    let kb = knowledge_base(d.path());
    let s = serve_tenants(&kb, &[]);
    let body = |tenant: Option<&str>| {
        let mut b = json!({"query": "ledger-sync rollout password rotates", "knowledge_base": kb.display().to_string(), "force_strategy": "keyword"});
        if let Some(t) = tenant {
            b["tenant_id"] = json!(t);
        }
        b
    };
    let (status, out) = post(
        &s.addr,
        "/api/memory/search",
        Some("acme-secret"),
        &body(None),
    );
    assert_eq!(status, 200, "{out}");
    assert_eq!(tenant_notes(&out["outputs"]), ["tenants/acme.md"]);
    // Naming itself is fine; naming another tenant is refused, and nothing runs.
    let (status, out) = post(
        &s.addr,
        "/api/memory/search",
        Some("acme-secret"),
        &body(Some("ACME")),
    );
    assert_eq!(status, 200, "{out}");
    assert_eq!(tenant_notes(&out["outputs"]), ["tenants/acme.md"]);
    acme_asking_for_globex(post(
        &s.addr,
        "/api/memory/search",
        Some("acme-secret"),
        &body(Some("globex")),
    ));
    let (status, out) = post(
        &s.addr,
        "/api/memory/search",
        Some("globex-secret"),
        &body(None),
    );
    assert_eq!(status, 200, "{out}");
    assert_eq!(tenant_notes(&out["outputs"]), ["tenants/globex.md"]);
    // The graph's answers too (`graph-ask.md`): each tenant its own owner,
    // cited by its own note; naming another tenant is refused.
    let ask = |tenant: Option<&str>| {
        let mut b = json!({"question": "Who owns the ledger-sync service?", "knowledge_base": kb.display().to_string(), "reader": "none"});
        if let Some(t) = tenant {
            b["tenant_id"] = json!(t);
        }
        b
    };
    for (token, owner, cited) in [
        ("acme-secret", "Wile Coyote", "tenants/acme.md:8"),
        ("globex-secret", "Hank Scorpio", "tenants/globex.md:8"),
    ] {
        let (status, out) = post(&s.addr, "/api/graph/ask", Some(token), &ask(None));
        assert_eq!(status, 200, "{out}");
        assert_eq!(
            (&out["outputs"]["names"], &out["outputs"]["citations"]),
            (&json!([owner]), &json!([cited])),
            "{out}"
        );
    }
    acme_asking_for_globex(post(
        &s.addr,
        "/api/graph/ask",
        Some("acme-secret"),
        &ask(Some("globex")),
    ));
    // No token, a wrong one, or the operator's (which is the run API's, not
    // a tenant's): nobody's request.
    for token in [None, Some("wrong"), Some("operator-secret")] {
        let (status, out) = post(&s.addr, "/api/memory/search", token, &body(Some("acme")));
        assert_eq!(
            (status, out),
            (
                401,
                json!({"error": "`tenant_id` is the tenant: send a tenant's token (`Authorization: Bearer …`); tokens are configured with --tenant-token"})
            ),
            "{token:?}"
        );
    }

    // The run API and the console are the operator's: a tenant's token
    // does not open them; the operator may run for any tenant.
    let (status, _) = post(
        &s.addr,
        "/workflows/conhub-memory-search/runs",
        Some("acme-secret"),
        &body(None),
    );
    assert_eq!(status, 401);
    let r = http(
        &s.addr,
        "GET",
        "/runs",
        &[("Authorization", "Bearer globex-secret")],
        b"",
    );
    assert_eq!(r.status, 401, "{}", r.body);
    let (status, started) = post(
        &s.addr,
        "/workflows/conhub-memory-search/runs",
        Some("operator-secret"),
        &body(Some("globex")),
    );
    assert_eq!(status, 202, "{started}");
    let path = format!("/runs/{}", started["run_id"].as_str().unwrap());
    let mut run = Value::Null;
    crate::support::wait_for("the operator's run", || {
        run = http(
            &s.addr,
            "GET",
            &path,
            &[("Authorization", "Bearer operator-secret")],
            b"",
        )
        .json();
        run["status"] == "completed"
    });
    assert_eq!(
        tenant_notes(&run["outputs"]),
        ["tenants/globex.md"],
        "{run}"
    );
}

#[test]
fn mcp_calls_are_the_tenant_their_token_grants_over_http_and_stdio() {
    if !crate::mcp::have_client() {
        return;
    }
    let d = tempdir();
    let kb = knowledge_base(d.path());
    let s = serve_tenants(&kb, &["--mcp", "--mcp-token-env", "MCP_TOKEN"]);
    let url = format!("http://{}/mcp", s.addr);
    let kb_arg = kb.display().to_string();
    let search = |tenant: Option<&str>| {
        let mut a = json!({"query": "ledger-sync rollout password rotates", "knowledge_base": kb_arg, "strategy": "keyword"});
        if let Some(t) = tenant {
            a["tenant_id"] = json!(t);
        }
        json!({"do": "call", "name": "memory.search", "arguments": a})
    };
    let store = json!({"do": "call", "name": "memory.store", "arguments": {
        "text": "The ledger-sync failover drill is on the first Tuesday.", "knowledge_base": kb_arg, "today": "2026-11-20"}});
    let client = |token: &str, actions: Value| {
        let mut c = Command::new("python3");
        c.arg(repo().join("tests/mcp/client.py"))
            .arg("http")
            .arg(actions.to_string())
            .arg(&url)
            .arg(token);
        crate::mcp::client(c, &[])
    };
    let out = client(
        "acme-secret",
        json!([{"do": "list"}, search(None), search(Some("globex")), store, search(None)]),
    );
    let names: Vec<&str> = out[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // The tools that keep tenants apart, not the others.
    assert_eq!(
        names,
        [
            "graph.ask",
            "memory.search",
            "memory.store",
            "memory.robot_context",
            "memory.robot_search"
        ],
        "{}",
        out[0]
    );
    assert_eq!(
        tenant_notes(&out[1]["result"]["structuredContent"]),
        ["tenants/acme.md"]
    );
    assert_eq!(out[2]["result"]["isError"], true, "{}", out[2]);
    assert_eq!(
        out[2]["result"]["content"][0]["text"],
        "`tenant_id`: the token grants tenant `acme`, not `globex`"
    );
    // What acme stored is acme's.
    let stored = out[3]["result"]["structuredContent"]["source_id"]
        .as_str()
        .unwrap()
        .to_string();
    let text = std::fs::read_to_string(kb.join(&stored)).unwrap();
    assert!(text.starts_with("---\ntenant_id: \"acme\"\n"), "{text}");
    let drill = json!({"do": "call", "name": "memory.search", "arguments": {"query": "failover drill", "knowledge_base": kb_arg, "strategy": "keyword"}});
    let acme = client("acme-secret", json!([drill]));
    assert_eq!(sources(&acme[0]["result"]["structuredContent"])[0], stored);
    let globex = client("globex-secret", json!([drill]));
    assert!(
        !sources(&globex[0]["result"]["structuredContent"]).contains(&stored),
        "{}",
        globex[0]
    );
    // The graph's answer is the caller's tenant's too.
    let ask = json!({"do": "call", "name": "graph.ask", "arguments": {"question": "Who owns the ledger-sync service?", "knowledge_base": kb_arg, "reader": "none"}});
    for (token, owner) in [
        ("acme-secret", "Wile Coyote"),
        ("globex-secret", "Hank Scorpio"),
    ] {
        let out = client(token, json!([ask]));
        assert_eq!(
            out[0]["result"]["structuredContent"]["names"],
            json!([owner]),
            "{}",
            out[0]
        );
    }
    // The MCP token is the operator's: every tool, any tenant named.
    let op = client(
        "mcp-secret",
        json!([{"do": "list"}, search(Some("globex"))]),
    );
    assert_eq!(op[0]["tools"].as_array().unwrap().len(), 6, "{}", op[0]);
    assert_eq!(
        tenant_notes(&op[1]["result"]["structuredContent"]),
        ["tenants/globex.md"]
    );
    drop(s);

    // Over stdio, `--tenant` makes every call that tenant's.
    let mut c = Command::new("python3");
    c.current_dir(repo())
        .arg(repo().join("tests/mcp/client.py"))
        .arg("stdio")
        .arg(json!([search(None), search(Some("acme"))]).to_string())
        .arg("--")
        .arg(bin())
        .args([
            "mcp",
            "workflows/conhub",
            "--tenant",
            "globex",
            "--allow-read",
        ])
        .arg(&kb);
    let out = crate::mcp::client(c, &[]);
    assert_eq!(
        tenant_notes(&out[0]["result"]["structuredContent"]),
        ["tenants/globex.md"]
    );
    assert_eq!(
        out[1]["result"]["content"][0]["text"],
        "`tenant_id`: the token grants tenant `globex`, not `acme`"
    );
}

#[test]
fn a_server_that_cannot_tell_tenants_apart_does_not_start() {
    let d = tempdir();
    // Open to the network, with nothing to say whose a request is.
    let r = run(cmd(&repo())
        .args([
            "serve",
            "workflows/conhub",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--no-store",
        ])
        .current_dir(repo()));
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(
        r.stderr.trim(),
        "error: workflows/conhub/graph-ask.md: input `tenant_id` is its tenant; serving it on 0.0.0.0 needs `--tenant-token TENANT=VAR` (or a `token_env` on its webhook)"
    );
    let r = run(cmd(d.path()).args([
        "serve",
        &repo().join("workflows/conhub").display().to_string(),
        "--tenant-token",
        "acme=NOT_SET",
        "--port",
        "0",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(
        r.stderr.trim(),
        "error: `--tenant-token acme=NOT_SET`: `NOT_SET` is not set; the tenant is not served without its token"
    );
}
