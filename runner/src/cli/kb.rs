//! `marktoflow kb index | status PATH`: a knowledge base indexed (and
//! embedded) up front, with progress, or how far that has got; the same
//! `kb.index` and `kb.status` actions a workflow calls.

use super::report::Style;
use super::{EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE};
use marktoflow_steps::core::action::{Call, Capabilities};
use marktoflow_steps::core::sandbox::Sandbox;
use marktoflow_steps::core::signals::Progress;
use marktoflow_steps::Registry;
use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What `kb index` and `kb status` are given.
pub struct KbCommand<'a> {
    pub method: &'a str,
    pub kb: &'a Path,
    pub index_dir: Option<&'a Path>,
    pub embed: bool,
    pub force: bool,
    pub json: bool,
}

pub fn kb(c: KbCommand) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let kb = cwd.join(c.kb);
    if !kb.is_dir() {
        eprintln!(
            "marktoflow: {} is {}",
            c.kb.display(),
            if kb.exists() {
                "not a folder"
            } else {
                "not found"
            }
        );
        return EXIT_USAGE;
    }
    let env = super::env::environment(&cwd);
    let writes: Vec<PathBuf> = c.index_dir.map(|d| cwd.join(d)).into_iter().collect();
    let sandbox = Sandbox::new(cwd.clone(), vec![kb.clone()], writes);
    let mut caps = super::run::one_run_caps(&cwd, sandbox, Default::default(), env, None);
    let bar = Arc::new(Bar::new(c.json));
    let shown = bar.clone();
    caps.progress = Arc::new(move |p: Progress| shown.draw(&p));
    let mut inputs = json!({"kb": kb.display().to_string()});
    if let Some(d) = c.index_dir {
        inputs["index_dir"] = json!(cwd.join(d).display().to_string());
    }
    if c.method == "index" {
        inputs["embed"] = json!(c.embed);
        inputs["force"] = json!(c.force);
    }
    let out = match call(&caps, c.method, inputs) {
        Ok(v) => v,
        Err(e) => {
            bar.clear();
            eprintln!("marktoflow: kb {}: {e}", c.method);
            return EXIT_RUN_FAILED;
        }
    };
    bar.clear();
    if c.json {
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        print!("{}", summary(c.method, &out));
    }
    EXIT_OK
}

/// Runs `kb.<method>` once, cancelled by Ctrl-C or SIGTERM (what was
/// indexed and embedded is kept).
fn call(caps: &Capabilities, method: &str, inputs: Value) -> Result<Value, String> {
    let action = format!("kb.{method}");
    let resolved = Registry::standard()
        .resolve(&action, &[])
        .map_err(|e| e.message)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let cancel = caps.cancel.clone();
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).ok();
        let mut int = signal(SignalKind::interrupt()).ok();
        let call = Call::outside_a_run(&action, method, None, caps);
        let work = resolved.action.call(&call, inputs);
        tokio::pin!(work);
        loop {
            tokio::select! {
                r = &mut work => return r.map_err(|e| e.to_string()),
                _ = super::run::recv(&mut term) => cancel.cancel(),
                _ = super::run::recv(&mut int) => cancel.cancel(),
            }
        }
    })
}

fn summary(method: &str, o: &Value) -> String {
    let n = |k: &str| o[k].as_u64().unwrap_or(0);
    let mut s = match method {
        "index" => format!(
            "indexed {} notes ({} chunks; {} added, {} updated, {} removed) in {:.1} s\nindex: {}\n",
            n("files"),
            n("chunks"),
            n("added"),
            n("updated"),
            n("removed"),
            o["duration_ms"].as_f64().unwrap_or(0.0) / 1000.0,
            o["index_dir"].as_str().unwrap_or("")
        ),
        _ if !o["indexed"].as_bool().unwrap_or(false) => format!(
            "{}: not indexed yet (`marktoflow kb index {}`)\n",
            o["kb"].as_str().unwrap_or(""),
            o["kb"].as_str().unwrap_or("")
        ),
        _ => format!(
            "{}: {} notes, {} chunks indexed\nindex: {}\n",
            o["kb"].as_str().unwrap_or(""),
            n("files"),
            n("chunks"),
            o["index_dir"].as_str().unwrap_or("")
        ),
    };
    let v = &o["vectors"];
    if let (Some(covered), Some(chunks)) = (v["covered"].as_u64(), v["chunks"].as_u64()) {
        let pct = if chunks == 0 {
            100.0
        } else {
            covered as f64 * 100.0 / chunks as f64
        };
        s.push_str(&format!(
            "vectors ({}): {covered} of {chunks} chunks ({pct:.1} %){}\n",
            v["model"].as_str().unwrap_or(""),
            if covered < chunks && method == "status" {
                "; `marktoflow kb index --embed` embeds the rest, `serve` does it in the background"
            } else {
                ""
            }
        ));
        let bg = &v["background"];
        if let (Some(pid), Some(done), Some(total)) = (
            bg["pid"].as_u64(),
            bg["done"].as_u64(),
            bg["total"].as_u64(),
        ) {
            let took = bg["updated_ms"]
                .as_u64()
                .unwrap_or(0)
                .saturating_sub(bg["started_ms"].as_u64().unwrap_or(0))
                as f64
                / 1000.0;
            s.push_str(&format!(
                "embedding in the background (process {pid}): {done} of {total} chunks{}\n",
                eta(took, done, total)
            ));
        }
    } else if method == "status" && o["indexed"].as_bool().unwrap_or(false) {
        s.push_str(
            "vectors: no embedding model installed (`marktoflow model install all-minilm-l6-v2`)\n",
        );
    }
    s
}

/// Progress on stderr: a bar redrawn in place on a terminal, a line per
/// tenth elsewhere; with an estimate of the time left.
struct Bar {
    quiet: bool,
    terminal: bool,
    style: Style,
    state: Mutex<BarState>,
}

#[derive(Default)]
struct BarState {
    drawn: Option<Instant>,
    /// When the current phase (`what`) started, and its name.
    phase: Option<(Instant, String)>,
    tenth: u64,
}

impl Bar {
    fn new(quiet: bool) -> Bar {
        Bar {
            quiet,
            terminal: std::io::stderr().is_terminal(),
            style: Style::stderr(),
            state: Mutex::default(),
        }
    }

    fn draw(&self, p: &Progress) {
        if self.quiet || p.total == 0 {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if st.phase.as_ref().is_none_or(|(_, w)| *w != p.what) {
            st.phase = Some((now, p.what.clone()));
            st.tenth = 0;
        }
        let started = st.phase.as_ref().map_or(now, |(t, _)| *t);
        let left = eta(now.duration_since(started).as_secs_f64(), p.done, p.total);
        let pct = p.done * 100 / p.total;
        let mut err = std::io::stderr().lock();
        if self.terminal {
            if st
                .drawn
                .is_some_and(|t| now.duration_since(t).as_millis() < 100)
                && p.done < p.total
            {
                return;
            }
            st.drawn = Some(now);
            let bar = super::progress::bar_text("  ", &p.what, p.done, p.total);
            let _ = write!(err, "{bar}{left}");
            let _ = err.flush();
        } else if p.done * 10 / p.total > st.tenth || p.done == p.total {
            st.tenth = p.done * 10 / p.total + u64::from(p.done == p.total);
            let _ = writeln!(
                err,
                "  {} {pct}% {}/{} {}{left}",
                self.style.paint("2", "·"),
                p.done,
                p.total,
                p.what
            );
        }
    }

    fn clear(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.terminal && st.drawn.take().is_some() {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

/// ", about 3 min left" from the rate so far.
fn eta(elapsed: f64, done: u64, total: u64) -> String {
    if done == 0 || done >= total || elapsed < 1.0 {
        return String::new();
    }
    let left = elapsed / done as f64 * (total - done) as f64;
    match left {
        s if s < 90.0 => format!(", about {s:.0} s left"),
        s if s < 5400.0 => format!(", about {:.0} min left", s / 60.0),
        s => format!(", about {:.1} h left", s / 3600.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_is_said_in_the_unit_that_reads() {
        assert_eq!(eta(10.0, 100, 200), ", about 10 s left");
        assert_eq!(eta(60.0, 10, 100), ", about 9 min left");
        assert_eq!(eta(60.0, 1, 1000), ", about 16.6 h left");
        assert_eq!(eta(0.5, 1, 1000), "", "too early to say");
        assert_eq!(eta(10.0, 5, 5), "");
    }
}
