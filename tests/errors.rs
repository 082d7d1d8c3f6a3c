//! Error messages for a folder of broken workflows, pinned exactly.
//!
//! Each `tests/errors/NAME.md` starts with `<!-- args: ... -->` (the
//! marktoflow arguments; the file is appended). The expected exit code and
//! stderr are in `NAME.expected`. `MARKTOFLOW_BLESS=1` rewrites them.

use crate::support::{case_files, cmd, repo, run};
use std::fs;

#[test]
fn broken_workflows_report_file_line_col() {
    let dir = repo().join("tests/errors");
    let bless = std::env::var_os("MARKTOFLOW_BLESS").is_some();
    let cases = case_files(&dir, "md", 10);
    let mut failures = Vec::new();
    for case in &cases {
        let text = fs::read_to_string(case).unwrap();
        let args = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("<!-- args:"))
            .and_then(|l| l.strip_suffix("-->"))
            .unwrap_or_else(|| panic!("{} must start with <!-- args: ... -->", case.display()));
        let name = case.file_name().unwrap().to_str().unwrap();
        let mut words: Vec<String> = args.split_whitespace().map(str::to_string).collect();
        let sub = words.remove(0);
        let mut c = cmd(&dir);
        c.arg(&sub).arg(name).args(&words).arg("--quiet");
        if sub == "validate" {
            c = cmd(&dir);
            c.arg(&sub).arg(name).args(&words);
        }
        let r = run(&mut c);
        let actual = format!("exit {}\n{}", r.code, r.stderr);
        let expected_path = case.with_extension("expected");
        if bless {
            fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "--- {}\nexpected:\n{expected}\nactual:\n{actual}",
                case.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) differ (MARKTOFLOW_BLESS=1 rewrites):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
