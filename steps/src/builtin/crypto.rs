//! `core.crypto`: hashes, HMAC, random bytes, UUIDs, base64.

use super::Args;
use crate::core::error::ActionError;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Digest;

fn encode(bytes: &[u8], encoding: &str) -> String {
    match encoding {
        "base64" => base64::engine::general_purpose::STANDARD.encode(bytes),
        "base64url" => base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes),
        _ => bytes.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

fn digest(algorithm: &str, data: &[u8]) -> Option<Vec<u8>> {
    Some(match algorithm {
        "sha256" => sha2::Sha256::digest(data).to_vec(),
        "sha512" => sha2::Sha512::digest(data).to_vec(),
        "sha384" => sha2::Sha384::digest(data).to_vec(),
        "sha1" => sha1::Sha1::digest(data).to_vec(),
        "md5" => md5::Md5::digest(data).to_vec(),
        _ => return None,
    })
}

fn hmac(algorithm: &str, key: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    macro_rules! mac {
        ($t:ty) => {{
            let mut m = <Hmac<$t>>::new_from_slice(key).ok()?;
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }};
    }
    Some(match algorithm {
        "sha256" => mac!(sha2::Sha256),
        "sha512" => mac!(sha2::Sha512),
        "sha384" => mac!(sha2::Sha384),
        "sha1" => mac!(sha1::Sha1),
        "md5" => mac!(md5::Md5),
        _ => return None,
    })
}

pub const OPERATIONS: &[&str] = &[
    "hash",
    "hmac",
    "random",
    "uuid",
    "base64_encode",
    "base64_decode",
];
pub const ENCODINGS: &[&str] = &["hex", "base64", "base64url"];
pub const ALGORITHMS: &[&str] = &["sha256", "sha512", "sha384", "sha1", "md5"];

pub fn crypto(a: &Args) -> Result<Value, ActionError> {
    let op = a.chosen("operation")?;
    let encoding = a.chosen("encoding")?;
    let data = || -> Result<String, ActionError> {
        Ok(match a.required("data")? {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let algorithm = || a.chosen("algorithm");
    Ok(match op {
        "hash" => {
            let d = digest(algorithm()?, data()?.as_bytes()).unwrap_or_default();
            json!(encode(&d, encoding))
        }
        "hmac" => {
            let key = a.required_str("key")?;
            let d = hmac(algorithm()?, key.as_bytes(), data()?.as_bytes()).unwrap_or_default();
            json!(encode(&d, encoding))
        }
        "random" => {
            let size = a.number("size")?;
            if !(1.0..=4096.0).contains(&size) {
                return Err(a.invalid("size", "use 1 to 4096 bytes"));
            }
            let bytes: Vec<u8> = (0..size as usize).map(|_| fastrand::u8(..)).collect();
            json!(encode(&bytes, encoding))
        }
        "uuid" => json!(uuid::Uuid::new_v4().to_string()),
        "base64_encode" => {
            json!(base64::engine::general_purpose::STANDARD.encode(data()?.as_bytes()))
        }
        _ => {
            let text = data()?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text.trim()))
                .map_err(|e| a.invalid("data", format!("not base64: {e}")))?;
            json!(String::from_utf8(bytes)
                .map_err(|_| a.invalid("data", "the decoded bytes are not UTF-8 text"))?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: Value) -> Result<Value, ActionError> {
        crypto(
            &Args::new(
                crate::core::args::spec_of(super::super::CORE_SPECS, "crypto", "core.crypto")
                    .unwrap(),
                &v,
            )
            .unwrap(),
        )
    }

    #[test]
    fn known_answers() {
        assert_eq!(
            run(json!({"operation": "hash", "data": "abc"})).unwrap(),
            json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(
            run(json!({"operation": "hash", "algorithm": "md5", "data": ""})).unwrap(),
            json!("d41d8cd98f00b204e9800998ecf8427e")
        );
        // RFC 4231 test case 2.
        assert_eq!(
            run(
                json!({"operation": "hmac", "key": "Jefe", "data": "what do ya want for nothing?"})
            )
            .unwrap(),
            json!("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
        assert_eq!(
            run(json!({"operation": "base64_encode", "data": "hi!"})).unwrap(),
            json!("aGkh")
        );
        assert_eq!(
            run(json!({"operation": "base64_decode", "data": "aGkh"})).unwrap(),
            json!("hi!")
        );
        let r = run(json!({"operation": "random", "size": 8})).unwrap();
        assert_eq!(r.as_str().unwrap().len(), 16);
        let u = run(json!({"operation": "uuid"})).unwrap();
        assert_eq!(u.as_str().unwrap().len(), 36);
        let e = run(json!({"operation": "hash", "algorithm": "sha3", "data": "x"}))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "input `algorithm` of `core.crypto` cannot be `sha3` (expected one of: sha256, sha512, sha384, sha1, md5)"
        );
    }
}
