//! External script tools, as the peer runs them: `tools.<name>: {sdk:
//! script, options: {path: ./tool.sh}}`, and `<name>.<operation>` runs that
//! file with the step's inputs as `--key=value` arguments and reads its
//! stdout as JSON (as text when it is not JSON).
//!
//! A `tool.yaml` beside `tool.sh` may list `operations` (then the operation
//! name comes first among the arguments), a `timeout` in seconds and `env`.
//!
//! Unlike the peer, the file is opened through the sandbox (it must lie
//! under a read root, and the file run is the one checked: it is executed
//! through its open descriptor), and the process gets only the declared
//! environment — `options.env`, the yaml's `env`, and a `PATH` — never the
//! run's secrets. It runs in its own process group, killed whole on timeout
//! or cancellation.

use crate::core::catalog::{spec, Spec, WAITS};
use crate::core::sandbox::Sandbox;
use crate::core::{
    action::{Action, Call},
    error::ActionError,
};
use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The contract of every external tool operation: any inputs.
pub static EXTERNAL_SPEC: Spec = spec(
    "script",
    "<operation>",
    "Runs the tool's file (`options.path`) with the inputs as `--key=value` arguments; its stdout, parsed as JSON when it is JSON.",
)
.open()
.returns("the parsed stdout; `{success: true, stderr}` when it prints nothing")
.traits(WAITS);

/// Whether a declared `sdk: script` tool names a file to run (not `inline`).
pub fn external_path(options: &Map<String, Value>) -> Option<&str> {
    options
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| *p != "inline")
}

/// The peer's default when neither the step nor the tool sets a timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Most stdout kept (the reply); stderr keeps its last part for messages.
const MAX_STDOUT: usize = 16 << 20;
const STDERR_TAIL: usize = 4096;
/// `PATH` of the tool's process unless the tool declares one.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

pub struct ExternalToolAction;

/// Kills a tool's process group when dropped, unless the tool ended.
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: signals the group this action created for the tool.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    }
}

/// What the tool's `<stem>.yaml` says.
#[derive(Default)]
struct Metadata {
    operations: Vec<String>,
    timeout: Option<Duration>,
    env: Map<String, Value>,
}

fn metadata(sb: &Sandbox, path: &str) -> Result<Metadata, ActionError> {
    let p = std::path::Path::new(path);
    let yaml = p.with_extension("yaml");
    let yaml = yaml.to_string_lossy();
    let Ok((mut f, _)) = sb.open_read(&yaml) else {
        return Ok(Metadata::default());
    };
    let mut text = String::new();
    std::io::Read::read_to_string(&mut f, &mut text)
        .map_err(|e| ActionError::failed(format!("cannot read {yaml}: {e}")))?;
    let v: Value = serde_yaml::from_str(&text)
        .map_err(|e| ActionError::failed(format!("{yaml} is not valid YAML: {e}")))?;
    let operations = match v.get("operations") {
        Some(Value::Object(o)) => o.keys().cloned().collect(),
        _ => Vec::new(),
    };
    let timeout = v
        .get("timeout")
        .and_then(Value::as_f64)
        .and_then(crate::core::time::from_secs);
    let env = match v.get("env") {
        Some(Value::Object(e)) => e.clone(),
        _ => Map::new(),
    };
    Ok(Metadata {
        operations,
        timeout,
        env,
    })
}

/// The peer's argument convention: `--key=value`; `true` is a bare
/// `--key`, `false` and null are left out, lists and mappings are JSON.
fn arguments(inputs: &Value) -> Vec<String> {
    let Value::Object(m) = inputs else {
        return Vec::new();
    };
    m.iter()
        .filter_map(|(k, v)| match v {
            Value::Null | Value::Bool(false) => None,
            Value::Bool(true) => Some(format!("--{k}")),
            Value::String(s) => Some(format!("--{k}={s}")),
            other => Some(format!("--{k}={other}")),
        })
        .collect()
}

/// Refuses an input that holds a NUL byte: no program argument can carry
/// one (the C string would end there), so the tool would see less than
/// the workflow passed.
fn refuse_nul(inputs: &Value) -> Result<(), ActionError> {
    let Value::Object(m) = inputs else {
        return Ok(());
    };
    for (k, v) in m {
        let holds = match v {
            Value::String(s) => s.contains('\0'),
            other => other.to_string().contains("\\u0000"),
        };
        if holds || k.contains('\0') {
            return Err(ActionError::Input(format!(
                "input `{}` holds a NUL byte, which no program argument can carry",
                k.replace('\0', "\\0")
            )));
        }
    }
    Ok(())
}

fn env_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The end of `bytes` as text, at most [`STDERR_TAIL`] bytes.
fn tail(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim();
    if s.len() <= STDERR_TAIL {
        return s.to_string();
    }
    let mut start = s.len() - STDERR_TAIL;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &s[start..])
}

#[async_trait]
impl Action for ExternalToolAction {
    fn specs(&self) -> &'static [Spec] {
        std::slice::from_ref(&EXTERNAL_SPEC)
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        let options = call.tool.map(|t| &t.options);
        let Some(path) = options.and_then(external_path) else {
            return Err(ActionError::Input(
                "an external script tool needs `options.path`".into(),
            ));
        };
        let sb = &call.caps.sandbox;
        let meta = metadata(sb, path)?;
        if !meta.operations.is_empty() && !meta.operations.iter().any(|o| o == call.method) {
            return Err(ActionError::Input(format!(
                "`{}` has no operation `{}`: its yaml lists {}",
                path,
                call.method,
                meta.operations.join(", ")
            )));
        }
        let (file, real) = sb.open_read(path).map_err(|e| {
            ActionError::failed(format!(
                "cannot run {path} ({}): {e}",
                sb.absolute(path).display()
            ))
        })?;
        let mode = file
            .metadata()
            .map_err(|e| ActionError::failed(format!("cannot run {path}: {e}")))?
            .permissions()
            .mode();
        if mode & 0o111 == 0 {
            return Err(ActionError::failed(format!(
                "cannot run {path}: it is not executable (chmod +x {path})"
            )));
        }
        refuse_nul(&inputs)?;
        let mut args = Vec::new();
        if !meta.operations.is_empty() {
            args.push(call.method.to_string());
        }
        args.extend(arguments(&inputs));

        // Executed through the descriptor opened above, so the file run is
        // the file checked, whatever happens to the path meanwhile.
        let fd = file.as_raw_fd();
        let fd_path = format!("/proc/self/fd/{fd}");
        let program = if std::path::Path::new("/proc/self/fd").is_dir() {
            fd_path
        } else {
            real.to_string_lossy().into_owned()
        };
        let mut cmd = tokio::process::Command::new(&program);
        cmd.args(&args)
            .current_dir(sb.absolute("."))
            .env_clear()
            .env("PATH", DEFAULT_PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let declared = meta.env.iter().chain(
            options
                .and_then(|o| o.get("env"))
                .and_then(Value::as_object)
                .into_iter()
                .flatten(),
        );
        for (k, v) in declared {
            cmd.env(k, env_text(v));
        }
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Keep the script's descriptor open across exec (an
                // interpreter reads the script through it), and give the
                // tool a process group of its own to kill whole.
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 || libc::setpgid(0, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| ActionError::failed(format!("cannot run {path}: {e}")))?;
        drop(file);
        let pid = child.id();
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let work = async {
            let mut out = Vec::new();
            let mut err = Vec::new();
            let read_out = async {
                let mut buf = [0u8; 65536];
                loop {
                    let n = stdout.read(&mut buf).await?;
                    if n == 0 {
                        return Ok::<_, std::io::Error>(());
                    }
                    if out.len() + n > MAX_STDOUT {
                        return Err(std::io::Error::other("it printed more than 16 MiB"));
                    }
                    out.extend_from_slice(&buf[..n]);
                }
            };
            let read_err = async {
                let mut buf = [0u8; 65536];
                loop {
                    let n = stderr.read(&mut buf).await?;
                    if n == 0 {
                        return Ok::<_, std::io::Error>(());
                    }
                    err.extend_from_slice(&buf[..n]);
                    if err.len() > 2 * STDERR_TAIL {
                        err.drain(..err.len() - STDERR_TAIL);
                    }
                }
            };
            let (a, b) = tokio::join!(read_out, read_err);
            a.and(b)?;
            let status = child.wait().await?;
            Ok::<_, std::io::Error>((status, out, err))
        };
        let timeout = call.timeout.or(meta.timeout).unwrap_or(DEFAULT_TIMEOUT);
        // Whichever way this call ends early (its timeout, cancellation, or
        // the engine dropping it at the step's timeout), the whole group goes.
        let mut group = GroupGuard(pid.map(|p| p as i32));
        let outcome = tokio::select! {
            r = tokio::time::timeout(timeout, work) => r,
            _ = call.caps.cancel.cancelled() => return Err(ActionError::Cancelled),
        };
        let (status, out, err) = match outcome {
            Err(_) => return Err(ActionError::Timeout(timeout)),
            Ok(Err(e)) => return Err(ActionError::failed(format!("{path}: {e}"))),
            Ok(Ok(r)) => r,
        };
        group.0 = None;
        if !status.success() {
            let how = match status.code() {
                Some(c) => format!("exited with code {c}"),
                None => "was killed by a signal".to_string(),
            };
            let err = tail(&err);
            let detail = if err.is_empty() { tail(&out) } else { err };
            return Err(ActionError::failed(if detail.is_empty() {
                format!("{path} {how}")
            } else {
                format!("{path} {how}: {detail}")
            }));
        }
        let text = String::from_utf8_lossy(&out);
        let text = text.trim();
        if text.is_empty() {
            return Ok(json!({"success": true, "stderr": tail(&err)}));
        }
        Ok(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_byte_is_refused_not_cut_off() {
        for bad in [
            json!({"name": "ab\u{0}cd"}),
            json!({"list": ["x\u{0}"]}),
            json!({"k\u{0}": 1}),
        ] {
            let e = refuse_nul(&bad).unwrap_err();
            assert!(e.to_string().contains("holds a NUL byte"), "{bad}: {e}");
        }
        assert!(refuse_nul(&json!({"name": "abcd", "n": [1, "x"]})).is_ok());
    }

    #[test]
    fn arguments_follow_the_peer() {
        let a = arguments(
            &json!({"name": "x y", "n": 3, "on": true, "off": false, "none": null, "list": [1, 2]}),
        );
        assert_eq!(a, ["--name=x y", "--n=3", "--on", "--list=[1,2]"]);
    }
}
