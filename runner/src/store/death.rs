//! Why a process that held runs died, so that a restart blames the run it
//! died in and not every run it held.
//!
//! A process that aborts (a failed allocation, a stack overflow, a panic
//! while panicking) raises SIGABRT on the thread that failed. A handler
//! writes the run that thread was working for
//! ([`marktoflow_steps::core::blame`]) into the process's owner lock file
//! (see [`super::owner`]), which outlives it. A process killed from outside
//! (`kill -9`, the kernel's OOM killer, a power cut) writes nothing: no run
//! is to blame, or none can be told.
//!
//! The store's `deaths` of a run is a weight: a death the run is blamed for
//! counts [`BLAMED`], a death nobody can be blamed for [`UNEXPLAINED`], a
//! death blamed on another run nothing. At [`super::MAX_DEATHS`] the run is
//! failed instead of resumed: one that aborted its process twice, or that
//! was running through four unexplained deaths (a run the OOM killer keeps
//! killing).

use marktoflow_steps::core::blame;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

/// A death the run was blamed for: its process aborted inside it.
pub const BLAMED: u32 = 2;
/// A death nobody can be blamed for.
pub const UNEXPLAINED: u32 = 1;

/// How a process that held runs ended, as its owner file tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Death {
    /// It aborted while working for this run.
    InRun(String),
    /// It was killed from outside, or aborted outside any run.
    Unexplained,
}

impl Death {
    /// What the owner file of a dead process says.
    pub fn read(record: &[u8]) -> Death {
        let text = String::from_utf8_lossy(record);
        match text.lines().next().and_then(|l| l.strip_prefix("run ")) {
            Some(id) if !id.is_empty() => Death::InRun(id.to_string()),
            _ => Death::Unexplained,
        }
    }

    /// What this death adds to the weight of `run_id`, which was running.
    pub fn weight(&self, run_id: &str) -> u32 {
        match self {
            Death::InRun(id) if id == run_id => BLAMED,
            Death::InRun(_) => 0,
            Death::Unexplained => UNEXPLAINED,
        }
    }
}

/// Where the handler writes; -1 while no owner file is open.
static RECORD: AtomicI32 = AtomicI32::new(-1);

/// Has an abort of this process recorded in `fd` (an owner lock file, open
/// for writing while the process lives).
pub fn record_aborts_in(fd: RawFd) {
    static INSTALL: Once = Once::new();
    let _ = RECORD.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst);
    INSTALL.call_once(|| {
        // SAFETY: a plain sigaction with a handler that only reads a
        // thread-local and an atomic and calls pwrite and raise
        // (async-signal-safe).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_abort as extern "C" fn(libc::c_int) as usize;
            // On the alternate stack a stack overflow left us on; once.
            action.sa_flags = libc::SA_ONSTACK | libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGABRT, &action, std::ptr::null_mut());
        }
    });
}

/// Stops recording into `fd` (its owner file is about to close).
pub fn stop_recording_in(fd: RawFd) {
    let _ = RECORD.compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst);
}

extern "C" fn on_abort(_signal: libc::c_int) {
    let fd = RECORD.load(Ordering::SeqCst);
    if fd < 0 {
        // SAFETY: raise is async-signal-safe (see below).
        unsafe {
            libc::raise(libc::SIGABRT);
        }
        return;
    }
    let mark = blame::current();
    let id = mark.as_bytes();
    let mut line = [0u8; blame::MAX_ID + 8];
    let n = if id.is_empty() {
        line[..5].copy_from_slice(b"none\n");
        5
    } else {
        line[..4].copy_from_slice(b"run ");
        line[4..4 + id.len()].copy_from_slice(id);
        line[4 + id.len()] = b'\n';
        id.len() + 5
    };
    // SAFETY: pwrite on a descriptor this process keeps open; the buffer
    // lives on this stack. The signal again, now with its default action
    // (SA_RESETHAND), ends the process once this returns, whether abort()
    // raised it or someone sent it.
    unsafe {
        libc::pwrite(fd, line.as_ptr().cast(), n, 0);
        libc::raise(libc::SIGABRT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_death_weighs_on_the_run_it_was_blamed_on_alone() {
        let blamed = Death::read(b"run r1\n");
        assert_eq!(blamed, Death::InRun("r1".into()));
        assert_eq!(blamed.weight("r1"), BLAMED);
        assert_eq!(blamed.weight("r2"), 0);
        for nothing in [&b""[..], b"none\n", b"run \n", b"\xff\xfe"] {
            let d = Death::read(nothing);
            assert_eq!(d, Death::Unexplained);
            assert_eq!(d.weight("r1"), UNEXPLAINED);
        }
    }

    /// The child half of the test below: aborts the way a run can.
    fn abort_in_a_run(record: &std::path::Path, how: &str) {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(record)
            .unwrap();
        record_aborts_in(file.as_raw_fd());
        let how = how.to_string();
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                blame::with_mark(blame::RunMark::new("run-that-died"), || {
                    match how.as_str() {
                        "overflow" => {
                            // Deeper than any stack this thread has.
                            fn deeper(n: u64) -> u64 {
                                let pad = [n; 64];
                                std::hint::black_box(&pad);
                                if n == u64::MAX {
                                    return 0;
                                }
                                deeper(n + 1) + pad[3]
                            }
                            deeper(0);
                        }
                        _ => std::process::abort(),
                    }
                })
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn an_aborted_process_names_the_run_its_failing_thread_worked_for() {
        // Run as the child: abort, and leave the record behind.
        if let (Ok(path), Ok(how)) = (
            std::env::var("MARKTOFLOW_DEATH_TEST_RECORD"),
            std::env::var("MARKTOFLOW_DEATH_TEST_HOW"),
        ) {
            abort_in_a_run(std::path::Path::new(&path), &how);
            return;
        }
        for how in ["abort", "overflow"] {
            let d = tempfile::tempdir().unwrap();
            let record = d.path().join("owner");
            std::fs::write(&record, "").unwrap();
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "store::death::tests::an_aborted_process_names_the_run_its_failing_thread_worked_for",
                    "--nocapture",
                ])
                .env("MARKTOFLOW_DEATH_TEST_RECORD", &record)
                .env("MARKTOFLOW_DEATH_TEST_HOW", how)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{how}: the child did not die");
            let written = std::fs::read(&record).unwrap();
            assert_eq!(
                Death::read(&written),
                Death::InRun("run-that-died".into()),
                "{how}: {:?}; stderr: {}",
                String::from_utf8_lossy(&written),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
