//! The shared store on a real PostgreSQL, started by each test itself
//! (`initdb` + `pg_ctl` in a temporary folder, as an unprivileged user, on a
//! free port): the store's behaviour, fencing, and servers and workers of
//! the real binary sharing one queue.

use crate::support::{bin, repo, tempdir};
use marktoflow::store::{NewRun, PgOptions, PgStore, RunFilter, RunStatus, RunStore, StoreError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A PostgreSQL server of the test's own, stopped when dropped.
pub struct Postgres {
    pub url: String,
    bin: PathBuf,
    data: PathBuf,
    user: Option<String>,
    /// How `pg_ctl` started it (port, socket folder, settings).
    opts: String,
    _dir: tempfile::TempDir,
}

/// Where Debian (or PATH) keeps `initdb` and `pg_ctl`.
fn pg_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| rd.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs.reverse();
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter()
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

impl Postgres {
    /// Starts one, or None when PostgreSQL is missing and the run allows
    /// skipping (see `support::missing`); otherwise its absence fails.
    pub fn start() -> Option<Postgres> {
        let Some(bin) = pg_bin() else {
            crate::support::missing(
                "the shared-store tests",
                "install PostgreSQL's initdb and pg_ctl (apt-get install postgresql; `.ci/run` does)",
            );
            return None;
        };
        // PostgreSQL refuses to run as root: then as an unprivileged user.
        let user = is_root().then(|| {
            let has = |u: &str| {
                Command::new("id")
                    .arg(u)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if has("postgres") {
                "postgres"
            } else {
                "nobody"
            }
            .to_string()
        });
        let dir = tempfile::Builder::new()
            .prefix("marktoflow-pg")
            .tempdir_in("/tmp")
            .unwrap();
        let data = dir.path().join("data");
        if let Some(u) = &user {
            let ok = Command::new("chown")
                .args(["-R", u])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(ok.success(), "chown of the test's PostgreSQL folder");
        }
        let as_user = |program: &Path| -> Command {
            match &user {
                Some(u) => {
                    let mut c = Command::new("runuser");
                    c.args(["-u", u, "--"]).arg(program);
                    c
                }
                None => Command::new(program),
            }
        };
        let out = as_user(&bin.join("initdb"))
            .args([
                "-A",
                "trust",
                "-U",
                "marktoflow",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let opts = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
                dir.path().display()
            );
            let started = as_user(&bin.join("pg_ctl"))
                .args(["-w", "-t", "60", "-o", &opts, "-l"])
                .arg(dir.path().join("log"))
                .arg("-D")
                .arg(&data)
                .arg("start")
                .stdout(Stdio::null())
                .status()
                .unwrap();
            if started.success() {
                return Some(Postgres {
                    url: format!("postgres://marktoflow@127.0.0.1:{port}/postgres"),
                    bin,
                    data,
                    user,
                    opts,
                    _dir: dir,
                });
            }
        }
        panic!(
            "PostgreSQL did not start: {}",
            std::fs::read_to_string(dir.path().join("log")).unwrap_or_default()
        );
    }

    fn pg_ctl(&self) -> Command {
        match &self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(self.bin.join("pg_ctl"));
                c
            }
            None => Command::new(self.bin.join("pg_ctl")),
        }
    }

    /// Stops the server (an outage), its clients cut off.
    pub fn stop(&self) {
        let ok = self
            .pg_ctl()
            .args(["-w", "-m", "fast", "-D"])
            .arg(&self.data)
            .arg("stop")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "pg_ctl stop");
    }

    /// Starts it again after [`Postgres::stop`], on the same port.
    pub fn start_again(&self) {
        let ok = self
            .pg_ctl()
            .args(["-w", "-t", "60", "-o", &self.opts, "-l"])
            .arg(self.data.parent().unwrap().join("log"))
            .arg("-D")
            .arg(&self.data)
            .arg("start")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "pg_ctl start");
    }

    /// A plain client, for what the test checks or changes behind the store.
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).unwrap()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let mut c = match &self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(self.bin.join("pg_ctl"));
                c
            }
            None => Command::new(self.bin.join("pg_ctl")),
        };
        let _ = c
            .args(["-m", "immediate", "-D"])
            .arg(&self.data)
            .arg("stop")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn new_run(id: &str, key: Option<&str>) -> NewRun {
    NewRun {
        id: id.into(),
        workflow: "w".into(),
        file: "/tmp/w.md".into(),
        version: "v1".into(),
        inputs: json!({"q": "x"}).as_object().unwrap().clone(),
        trigger: "webhook".into(),
        status: RunStatus::Queued,
        retry_of: None,
        pid: None,
        owner: None,
        idempotency_key: key.map(str::to_string),
        context: json!({"type": "webhook"}),
        concurrency: None,
    }
}

fn step(id: &str, top: usize) -> marktoflow::store::StepRow {
    marktoflow::store::StepRow {
        step_id: id.into(),
        name: id.into(),
        depth: 0,
        top_index: top,
        status: marktoflow::engine::StepStatus::Completed,
        attempts: 1,
        started_at: 0,
        duration_ms: 1,
        output: json!({"n": top}),
        error: None,
        reused: false,
        inputs: None,
        usage: None,
    }
}

fn opts(executes: bool, lease_ms: u64) -> PgOptions {
    PgOptions {
        executes,
        lease: Duration::from_millis(lease_ms),
        role: "test".into(),
    }
}

#[test]
fn the_shared_store_queues_leases_fences_and_keeps_keys_unique() {
    let Some(pg) = Postgres::start() else { return };
    // A server that only enqueues, and two workers.
    let front = PgStore::open(&pg.url, opts(false, 10_000)).unwrap();
    let a = PgStore::open(&pg.url, opts(true, 10_000)).unwrap();
    let b = PgStore::open(&pg.url, opts(true, 10_000)).unwrap();
    for i in 0..5 {
        front
            .create_run(new_run(&format!("run-{i}"), None))
            .unwrap();
    }
    // Queued for a worker: alive (waiting), not interrupted.
    let r = front.get_run("run-0").unwrap();
    assert_eq!((r.status, r.is_interrupted()), (RunStatus::Queued, false));
    assert_eq!(r.context, json!({"type": "webhook"}));
    // A part of an id finds the one run it names; LIKE's wildcards and
    // escape name none (as on SQLite).
    assert!(matches!(
        front.get_run("run-"),
        Err(StoreError::Ambiguous(_))
    ));
    assert_eq!(front.get_run("n-3").unwrap().id, "run-3");
    for key in ["", "%", "run-%", "_un-0", "run-0\\", "r\\%"] {
        assert!(
            matches!(front.get_run(key), Err(StoreError::NotFound(_))),
            "{key:?}"
        );
    }
    // Each run goes to one worker only.
    let mine = a.claim(&["v1".into()], 3).unwrap();
    let theirs = b.claim(&["v1".into(), "other".into()], 10).unwrap();
    assert_eq!((mine.len(), theirs.len()), (3, 2));
    assert!(b.claim(&["v1".into()], 10).unwrap().is_empty());
    let mut all: Vec<String> = mine.iter().chain(&theirs).map(|r| r.id.clone()).collect();
    all.sort();
    assert_eq!(all, ["run-0", "run-1", "run-2", "run-3", "run-4"]);
    assert_eq!(mine[0].id, "run-0", "oldest first");
    // The holder records; a run taken away from it (its lease given to
    // another worker) refuses its writes, and nothing of them is stored.
    let held = mine[0].id.clone();
    a.mark_running(&held);
    a.record_step(&held, step("one", 1));
    a.flush().unwrap();
    pg.client()
        .execute(
            "UPDATE runs SET worker = 'someone-else', attempt = attempt + 1 WHERE id = $1",
            &[&held],
        )
        .unwrap();
    a.record_step(&held, step("two", 2));
    match a.flush() {
        Err(StoreError::LeaseLost(id)) => assert_eq!(id, held),
        other => panic!("a fenced write must fail the flush: {other:?}"),
    }
    let steps = a.steps_of(&held).unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
    // An Idempotency-Key is the first run's across the cluster.
    a.create_run(new_run("keyed-1", Some("POST /hook k1")))
        .unwrap();
    match b.create_run(new_run("keyed-2", Some("POST /hook k1"))) {
        Err(StoreError::Db(m)) if m.contains("keyed-1") => {}
        Err(StoreError::DuplicateKey(id)) => assert_eq!(id, "keyed-1"),
        other => panic!("a second run for one key: {other:?}"),
    }
    assert!(matches!(b.get_run("keyed-2"), Err(StoreError::NotFound(_))));
    assert_eq!(
        b.run_for_key("POST /hook k1").unwrap().as_deref(),
        Some("keyed-1")
    );
    // Listing and counting as with SQLite.
    let queued = front
        .list_runs(&RunFilter {
            status: Some(RunStatus::Queued),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(queued.len(), 5);
    assert_eq!(front.count_runs(&RunFilter::default()).unwrap(), 6);
}

#[test]
fn a_dead_workers_runs_go_back_to_the_queue_after_its_lease() {
    let Some(pg) = Postgres::start() else { return };
    let front = PgStore::open(&pg.url, opts(false, 10_000)).unwrap();
    front.create_run(new_run("r1", None)).unwrap();
    let dying = PgStore::open(&pg.url, opts(true, 1_000)).unwrap();
    let took = dying.claim(&["v1".into()], 1).unwrap();
    assert_eq!(took.len(), 1);
    dying.mark_running("r1");
    dying.record_step("r1", step("one", 1));
    dying.save_checkpoint(
        "r1",
        marktoflow::store::CheckpointRow::Whole(std::sync::Arc::new(
            marktoflow::engine::Checkpoint {
                next_step: 1,
                ..Default::default()
            },
        )),
        false,
    );
    // A step after the checkpoint: redone by the next worker, kept once.
    dying.record_step("r1", step("two", 2));
    dying.flush().unwrap();
    // Killed: no heartbeat any more (its leases are not pushed on).
    pg.client().execute("DELETE FROM workers", &[]).unwrap();
    drop(dying);
    let other = PgStore::open(&pg.url, opts(true, 1_000)).unwrap();
    other.join_cluster();
    let start = Instant::now();
    let again = loop {
        let got = other.claim(&["v1".into()], 1).unwrap();
        if !got.is_empty() {
            break got;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never re-queued");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(again[0].id, "r1");
    let steps: Vec<String> = other
        .steps_of("r1")
        .unwrap()
        .into_iter()
        .map(|s| s.step_id)
        .collect();
    assert_eq!(
        steps,
        ["one"],
        "the step after the checkpoint is dropped, to run again"
    );
    let cp = other.checkpoint("r1", None).unwrap().unwrap();
    assert_eq!(cp.next_step, 1);
    // The reaper counted the death, one nobody is blamed for (a lease ran
    // out); a second one is counted too. At `MAX_DEATHS` a server refuses to
    // resume the run.
    assert_eq!(again[0].deaths, marktoflow::store::death::UNEXPLAINED);
    other.mark_running("r1");
    other.flush().unwrap();
    pg.client().execute("DELETE FROM workers", &[]).unwrap();
    drop(other);
    let third = PgStore::open(&pg.url, opts(true, 1_000)).unwrap();
    third.join_cluster();
    let start = Instant::now();
    let last = loop {
        let got = third.claim(&["v1".into()], 1).unwrap();
        if !got.is_empty() {
            break got;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never re-queued");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(last[0].deaths, 2 * marktoflow::store::death::UNEXPLAINED);
}

const WORKFLOW: &str = r#"---
workflow:
  id: pg-demo
  name: PG demo
inputs:
  n:
    type: number
    default: 0
triggers:
  - type: webhook
    path: /pg
    method: POST
---

# PG demo

## One
```yaml
action: core.set
inputs:
  a: "{{ inputs.n }}"
output_variable: one
```

## Wait
```yaml
action: script
inputs:
  code: "const t = Date.now(); while (Date.now() - t < 150) {} return 1;"
output_variable: waited
```

## Two
```yaml
action: core.set
inputs:
  b: "{{ one.a }}-done"
output_variable: two
```
"#;

/// A process of the binary, killed when dropped (also when a test fails).
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(dir: &Path, args: &[&str]) -> Proc {
    Proc(
        Command::new(bin())
            .current_dir(dir)
            .args(args)
            .env("MARKTOFLOW_HOME", dir.join(".home"))
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Starts the binary with `args` and waits for the address it prints
/// after `on http://` (a server, or a worker with `--port`).
fn start_listening(dir: &Path, args: &[&str]) -> (Proc, String) {
    start_listening_at(dir, &dir.join(".home"), args)
}

/// [`start_listening`] with its own per-user folder `home`, as on a host
/// of its own.
fn start_listening_at(dir: &Path, home: &Path, args: &[&str]) -> (Proc, String) {
    use std::io::BufRead;
    let mut c = Command::new(bin());
    c.current_dir(dir).args(args);
    // A kill or a pause here is the server's own (not its supervisor's).
    if args.first() == Some(&"serve") {
        c.arg("--no-supervisor");
    }
    crate::support::no_local_model(&mut c);
    let mut child = c
        .env("MARKTOFLOW_HOME", home)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let proc = Proc(child);
    let mut all = String::new();
    loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "ended: {all}");
        all.push_str(&line);
        if let Some(rest) = line.split("on http://").nth(1) {
            let addr = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            std::thread::spawn(move || {
                let mut sink = String::new();
                while err.read_line(&mut sink).unwrap_or(0) > 0 {
                    sink.clear();
                }
            });
            return (proc, addr);
        }
    }
}

fn serve_enqueue_only(dir: &Path, url: &str) -> (Proc, String) {
    start_listening(
        dir,
        &[
            "serve",
            "wf.md",
            "--port",
            "0",
            "--no-execute",
            "--store",
            url,
        ],
    )
}

#[test]
fn two_workers_and_an_enqueue_only_server_finish_every_run_once_through_a_kill() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    std::fs::write(d.path().join("wf.md"), WORKFLOW).unwrap();
    let (_server, addr) = serve_enqueue_only(d.path(), &pg.url);
    let worker = |d: &Path| {
        spawn(
            d,
            &[
                "worker",
                "wf.md",
                "--store",
                &pg.url,
                "--lease",
                "2s",
                "--max-concurrent",
                "8",
            ],
        )
    };
    let mut victim = worker(d.path());
    let _survivor = worker(d.path());
    let total = 200;
    let mut ids = Vec::new();
    for i in 0..total {
        let r = crate::support::post(&addr, "/pg?async=true", json!({"n": i}));
        assert_eq!(r.status, 202, "{}", r.body);
        ids.push(r.json()["run_id"].as_str().unwrap().to_string());
    }
    // Killed mid-run, while it holds runs.
    let mut c = pg.client();
    let pid = victim.0.id() as i32;
    let start = Instant::now();
    loop {
        let held: i64 = c
            .query_one(
                "SELECT count(*) FROM runs WHERE pid = $1 AND status = 'running'",
                &[&pid],
            )
            .unwrap()
            .get(0);
        if held > 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the worker never ran anything"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    victim.0.kill().unwrap();
    victim.0.wait().unwrap();
    let start = Instant::now();
    loop {
        let done: i64 = c
            .query_one("SELECT count(*) FROM runs WHERE status = 'completed'", &[])
            .unwrap()
            .get(0);
        if done == total as i64 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "{done} of {total} runs completed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Every step journaled once, outputs as computed.
    let dup: i64 = c
        .query_one(
            "SELECT count(*) FROM (SELECT run_id, step_id FROM steps GROUP BY run_id, step_id HAVING count(*) > 1) d",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(dup, 0, "a step journaled twice");
    let steps: i64 = c
        .query_one("SELECT count(*) FROM steps", &[])
        .unwrap()
        .get(0);
    assert_eq!(steps, 3 * total as i64);
    let r = crate::support::http(&addr, "GET", &format!("/runs/{}", ids[7]), &[], b"");
    assert_eq!(r.json()["status"], "completed", "{}", r.body);
    let outputs: Value = r.json()["outputs"].clone();
    assert_eq!(outputs["two"]["b"], "7-done", "{outputs}");
    // A request that waits is answered when a worker recorded the end.
    let r = crate::support::post(&addr, "/pg", json!({"n": 5}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["outputs"]["two"]["b"], "5-done", "{}", r.body);
    let answer = r.json();
    let steps: Vec<&str> = answer["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["one", "wait", "two"], "{}", r.body);
    // `marktoflow workers` lists the live processes.
    let out = Command::new(bin())
        .args(["workers", "--json", "--store", &pg.url])
        .output()
        .unwrap();
    assert!(out.status.success());
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let roles: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["role"].as_str())
        .collect();
    assert!(
        roles.contains(&"worker") && roles.contains(&"enqueue"),
        "{list}"
    );
}

const KEYED: &str = r#"---
workflow:
  id: keyed
  name: Keyed
inputs:
  user:
    type: string
    required: true
concurrency:
  key: "{{ inputs.user }}"
  limit: 1
triggers:
  - type: webhook
    path: /keyed
    method: POST
---

# Keyed

## Hold
```yaml
action: script
inputs:
  code: "const start = Date.now(); while (Date.now() - start < 120) {} return {start, end: Date.now()};"
output_variable: held
```
"#;

/// Each user's runs as (start, end) intervals, from their outputs.
pub fn intervals_by_user(
    runs: &[(String, Value)],
) -> std::collections::BTreeMap<String, Vec<(i64, i64)>> {
    let mut by: std::collections::BTreeMap<String, Vec<(i64, i64)>> = Default::default();
    for (user, out) in runs {
        let held = &out["held"];
        by.entry(user.clone()).or_default().push((
            held["start"].as_i64().unwrap(),
            held["end"].as_i64().unwrap(),
        ));
    }
    for v in by.values_mut() {
        v.sort();
    }
    by
}

/// Sixteen waiting requests with one key at once, over two executing
/// servers of the cluster: one execution, one recorded run, one answer.
#[test]
fn concurrent_requests_with_one_idempotency_key_run_once_in_the_cluster() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    crate::support::once_workflow(d.path());
    let dir = d.path().to_str().unwrap().to_string();
    let server = || {
        start_listening(
            d.path(),
            &[
                "serve",
                "once.md",
                "--port",
                "0",
                "--store",
                &pg.url,
                "--allow-write",
                &dir,
            ],
        )
    };
    let (_a, a) = server();
    let (_b, b) = server();
    let answers = crate::support::post_once_at_once(&[&a, &b]);
    assert_eq!(
        std::fs::read_to_string(d.path().join("ran.txt")).unwrap(),
        "x",
        "one execution"
    );
    assert_eq!(
        answers[0]["outputs"],
        json!({"done": true}),
        "{}",
        answers[0]
    );
    for other in &answers {
        assert_eq!(other, &answers[0], "every caller gets the same answer");
    }
    let runs: i64 = pg
        .client()
        .query_one("SELECT count(*) FROM runs", &[])
        .unwrap()
        .get(0);
    assert_eq!(runs, 1);
}

#[test]
fn a_concurrency_key_holds_across_servers_and_workers() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    std::fs::write(d.path().join("wf.md"), KEYED).unwrap();
    let (_front, addr) = serve_enqueue_only(d.path(), &pg.url);
    let _w1 = spawn(d.path(), &["worker", "wf.md", "--store", &pg.url]);
    let _w2 = spawn(d.path(), &["worker", "wf.md", "--store", &pg.url]);
    let users = ["ana", "bo", "cy"];
    let mut ids = Vec::new();
    for i in 0..30 {
        let user = users[i % users.len()];
        let r = crate::support::post(&addr, "/keyed?async=true", json!({"user": user}));
        assert_eq!(r.status, 202, "{}", r.body);
        ids.push((
            user.to_string(),
            r.json()["run_id"].as_str().unwrap().to_string(),
        ));
    }
    let mut c = pg.client();
    let start = Instant::now();
    let mut runs = Vec::new();
    for (user, id) in &ids {
        loop {
            let row = c
                .query_one("SELECT status, outputs FROM runs WHERE id = $1", &[id])
                .unwrap();
            let status: String = row.get(0);
            if status == "completed" {
                let out: String = row.get(1);
                runs.push((user.clone(), serde_json::from_str::<Value>(&out).unwrap()));
                break;
            }
            assert_ne!(status, "failed");
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "run {id} is {status}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let by = intervals_by_user(&runs);
    for (user, spans) in &by {
        assert_eq!(spans.len(), 10);
        for pair in spans.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "two runs of `{user}` at once: {:?} and {:?}",
                pair[0],
                pair[1]
            );
        }
    }
}

/// A worker paused (SIGSTOP) past its lease, then continued, does not run
/// the next step of the run another worker took meanwhile: it checks its
/// lease before each step and abandons the run, saying so.
#[test]
fn a_paused_worker_past_its_lease_does_not_go_on_with_the_run() {
    use std::io::BufRead;
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    let dir = d.path().to_str().unwrap().to_string();
    std::fs::write(
        d.path().join("wf.md"),
        include_str!("fixtures/postgres/paused.md"),
    )
    .unwrap();
    let (_server, addr) = serve_enqueue_only(d.path(), &pg.url);
    let worker_args = [
        "worker",
        "wf.md",
        "--store",
        &pg.url,
        "--lease",
        "1s",
        "--allow-write",
        &dir,
    ];
    let mut paused = Command::new(bin())
        .current_dir(d.path())
        .args(worker_args)
        .env("MARKTOFLOW_HOME", d.path().join(".home"))
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let err = std::io::BufReader::new(paused.stderr.take().unwrap());
    let heard = said.clone();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            heard.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    let paused = Proc(paused);
    let r = crate::support::post(&addr, "/pg?async=true", json!({}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let log = || std::fs::read_to_string(d.path().join("log.txt")).unwrap_or_default();
    let wait = |what: &str, mut ok: Box<dyn FnMut() -> bool + '_>| {
        let start = Instant::now();
        while !ok() {
            assert!(start.elapsed() < Duration::from_secs(60), "never: {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait("step one", Box::new(|| log() == "1\n"));
    let mut c = pg.client();
    wait(
        "the checkpoint after step one",
        Box::new(|| {
            c.query_one(
                "SELECT count(*) FROM checkpoints WHERE run_id = $1 AND next_step >= 1",
                &[&id],
            )
            .unwrap()
            .get::<_, i64>(0)
                > 0
        }),
    );
    // Stopped in step two, past its lease.
    let pid = paused.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let other = spawn(d.path(), &worker_args);
    let mut c = pg.client();
    let other_pid = other.0.id() as i32;
    wait(
        "the other worker takes the run",
        Box::new(|| {
            c.query_one("SELECT pid FROM runs WHERE id = $1", &[&id])
                .unwrap()
                .get::<_, Option<i32>>(0)
                == Some(other_pid)
        }),
    );
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    let mut c = pg.client();
    wait(
        "the run completes",
        Box::new(|| status_of(&mut c, &id) == "completed"),
    );
    wait(
        "the paused worker says it abandoned the run",
        Box::new(|| said.lock().unwrap().contains("abandoned here")),
    );
    assert_eq!(log(), "1\n3\n", "step three ran once, by the other worker");
}

/// While the store is down a webhook is answered 503 with `Retry-After`
/// and nothing runs; once it is back, requests run again, and a run whose
/// end could not be recorded shows what the store holds, not a stale
/// failure.
#[test]
fn a_store_outage_is_answered_503_and_the_truth_is_read_again_after() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    std::fs::write(d.path().join("wf.md"), WORKFLOW).unwrap();
    let (_server, addr) = start_listening(
        d.path(),
        &["serve", "wf.md", "--port", "0", "--store", &pg.url],
    );
    let first = crate::support::post(&addr, "/pg", json!({"n": 1}));
    assert_eq!(first.status, 200, "{}", first.body);
    pg.stop();
    for body in [json!({"n": 2}), json!({"n": 3})] {
        let r = crate::support::post(&addr, "/pg", body.clone());
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k.eq_ignore_ascii_case("retry-after") && v == "5"),
            "{:?}",
            r.headers
        );
        assert!(r.body.contains("run store unreachable"), "{}", r.body);
        let r = crate::support::post(&addr, "/pg?async=true", body);
        assert_eq!(r.status, 503, "{}", r.body);
    }
    pg.start_again();
    let start = Instant::now();
    let again = loop {
        let r = crate::support::post(&addr, "/pg", json!({"n": 4}));
        if r.status != 503 {
            break r;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{}", r.body);
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["outputs"]["two"]["b"], "4-done");
    let runs: i64 = pg
        .client()
        .query_one("SELECT count(*) FROM runs", &[])
        .unwrap()
        .get(0);
    assert_eq!(runs, 2, "nothing ran or was recorded during the outage");
}

const SLOW: &str = r#"---
workflow:
  id: slow
  name: Slow
triggers:
  - type: webhook
    path: /slow
    method: POST
---

# Slow

## First
```yaml
action: script
inputs:
  code: "const t = Date.now(); while (Date.now() - t < 1500) {} return 1;"
output_variable: first
```

## Second
```yaml
action: script
inputs:
  code: "const t = Date.now(); while (Date.now() - t < 1500) {} return 2;"
output_variable: second
```
"#;

fn status_of(c: &mut postgres::Client, id: &str) -> String {
    c.query_one("SELECT status FROM runs WHERE id = $1", &[&id])
        .unwrap()
        .get(0)
}

#[test]
fn a_stopping_worker_hands_its_runs_back_and_shows_its_metrics() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    std::fs::write(d.path().join("wf.md"), SLOW).unwrap();
    let (_front, addr) = serve_enqueue_only(d.path(), &pg.url);
    let (leaving, metrics) = start_listening(
        d.path(),
        &[
            "worker",
            "wf.md",
            "--store",
            &pg.url,
            "--grace-period",
            "1",
            "--port",
            "0",
        ],
    );
    let r = crate::support::post(&addr, "/slow?async=true", json!({}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let mut c = pg.client();
    let start = Instant::now();
    while status_of(&mut c, &id) != "running" {
        assert!(start.elapsed() < Duration::from_secs(30), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let m = crate::support::http(&metrics, "GET", "/metrics", &[], b"");
    assert_eq!(m.status, 200, "{}", m.body);
    for want in [
        "marktoflow_runs_executing 1",
        "marktoflow_runs_claimed_total 1",
        "marktoflow_claim_duration_seconds_count",
        "marktoflow_queue_depth 0",
        "marktoflow_store_up 1",
    ] {
        assert!(m.body.contains(want), "{want} in {}", m.body);
    }
    // SIGTERM: one second of grace, then the run goes back to the queue,
    // neither cancelled nor left to its lease.
    let ok = Command::new("kill")
        .args(["-TERM", &leaving.0.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let start = Instant::now();
    while status_of(&mut c, &id) != "queued" {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not handed back: {}",
            status_of(&mut c, &id)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(leaving);
    assert_eq!(
        status_of(&mut c, &id),
        "queued",
        "the stopped worker wrote after handing it back"
    );
    let _next = spawn(d.path(), &["worker", "wf.md", "--store", &pg.url]);
    let start = Instant::now();
    while status_of(&mut c, &id) != "completed" {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{}",
            status_of(&mut c, &id)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let steps: i64 = c
        .query_one("SELECT count(*) FROM steps WHERE run_id = $1", &[&id])
        .unwrap()
        .get(0);
    assert_eq!(steps, 2);
}

const TICK: &str = r#"---
workflow:
  id: tick
  name: Tick
triggers:
  - type: schedule
    cron: "* * * * *"
---

# Tick

## Note it
```yaml
action: core.set
inputs:
  at: "{{ now() }}"
output_variable: ticked
```
"#;

#[test]
fn a_schedule_under_two_servers_fires_once_per_tick() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    // Every second (six fields, the seconds first): ticks come at once.
    std::fs::write(
        d.path().join("wf.md"),
        TICK.replace("cron: \"* * * * *\"", "cron: \"* * * * * *\""),
    )
    .unwrap();
    let serve =
        |d: &Path| start_listening(d, &["serve", "wf.md", "--port", "0", "--store", &pg.url]);
    let (_a, _) = serve(d.path());
    let (_b, _) = serve(d.path());
    let mut c = pg.client();
    // Both servers have each tick; its key lets one start it. Three ticks
    // recorded, each by one run.
    let start = Instant::now();
    let keys = |c: &mut postgres::Client| -> i64 {
        c.query_one(
            "SELECT count(*) FROM idempotency WHERE key LIKE 'schedule tick %'",
            &[],
        )
        .unwrap()
        .get(0)
    };
    while keys(&mut c) < 3 {
        assert!(start.elapsed() < Duration::from_secs(30), "no ticks");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (runs, ticks): (i64, i64) = {
        let r = c
            .query_one(
                "SELECT (SELECT count(*) FROM runs WHERE trigger = 'schedule'),
                        (SELECT count(*) FROM idempotency WHERE key LIKE 'schedule tick %')",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(runs, ticks, "one run per tick over two servers");
    let per_second: Vec<(i64, i64)> = c
        .query(
            "SELECT created_at / 1000 AS second, count(*) FROM runs WHERE trigger = 'schedule' GROUP BY second",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(per_second.iter().all(|(_, n)| *n == 1), "{per_second:?}");
    let first: String = c
        .query_one(
            "SELECT id FROM runs WHERE trigger = 'schedule' ORDER BY created_at LIMIT 1",
            &[],
        )
        .unwrap()
        .get(0);
    let start = Instant::now();
    while status_of(&mut c, &first) != "completed" {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(50));
    }
}

const STEPS: &str = r#"---
workflow: {id: steps}
inputs:
  fail: {type: boolean, default: false}
---

## One
```yaml
action: core.set
inputs: {x: 1}
output_variable: one
```

## Two
```yaml
action: workflow.fail
conditions: ['inputs.fail']
inputs: {message: 'asked to fail'}
```
"#;

fn cli(dir: &Path, args: &[&str]) -> crate::support::Run {
    crate::support::run(
        Command::new(bin())
            .current_dir(dir)
            .args(args)
            .env("MARKTOFLOW_HOME", dir.join(".home"))
            .env("NO_COLOR", "1"),
    )
}

#[test]
fn the_cli_records_reads_retries_prunes_and_copies_history_on_the_shared_store() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    std::fs::write(d.path().join("w.md"), STEPS).unwrap();
    let url = pg.url.as_str();
    // `run` records into PostgreSQL directly.
    let ok = cli(
        d.path(),
        &["run", "w.md", "--json", "--quiet", "--store", url],
    );
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let failed = cli(
        d.path(),
        &[
            "run",
            "w.md",
            "--json",
            "--quiet",
            "--store",
            url,
            "--input",
            "fail=true",
        ],
    );
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    let failed_id = failed.json()["run_id"].as_str().unwrap().to_string();
    let h = cli(d.path(), &["history", "--json", "--store", url]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let runs = h.json()["runs"].as_array().unwrap().clone();
    let statuses: Vec<&str> = runs.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["failed", "completed"], "{runs:?}");
    let shown = cli(
        d.path(),
        &[
            "show",
            &failed_id[failed_id.len() - 8..],
            "--json",
            "--store",
            url,
        ],
    );
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert_eq!(shown.json()["error_step"], "two", "{}", shown.stdout);
    // `retry` from the failed step reuses step one.
    let again = cli(
        d.path(),
        &[
            "retry", &failed_id, "--from", "two", "--json", "--quiet", "--store", url,
        ],
    );
    assert_eq!(again.code, 1, "it fails the same way: {}", again.stderr);
    let retry_id = again.json()["run_id"].as_str().unwrap().to_string();
    let shown = cli(d.path(), &["show", &retry_id, "--json", "--store", url]).json();
    assert_eq!(shown["retry_of"], failed_id.as_str(), "{shown}");
    assert_eq!(shown["steps"][0]["reused"], true, "{shown}");
    // `copy-history` brings an SQLite store's finished runs in, once.
    let db = d.path().join("old.db");
    let db_arg = db.to_str().unwrap();
    for _ in 0..2 {
        let r = cli(d.path(), &["run", "w.md", "--quiet", "--store", db_arg]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let copy = cli(d.path(), &["copy-history", "--from", db_arg, "--to", url]);
    assert_eq!(copy.code, 0, "{}", copy.stderr);
    assert!(
        copy.stdout.contains("copied 2 runs; 0 already there"),
        "{}",
        copy.stdout
    );
    let copy = cli(d.path(), &["copy-history", "--from", db_arg, "--to", url]);
    assert!(
        copy.stdout.contains("copied 0 runs; 2 already there"),
        "{}",
        copy.stdout
    );
    let h = cli(d.path(), &["history", "--json", "--store", url]).json();
    assert_eq!(h["runs"].as_array().unwrap().len(), 5, "{h}");
    let copied = h["runs"].as_array().unwrap().iter().find(|r| {
        !r["id"].as_str().unwrap().is_empty()
            && r["id"] != failed_id.as_str()
            && r["id"] != retry_id.as_str()
    });
    let copied_id = copied.unwrap()["id"].as_str().unwrap().to_string();
    let steps = cli(d.path(), &["show", &copied_id, "--json", "--store", url]).json();
    assert!(!steps["steps"].as_array().unwrap().is_empty(), "{steps}");
    // `prune` on the shared store.
    let pruned = cli(d.path(), &["prune", "--older-than", "0s", "--store", url]);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert!(pruned.stdout.contains("pruned 5 runs"), "{}", pruned.stdout);
}

#[test]
fn a_run_waiting_on_one_server_is_answered_on_another_and_a_worker_finishes_it() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    std::fs::copy(
        repo().join("examples/approval.md"),
        d.path().join("approval.md"),
    )
    .unwrap();
    let server = || {
        start_listening(
            d.path(),
            &["serve", "approval.md", "--port", "0", "--store", &pg.url],
        )
    };
    let (a_proc, a) = server();
    let r = crate::support::post(
        &a,
        "/hooks/refund",
        json!({"amount": 300, "customer": "Bob"}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.json()["status"], "waiting");
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    // The server that started it is gone; nobody holds the run.
    drop(a_proc);
    let (_b, b) = server();
    let (_c, c) = server();
    let waits = crate::support::http(&b, "GET", "/waits", &[], b"").json();
    assert_eq!(waits["waits"][0]["run_id"], json!(id), "{waits}");
    let path = format!("/runs/{id}/steps/review/answer");
    let codes: Vec<u16> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..6)
            .map(|i| {
                let (addr, path) = (if i % 2 == 0 { b.clone() } else { c.clone() }, path.clone());
                scope.spawn(move || {
                    crate::support::post(
                        &addr,
                        &path,
                        json!({"decision": "approve", "refund": 90 + i}),
                    )
                    .status
                })
            })
            .collect();
        calls.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(codes.iter().filter(|c| **c == 202).count(), 1, "{codes:?}");
    assert!(codes.iter().all(|c| *c == 202 || *c == 409), "{codes:?}");
    crate::support::wait_for("a worker finishes the answered run", || {
        status_of(&mut pg.client(), &id) == "completed"
    });
    let outputs: String = pg
        .client()
        .query_one("SELECT outputs FROM runs WHERE id = $1", &[&id])
        .unwrap()
        .get(0);
    let outputs: Value = serde_json::from_str(&outputs).unwrap();
    assert_eq!(outputs["status"], "approved");
    let state: String = pg
        .client()
        .query_one("SELECT state FROM waits WHERE run_id = $1", &[&id])
        .unwrap()
        .get(0);
    assert_eq!(state, "answered");
}

#[test]
fn a_run_executing_on_one_server_is_paused_and_resumed_through_another() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    std::fs::copy(
        repo().join("tests/fixtures/approvals/long.md"),
        d.path().join("long.md"),
    )
    .unwrap();
    let server = || {
        start_listening(
            d.path(),
            &["serve", "long.md", "--port", "0", "--store", &pg.url],
        )
    };
    let (_a, a) = server();
    let (_b, b) = server();
    let r = crate::support::http(
        &a,
        "POST",
        "/hooks/long",
        &[
            ("Prefer", "respond-async"),
            ("Content-Type", "application/json"),
        ],
        b"{}",
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    // Server B does not hold the run: the pause goes through the store to
    // whichever process executes it.
    let p = crate::support::post(&b, &format!("/runs/{id}/pause"), json!({}));
    assert_eq!(
        (p.status, p.json()["status"].clone()),
        (202, json!("pausing")),
        "{}",
        p.body
    );
    crate::support::wait_for("the run pauses", || {
        status_of(&mut pg.client(), &id) == "waiting"
    });
    let mode: String = pg
        .client()
        .query_one("SELECT mode FROM waits WHERE run_id = $1", &[&id])
        .unwrap()
        .get(0);
    assert_eq!(mode, "pause");
    let r = crate::support::post(&b, &format!("/runs/{id}/resume"), json!({}));
    assert_eq!(r.status, 202, "{}", r.body);
    crate::support::wait_for("a worker finishes the resumed run", || {
        status_of(&mut pg.client(), &id) == "completed"
    });
    let asked: i64 = pg
        .client()
        .query_one("SELECT count(*) FROM pauses", &[])
        .unwrap()
        .get(0);
    assert_eq!(asked, 0, "the pause was taken and dropped");
}

#[test]
fn a_workflows_daily_budget_counts_its_runs_on_the_shared_store() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    let llm = crate::testing::spending_llm();
    // Each run's one call takes 1,000 tokens; the day allows 2,000.
    std::fs::write(
        d.path().join("daily.md"),
        "---\nworkflow: {id: daily}\ntools:\n  agent: {sdk: anthropic, options: {model: house-model}}\nbudget:\n  daily_tokens: 2000\n  prices: {house-model: {input: 3.0, output: 15.0}}\n---\n\n```yaml\nid: ask\naction: agent.run\ninputs: {prompt: one}\n```\n",
    )
    .unwrap();
    let go = || {
        crate::support::run(
            Command::new(bin())
                .current_dir(d.path())
                .args(["run", "daily.md", "--json", "--quiet", "--store", &pg.url])
                .env("MARKTOFLOW_HOME", d.path().join(".home"))
                .env("ANTHROPIC_BASE_URL", &llm.base)
                .env("ANTHROPIC_API_KEY", "k"),
        )
    };
    let first = go();
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(go().code, 0);
    let third = go();
    assert_eq!(third.code, 1, "{third:?}");
    let message = third.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with(
            "the workflow's daily budget of 2000 tokens would be passed: 2000 tokens today spent"
        ),
        "{message}"
    );
    assert_eq!(llm.requests().len(), 2, "the third run's call was not made");
    // What a run spent is kept with its step in PostgreSQL.
    let store = PgStore::open(&pg.url, opts(false, 10_000)).unwrap();
    let id = first.json()["run_id"].as_str().unwrap().to_string();
    let steps = store.steps_of(&id).unwrap();
    assert_eq!(
        serde_json::to_value(&steps[0].usage).unwrap(),
        json!({"input_tokens": 900, "output_tokens": 100, "calls": 1, "cost_usd": 0.0042, "model": "house-model"})
    );
}

/// ConHub on a cluster: the notes are one folder every host mounts, and
/// each host keeps its own index and knowledge graph of them (its own
/// per-user folder here). A memory stored by one process is searched and
/// answered from the graph by a server on another host, whose index and
/// graph were built before the memory existed.
#[test]
fn a_memory_stored_on_one_host_is_found_and_in_the_graph_on_another() {
    let Some(pg) = Postgres::start() else { return };
    let d = tempdir();
    // Copies, so that no `.marktoflow/` above the repository's files is
    // the state folder both hosts would share.
    let (kb, wf) = (d.path().join("notes"), d.path().join("conhub"));
    crate::support::copy_dir(&repo().join("examples/conhub"), &kb);
    crate::support::copy_dir(&repo().join("workflows/conhub"), &wf);
    let (kb_arg, wf_arg) = (kb.display().to_string(), wf.display().to_string());
    let (_b, b) = start_listening_at(
        d.path(),
        &d.path().join("host-b"),
        &[
            "serve",
            &wf_arg,
            "--port",
            "0",
            "--store",
            &pg.url,
            "--allow-read",
            &kb_arg,
        ],
    );
    let ask = || {
        let r = crate::support::post(
            &b,
            "/api/graph/ask",
            json!({"question": "Who owns the Quill exporter?", "knowledge_base": kb_arg, "reader": "none"}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["outputs"].clone()
    };
    assert_eq!(ask()["found"], false);
    let graphs_of = |host: &str| -> Vec<PathBuf> {
        std::fs::read_dir(d.path().join(host).join("kb"))
            .map(|entries| {
                entries
                    .filter_map(|e| Some(e.ok()?.path().join("index/graph.bin")))
                    .filter(|p| p.is_file())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        graphs_of("host-b").len(),
        1,
        "host b's graph, before the memory"
    );

    let mut store = Command::new(bin());
    crate::support::no_local_model(&mut store);
    let stored = crate::support::run(
        store
            .current_dir(d.path())
            .env("MARKTOFLOW_HOME", d.path().join("host-a"))
            .env("NO_COLOR", "1")
            .args(["run", &format!("{wf_arg}/memory-store.md"), "--json"])
            .args(["--store", &pg.url, "--allow-write", &kb_arg])
            .args(["--input", &format!("knowledge_base={kb_arg}")])
            .args(["--input", "title=Quill exporter"])
            .args(["--input", "today=2026-12-07"])
            .args([
                "--input",
                "text=The Quill exporter is owned by Marta Ilves.",
            ]),
    );
    assert_eq!(stored.code, 0, "{}", stored.stderr);
    let note = stored.json()["outputs"]["source_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(note.starts_with("stored/2026-12-07-"), "{note}");

    // Host B finds the new note when its index next looks at the folder
    // (`refresh_interval_ms`, a second by default).
    let mut answer = Value::Null;
    crate::support::wait_for("host b's graph holds the stored memory", || {
        answer = ask();
        answer["found"] == true
    });
    let line = std::fs::read_to_string(kb.join(&note))
        .unwrap()
        .lines()
        .position(|l| l.contains("owned by Marta Ilves"))
        .unwrap()
        + 1;
    assert_eq!(
        (&answer["answer"], &answer["citations"], &answer["source"]),
        (
            &json!("Marta Ilves"),
            &json!([format!("{note}:{line}")]),
            &json!("graph")
        ),
        "{answer}"
    );
    let r = crate::support::post(
        &b,
        "/api/memory/search",
        json!({"query": "Quill exporter", "knowledge_base": kb_arg}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["outputs"]["blocks"][0]["source_id"],
        json!(note),
        "{}",
        r.body
    );
    // Host a, which stored the memory, built an index and graph of its own.
    assert_eq!(graphs_of("host-a").len(), 1, "host a's graph");
}
