//! Work that goes on after the step that started it has returned, in a
//! process that lives on (`serve`, `worker`): a knowledge base's chunks
//! without a vector are embedded while requests are answered. One task per
//! key at a time, on threads at the lowest CPU priority, so a request's own
//! work always comes first; stopped with the process (what was done is kept
//! by the task itself).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How far one task has got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStatus {
    /// What the task does, for people: `chunks embedded`.
    pub what: String,
    pub done: u64,
    pub total: u64,
    pub running: bool,
    /// Why it ended early, if it did.
    pub error: Option<String>,
    /// Seconds since the task started.
    pub seconds: u64,
}

struct Task {
    status: TaskStatus,
    started: Instant,
}

/// A process's background tasks, by key (a knowledge base's vector file).
#[derive(Default)]
pub struct Background {
    stopping: AtomicBool,
    tasks: Mutex<BTreeMap<String, Task>>,
}

/// Tasks that run at once in one process.
pub const MAX_RUNNING: usize = 4;
/// Tasks whose status is kept (running ones and the latest finished).
pub const MAX_KEPT: usize = 256;

/// What a task is given: where to report progress, and whether to stop.
#[derive(Clone)]
pub struct TaskContext {
    background: Arc<Background>,
    key: String,
}

impl TaskContext {
    pub fn progress(&self, done: u64, total: u64) {
        self.background.update(&self.key, |s| {
            s.done = done;
            s.total = total;
        });
    }

    /// True once the process is shutting down.
    pub fn should_stop(&self) -> bool {
        self.background.stopping.load(Ordering::Relaxed)
    }
}

/// The lowest CPU priority for the calling thread (Linux sets it per thread).
fn lowest_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority only reads its arguments; the thread id is ours.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

impl Background {
    pub fn new() -> Arc<Background> {
        Arc::default()
    }

    /// Starts `work` under `key` unless a task with that key is running
    /// (false then). `work` runs on a thread of its own, and whatever it
    /// parallelises runs on a pool of lowest-priority threads.
    pub fn start(
        self: &Arc<Self>,
        key: &str,
        what: &str,
        work: impl FnOnce(&TaskContext) -> Result<(), String> + Send + 'static,
    ) -> bool {
        if self.stopping.load(Ordering::Relaxed) {
            return false;
        }
        {
            let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
            if tasks.get(key).is_some_and(|t| t.status.running) {
                return false;
            }
            // Each knowledge base a caller names may want a task: at most a
            // few run at once (the others are asked for again later), and
            // the statuses of the oldest finished ones are forgotten.
            if tasks.values().filter(|t| t.status.running).count() >= MAX_RUNNING {
                return false;
            }
            while tasks.len() >= MAX_KEPT {
                let oldest = tasks
                    .iter()
                    .filter(|(_, t)| !t.status.running)
                    .min_by_key(|(_, t)| t.started)
                    .map(|(k, _)| k.clone());
                match oldest {
                    Some(k) => tasks.remove(&k),
                    None => break,
                };
            }
            tasks.insert(
                key.to_string(),
                Task {
                    status: TaskStatus {
                        what: what.to_string(),
                        done: 0,
                        total: 0,
                        running: true,
                        error: None,
                        seconds: 0,
                    },
                    started: Instant::now(),
                },
            );
        }
        let cx = TaskContext {
            background: self.clone(),
            key: key.to_string(),
        };
        let spawned = std::thread::Builder::new()
            .name("marktoflow-background".into())
            .spawn(move || {
                lowest_priority();
                let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("marktoflow-background-{i}"))
                    .start_handler(|_| lowest_priority())
                    .build();
                let result = match pool {
                    Ok(pool) => pool.install(|| work(&cx)),
                    Err(e) => Err(format!("cannot start background threads: {e}")),
                };
                cx.background.update(&cx.key, |s| {
                    s.running = false;
                    s.error = result.err();
                });
            });
        if let Err(e) = spawned {
            self.update(key, |s| {
                s.running = false;
                s.error = Some(format!("cannot start a background thread: {e}"));
            });
            return false;
        }
        true
    }

    fn update(&self, key: &str, f: impl FnOnce(&mut TaskStatus)) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = tasks.get_mut(key) {
            f(&mut t.status);
        }
    }

    /// Every task started in this process, by key.
    pub fn status(&self) -> Vec<(String, TaskStatus)> {
        let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks
            .iter()
            .map(|(k, t)| {
                let mut s = t.status.clone();
                s.seconds = t.started.elapsed().as_secs();
                (k.clone(), s)
            })
            .collect()
    }

    /// Asks every task to stop (the process is ending); none starts after.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_task_per_key_reporting_progress_until_stopped() {
        let bg = Background::new();
        let (tx, rx) = std::sync::mpsc::channel();
        assert!(bg.start("kb", "chunks embedded", move |cx| {
            cx.progress(3, 10);
            tx.send(()).unwrap();
            while !cx.should_stop() {
                std::thread::park_timeout(std::time::Duration::from_millis(5));
            }
            Err("stopped".into())
        }));
        rx.recv().unwrap();
        assert!(
            !bg.start("kb", "again", |_| Ok(())),
            "one at a time per key"
        );
        let (k, s) = bg.status().remove(0);
        assert_eq!(
            (k.as_str(), s.done, s.total, s.running),
            ("kb", 3, 10, true)
        );
        bg.stop();
        // The task sees the stop and ends, saying why.
        let ended = (0..2000).find_map(|_| {
            let s = bg.status().remove(0).1;
            if s.running {
                std::thread::sleep(std::time::Duration::from_millis(5));
                None
            } else {
                Some(s)
            }
        });
        assert_eq!(ended.and_then(|s| s.error).as_deref(), Some("stopped"));
        assert!(
            !bg.start("other", "x", |_| Ok(())),
            "none starts after a stop"
        );
    }

    #[test]
    fn a_few_tasks_run_at_once_and_old_statuses_are_forgotten() {
        let bg = Background::new();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let release = Arc::new(AtomicBool::new(false));
        for i in 0..MAX_RUNNING {
            let (tx, release) = (tx.clone(), release.clone());
            assert!(bg.start(&format!("kb{i}"), "x", move |_| {
                tx.send(()).unwrap();
                while !release.load(Ordering::SeqCst) {
                    std::thread::park_timeout(std::time::Duration::from_millis(2));
                }
                Ok(())
            }));
        }
        for _ in 0..MAX_RUNNING {
            rx.recv().unwrap();
        }
        assert!(!bg.start("one-more", "x", |_| Ok(())), "the cap holds");
        release.store(true, Ordering::SeqCst);
        let wait_idle = || {
            while bg.status().iter().any(|(_, s)| s.running) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        };
        wait_idle();
        // Finished tasks make room, and only the latest statuses are kept.
        for i in 0..MAX_KEPT + 10 {
            assert!(bg.start(&format!("done{i}"), "x", |_| Ok(())));
            wait_idle();
        }
        let kept = bg.status();
        assert_eq!(kept.len(), MAX_KEPT);
        assert!(kept
            .iter()
            .any(|(k, _)| k == &format!("done{}", MAX_KEPT + 9)));
        assert!(!kept.iter().any(|(k, _)| k == "kb0"));
    }
}
