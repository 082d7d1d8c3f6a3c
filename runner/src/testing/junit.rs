//! The outcomes as a JUnit XML report (`--junit FILE`), as CI systems read
//! it: one `<testsuite>` per test file, one `<testcase>` per case.

use super::run::Outcome;

/// The report of `files`, each a test file's name and its cases' outcomes.
pub fn report(files: &[(String, Vec<Outcome>)]) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let (tests, failed): (usize, usize) = files.iter().fold((0, 0), |(t, f), (_, cases)| {
        (
            t + cases.len(),
            f + cases.iter().filter(|c| !c.passed()).count(),
        )
    });
    out.push_str(&format!(
        "<testsuites name=\"marktoflow test\" tests=\"{tests}\" failures=\"{failed}\">\n"
    ));
    for (file, cases) in files {
        let failures = cases.iter().filter(|c| !c.passed()).count();
        let secs: f64 = cases.iter().map(|c| c.duration.as_secs_f64()).sum();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" time=\"{secs:.3}\">\n",
            escape(file),
            cases.len()
        ));
        for c in cases {
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                escape(file),
                escape(&c.case),
                c.duration.as_secs_f64()
            ));
            if c.passed() {
                out.push_str("/>\n");
            } else {
                let text = c.failures.join("\n");
                out.push_str(&format!(
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                    escape(c.failures.first().map(String::as_str).unwrap_or_default()),
                    escape(&text)
                ));
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// Text as XML character data or an attribute value (control characters
/// XML 1.0 cannot hold become spaces).
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\n' | '\t' => out.push(c),
            c if (c as u32) < 0x20 => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn cases_become_testcases_and_failures_their_messages() {
        let cases = vec![
            Outcome {
                case: "ok".into(),
                failures: vec![],
                duration: Duration::from_millis(5),
            },
            Outcome {
                case: "refund <big>".into(),
                failures: vec!["output `x`: expected 1, got \"2\"".into()],
                duration: Duration::from_millis(7),
            },
        ];
        assert_eq!(
            report(&[("flows/a.test.md".into(), cases)]),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"marktoflow test\" tests=\"2\" failures=\"1\">\n  <testsuite name=\"flows/a.test.md\" tests=\"2\" failures=\"1\" time=\"0.012\">\n    <testcase classname=\"flows/a.test.md\" name=\"ok\" time=\"0.005\"/>\n    <testcase classname=\"flows/a.test.md\" name=\"refund &lt;big&gt;\" time=\"0.007\">\n      <failure message=\"output `x`: expected 1, got &quot;2&quot;\">output `x`: expected 1, got &quot;2&quot;</failure>\n    </testcase>\n  </testsuite>\n</testsuites>\n"
        );
    }
}
