//! Waits in the store: a run stopped at a `wait` for a person or an event
//! is a row, not a task; an answer closes it once (whoever records the
//! deciding vote requeues the run, as its owner, in the same transaction);
//! a deadline closes it as expired. Both backends keep the same columns and
//! decide with [`decide`].

use crate::engine::{Answer, Resolution, Vote, WaitRequest};
use crate::format::model::AskMode;
use serde::Serialize;

/// Where a wait stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitState {
    Open,
    Answered,
    Expired,
    /// Its run was cancelled while it waited.
    Cancelled,
}

impl WaitState {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitState::Open => "open",
            WaitState::Answered => "answered",
            WaitState::Expired => "expired",
            WaitState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> WaitState {
        match s {
            "open" => WaitState::Open,
            "answered" => WaitState::Answered,
            "expired" => WaitState::Expired,
            _ => WaitState::Cancelled,
        }
    }
}

/// A stored wait.
#[derive(Debug, Clone, Serialize)]
pub struct WaitRecord {
    pub run_id: String,
    pub workflow: String,
    pub request: WaitRequest,
    pub state: WaitState,
    /// Answers given so far (approval mode may need several).
    pub votes: Vec<Vote>,
    /// How it was closed, once it is.
    pub resolution: Option<Resolution>,
    pub closed_at: Option<i64>,
}

/// Which waits [`super::RunStore::waits`] lists.
#[derive(Debug, Clone, Default)]
pub struct WaitFilter {
    /// Only this run's.
    pub run_id: Option<String>,
    /// Only open ones.
    pub open: bool,
    /// Only those whose (webhook) key is this.
    pub key: Option<String>,
    pub limit: Option<usize>,
}

/// An answer to record (see [`super::RunStore::answer_wait`]).
#[derive(Debug, Clone)]
pub struct AnswerIn {
    pub run_id: String,
    pub step_id: String,
    pub vote: Vote,
}

/// What asking a run to pause did.
#[derive(Debug, Clone, PartialEq)]
pub enum PauseAsked {
    /// Recorded: whichever process executes the run pauses it before its
    /// next top-level step.
    Asked,
    /// The run is not queued or running: it is this.
    NotRunning(super::RunStatus),
    NotFound,
}

/// What recording an answer did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Answered {
    /// It decided the wait: the run is queued again, owned by this process,
    /// which resumes it (or a restarted server, should this one die).
    Resumes { answer: Answer },
    /// Counted; the wait needs more approvals.
    Counted { have: u32, need: u32 },
    /// The wait's policy refuses this answer (who may answer, twice).
    Refused { why: String },
    /// The wait was closed already (answered, expired, cancelled).
    Closed { state: String },
    /// No such wait: the run never waited at that step.
    NotFound,
}

/// Whether `vote` may count toward `request` after `votes`, and whether
/// it decides it: `Ok(Some(answer))` closes the wait, `Ok(None)` counts it.
pub fn decide(
    request: &WaitRequest,
    votes: &[Vote],
    vote: &Vote,
) -> Result<Option<Answer>, String> {
    if !request.approvers.is_empty() && !request.approvers.iter().any(|a| a == &vote.by) {
        return Err(format!(
            "`{}` is not among the approvers of this step ({})",
            vote.by,
            request.approvers.join(", ")
        ));
    }
    if !request.self_approval && request.requester.as_deref() == Some(vote.by.as_str()) {
        return Err(format!(
            "`{}` asked for this and may not answer it (self_approval: false)",
            vote.by
        ));
    }
    if votes.iter().any(|v| v.by == vote.by) {
        return Err(format!("`{}` has answered this step already", vote.by));
    }
    let mut all = votes.to_vec();
    all.push(vote.clone());
    let decided = match request.mode {
        AskMode::Approval => match vote.decision.as_deref() {
            Some("rejected") => true,
            Some("approved") => {
                let yes = all
                    .iter()
                    .filter(|v| v.decision.as_deref() == Some("approved"))
                    .count();
                yes >= request.approvals.max(1) as usize
            }
            _ => return Err("an approval needs a decision: approve or reject".into()),
        },
        AskMode::Form | AskMode::Webhook | AskMode::Pause => true,
    };
    Ok(decided.then(|| Answer {
        decision: vote.decision.clone(),
        comment: vote.comment.clone(),
        values: vote.values.clone(),
        by: vote.by.clone(),
        at: vote.at,
        via: vote.via.clone(),
        votes: all,
    }))
}

/// What a backend writes for an answer, decided from the wait's stored
/// columns (see [`decided`]).
pub(super) enum Decision {
    /// Nothing to write.
    Final(Answered),
    /// The votes so far (JSON) to keep; the wait stays open.
    Counted(String, Answered),
    /// The wait closes: its votes and resolution (JSON), and when.
    Closes {
        votes: String,
        resolution: String,
        at: i64,
        outcome: Answered,
    },
}

/// How `vote` changes the wait stored as `request`, `state` and `votes`
/// (the backends' columns), by [`decide`].
pub(super) fn decided(request: &str, state: &str, votes: &str, vote: &Vote) -> Decision {
    if state != "open" {
        return Decision::Final(Answered::Closed {
            state: state.to_string(),
        });
    }
    let (Ok(request), Ok(votes)) = (
        serde_json::from_str::<WaitRequest>(request),
        serde_json::from_str::<Vec<Vote>>(votes),
    ) else {
        return Decision::Final(Answered::Refused {
            why: "the stored wait cannot be read by this version of marktoflow".into(),
        });
    };
    match decide(&request, &votes, vote) {
        Err(why) => Decision::Final(Answered::Refused { why }),
        Ok(None) => {
            let mut all = votes;
            all.push(vote.clone());
            let have = all
                .iter()
                .filter(|v| v.decision.as_deref() == Some("approved"))
                .count() as u32;
            Decision::Counted(
                text(&all),
                Answered::Counted {
                    have,
                    need: request.approvals,
                },
            )
        }
        Ok(Some(answer)) => Decision::Closes {
            votes: text(&answer.votes),
            resolution: text(&Resolution::Answered(answer.clone())),
            at: answer.at,
            outcome: Answered::Resumes { answer },
        },
    }
}

/// The resolution of a wait that expired at `now`, as stored.
pub(super) fn expired_text(now: i64) -> String {
    text(&Resolution::Expired { at: now })
}

/// A value as the stores keep it: JSON text.
fn text<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A wait as a backend read it (None: unreadable by this version).
pub(super) fn record(
    run_id: String,
    workflow: String,
    request: &str,
    state: &str,
    votes: &str,
    resolution: Option<&str>,
    closed_at: Option<i64>,
) -> Option<WaitRecord> {
    Some(WaitRecord {
        run_id,
        workflow,
        request: serde_json::from_str(request).ok()?,
        state: WaitState::parse(state),
        votes: serde_json::from_str(votes).unwrap_or_default(),
        resolution: resolution.and_then(|r| serde_json::from_str(r).ok()),
        closed_at,
    })
}

/// `approve`/`approved`/`yes` and `reject`/`rejected`/`no`, as stored.
pub fn decision_word(s: &str) -> Option<&'static str> {
    match s.trim().to_ascii_lowercase().as_str() {
        "approve" | "approved" | "yes" | "accept" => Some("approved"),
        "reject" | "rejected" | "no" | "deny" | "denied" => Some("rejected"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn request(mode: AskMode, approvals: u32) -> WaitRequest {
        WaitRequest {
            step_id: "review".into(),
            step_name: "Review".into(),
            mode,
            title: None,
            prompt: None,
            fields: Vec::new(),
            approvals,
            approvers: Vec::new(),
            requester: Some("erin".into()),
            self_approval: false,
            key: None,
            created_at: 0,
            deadline: None,
            link: None,
            links: Map::new(),
            link_expires: None,
        }
    }

    fn vote(by: &str, decision: Option<&str>) -> Vote {
        Vote {
            by: by.into(),
            at: 1,
            decision: decision.map(str::to_string),
            comment: None,
            values: Map::new(),
            via: "api".into(),
        }
    }

    #[test]
    fn two_approvals_need_two_people_and_one_rejection_decides() {
        let r = request(AskMode::Approval, 2);
        let first = vote("ann", Some("approved"));
        assert_eq!(decide(&r, &[], &first), Ok(None));
        assert_eq!(
            decide(
                &r,
                std::slice::from_ref(&first),
                &vote("ann", Some("approved"))
            ),
            Err("`ann` has answered this step already".into())
        );
        let done = decide(
            &r,
            std::slice::from_ref(&first),
            &vote("bob", Some("approved")),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (done.decision.as_deref(), done.votes.len()),
            (Some("approved"), 2)
        );
        let no = decide(&r, &[], &vote("cat", Some("rejected")))
            .unwrap()
            .unwrap();
        assert_eq!(
            (no.decision.as_deref(), no.by.as_str()),
            (Some("rejected"), "cat")
        );
    }

    #[test]
    fn the_requester_and_strangers_are_refused() {
        let mut r = request(AskMode::Approval, 1);
        assert!(decide(&r, &[], &vote("erin", Some("approved")))
            .unwrap_err()
            .contains("may not answer"));
        r.approvers = vec!["ann".into()];
        assert!(decide(&r, &[], &vote("bob", Some("approved")))
            .unwrap_err()
            .contains("not among the approvers"));
        assert!(decide(&r, &[], &vote("ann", None))
            .unwrap_err()
            .contains("needs a decision"));
    }

    #[test]
    fn a_form_is_decided_by_its_first_answer() {
        let r = request(AskMode::Form, 1);
        assert!(decide(&r, &[], &vote("ann", None)).unwrap().is_some());
    }
}
