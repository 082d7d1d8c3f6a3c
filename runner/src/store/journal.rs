//! Run journals: how a CLI run is recorded without opening the database.
//!
//! A run's writes are appended, one JSON [`Write`] per line, to
//! `<store>.pending/<run id>.jsonl` beside the store file. Whoever next
//! reads the store ([`super::SqliteStore`] at open and before every read)
//! moves the journals in under a lock, in one transaction, and deletes those
//! that are complete: the run finished, or its process is gone. A journal
//! whose process still runs is moved in as it stands (the run shows as
//! running) and kept, to be moved again once it grew.
//!
//! Durability is the database's (`synchronous=NORMAL`): a write is in the
//! OS's cache when it returns, so it survives the process being killed, not
//! a power cut. A line cut short by a crash is ignored; a line that does not
//! parse stops the reading of its file, which is then never deleted.
//!
//! A step's output and a run's outputs are written as the store keeps them
//! (cut to a marker over [`super::STORED_VALUE_MAX`]): a run whose steps
//! pass large values along does not write them again and again, and the
//! next reader does not hold them all in memory.

use super::{
    now_ms, process_alive, Checkpoint, NewRun, RunFilter, RunRecord, RunStore, SqliteStore,
    StepRow, StoreError, Write,
};
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The folder of journals that belongs to the store file `db`.
pub fn dir_of(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".pending");
    db.with_file_name(name)
}

/// Records runs as journals beside the store file; reads open the store.
pub struct JournalStore {
    db: PathBuf,
    dir: PathBuf,
    file: Mutex<Option<File>>,
    /// The first write that failed, reported at the next flush.
    failed: Mutex<Option<String>>,
    reader: Mutex<Option<Arc<SqliteStore>>>,
    /// Where the pauses asked of the run are looked up (the store file as
    /// it stands: opening the store would move the journals in each time).
    pauses: Mutex<Option<rusqlite::Connection>>,
    /// This process as the owner of the run (see [`super::owner`]).
    owner: Mutex<Option<super::owner::Owner>>,
}

impl JournalStore {
    /// A journal store for the store file `db`; creates the journal folder.
    pub fn open(db: &Path) -> Result<JournalStore, StoreError> {
        // What the next reader would refuse is refused now, before the run.
        if db.exists() && !is_sqlite(db) {
            return Err(StoreError::Open {
                path: db.display().to_string(),
                message: "not a run store (not an SQLite database)".into(),
            });
        }
        let dir = dir_of(db);
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::Open {
            path: dir.display().to_string(),
            message: format!("cannot create the folder: {e}"),
        })?;
        Ok(JournalStore {
            db: db.to_path_buf(),
            dir,
            file: Mutex::new(None),
            failed: Mutex::new(None),
            reader: Mutex::new(None),
            pauses: Mutex::new(None),
            owner: Mutex::new(None),
        })
    }

    fn create(&self, mut run: NewRun) -> Result<(), StoreError> {
        // Run ids become file names: nothing but what a uuid is made of.
        let safe = !run.id.is_empty()
            && run.id.len() <= 64
            && run
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !safe {
            return Err(StoreError::Db(format!(
                "run id `{}` cannot name a journal",
                run.id
            )));
        }
        let path = self.dir.join(format!("{}.jsonl", run.id));
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        let mut slot = self.file.lock().map_err(|_| StoreError::Closed)?;
        *slot = Some(file);
        drop(slot);
        let owner = super::owner::Owner::acquire(&self.db)?;
        run.owner = Some(owner.token.clone());
        if let Ok(mut o) = self.owner.lock() {
            *o = Some(owner);
        }
        self.append(&Write::Create { run, at: now_ms() });
        self.failed()
    }

    fn append(&self, w: &Write) {
        let result = (|| -> Result<(), String> {
            let compacted = compact(w);
            let mut line =
                serde_json::to_vec(compacted.as_ref().unwrap_or(w)).map_err(|e| e.to_string())?;
            line.push(b'\n');
            let mut slot = self
                .file
                .lock()
                .map_err(|_| "journal lock poisoned".to_string())?;
            let file = slot.as_mut().ok_or("no run was created in this journal")?;
            // One write call per line: a reader sees whole lines or a cut
            // last one, which it ignores.
            file.write_all(&line).map_err(|e| e.to_string())
        })();
        if let Err(e) = result {
            if let Ok(mut f) = self.failed.lock() {
                f.get_or_insert(format!("journal of run `{}`: {e}", w.run_id()));
            }
        }
    }

    fn failed(&self) -> Result<(), StoreError> {
        match self.failed.lock().map(|f| f.clone()) {
            Ok(None) => Ok(()),
            Ok(Some(e)) => Err(StoreError::Db(e)),
            Err(_) => Err(StoreError::Closed),
        }
    }

    fn reader(&self) -> Result<Arc<SqliteStore>, StoreError> {
        let mut slot = self.reader.lock().map_err(|_| StoreError::Closed)?;
        if let Some(r) = slot.as_ref() {
            return Ok(r.clone());
        }
        let r = Arc::new(SqliteStore::open(&self.db)?);
        *slot = Some(r.clone());
        Ok(r)
    }
}

impl RunStore for JournalStore {
    fn submit_run(&self, run: NewRun) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        let _ = reply.send(self.create(run));
        rx
    }

    /// A CLI run's deaths are not kept (a server never resumes it); its
    /// agent replies are, for `marktoflow answer` to continue it.
    fn write(&self, w: Write) {
        if !matches!(w, Write::Died { .. }) {
            self.append(&w);
        }
    }

    fn owner_token(&self) -> Option<String> {
        self.owner
            .lock()
            .ok()
            .and_then(|o| o.as_ref().map(|o| o.token.clone()))
    }

    fn submit_flush(&self) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>> {
        // Appends are written as they are made: nothing to wait for.
        let (reply, rx) = tokio::sync::oneshot::channel();
        let _ = reply.send(self.failed());
        rx
    }

    fn get_run(&self, id: &str) -> Result<RunRecord, StoreError> {
        self.reader()?.get_run(id)
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        self.reader()?.list_runs(filter)
    }

    fn count_runs(&self, filter: &RunFilter) -> Result<usize, StoreError> {
        self.reader()?.count_runs(filter)
    }

    fn steps_of(&self, run_id: &str) -> Result<Vec<StepRow>, StoreError> {
        self.reader()?.steps_of(run_id)
    }

    fn spent_since(
        &self,
        workflow: &str,
        since: i64,
        except: &str,
    ) -> Result<crate::engine::Spend, StoreError> {
        self.reader()?.spent_since(workflow, since, except)
    }

    fn checkpoint(
        &self,
        run_id: &str,
        next_step: Option<usize>,
    ) -> Result<Option<Checkpoint>, StoreError> {
        self.reader()?.checkpoint(run_id, next_step)
    }

    fn incomplete_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.reader()?.incomplete_runs()
    }

    fn prune(&self, older_than: Duration) -> Result<usize, StoreError> {
        self.reader()?.prune(older_than)
    }

    fn answer_wait(&self, a: super::AnswerIn) -> Result<super::Answered, StoreError> {
        self.reader()?.answer_wait(a)
    }

    fn expire_waits(&self, now: i64) -> Result<Vec<String>, StoreError> {
        self.reader()?.expire_waits(now)
    }

    fn cancel_waiting(&self, run_id: &str) -> Result<bool, StoreError> {
        self.reader()?.cancel_waiting(run_id)
    }

    fn waits(&self, f: &super::WaitFilter) -> Result<Vec<super::WaitRecord>, StoreError> {
        self.reader()?.waits(f)
    }

    fn ask_pause(&self, run_id: &str, by: &str) -> Result<super::PauseAsked, StoreError> {
        self.reader()?.ask_pause(run_id, by)
    }

    fn asked_pauses(&self) -> Result<Vec<(String, i64)>, StoreError> {
        // Nobody asked anything of a store that does not exist yet.
        if !self.db.exists() {
            return Ok(Vec::new());
        }
        let mut slot = self.pauses.lock().map_err(|_| StoreError::Closed)?;
        if slot.is_none() {
            let c = marktoflow_steps::core::sqlite::connect(&self.db)
                .map_err(|e| StoreError::Db(e.to_string()))?;
            *slot = Some(c);
        }
        match slot.as_ref() {
            Some(c) => SqliteStore::asked_pauses_in(c).map_err(|e| StoreError::Db(e.to_string())),
            None => Err(StoreError::Closed),
        }
    }
}

/// Whether `path` is a file that starts as every SQLite database does.
/// Whether `path` is an SQLite file. An empty file is one: another
/// process has just created the store and not yet written its first page
/// (SQLite itself reads an empty file as an empty database).
fn is_sqlite(path: &Path) -> bool {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        return true;
    }
    let mut head = [0u8; 16];
    File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| &head == b"SQLite format 3\0")
}

/// One journal read back.
pub(super) struct Pending {
    pub path: PathBuf,
    pub writes: Vec<Write>,
    /// Nothing more will be appended and all of it was read: delete it once
    /// moved in.
    pub complete: bool,
}

/// Whether `dir` holds any journal (cheap: no file is read).
pub(super) fn any_pending(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
    })
}

/// Holds the journal folder's lock: one process moves journals at a time,
/// so an older reading of a journal never replaces a newer one.
pub(super) fn lock(dir: &Path) -> Result<File, StoreError> {
    let path = dir.join(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::Open {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    file.lock().map_err(|e| StoreError::Open {
        path: path.display().to_string(),
        message: format!("cannot lock: {e}"),
    })?;
    Ok(file)
}

/// The journals of the store file `db`, oldest run first. Files that do not
/// start with the creation of a run are left alone.
pub(super) fn read_pending(db: &Path) -> Vec<Pending> {
    let Ok(entries) = std::fs::read_dir(dir_of(db)) else {
        return Vec::new();
    };
    let mut found: Vec<(i64, Pending)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|path| {
            let (writes, whole) = parse(File::open(&path).ok()?);
            let (created, pid, owner) = match writes.first() {
                Some(Write::Create { run, at }) if trusted(db, &path, run) => {
                    (*at, run.pid, run.owner.clone())
                }
                Some(Write::Create { .. }) => {
                    // Not a journal `marktoflow run` wrote: set aside, never
                    // read again.
                    let mut aside = path.clone().into_os_string();
                    aside.push(".rejected");
                    let _ = std::fs::rename(&path, aside);
                    return None;
                }
                _ => return None,
            };
            let finished = writes.iter().any(|w| matches!(w, Write::Finish { .. }));
            // The writer's lock says whether it lives; older journals
            // without an owner fall back on the process id.
            let alive = match &owner {
                Some(t) => super::owner::is_alive(db, t),
                None => pid.is_some_and(process_alive),
            };
            Some((
                created,
                Pending {
                    path,
                    writes,
                    complete: whole && (finished || !alive),
                },
            ))
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.path.cmp(&b.1.path)));
    found.into_iter().map(|(_, p)| p).collect()
}

/// Whether the journal at `path`, which creates `run`, is one a CLI run of
/// this store wrote: named after its run, a run of `marktoflow run` or
/// `retry` (which carries no `Idempotency-Key`), in a file of the store
/// file's owner.
fn trusted(db: &Path, path: &Path, run: &NewRun) -> bool {
    use std::os::unix::fs::MetadataExt;
    let named = path.file_stem().and_then(|n| n.to_str()) == Some(run.id.as_str());
    let owner_of = |p: &Path| std::fs::metadata(p).map(|m| m.uid()).ok();
    let same_owner = match (
        owner_of(path),
        owner_of(db).or_else(|| owner_of(&dir_of(db))),
    ) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    let cli = run.trigger == "cli" || (run.trigger == "retry" && run.retry_of.is_some());
    named && same_owner && cli && run.idempotency_key.is_none()
}

/// `w` with its large values as the store keeps them; `None` when it is
/// kept as it is.
fn compact(w: &Write) -> Option<Write> {
    match w {
        Write::Step { run_id, row } => super::stored_marker(&row.output).map(|output| {
            let mut row = row.clone();
            row.output = output;
            Write::Step {
                run_id: run_id.clone(),
                row,
            }
        }),
        Write::Finish { run_id, end, at } => super::stored_marker(&end.outputs).map(|outputs| {
            let mut end = end.clone();
            end.outputs = outputs;
            Write::Finish {
                run_id: run_id.clone(),
                end,
                at: *at,
            }
        }),
        _ => None,
    }
}

/// The writes of one journal, read a line at a time (large values cut as
/// the store keeps them, for journals written before they were cut), and
/// whether every line was read (a cut last line does not count against
/// it: its write never returned).
fn parse(file: impl std::io::Read) -> (Vec<Write>, bool) {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let mut writes: Vec<Write> = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return (writes, true),
            Ok(_) if line.last() != Some(&b'\n') => {
                // After the last newline: a write cut short.
                return (writes, true);
            }
            Ok(_) => {}
            Err(_) => return (writes, false),
        }
        match serde_json::from_slice::<Write>(&line) {
            Ok(w) if writes.first().is_none_or(|f| f.run_id() == w.run_id()) => {
                writes.push(compact(&w).unwrap_or(w));
            }
            _ => return (writes, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{RunEnd, RunRecord, RunStatus};
    use serde_json::json;

    fn new_run(id: &str) -> NewRun {
        NewRun {
            id: id.into(),
            workflow: "w".into(),
            file: "/tmp/w.md".into(),
            version: "v1".into(),
            inputs: json!({"q": "x"}).as_object().unwrap().clone(),
            trigger: "cli".into(),
            status: RunStatus::Queued,
            retry_of: None,
            pid: Some(std::process::id()),
            owner: None,
            idempotency_key: None,
            context: serde_json::Value::Null,
            concurrency: None,
        }
    }

    fn step(id: &str) -> StepRow {
        StepRow {
            step_id: id.into(),
            name: id.into(),
            depth: 0,
            top_index: 1,
            status: crate::engine::StepStatus::Completed,
            attempts: 1,
            started_at: 0,
            duration_ms: 2,
            output: json!({"id": id}),
            error: None,
            reused: false,
            inputs: None,
            usage: None,
        }
    }

    fn end() -> RunEnd {
        RunEnd {
            status: RunStatus::Completed,
            outputs: json!({"ok": 1}),
            error: None,
            error_step: None,
            duration_ms: 4,
            waiting: None,
        }
    }

    fn stored(db: &Path, id: &str) -> (RunRecord, usize) {
        let s = SqliteStore::open(db).unwrap();
        let r = s.get_run(id).unwrap();
        (r, s.steps_of(id).unwrap().len())
    }

    /// A large step output or run output is written as the store keeps it
    /// (a marker), not whole: the journal stays small, the store shows the
    /// same as for a run written to it directly. An older journal that
    /// holds the whole values is cut the same way when read.
    #[test]
    fn large_values_are_written_as_the_store_keeps_them() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("runs.db");
        let big = json!({"text": "x".repeat(crate::store::STORED_VALUE_MAX + 10)});
        let j = JournalStore::open(&db).unwrap();
        j.create_run(new_run("run-big")).unwrap();
        j.mark_running("run-big");
        let mut row = step("a");
        row.output = big.clone();
        j.record_step("run-big", row.clone());
        let mut e = end();
        e.outputs = big.clone();
        let journal = dir_of(&db).join("run-big.jsonl");
        j.finish_run("run-big", e.clone());
        j.flush().unwrap();
        let written = std::fs::metadata(&journal).unwrap().len();
        assert!(written < 16 << 10, "the journal holds {written} bytes");
        // Read back as if another process wrote it (this one is alive).
        let (writes, whole) = parse(File::open(&journal).unwrap());
        assert!(whole);
        let marker = crate::store::stored_marker(&big).unwrap();
        assert_eq!(marker["truncated"], json!(true));
        assert!(writes.iter().any(|w| matches!(w,
            Write::Step { row, .. } if row.output == marker)));
        assert!(writes.iter().any(|w| matches!(w,
            Write::Finish { end, .. } if end.outputs == marker)));
        // A journal written whole (by an older version) is cut on reading.
        let old = d.path().join("old.jsonl");
        let lines = [
            Write::Create {
                run: new_run("run-old"),
                at: 1,
            },
            Write::Step {
                run_id: "run-old".into(),
                row,
            },
            Write::Finish {
                run_id: "run-old".into(),
                end: e,
                at: 2,
            },
        ]
        .iter()
        .map(|w| serde_json::to_string(w).unwrap() + "\n")
        .collect::<String>();
        std::fs::write(&old, &lines).unwrap();
        assert!(lines.len() > 2 * crate::store::STORED_VALUE_MAX);
        let (writes, whole) = parse(File::open(&old).unwrap());
        assert!(whole && writes.len() == 3);
        assert!(writes
            .iter()
            .all(|w| serde_json::to_string(w).unwrap().len() < 8 << 10));
        // Small values are kept whole.
        assert_eq!(crate::store::stored_marker(&json!({"id": "a"})), None);
    }

    #[test]
    fn a_live_run_is_shown_while_it_runs_and_moved_once_when_it_ends() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("runs.db");
        let j = JournalStore::open(&db).unwrap();
        j.create_run(new_run("run-1")).unwrap();
        j.mark_running("run-1");
        j.record_step("run-1", step("a"));
        // This process is alive: moved in as it stands, the journal kept.
        let (r, steps) = stored(&db, "run-1");
        assert_eq!((r.status, steps), (RunStatus::Running, 1));
        let journal = dir_of(&db).join("run-1.jsonl");
        assert!(journal.exists());
        j.record_step("run-1", step("b"));
        j.finish_run("run-1", end());
        j.flush().unwrap();
        // Moved again, replacing the first move rather than adding to it.
        let (r, steps) = stored(&db, "run-1");
        assert_eq!((r.status, steps), (RunStatus::Completed, 2));
        assert_eq!(r.outputs, json!({"ok": 1}));
        assert!(
            !journal.exists(),
            "a finished journal is deleted once moved"
        );
        // Reading again changes nothing.
        assert_eq!(stored(&db, "run-1").1, 2);
    }

    #[test]
    fn a_cut_line_is_ignored_and_a_damaged_journal_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("runs.db");
        let dir = dir_of(&db);
        std::fs::create_dir_all(&dir).unwrap();
        let mut dead = new_run("run-2");
        dead.pid = Some(u32::MAX);
        let create = serde_json::to_string(&Write::Create { run: dead, at: 5 }).unwrap();
        // A writer killed in the middle of its second line.
        std::fs::write(dir.join("run-2.jsonl"), format!("{create}\n{{\"op\":\"st")).unwrap();
        // A line in the middle that is not a write.
        let mut other = new_run("run-3");
        other.pid = Some(u32::MAX);
        let create3 = serde_json::to_string(&Write::Create { run: other, at: 6 }).unwrap();
        std::fs::write(dir.join("run-3.jsonl"), format!("{create3}\nnot json\n")).unwrap();
        let (r, _) = stored(&db, "run-2");
        assert!(r.is_interrupted(), "its process is gone");
        assert!(
            !dir.join("run-2.jsonl").exists(),
            "complete as it will ever be"
        );
        assert_eq!(stored(&db, "run-3").0.id, "run-3");
        assert!(
            dir.join("run-3.jsonl").exists(),
            "a damaged journal is never deleted"
        );
    }

    #[test]
    fn a_finished_run_is_not_replaced_by_an_older_reading() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("runs.db");
        let j = JournalStore::open(&db).unwrap();
        j.create_run(new_run("run-4")).unwrap();
        j.record_step("run-4", step("a"));
        let partial = std::fs::read(dir_of(&db).join("run-4.jsonl")).unwrap();
        j.finish_run("run-4", end());
        assert_eq!(stored(&db, "run-4").0.status, RunStatus::Completed);
        // A journal that stops before the end reappears (say, a slow reader's copy).
        std::fs::write(dir_of(&db).join("run-4.jsonl"), partial).unwrap();
        assert_eq!(stored(&db, "run-4").0.status, RunStatus::Completed);
    }

    /// Forged journals (as a workflow with a write root over the store's
    /// folder could once drop): none rewrites a run, queues a server run or
    /// takes a key; each is set aside.
    #[test]
    fn forged_journals_change_nothing_and_are_set_aside() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("runs.db");
        let server = SqliteStore::open(&db).unwrap();
        let mut real = new_run("served");
        real.trigger = "webhook".into();
        server.create_run(real).unwrap();
        server.finish_run("served", end());
        server.flush().unwrap();
        drop(server);
        let dir = dir_of(&db);
        std::fs::create_dir_all(&dir).unwrap();
        let line = |run: NewRun, at: i64, outputs: serde_json::Value| {
            let id = run.id.clone();
            let mut end = end();
            end.outputs = outputs;
            format!(
                "{}\n{}\n",
                serde_json::to_string(&Write::Create { run, at }).unwrap(),
                serde_json::to_string(&Write::Finish {
                    run_id: id,
                    end,
                    at
                })
                .unwrap()
            )
        };
        // Rewrites the finished server run.
        std::fs::write(
            dir.join("served.jsonl"),
            line(new_run("served"), 1, json!({"poisoned": true})),
        )
        .unwrap();
        // A server run with an attacker's inputs, queued for the next start.
        let mut queued = new_run("queued");
        queued.trigger = "webhook".into();
        queued.status = RunStatus::Queued;
        std::fs::write(dir.join("queued.jsonl"), line(queued, 2, json!({}))).unwrap();
        // An Idempotency-Key's answer.
        let mut keyed = new_run("keyed");
        keyed.idempotency_key = Some("POST /pay k".into());
        std::fs::write(dir.join("keyed.jsonl"), line(keyed, 3, json!({}))).unwrap();
        // A journal named after another run.
        std::fs::write(dir.join("other.jsonl"), line(new_run("x"), 4, json!({}))).unwrap();
        let s = SqliteStore::open(&db).unwrap();
        let r = s.get_run("served").unwrap();
        assert_eq!(r.outputs, json!({"ok": 1}), "the finished run stands");
        assert_eq!(r.trigger, "webhook");
        for id in ["queued", "keyed", "x"] {
            assert!(s.get_run(id).is_err(), "{id} was absorbed");
        }
        assert!(s.incomplete_runs().unwrap().is_empty());
        assert_eq!(s.run_for_key("POST /pay k").unwrap(), None);
        for name in ["queued", "keyed", "other"] {
            assert!(!dir.join(format!("{name}.jsonl")).exists(), "{name}");
            assert!(
                dir.join(format!("{name}.jsonl.rejected")).exists(),
                "{name}"
            );
        }
        assert!(!dir.join("served.jsonl").exists(), "dropped once read");
    }

    #[test]
    fn a_file_that_is_not_a_store_is_refused_before_anything_is_written() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("runs.db");
        std::fs::write(&db, "plain text, long enough to have a header").unwrap();
        let e = JournalStore::open(&db).err().expect("refused");
        assert!(e.to_string().contains("runs.db"), "{e}");
        assert!(!dir_of(&db).exists());
        std::fs::remove_file(&db).unwrap();
        // Another process is creating the store: the file is there, empty.
        std::fs::write(&db, "").unwrap();
        JournalStore::open(&db).expect("a store being created is accepted");
        std::fs::remove_file(&db).unwrap();
        SqliteStore::open(&db).unwrap();
        JournalStore::open(&db).expect("a real store is accepted");
    }

    #[test]
    fn ids_that_are_not_file_names_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let j = JournalStore::open(&d.path().join("runs.db")).unwrap();
        for id in ["../x", "", "a/b", "a.b"] {
            assert!(j.create_run(new_run(id)).is_err(), "{id}");
        }
        assert!(std::fs::read_dir(d.path()).unwrap().count() == 1);
    }
}
