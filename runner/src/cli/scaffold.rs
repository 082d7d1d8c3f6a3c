//! `marktoflow init` and `marktoflow new`: a project folder to start from,
//! and new workflows from templates. Files that exist are never
//! overwritten (unless `new --force`).

use super::{EXIT_OK, EXIT_USAGE};
use std::path::{Path, PathBuf};

/// The templates `new --template` offers: name, what it is, its text.
pub const TEMPLATES: &[(&str, &str, &str)] = &[
    (
        "basic",
        "an input, a template step and a script step",
        include_str!("templates/basic.md"),
    ),
    (
        "webhook",
        "answers HTTP requests (`serve`), testable with `run --event`",
        include_str!("templates/webhook.md"),
    ),
    (
        "schedule",
        "runs on a cron schedule inside `serve`",
        include_str!("templates/schedule.md"),
    ),
    (
        "rag",
        "answers a question from a folder of notes, with sources",
        include_str!("templates/rag.md"),
    ),
    (
        "agent",
        "asks a model, once for text and once for JSON",
        include_str!("templates/agent.md"),
    ),
];

/// `daily digest` → `daily-digest`.
fn workflow_id(name: &str) -> String {
    let mut id = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c.to_ascii_lowercase());
        } else if !id.is_empty() && !id.ends_with('-') {
            id.push('-');
        }
    }
    let id = id.trim_end_matches('-').to_string();
    if id.is_empty() {
        "workflow".into()
    } else {
        id
    }
}

/// `daily-digest` → `Daily digest`.
fn title(id: &str) -> String {
    let words = id.replace(['-', '_'], " ");
    let mut c = words.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// A template's text for the workflow at `file`.
fn render(template: &str, file: &Path) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id = workflow_id(&stem);
    template
        .replace("__NAME__", &title(&id))
        .replace("__ID__", &id)
        .replace("__ENV__", &id.to_ascii_uppercase().replace('-', "_"))
        .replace("__FILE__", &file.display().to_string())
}

/// `marktoflow new NAME [--template T] [--force]`.
pub fn new(name: &str, template: &str, force: bool) -> i32 {
    let Some((_, _, text)) = TEMPLATES.iter().find(|(n, ..)| *n == template) else {
        let names: Vec<&str> = TEMPLATES.iter().map(|(n, ..)| *n).collect();
        eprintln!(
            "error: no template `{template}`; the templates are {}",
            names.join(", ")
        );
        return EXIT_USAGE;
    };
    let mut file = PathBuf::from(name);
    if file.extension().is_none_or(|e| e != "md") {
        let stem = file
            .file_name()
            .map(|s| workflow_id(&s.to_string_lossy()))
            .unwrap_or_default();
        file.set_file_name(format!("{stem}.md"));
    }
    if file.exists() && !force {
        eprintln!("error: `{}` exists; nothing was written", file.display());
        eprintln!("  = hint: choose another name, or `--force` to replace it");
        return EXIT_USAGE;
    }
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("error: cannot create `{}`: {e}", dir.display());
            return EXIT_USAGE;
        }
    }
    if let Err(e) = write_new(&file, &render(text, &file), force) {
        eprintln!("error: cannot write `{}`: {e}", file.display());
        return EXIT_USAGE;
    }
    println!("{}", file.display());
    eprintln!(
        "created `{}` from the `{template}` template",
        file.display()
    );
    eprintln!(
        "  next: marktoflow validate {0}   # check it",
        file.display()
    );
    // The command shown runs as printed: the rag template needs its
    // question, and the schedule and rag templates read a folder of notes
    // (`notes` by default) that may not exist here yet.
    let mut run = format!("marktoflow run {}", file.display());
    if template == "rag" {
        run.push_str(" --input question='What did I decide?'");
    }
    let folder_input = match template {
        "schedule" => Some("folder"),
        "rag" => Some("notes"),
        _ => None,
    };
    match folder_input {
        Some(input) if !Path::new("notes").is_dir() => eprintln!(
            "        {run} --input {input}=DIR   # run it on the notes in DIR (there is no `notes/` here)"
        ),
        _ => eprintln!("        {run}        # run it"),
    }
    EXIT_OK
}

/// Writes `text` to `file`: only when it does not exist, unless `replace`.
fn write_new(file: &Path, text: &str, replace: bool) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = if replace {
        std::fs::File::create(file)?
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(file)?
    };
    f.write_all(text.as_bytes())
}

const ENV_EXAMPLE: &str = "\
# Copy to `.env` (which git ignores) and fill in what you use; marktoflow
# reads `.env` from the current folder, the workflow's folder and the
# folders above it up to this project's root (the folder with `.marktoflow/`).
# Without any key, agent steps run on the built-in local model
# (`marktoflow model install`).

# ANTHROPIC_API_KEY=sk-ant-...
# OPENAI_API_KEY=sk-...
# OPENAI_BASE_URL=https://api.openai.com/v1
# OLLAMA_HOST=http://127.0.0.1:11434

# Webhook secrets and the console's token for `serve`:
# HOOK_SECRET=...
# MARKTOFLOW_API_TOKEN=...
";

const GITIGNORE: &[&str] = &[".env", ".marktoflow/"];

/// A VS Code task that validates every workflow, its problems shown at
/// their file, line and column.
const VSCODE_TASKS: &str = r#"{
  "version": "2.0.0",
  "tasks": [
    {
      "label": "marktoflow: validate",
      "type": "shell",
      "command": "marktoflow validate workflows",
      "group": "build",
      "presentation": {"reveal": "silent"},
      "problemMatcher": {
        "owner": "marktoflow",
        "fileLocation": ["relative", "${workspaceFolder}"],
        "pattern": {
          "regexp": "^(.+?):(\\d+):(\\d+): (error|warning): (.*)$",
          "file": 1, "line": 2, "column": 3, "severity": 4, "message": 5
        }
      }
    }
  ]
}
"#;

/// `marktoflow init [DIR]`.
pub fn init(dir: &Path) -> i32 {
    let schema = crate::format::schema::schema_text();
    let hello = render(TEMPLATES[0].2, Path::new("workflows/hello.md"));
    let files: [(&str, String); 4] = [
        ("workflows/hello.md", hello),
        (".env.example", ENV_EXAMPLE.to_string()),
        (".marktoflow/workflow.schema.json", schema.to_string()),
        (".vscode/tasks.json", VSCODE_TASKS.to_string()),
    ];
    let mut wrote = Vec::new();
    let mut kept = Vec::new();
    for (rel, text) in &files {
        let path = dir.join(rel);
        if path.exists() {
            kept.push(*rel);
            continue;
        }
        let made = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| write_new(&path, text, false));
        if let Err(e) = made {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            return EXIT_USAGE;
        }
        wrote.push(*rel);
    }
    // `.gitignore`: the lines it lacks are added, nothing is removed.
    let ignore = dir.join(".gitignore");
    let have = std::fs::read_to_string(&ignore).unwrap_or_default();
    let missing: Vec<&str> = GITIGNORE
        .iter()
        .copied()
        .filter(|l| !have.lines().any(|h| h.trim() == *l))
        .collect();
    if !missing.is_empty() {
        let mut text = have.clone();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        for l in &missing {
            text.push_str(l);
            text.push('\n');
        }
        if let Err(e) = std::fs::write(&ignore, text) {
            eprintln!("error: cannot write `{}`: {e}", ignore.display());
            return EXIT_USAGE;
        }
        wrote.push(".gitignore");
    }
    let shown = dir.display().to_string();
    eprintln!("initialised a marktoflow project in `{shown}`");
    for w in &wrote {
        eprintln!("  wrote {w}");
    }
    for k in &kept {
        eprintln!("  kept  {k} (it exists)");
    }
    eprintln!("  runs are recorded in .marktoflow/runs.db (`marktoflow history`)");
    let cd = if shown == "." {
        String::new()
    } else {
        format!("cd {shown} && ")
    };
    eprintln!("next: {cd}marktoflow run workflows/hello.md --input name=Ada");
    eprintln!("      marktoflow new workflows/NAME --template webhook|schedule|rag|agent");
    EXIT_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_ids_and_titles() {
        assert_eq!(workflow_id("Daily Digest!"), "daily-digest");
        assert_eq!(workflow_id("--"), "workflow");
        assert_eq!(title("daily-digest"), "Daily digest");
        let text = render(TEMPLATES[1].2, Path::new("hooks/on-push.md"));
        assert!(text.contains("id: on-push"), "{text}");
        assert!(text.contains("path: /hooks/on-push"));
        assert!(text.contains("${ON_PUSH_SECRET}"));
        assert!(!text.contains("__"), "every placeholder is filled");
    }
}
