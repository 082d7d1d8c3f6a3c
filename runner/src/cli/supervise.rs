//! `serve` as two processes: a small supervisor that holds the listening
//! socket and a server that it starts, and starts again at once when it
//! dies of a signal (a failed allocation or a stack overflow aborts a
//! process; the kernel's OOM killer ends one). What a server that died was
//! running is resumed by the next one from its checkpoints, and the run it
//! died in is blamed alone (see `store::death`), so the next unbounded path
//! costs one run and a restart, not the service. Connections wait in the
//! socket's queue meanwhile: the port never closes.
//!
//! `--no-supervisor` serves in one process (for a supervisor of one's own,
//! such as systemd, or a test that kills the server).

use super::{ServeArgs, EXIT_USAGE};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The environment variable that hands the server the supervisor's socket.
pub const LISTEN_FD: &str = "MARKTOFLOW_SERVE_LISTEN_FD";

/// The socket the supervisor handed down, if this process is its server.
pub fn inherited_listener() -> Option<std::net::TcpListener> {
    let fd: RawFd = std::env::var(LISTEN_FD).ok()?.parse().ok()?;
    // Not passed on to what this server starts (scripts, MCP servers).
    std::env::remove_var(LISTEN_FD);
    // SAFETY: the supervisor opened this descriptor for us and passed it
    // on exec; nothing else in this process owns it.
    let listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
    }
    Some(listener)
}

/// Whether `serve` should supervise: not when told otherwise, and not in
/// the server it started.
pub fn wanted(a: &ServeArgs) -> bool {
    !a.no_supervisor && std::env::var_os(LISTEN_FD).is_none()
}

/// The signal the supervisor last received (SIGTERM, SIGINT), 0 for none.
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(signal: libc::c_int) {
    STOP.store(signal, Ordering::SeqCst);
}

/// Runs the supervisor: binds the address, then starts the server on it
/// (this program, same arguments) until it ends by itself; returns its exit code.
pub fn run(a: &ServeArgs) -> i32 {
    let addr = format!("{}:{}", a.host, a.port);
    let listener = match std::net::TcpListener::bind(&addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {addr}: {e}");
            return EXIT_USAGE;
        }
    };
    let fd = listener.as_raw_fd();
    // SAFETY: fcntl on our own descriptor: it is to survive exec.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
    }
    // SAFETY: handlers that store into an atomic.
    unsafe {
        for signal in [libc::SIGTERM, libc::SIGINT] {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    crate::serve::listen::raise_descriptor_limit();
    let exe = std::env::current_exe().unwrap_or_else(|_| "marktoflow".into());
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let me = std::process::id() as libc::pid_t;
    let mut quick_deaths = 0u32;
    loop {
        let mut c = Command::new(&exe);
        c.args(&args).env(LISTEN_FD, fd.to_string());
        use std::os::unix::process::CommandExt as _;
        // SAFETY: prctl, setpgid, getppid and _exit are async-signal-safe.
        unsafe {
            c.pre_exec(move || {
                // The server ends with its supervisor, however that ends.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != me {
                    libc::_exit(1);
                }
                // Its own group: a Ctrl-C reaches it once, through us.
                libc::setpgid(0, 0);
                Ok(())
            });
        }
        let started = Instant::now();
        let mut child = match c.spawn() {
            Ok(ch) => ch,
            Err(e) => {
                eprintln!("error: cannot start the server: {e}");
                return EXIT_USAGE;
            }
        };
        let mut told = 0;
        let status = loop {
            let stop = STOP.load(Ordering::SeqCst);
            if stop != 0 && stop != told {
                // SAFETY: kill to our own child.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, stop);
                }
                told = stop;
                STOP.store(0, Ordering::SeqCst);
            }
            match child.try_wait() {
                Ok(Some(st)) => break st,
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => {
                    eprintln!("error: cannot wait for the server: {e}");
                    return EXIT_USAGE;
                }
            }
        };
        use std::os::unix::process::ExitStatusExt as _;
        let Some(signal) = status.signal().filter(|_| told == 0) else {
            return status.code().unwrap_or(super::EXIT_RUN_FAILED);
        };
        // Died of a signal, not asked to stop: start it again, backing
        // off while it keeps dying young.
        if started.elapsed() > Duration::from_secs(60) {
            quick_deaths = 0;
        }
        let wait = Duration::from_millis(100 * (1u64 << quick_deaths.min(7)));
        quick_deaths += 1;
        eprintln!(
            "marktoflow: the server died ({}); starting it again in {:.1} s — its runs are resumed from their last step",
            signal_name(signal),
            wait.as_secs_f64()
        );
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if STOP.load(Ordering::SeqCst) != 0 {
                return super::EXIT_OK;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGABRT => "SIGABRT: an abort, such as a failed allocation or a stack overflow",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGKILL => "SIGKILL: killed, perhaps by the kernel's OOM killer",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}
