//! Signed links to answer a wait: `{base}/answer/{token}`, where the token
//! names one run's step (and, for a listed approver, who answers), when it
//! expires, and an HMAC-SHA256 of that by a key kept in the state folder
//! (`wait-links.key`, made on first use, readable by its owner only). A
//! link grants answering that one wait while it is open, nothing else; it
//! is one-time because a wait, once answered, takes no further answer
//! (and a named approver's second answer is refused).

use crate::engine::WaitLinks;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::Path;

/// What a link's token says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkClaim {
    #[serde(rename = "r")]
    pub run_id: String,
    #[serde(rename = "s")]
    pub step_id: String,
    /// The approver it answers as; None: `link`.
    #[serde(rename = "w", default, skip_serializing_if = "Option::is_none")]
    pub who: Option<String>,
    /// Milliseconds since 1970.
    #[serde(rename = "e")]
    pub expires: i64,
}

/// Why a link is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinkError {
    #[error("this link is not one this server made (it is damaged or forged)")]
    Forged,
    #[error("this link expired")]
    Expired,
}

/// Makes and checks links with one key.
pub struct Links {
    key: [u8; 32],
    /// Where the server is reached, without a trailing `/` (set once the
    /// server knows its address, when no public URL was given).
    base: std::sync::RwLock<String>,
}

const KEY_FILE: &str = "wait-links.key";

impl Links {
    /// The links of the state folder `dir` (its key made when missing),
    /// pointing at `base`.
    pub fn open(dir: &Path, base: &str) -> std::io::Result<Links> {
        let path = dir.join(KEY_FILE);
        let key = match std::fs::read(&path) {
            Ok(k) if k.len() == 32 => k,
            _ => {
                std::fs::create_dir_all(dir)?;
                let mut k = vec![0u8; 32];
                std::fs::File::open("/dev/urandom")
                    .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut k))?;
                // Made whole beside it, then moved: never half a key.
                let tmp = dir.join(format!("{KEY_FILE}.{}", std::process::id()));
                {
                    use std::os::unix::fs::OpenOptionsExt;
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .mode(0o600)
                        .open(&tmp)?;
                    f.write_all(&k)?;
                    f.sync_all()?;
                }
                // Another process may have made one first: theirs wins.
                match std::fs::hard_link(&tmp, &path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => {
                        let _ = std::fs::remove_file(&tmp);
                        return Err(e);
                    }
                }
                let _ = std::fs::remove_file(&tmp);
                std::fs::read(&path)?
            }
        };
        let mut fixed = [0u8; 32];
        if key.len() != 32 {
            return Err(std::io::Error::other(format!(
                "`{}` is not a link key (32 bytes)",
                path.display()
            )));
        }
        fixed.copy_from_slice(&key);
        Ok(Links {
            key: fixed,
            base: std::sync::RwLock::new(base.trim_end_matches('/').to_string()),
        })
    }

    /// Links point at `base` from now on.
    pub fn set_base(&self, base: &str) {
        if let Ok(mut b) = self.base.write() {
            *b = base.trim_end_matches('/').to_string();
        }
    }

    fn mac(&self, payload: &[u8]) -> Vec<u8> {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&self.key)
            .expect("HMAC takes a key of any length");
        mac.update(payload);
        mac.finalize().into_bytes().to_vec()
    }

    /// The token of `claim`: the claim and its MAC, base64url.
    pub fn token(&self, claim: &LinkClaim) -> String {
        let payload = serde_json::to_vec(claim).unwrap_or_default();
        format!(
            "{}.{}",
            B64.encode(&payload),
            B64.encode(self.mac(&payload))
        )
    }

    /// What `token` says, if this key signed it and it has not expired by `now`.
    pub fn check(&self, token: &str, now: i64) -> Result<LinkClaim, LinkError> {
        let (payload, mac) = token.split_once('.').ok_or(LinkError::Forged)?;
        if token.len() > 16 * 1024 {
            return Err(LinkError::Forged);
        }
        let payload = B64.decode(payload).map_err(|_| LinkError::Forged)?;
        let mac = B64.decode(mac).map_err(|_| LinkError::Forged)?;
        let expected = self.mac(&payload);
        if !super::request::constant_time_eq(&expected, &mac) {
            return Err(LinkError::Forged);
        }
        let claim: LinkClaim = serde_json::from_slice(&payload).map_err(|_| LinkError::Forged)?;
        if claim.expires <= now {
            return Err(LinkError::Expired);
        }
        Ok(claim)
    }
}

impl WaitLinks for Links {
    fn link(&self, run_id: &str, step_id: &str, who: Option<&str>, expires: i64) -> Option<String> {
        let token = self.token(&LinkClaim {
            run_id: run_id.to_string(),
            step_id: step_id.to_string(),
            who: who.map(str::to_string),
            expires,
        });
        let base = self.base.read().map(|b| b.clone()).unwrap_or_default();
        Some(format!("{base}/answer/{token}"))
    }
}

/// URL-safe, unpadded: a token is a path segment.
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_checks_until_it_expires_and_a_changed_one_never() {
        let dir = tempfile::tempdir().unwrap();
        let links = Links::open(dir.path(), "http://h:1/").unwrap();
        let claim = LinkClaim {
            run_id: "r1".into(),
            step_id: "review".into(),
            who: Some("ann".into()),
            expires: 2_000,
        };
        let token = links.token(&claim);
        assert_eq!(links.check(&token, 1_000), Ok(claim.clone()));
        assert_eq!(links.check(&token, 2_000), Err(LinkError::Expired));
        // Another run's step, or another approver, under the same signature.
        let (_, mac) = token.split_once('.').unwrap();
        let other = LinkClaim {
            who: Some("bob".into()),
            ..claim
        };
        let forged = format!("{}.{mac}", B64.encode(serde_json::to_vec(&other).unwrap()));
        assert_eq!(links.check(&forged, 1_000), Err(LinkError::Forged));
        assert_eq!(links.check("zz.zz", 1_000), Err(LinkError::Forged));
        assert_eq!(links.check("", 1_000), Err(LinkError::Forged));
        // The same folder gives the same key; another folder does not.
        let again = Links::open(dir.path(), "http://h:1").unwrap();
        assert!(again.check(&token, 1_000).is_ok());
        let elsewhere = tempfile::tempdir().unwrap();
        let stranger = Links::open(elsewhere.path(), "http://h:1").unwrap();
        assert_eq!(stranger.check(&token, 1_000), Err(LinkError::Forged));
        let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o600);
        assert!(links
            .link("r1", "review", None, 5)
            .unwrap()
            .starts_with("http://h:1/answer/"));
    }
}
