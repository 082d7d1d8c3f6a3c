//! The prompt a chat model expects: its own `tokenizer.chat_template`
//! (a Jinja template in the GGUF) rendered with minijinja. llama.cpp's
//! built-in guess at the format drops the template's default system prompt,
//! so the template itself is rendered.

use minijinja::{Environment, Error, ErrorKind, Value};
use serde::Serialize;

/// One message as chat templates see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    /// A system message and a user message.
    pub fn pair(system: &str, user: &str) -> Vec<ChatMessage> {
        vec![
            ChatMessage {
                role: "system".into(),
                content: system.into(),
            },
            ChatMessage {
                role: "user".into(),
                content: user.into(),
            },
        ]
    }
}

/// ChatML, for models whose GGUF has no template.
const CHATML: &str = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/// Renders `template` (ChatML when `None`) for `messages`, ending with the
/// cue for the assistant's reply. `today` fills templates that ask for the
/// date (`strftime_now`).
pub fn render(
    template: Option<&str>,
    messages: &[ChatMessage],
    bos: &str,
    eos: &str,
    today: chrono::NaiveDate,
) -> Result<String, String> {
    let mut env = Environment::new();
    // Templates are written for Python's Jinja: `.strip()`, `.startswith()`, …
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, msg))
    });
    env.add_function("strftime_now", move |fmt: String| -> String {
        today.format(&fmt).to_string()
    });
    // A template's own loops are bounded by its messages, but a GGUF is
    // input too: a runaway template stops instead of spinning.
    env.set_fuel(Some(50_000_000));
    let source = template.unwrap_or(CHATML);
    let tmpl = env
        .template_from_str(source)
        .map_err(|e| format!("the model's chat template does not parse: {e}"))?;
    tmpl.render(minijinja::context! {
        messages => minijinja::value::Serde(messages),
        add_generation_prompt => true,
        bos_token => bos,
        eos_token => eos,
    })
    .map_err(|e| format!("the model's chat template failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }

    fn day() -> chrono::NaiveDate {
        chrono::NaiveDate::from_ymd_opt(2026, 11, 24).unwrap()
    }

    /// The part of Qwen2.5's template that decides the system prompt.
    const QWEN: &str = "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen.<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or message.role == 'assistant' %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

    #[test]
    fn the_models_default_system_prompt_is_kept() {
        let p = render(Some(QWEN), &[msg("user", "hi")], "", "", day()).unwrap();
        assert_eq!(
            p,
            "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        let p = render(
            Some(QWEN),
            &[msg("system", "Be brief."), msg("user", "hi")],
            "",
            "",
            day(),
        )
        .unwrap();
        assert!(p.starts_with("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi"));
        assert_eq!(p.matches("system").count(), 1, "{p}");
    }

    #[test]
    fn python_methods_dates_and_errors() {
        let t = "{{ bos_token }}{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('bad role ' + m.role) }}{% endif %}[{{ m.content.strip() }}]{% endfor %}{{ strftime_now('%d %b %Y') }}";
        assert_eq!(
            render(Some(t), &[msg("user", "  x ")], "<s>", "</s>", day()).unwrap(),
            "<s>[x]24 Nov 2026"
        );
        let e = render(Some(t), &[msg("tool", "x")], "", "", day()).unwrap_err();
        assert!(e.contains("bad role tool"), "{e}");
        assert!(render(Some("{% for %}"), &[], "", "", day()).is_err());
        // No template: ChatML.
        assert_eq!(
            render(None, &[msg("user", "q")], "", "", day()).unwrap(),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
        );
    }
}
