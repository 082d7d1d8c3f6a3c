//! Mapped files that shrink while they are mapped.
//!
//! Indexes (tantivy), vector files and model weights are read through
//! memory maps. Reading a page of a map past the end of its file raises
//! SIGBUS, which kills the process, so a file cut short by another program
//! (or a full disk during someone else's write) would take a server down
//! with no word. [`guard`] installs a SIGBUS handler that maps a page of
//! zeros where the fault was and lets the read go on: the reader sees zeros
//! (which our readers treat as a damaged file and the next rebuild
//! replaces) instead of the process dying. Faults are counted
//! ([`faults`], shown on `/metrics`). A SIGBUS the handler cannot repair
//! falls back to the default action.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static INSTALL: Once = Once::new();
static FAULTS: AtomicU64 = AtomicU64::new(0);

/// Installs the handler (once per process); call before mapping a file.
pub fn guard() {
    INSTALL.call_once(install);
}

/// How many pages of mapped files were read past their end.
pub fn faults() -> u64 {
    FAULTS.load(Ordering::Relaxed)
}

fn install() {
    // SAFETY: a plain sigaction with a handler that only makes syscalls
    // (mmap, sigaction) and touches an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo; mmap and sigaction are
    // system calls, safe to make in a handler.
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE).max(4096) as usize;
        let addr = (*info).si_addr() as usize;
        let start = addr & !(page - 1);
        let zeros = libc::mmap(
            start as *mut libc::c_void,
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if start == 0 || zeros == libc::MAP_FAILED {
            // Not a page we can stand in for: the default action, at the
            // same instruction again.
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
            return;
        }
    }
    FAULTS.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_file_cut_short_reads_as_zeros() {
        guard();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, vec![7u8; 3 * 4096]).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        // SAFETY: the test cuts the file on purpose; that is what is tested.
        let map = unsafe { memmap2::Mmap::map(&f).unwrap() };
        assert_eq!(map[5000], 7);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(0)
            .unwrap();
        let before = faults();
        let tail = std::hint::black_box(&map[..])[2 * 4096 + 10];
        assert_eq!(tail, 0);
        assert!(faults() > before);
    }
}
