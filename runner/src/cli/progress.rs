//! Step progress on stderr while a run goes (a bar on a terminal).

use crate::engine::{RunEvent, RunStatus, StepStatus};
use marktoflow_steps::core::signals::LogLevel;
use std::io::{IsTerminal, Write};

use super::RunArgs;
use crate::cli::report::Style;

/// A progress bar redrawn in place (`[#####     ]  45% 4500/10000 what`),
/// after `indent`.
pub(super) fn bar_text(indent: &str, what: &str, done: u64, total: u64) -> String {
    const WIDTH: u64 = 30;
    let filled = (done.min(total) * WIDTH)
        .checked_div(total)
        .unwrap_or(WIDTH) as usize;
    let pct = (done * 100).checked_div(total).unwrap_or(100);
    format!(
        "\r\x1b[2K{indent}[{}{}] {pct:>3}% {done}/{total} {what}",
        "#".repeat(filled),
        " ".repeat(WIDTH as usize - filled)
    )
}

/// Step progress on stderr.
pub(super) struct Progress {
    style: Style,
    quiet: bool,
    verbose: bool,
    total: std::sync::atomic::AtomicUsize,
    /// A progress bar is drawn in place only on a terminal.
    terminal: bool,
    /// When the bar was last drawn; None while no bar is on screen.
    bar: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Progress {
    pub(super) fn new(a: &RunArgs) -> Self {
        Progress {
            style: Style::stderr(),
            quiet: a.exec.quiet,
            verbose: a.exec.verbose,
            total: Default::default(),
            terminal: std::io::stderr().is_terminal(),
            bar: Default::default(),
        }
    }

    /// Draws `what done/total` as a bar, at most every 100 ms.
    fn draw_bar(&self, err: &mut impl Write, what: &str, done: u64, total: u64) {
        let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        if bar.is_some_and(|t| now.duration_since(t).as_millis() < 100) && done < total {
            return;
        }
        *bar = Some(now);
        let _ = write!(err, "{}", bar_text("    ", what, done, total));
        let _ = err.flush();
    }

    /// Removes the bar before other output.
    fn clear_bar(&self, err: &mut impl Write) {
        let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        if bar.take().is_some() {
            let _ = write!(err, "\r\x1b[2K");
        }
    }

    pub(super) fn event(&self, e: &RunEvent) {
        if self.quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        let s = &self.style;
        if let RunEvent::Progress {
            what, done, total, ..
        } = e
        {
            if self.terminal {
                self.draw_bar(&mut err, what, *done, *total);
            } else if self.verbose {
                let _ = writeln!(
                    err,
                    "    │ {} {what}: {done}/{total}",
                    s.paint("2", "debug")
                );
            }
            return;
        }
        self.clear_bar(&mut err);
        match e {
            RunEvent::RunStarted {
                workflow,
                total_steps,
                ..
            } => {
                self.total
                    .store(*total_steps, std::sync::atomic::Ordering::Relaxed);
                let _ = writeln!(err, "{} {workflow}", s.paint("1", "▶ running"));
            }
            RunEvent::StepStarted {
                name,
                depth,
                index,
                detail,
                ..
            } => {
                if self.verbose {
                    let pad = "  ".repeat(*depth + 1);
                    let d = detail
                        .as_deref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default();
                    let counter = if *index > 0 {
                        format!(
                            "[{index}/{}] ",
                            self.total.load(std::sync::atomic::Ordering::Relaxed)
                        )
                    } else {
                        String::new()
                    };
                    let _ = writeln!(err, "{pad}{} {counter}{name}{d}", s.paint("2", "…"));
                }
            }
            RunEvent::Log { level, message, .. } => {
                if *level == LogLevel::Debug && !self.verbose {
                    return;
                }
                let tag = match level {
                    LogLevel::Warn => s.paint("33", "warn"),
                    LogLevel::Error => s.paint("31", "error"),
                    LogLevel::Debug => s.paint("2", "debug"),
                    LogLevel::Info => s.paint("2", "log"),
                };
                for line in message.lines() {
                    let _ = writeln!(err, "    │ {tag} {line}");
                }
            }
            RunEvent::StepRetry {
                id,
                attempt,
                error,
                delay_ms,
            } => {
                let _ = writeln!(
                    err,
                    "    {} `{id}` failed ({error}); retry {attempt} in {delay_ms} ms",
                    s.paint("33", "↻")
                );
            }
            RunEvent::StepFinished {
                name,
                depth,
                status,
                duration_ms,
                output,
                error,
                ..
            } => {
                let pad = "  ".repeat(*depth + 1);
                let (mark, color) = match status {
                    StepStatus::Completed => ("✓", "32"),
                    StepStatus::Failed => ("✗", "31"),
                    StepStatus::Skipped => ("-", "2"),
                    StepStatus::Waiting => ("⏸", "33"),
                };
                let tail = match status {
                    StepStatus::Skipped => "skipped".to_string(),
                    StepStatus::Waiting => "waiting for an answer".to_string(),
                    _ => format!("{duration_ms} ms"),
                };
                let _ = writeln!(
                    err,
                    "{pad}{} {name} {}",
                    s.paint(color, mark),
                    s.paint("2", &format!("({tail})"))
                );
                if self.verbose {
                    if let Some(e) = error {
                        let _ = writeln!(err, "{pad}  {e}");
                    } else if !output.is_null() {
                        let text = output.to_string();
                        let shown: String = text.chars().take(300).collect();
                        let more = if text.chars().count() > 300 {
                            " …"
                        } else {
                            ""
                        };
                        let _ = writeln!(err, "{pad}  {} {shown}{more}", s.paint("2", "→"));
                    }
                }
            }
            RunEvent::Waiting(w) => {
                for line in w
                    .title
                    .iter()
                    .chain(w.prompt.iter())
                    .flat_map(|t| t.lines())
                {
                    let _ = writeln!(err, "    │ {line}");
                }
                if let Some(link) = &w.link {
                    let _ = writeln!(err, "    │ {} {link}", s.paint("2", "link"));
                }
            }
            RunEvent::ModelCall {
                model,
                input_tokens,
                output_tokens,
                cost_usd,
                duration_ms,
                ..
            } if self.verbose => {
                let cost = cost_usd.map(|c| format!(", {}", crate::engine::usd(c)));
                let _ = writeln!(
                    err,
                    "    │ {} {model}: {input_tokens} tokens in, {output_tokens} out{} in {duration_ms} ms",
                    s.paint("2", "model"),
                    cost.unwrap_or_default()
                );
            }
            RunEvent::Checkpoint(_) | RunEvent::Progress { .. } | RunEvent::ModelCall { .. } => {}
            RunEvent::RunFinished {
                status,
                duration_ms,
            } => {
                let text = match status {
                    RunStatus::Completed => s.paint("1;32", "✔ completed"),
                    RunStatus::Failed => s.paint("1;31", "✖ failed"),
                    RunStatus::Cancelled => s.paint("1;33", "✖ cancelled"),
                    RunStatus::Rejected => s.paint("1;33", "✖ rejected"),
                    RunStatus::Waiting => s.paint("1;33", "⏸ waiting"),
                    // Not an end: said as such should a run end there.
                    RunStatus::Queued | RunStatus::Running => {
                        s.paint("1;33", &format!("… {}", status.as_str()))
                    }
                };
                let _ = writeln!(err, "{text} in {duration_ms} ms");
            }
        }
    }
}
