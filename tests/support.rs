//! Running the real `marktoflow` binary in tests.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_marktoflow"))
}

/// The repository root (where README.md and workflows/ live).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `../shared` beside the repository, when present.
pub fn shared() -> Option<PathBuf> {
    let p = repo().parent()?.join("shared");
    p.is_dir().then_some(p)
}

/// The per-user state folder for a test working in `cwd`: inside the test's
/// folder, or the build's scratch folder when `cwd` is in the checkout (a
/// test never writes into the source tree).
pub fn state_home(cwd: &Path) -> PathBuf {
    if cwd.starts_with(repo()) {
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("home")
    } else {
        cwd.join(".marktoflow")
    }
}

/// A command for the binary with a clean provider environment.
pub fn cmd(cwd: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(cwd);
    for v in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "OLLAMA_HOST",
        "OLLAMA_MODEL",
        "MARKTOFLOW_AGENT",
        "MARKTOFLOW_MODEL",
    ] {
        c.env_remove(v);
    }
    no_local_model(&mut c);
    c.env("NO_COLOR", "1");
    // llama.cpp's OpenMP threads sleep at their barriers instead of spinning:
    // beside other tests on two cores a spinning thread waits for one that
    // is not running (a local-model run took 28 s instead of 6).
    if std::env::var_os("OMP_WAIT_POLICY").is_none() {
        c.env("OMP_WAIT_POLICY", "passive");
    }
    // The per-user state folder, kept inside the test's folder: tests never
    // write to the real home (tests of state discovery set their own), nor
    // into the checkout when they run in one of its folders.
    c.env("MARKTOFLOW_HOME", state_home(cwd));
    c.env_remove("MARKTOFLOW_STORE");
    c.env("MTF_TEST_GREETING", "bonjour");
    c.env("MARKTOFLOW_RETRY_BASE_MS", "10");
    c
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

pub fn output(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

pub fn run(c: &mut Command) -> Run {
    output(c.output().expect("run marktoflow"))
}

/// Tests of the local model name it themselves (`MARKTOFLOW_LOCAL_MODEL`);
/// every other run sees an empty models folder, so an agent step never
/// falls back to a model installed on the machine.
pub fn no_local_model(c: &mut Command) {
    c.env_remove("MARKTOFLOW_LOCAL_MODEL");
    c.env(
        "MARKTOFLOW_MODELS_DIR",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-models"),
    );
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The embedding model folder from `MARKTOFLOW_EMBED_MODEL` (`.ci/run`
/// installs it).
pub fn embed_model() -> Option<PathBuf> {
    model_from_env("MARKTOFLOW_EMBED_MODEL", "the dense search tests")
}

/// The local chat model's GGUF from `MARKTOFLOW_LOCAL_MODEL` (`.ci/run`
/// installs the default one).
pub fn local_model() -> Option<PathBuf> {
    model_from_env("MARKTOFLOW_LOCAL_MODEL", "the local model tests")
}

/// The model `var` names, or None when the run allows skipping (see
/// [`missing`]).
fn model_from_env(var: &str, tests: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            missing(
                tests,
                &format!("set {var} (`bash .ci/run` installs the models and sets it)"),
            );
            None
        }
    }
}

/// A test cannot run here: `tests` need a tool this machine lacks, which
/// `how` installs. In CI (which installs every tool) that fails the test.
/// Elsewhere the test is skipped so that the README's test command works on
/// any machine, and the skip is never silent: it is printed and appended,
/// with the time, to `target/skipped-tests.txt`; `MARKTOFLOW_NO_SKIP=1`
/// makes it fail as in CI.
pub fn missing(tests: &str, how: &str) {
    let strict = std::env::var_os("CI").is_some()
        || std::env::var_os("MARKTOFLOW_NO_SKIP").is_some_and(|v| v == "1");
    if strict {
        panic!("{tests} cannot run here: {how}");
    }
    let line = format!(
        "{} skipped: {tests} ({how})",
        chrono::Utc::now().format("%Y-%m-%d %H:%M:%S")
    );
    eprintln!("{line}");
    let list = repo().join("target/skipped-tests.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(list)
    {
        use std::io::Write as _;
        // One write per line: tests skip side by side.
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

/// A `marktoflow serve` on 127.0.0.1 (a free port), killed when dropped.
pub struct Server {
    pub child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// What it printed up to its listening line (the banner, warnings).
    pub banner: String,
    /// Holds the server's own run store, unless the test gave one.
    _store: Option<tempfile::TempDir>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `marktoflow serve ARGS` in `cwd`; panics when it does not listen.
pub fn serve(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
    try_serve(cwd, args, env).unwrap_or_else(|e| panic!("server did not start: {e}"))
}

/// Starts `marktoflow serve ARGS` in `cwd`, with no provider keys, no local
/// model, its own run store (unless `env` names one) and state in the
/// test's folder; `Err` holds what it printed when it ended without
/// listening.
// The child is reaped by `Server`'s `Drop`, which clippy cannot follow.
#[allow(clippy::zombie_processes)]
pub fn try_serve(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Server, String> {
    try_serve_within(cwd, args, env, Vec::new(), false)
}

/// [`serve`] as a user gets it: with the supervisor that starts the server
/// again when it dies (the other helpers serve in one process, so that a
/// test's kill is the server's death).
pub fn serve_supervised(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
    try_serve_within(cwd, args, env, Vec::new(), true)
        .unwrap_or_else(|e| panic!("server did not start: {e}"))
}

/// [`serve`] with the server's address space limited to `bytes`: where
/// memory is the point, an unbounded allocation fails inside the server
/// (and must cost one run, not the process) instead of swapping the host.
pub fn serve_within(cwd: &Path, args: &[&str], env: &[(&str, &str)], bytes: u64) -> Server {
    serve_limited(cwd, args, env, &[(libc::RLIMIT_AS, bytes)])
}

/// [`serve`] under resource limits (`setrlimit`, soft and hard): an
/// address space, a number of open files.
pub fn serve_limited(
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    limits: &[(libc::__rlimit_resource_t, u64)],
) -> Server {
    try_serve_within(cwd, args, env, limits.to_vec(), false)
        .unwrap_or_else(|e| panic!("server did not start: {e}"))
}

#[allow(clippy::zombie_processes)]
fn try_serve_within(
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    limits: Vec<(libc::__rlimit_resource_t, u64)>,
    supervised: bool,
) -> Result<Server, String> {
    use std::io::BufRead;
    let mut c = Command::new(bin());
    if !limits.is_empty() {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            c.pre_exec(move || {
                for &(resource, value) in &limits {
                    let limit = libc::rlimit {
                        rlim_cur: value,
                        rlim_max: value,
                    };
                    if libc::setrlimit(resource, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
    c.current_dir(cwd)
        .arg("serve")
        .args(args)
        .args(["--port", "0"]);
    if !supervised {
        c.arg("--no-supervisor");
    }
    for v in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OLLAMA_HOST",
        "MARKTOFLOW_AGENT",
        "MARKTOFLOW_MODEL",
    ] {
        c.env_remove(v);
    }
    no_local_model(&mut c);
    // Each server gets its own run store, so no test resumes another's runs.
    let store = if env.iter().any(|(k, _)| *k == "MARKTOFLOW_STORE") {
        None
    } else {
        let d = tempdir();
        c.env("MARKTOFLOW_STORE", d.path().join("runs.db"));
        Some(d)
    };
    // State (indexes, memory) in the test's folder, never the real home.
    c.env("MARKTOFLOW_HOME", state_home(cwd));
    c.envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut all = String::new();
    loop {
        let mut line = String::new();
        // A server that never listens ends (the test's own timeout bounds a hang).
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            let _ = child.wait();
            return Err(all);
        }
        all.push_str(&line);
        if let Some(rest) = line.split("on http://").nth(1) {
            let addr = rest.trim().to_string();
            // Keep draining stderr so the server never blocks on it.
            std::thread::spawn(move || {
                let mut sink = String::new();
                while err.read_line(&mut sink).unwrap_or(0) > 0 {
                    sink.clear();
                }
            });
            return Ok(Server {
                child,
                addr,
                banner: all,
                _store: store,
            });
        }
    }
}

/// Copies the folder `from` to `to`, without any `.marktoflow` state inside.
/// The files of `dir` named `*.EXT`, sorted; a folder with fewer than
/// `min` of them fails the test (the cases were not found).
pub fn case_files(dir: &Path, ext: &str, min: usize) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    assert!(
        files.len() >= min,
        "expected at least {min} cases in {}",
        dir.display()
    );
    files
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == ".marktoflow" {
            continue;
        }
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            copy_dir(&e.path(), &to.join(&name));
        } else if ty.is_file() {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

/// An HTTP answer as the tests read it.
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Polls `f` every 20 ms until it holds; fails after 30 s saying `what`.
pub fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One request on its own connection (`Connection: close`).
pub fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    // The test's own `Host`, when it gives one.
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A JSON POST.
pub fn post(addr: &str, path: &str, body: Value) -> Resp {
    http(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
}

/// `once.md` in `dir`: a webhook (`/once`) whose first step appends an `x`
/// to `ran.txt` (each execution shows), then waits 300 ms and sets
/// `{done: true}`.
pub fn once_workflow(dir: &Path) {
    let wf = include_str!("fixtures/support/once.md");
    std::fs::write(dir.join("once.md"), wf).unwrap();
}

/// Sixteen waiting requests to `/once` with one `Idempotency-Key`, sent at
/// once over the servers at `addrs` in turn; each must be answered 200.
pub fn post_once_at_once(addrs: &[&str]) -> Vec<Value> {
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..16)
            .map(|i| {
                let addr = addrs[i % addrs.len()];
                scope.spawn(move || {
                    let r = http(
                        addr,
                        "POST",
                        "/once",
                        &[
                            ("Content-Type", "application/json"),
                            ("Idempotency-Key", "pay-16"),
                        ],
                        b"{}",
                    );
                    assert_eq!(r.status, 200, "{}", r.body);
                    r.json()
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    })
}

/// The folders of the workflows the repository ships: examples and the
/// bundled workflows.
pub const SHIPPED_DIRS: [&str; 7] = [
    "examples",
    "examples/lib",
    "workflows/lifeos",
    "workflows/conhub",
    "workflows/atlas",
    "workflows/luka",
    "workflows/memoryscope",
];

/// The workflow files directly in `dir` (the `.md` files that are not
/// tests, `NAME.test.md`), sorted.
pub fn workflows_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.ends_with(".md") && !name.ends_with(".test.md")
        })
        .collect();
    out.sort();
    out
}
