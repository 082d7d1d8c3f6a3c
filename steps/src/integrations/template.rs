//! A method's body written as a template (`body_template`): the JSON it
//! sends, with `{inputs.NAME}` filled in — a string that is only the
//! placeholder takes the input's value whatever its type, one inside text
//! is written into it, and a mapping or list member that comes out null
//! is left out. `{$email_base64url: {to, cc, bcc, subject, body, html}}`
//! is an RFC 5322 message, base64url-encoded (Gmail's `raw`).

use base64::Engine as _;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// `t` filled from `inputs`; the inputs it used are taken out of them.
pub(super) fn render(t: &Value, inputs: &mut Map<String, Value>) -> Result<Value, String> {
    let mut used = BTreeSet::new();
    let out = fill(t, inputs, &mut used)?;
    for k in used {
        inputs.remove(&k);
    }
    Ok(out)
}

fn fill(
    t: &Value,
    inputs: &Map<String, Value>,
    used: &mut BTreeSet<String>,
) -> Result<Value, String> {
    Ok(match t {
        Value::String(s) => text(s, inputs, used),
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|v| fill(v, inputs, used))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .filter(|v| !v.is_null())
                .collect(),
        ),
        Value::Object(m) if m.len() == 1 && m.contains_key("$email_base64url") => {
            let fields = fill(&m["$email_base64url"], inputs, used)?;
            Value::String(email(&fields)?)
        }
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let v = fill(v, inputs, used)?;
                if !v.is_null() {
                    out.insert(k.clone(), v);
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

fn text(s: &str, inputs: &Map<String, Value>, used: &mut BTreeSet<String>) -> Value {
    let whole = s
        .strip_prefix("{inputs.")
        .and_then(|r| r.strip_suffix('}'))
        .filter(|n| !n.contains('}'));
    if let Some(name) = whole {
        used.insert(name.to_string());
        return inputs.get(name).cloned().unwrap_or(Value::Null);
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("{inputs.") {
        out.push_str(&rest[..i]);
        let after = &rest[i + "{inputs.".len()..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[i..]);
            return Value::String(out);
        };
        let name = &after[..end];
        used.insert(name.to_string());
        match inputs.get(name) {
            Some(Value::String(v)) => out.push_str(v),
            Some(Value::Null) | None => {}
            Some(v) => out.push_str(&v.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Value::String(out)
}

/// An e-mail message from `{to, cc, bcc, subject, body, html}`, base64url.
fn email(f: &Value) -> Result<String, String> {
    let field = |k: &str| match f.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", "),
        _ => String::new(),
    };
    let to = field("to");
    if to.trim().is_empty() {
        return Err("the message needs `to`".into());
    }
    // Header values are one line: a newline would start another header.
    let one_line = |s: String| s.replace(['\r', '\n'], " ");
    let html = matches!(f.get("html"), Some(Value::Bool(true)))
        || f.get("html").and_then(Value::as_str) == Some("true");
    let mut m = format!("To: {}\r\n", one_line(to));
    for (k, name) in [("cc", "Cc"), ("bcc", "Bcc")] {
        let v = field(k);
        if !v.is_empty() {
            m.push_str(&format!("{name}: {}\r\n", one_line(v)));
        }
    }
    // The subject as an RFC 2047 word: any text, any language.
    let subject = base64::engine::general_purpose::STANDARD.encode(field("subject").as_bytes());
    m.push_str(&format!("Subject: =?UTF-8?B?{subject}?=\r\n"));
    m.push_str("MIME-Version: 1.0\r\n");
    m.push_str(&format!(
        "Content-Type: {}; charset=UTF-8\r\nContent-Transfer-Encoding: base64\r\n\r\n",
        if html { "text/html" } else { "text/plain" }
    ));
    m.push_str(&base64::engine::general_purpose::STANDARD.encode(field("body").as_bytes()));
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(m.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_take_values_whole_or_as_text_and_used_inputs_are_taken() {
        let t = json!({"requests": [{"insertText": {"text": "{inputs.text}", "endOfSegmentLocation": {}}}],
                       "note": "id {inputs.id}!", "gone": "{inputs.missing}"});
        let mut inputs = json!({"text": "hello", "id": 7, "other": 1})
            .as_object()
            .unwrap()
            .clone();
        let out = render(&t, &mut inputs).unwrap();
        assert_eq!(
            out,
            json!({"requests": [{"insertText": {"text": "hello", "endOfSegmentLocation": {}}}], "note": "id 7!"})
        );
        assert_eq!(Value::Object(inputs), json!({"other": 1}));
    }

    #[test]
    fn an_email_is_one_message_whose_headers_cannot_be_forged() {
        let t = json!({"raw": {"$email_base64url": {"to": "{inputs.to}", "subject": "{inputs.subject}", "body": "{inputs.body}"}}});
        let mut inputs =
            json!({"to": "ann@example.com\r\nBcc: eve@example.com", "subject": "Hé", "body": "Hi"})
                .as_object()
                .unwrap()
                .clone();
        let raw = render(&t, &mut inputs).unwrap()["raw"]
            .as_str()
            .unwrap()
            .to_string();
        let text = String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(raw)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            text,
            "To: ann@example.com  Bcc: eve@example.com\r\nSubject: =?UTF-8?B?SMOp?=\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: base64\r\n\r\nSGk="
        );
        let mut none = Map::new();
        assert!(render(&t, &mut none).is_err());
    }
}
