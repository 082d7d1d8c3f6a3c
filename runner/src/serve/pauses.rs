//! Pauses asked from another process — `marktoflow pause`, or the API of
//! another server of a shared store — are recorded in the run store
//! ([`RunStore::ask_pause`]); each process that executes runs looks for
//! them and pauses the runs it holds before their next top-level step.

use crate::store::RunStore;
use marktoflow_steps::core::signals::Cancel;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often a process looks for pauses asked of its runs.
pub const LOOK_EVERY: Duration = Duration::from_millis(500);

/// Until `stop`, every `every`: each pause asked of a run that `held`
/// gives the pause flag of (given the run's id and when the pause was
/// asked) is set, and the run pauses before its next step.
pub async fn take_asked_pauses(
    store: Arc<dyn RunStore>,
    every: Duration,
    stop: Cancel,
    held: impl Fn(&str, i64) -> Option<Arc<AtomicBool>> + Send + 'static,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => return,
        }
        let st = store.clone();
        let asked = tokio::task::spawn_blocking(move || st.asked_pauses()).await;
        // A store that cannot be read now is looked at again next time.
        let Ok(Ok(asked)) = asked else { continue };
        for (run_id, at) in asked {
            if let Some(flag) = held(&run_id, at) {
                flag.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// [`take_asked_pauses`] for a server or worker: the runs it executes
/// now. A request is dropped when its run stops (the store deletes it with
/// the run's end), so one still there is for this execution, whenever it
/// was asked (a run paused while queued pauses once a worker claims it;
/// the asking machine's clock does not matter).
pub async fn take_served_pauses(s: Arc<super::ServerState>) {
    let Some(store) = s.store.clone() else { return };
    let held = {
        let s = s.clone();
        move |run_id: &str, _at: i64| {
            let runs = s.runs.lock().ok()?;
            let e = runs.get(run_id)?;
            let running = e.result.borrow().is_none();
            running.then(|| e.pause.clone())
        }
    };
    take_asked_pauses(store, LOOK_EVERY, s.stopping.clone(), held).await
}
