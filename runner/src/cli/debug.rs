//! `marktoflow debug FILE`: a run that pauses before steps, in a terminal.
//! At a pause: `step`, `next`, `continue`, `break ID`, `delete ID`,
//! `print EXPR`, `set NAME = VALUE`, `vars`, `inputs`, `list`, `quit`, `help`.

use super::report::human_outputs;
use crate::engine::debug::{Debugger, Pause, Resume};
use crate::format::model::Workflow;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::sync::Mutex;

/// When the run pauses next.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Before every step (the start, and `step`).
    Every,
    /// Before the next step at this depth or above (`next`: the steps
    /// inside the current one run without pausing).
    AtOrAbove(usize),
    /// Only at breakpoints (`continue`).
    Breakpoints,
}

struct State {
    mode: Mode,
    breaks: BTreeSet<String>,
    input: Box<dyn BufRead + Send>,
}

/// The terminal debugger: reads commands from `input`, writes to stdout.
pub struct Repl {
    wf: std::sync::Arc<Workflow>,
    state: Mutex<State>,
}

const HELP: &str = "\
  s, step              run this step, pause before the next one (also inside it)
  n, next              run this step and what is inside it, pause after
  c, continue          run to the next breakpoint
  b, break ID          pause before step ID (no ID: list breakpoints)
  d, delete ID         remove a breakpoint
  p, print EXPR        a template expression now (`p steps.search.output.count`)
  set NAME = VALUE     change a variable (VALUE is JSON when it parses, else text)
  vars                 the variables
  i, inputs            this step's inputs, rendered as they will run
  l, list              this step's text in the file
  q, quit              stop the run (it ends cancelled)
  h, help              this list";

impl Repl {
    /// Pauses at the first step unless `breaks` names where to pause.
    pub fn new(
        wf: std::sync::Arc<Workflow>,
        breaks: Vec<String>,
        input: Box<dyn BufRead + Send>,
    ) -> Repl {
        let mode = if breaks.is_empty() {
            Mode::Every
        } else {
            Mode::Breakpoints
        };
        Repl {
            wf,
            state: Mutex::new(State {
                mode,
                breaks: breaks.into_iter().collect(),
                input,
            }),
        }
    }

    fn list(&self, pause: &Pause<'_>) -> String {
        let src = &self.wf.source;
        let first = pause.step.pos.line;
        (first.saturating_sub(1).max(1)..first + 8)
            .filter_map(|n| {
                src.line_text(n)
                    .map(|t| format!("{}{n:>5} | {t}", if n == first { "→" } else { " " }))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => human_outputs(other).trim_end().to_string(),
    }
}

impl Debugger for Repl {
    fn before_step(&self, pause: Pause<'_>) -> Resume {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let id = pause.step.id.clone();
        let here = match st.mode {
            Mode::Every => true,
            Mode::AtOrAbove(d) => pause.depth <= d,
            Mode::Breakpoints => false,
        } || st.breaks.contains(&id);
        if !here {
            return Resume::Run;
        }
        let out = &mut std::io::stdout();
        let _ = writeln!(
            out,
            "\npaused before `{id}` ({}) at {}:{}:{}",
            pause.step.display_name(),
            self.wf.source.name,
            pause.step.pos.line,
            pause.step.pos.col
        );
        if let Some(inputs) = &pause.inputs() {
            match inputs {
                Ok(v) => {
                    let _ = writeln!(out, "inputs:\n{}", indent(&show(v)));
                }
                Err(e) => {
                    let _ = writeln!(out, "inputs: cannot be rendered: {e}");
                }
            }
        }
        loop {
            let _ = write!(out, "(debug) ");
            let _ = out.flush();
            let mut line = String::new();
            // The end of input: run to the end without pausing again.
            if st.input.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = writeln!(out);
                st.mode = Mode::Breakpoints;
                st.breaks.clear();
                return Resume::Run;
            }
            let line = line.trim();
            let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
            let rest = rest.trim();
            match cmd {
                "" => {}
                "s" | "step" => {
                    st.mode = Mode::Every;
                    return Resume::Run;
                }
                "n" | "next" => {
                    st.mode = Mode::AtOrAbove(pause.depth);
                    return Resume::Run;
                }
                "c" | "continue" => {
                    st.mode = Mode::Breakpoints;
                    return Resume::Run;
                }
                "q" | "quit" => return Resume::Stop,
                "h" | "help" | "?" => {
                    let _ = writeln!(out, "{HELP}");
                }
                "b" | "break" if rest.is_empty() => {
                    let list: Vec<&str> = st.breaks.iter().map(String::as_str).collect();
                    let _ = writeln!(
                        out,
                        "breakpoints: {}",
                        if list.is_empty() {
                            "none".to_string()
                        } else {
                            list.join(", ")
                        }
                    );
                }
                "b" | "break" => match self.wf.walk().iter().any(|s| s.id == rest) {
                    true => {
                        st.breaks.insert(rest.to_string());
                        let _ = writeln!(out, "breakpoint before `{rest}`");
                    }
                    false => {
                        let _ = writeln!(out, "no step `{rest}` in {}", self.wf.source.name);
                    }
                },
                "d" | "delete" => {
                    let _ = if st.breaks.remove(rest) {
                        writeln!(out, "breakpoint `{rest}` removed")
                    } else {
                        writeln!(out, "no breakpoint `{rest}`")
                    };
                }
                "p" | "print" => {
                    let _ = match pause.print(rest) {
                        Ok(v) => writeln!(out, "{}", show(&v)),
                        Err(e) => writeln!(out, "error: {e}"),
                    };
                }
                "set" => match rest.split_once('=') {
                    Some((name, value)) if !name.trim().is_empty() => {
                        let value = value.trim();
                        let v = serde_json::from_str(value)
                            .unwrap_or_else(|_| Value::String(value.to_string()));
                        let _ = writeln!(out, "{} = {}", name.trim(), v);
                        pause.variables.insert(name.trim().to_string(), v);
                    }
                    _ => {
                        let _ = writeln!(out, "write it as `set NAME = VALUE`");
                    }
                },
                "vars" => {
                    if pause.variables.is_empty() {
                        let _ = writeln!(out, "no variables yet");
                    }
                    for (k, v) in pause.variables.iter() {
                        let mut text = v.to_string();
                        if text.chars().count() > 100 {
                            text = format!("{}…", text.chars().take(99).collect::<String>());
                        }
                        let _ = writeln!(out, "{k} = {text}");
                    }
                }
                "i" | "inputs" => {
                    let _ = match &pause.inputs() {
                        Some(Ok(v)) => writeln!(out, "{}", show(v)),
                        Some(Err(e)) => writeln!(out, "cannot be rendered: {e}"),
                        None => writeln!(out, "`{id}` has no inputs of its own"),
                    };
                }
                "l" | "list" => {
                    let _ = writeln!(out, "{}", self.list(&pause));
                }
                other => {
                    let _ = writeln!(out, "unknown command `{other}`; `help` lists them");
                }
            }
        }
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
