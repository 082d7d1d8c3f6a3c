//! ConHub's robot memory: episodes in the knowledge base, the relations
//! the seed's relation builder makes of them, and the seed's tools and
//! routes (`memory.robot_search`, `memory.robot_context`,
//! `POST /api/robots/:robot_id/memory/search`,
//! `GET /api/robots/:robot_id/context/latest`), on the bundled episodes
//! and on episodes generated with names no rule was written for.

use crate::support::{bin, cmd, copy_dir, http, repo, run, tempdir, try_serve};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

fn robot_search(kb: &Path, robot: &str, query: &str, today: &str) -> Value {
    let r = run(cmd(&repo())
        .args([
            "run",
            "workflows/conhub/robot-search.md",
            "--quiet",
            "--json",
        ])
        .args(["--input", &format!("robot_id={robot}")])
        .args(["--input", &format!("query={query}")])
        .args(["--input", &format!("today={today}")])
        .args(["--input", &format!("knowledge_base={}", kb.display())])
        .arg("--allow-read")
        .arg(kb));
    assert_eq!(r.code, 0, "{r:?}");
    r.json()["outputs"].clone()
}

/// The answer, what it rests on, and its first episode's note.
fn said(out: &Value) -> (Value, String, String) {
    (
        out["answer"].clone(),
        out["answer_text"].as_str().unwrap().to_string(),
        out["episodes"][0]["source_id"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

#[test]
fn the_bundled_robots_questions_are_answered_from_their_episodes() {
    let kb = repo().join("examples/conhub");
    let ask = |robot: &str, q: &str| said(&robot_search(&kb, robot, q, "2026-11-20"));
    assert_eq!(
        ask("r2", "Where did r2 last see the red toolbox?"),
        (
            json!("workshop"),
            "workshop — from robots/2026-11-20-1530-r2.md (2026-11-20 15:30)".into(),
            "robots/2026-11-20-1530-r2.md".into()
        )
    );
    // "On Tuesday", asked on a Friday, is the Tuesday past.
    assert_eq!(
        ask("r2", "Who was in the lab on Tuesday?"),
        (
            json!(["Maya Chen", "Tom Okafor"]),
            "Maya Chen, Tom Okafor — from robots/2026-11-17-0900-r2.md (2026-11-17 09:00)".into(),
            "robots/2026-11-17-0900-r2.md".into()
        )
    );
    assert_eq!(
        ask("r2", "When did r2 first see Priya?").0,
        json!("2026-11-18T12:00:00")
    );
    assert_eq!(
        ask("r2", "What was r2 doing at the workshop on Wednesday?").0,
        json!("tool return")
    );
    assert_eq!(
        ask("atlas-7", "Where did atlas-7 last see the red toolbox?").0,
        json!("loading dock")
    );
    // What the robot's episodes do not know is not made up.
    let out = robot_search(&kb, "r2", "Where is the blue ladder?", "2026-11-20");
    assert_eq!(
        (
            &out["found"],
            &out["answer"],
            out["answer_text"].as_str().unwrap()
        ),
        (
            &json!(false),
            &Value::Null,
            "The episodes do not mention \"blue ladder\"."
        )
    );
    // r2 never went to the loading dock: atlas-7's memory is not r2's.
    let out = robot_search(
        &kb,
        "r2",
        "Which objects were at the loading dock?",
        "2026-11-20",
    );
    assert_eq!(
        (&out["found"], out["total"].as_u64()),
        (&json!(false), Some(0)),
        "{out}"
    );
    let out = robot_search(&kb, "r2", "Who was in the lab last week?", "2026-11-20");
    assert_eq!(
        (&out["found"], out["answer_text"].as_str().unwrap()),
        (
            &json!(false),
            "No episode of this robot matches the question."
        )
    );
}

#[test]
fn the_relation_builder_makes_the_seeds_relations_and_the_context_is_the_latest_episode() {
    let r = run(cmd(&repo())
        .args([
            "run",
            "workflows/conhub/robot-context.md",
            "--quiet",
            "--json",
        ])
        .args(["--input", "robot_id=atlas-7"]));
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.json()["outputs"];
    assert_eq!(
        json!([
            &out["time"],
            &out["location"],
            &out["task"],
            &out["objects"],
            &out["persons"],
            &out["source_id"],
            &out["route"]
        ]),
        json!([
            "2026-11-20T14:00:00",
            "loading dock",
            "unloading",
            ["pallet", "hand truck"],
            ["Sam Reyes"],
            "robots/2026-11-20-1400-atlas-7.md",
            ["warehouse aisle 3", "loading dock"]
        ])
    );
    let pattern = out["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Priya Nair")
        .unwrap();
    assert_eq!(
        (
            &pattern["location"],
            &pattern["hour"],
            &pattern["weekdays"],
            &pattern["count"]
        ),
        (
            &json!("warehouse aisle 3"),
            &json!("10:00"),
            &json!(["Monday", "Wednesday", "Friday"]),
            &json!(3)
        )
    );
    let r = run(cmd(&repo())
        .args([
            "run",
            "workflows/conhub/robot-episodes.md",
            "--quiet",
            "--json",
        ])
        .args(["--input", "robot_id=r2"]));
    let out = &r.json()["outputs"];
    let mut kinds: Vec<&str> = out["relations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "ObjectLocation",
            "PersonLocation",
            "RouteConnection",
            "TaskLocation",
            "TaskObject",
            "TemporalPattern"
        ]
    );
    let route = out["relations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["type"] == "RouteConnection" && r["from"] == "lab")
        .unwrap();
    assert_eq!(
        route,
        &json!({"type": "RouteConnection", "robot_id": "r2", "from": "lab", "to": "kitchen", "count": 5,
                "first_seen": "2026-11-16T12:00:00", "last_seen": "2026-11-20T12:00:00", "source_id": "robots/2026-11-20-1200-r2.md"})
    );
}

/// A small generator (xorshift) so that the episodes are the same on every
/// machine.
struct Rng(u64);

impl Rng {
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        xs[(self.0 % xs.len() as u64) as usize]
    }
}

#[test]
fn episodes_with_names_nobody_tuned_for_are_answered_as_they_say() {
    let d = tempdir();
    let kb = d.path().join("kb");
    std::fs::create_dir_all(kb.join("eps")).unwrap();
    let places = [
        "boiler room",
        "greenhouse",
        "server hall",
        "mail room",
        "roof deck",
    ];
    let things = [
        "wrench set",
        "fire extinguisher",
        "seed tray",
        "mop bucket",
        "spare fan",
    ];
    let people = ["Ines Duarte", "Kofi Mensah", "Aiko Sato", "Lars Berg"];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // (time, place, things, people) of robot "kx-9", 10 days, 3 a day.
    let mut eps = Vec::new();
    for day in 0..10 {
        for hour in [8, 13, 17] {
            let time = format!("2026-10-{:02}T{hour:02}:15:00", 5 + day);
            let place = rng.pick(&places);
            let seen: Vec<&str> = (0..2).map(|_| rng.pick(&things)).collect();
            let met = vec![rng.pick(&people)];
            eps.push((time, place, seen, met));
        }
    }
    for (n, (time, place, seen, met)) in eps.iter().enumerate() {
        std::fs::write(
            kb.join(format!("eps/{n:03}.md")),
            format!(
                "---\nrobot_id: kx-9\ntime: \"{time}\"\nlocation: {place}\ntask: sweep\nobjects: {}\npersons: {}\ntype: robot_episode\ndate: {}\n---\n# kx-9 episode {n}\n",
                json!(seen),
                json!(met),
                &time[..10]
            ),
        )
        .unwrap();
    }
    copy_dir(&repo().join("examples/conhub/docs"), &kb.join("docs"));
    let today = "2026-10-16";
    // Answers that exist, not only "the episodes do not say".
    let mut answered = 0;
    for thing in things {
        let expected = eps
            .iter()
            .rev()
            .find(|e| e.2.contains(&thing))
            .map(|e| json!(e.1))
            .unwrap_or(Value::Null);
        let out = robot_search(
            &kb,
            "kx-9",
            &format!("Where did kx-9 last see the {thing}?"),
            today,
        );
        assert_eq!(out["answer"], expected, "{thing}: {out}");
        answered += usize::from(!expected.is_null());
    }
    for (day, place) in [
        (10, places[0]),
        (11, places[1]),
        (12, places[2]),
        (13, places[3]),
        (14, places[4]),
    ] {
        let date = format!("2026-10-{day:02}");
        let mut expected: Vec<&str> = Vec::new();
        for e in eps
            .iter()
            .rev()
            .filter(|e| e.0.starts_with(&date) && e.1 == place)
        {
            for p in &e.3 {
                if !expected.contains(p) {
                    expected.push(p);
                }
            }
        }
        let weekday = chrono::NaiveDate::parse_from_str(&date, "%Y-%m-%d")
            .unwrap()
            .format("%A");
        let out = robot_search(
            &kb,
            "kx-9",
            &format!("Who was in the {place} on {weekday}?"),
            today,
        );
        let want = if expected.is_empty() {
            Value::Null
        } else {
            json!(expected)
        };
        answered += usize::from(!want.is_null());
        assert_eq!(out["answer"], want, "{place} on {date}: {out}");
    }
    assert!(
        answered >= 6,
        "only {answered} questions have an answer in the episodes"
    );
}

#[test]
fn the_seeds_robot_routes_and_tools_answer_under_their_names() {
    let d = tempdir();
    let kb = d.path().join("conhub");
    copy_dir(&repo().join("examples/conhub"), &kb);
    let kb_arg = kb.display().to_string();
    let s = try_serve(&repo(), &["workflows/conhub", "--allow-read", &kb_arg], &[]).unwrap();
    let r = http(
        &s.addr,
        "GET",
        &format!("/api/robots/atlas-7/context/latest?knowledge_base={kb_arg}"),
        &[],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let out = &r.json()["outputs"];
    assert_eq!(
        (&out["robot_id"], &out["location"]),
        (&json!("atlas-7"), &json!("loading dock"))
    );
    // The path names the robot, whatever the body says.
    let body = json!({"query": "Where did it last see the red toolbox?", "robot_id": "r2", "today": "2026-11-20", "knowledge_base": kb_arg});
    let r = http(
        &s.addr,
        "POST",
        "/api/robots/atlas-7/memory/search",
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["outputs"]["answer"], "loading dock");
    let r = http(&s.addr, "POST", "/api/robots//memory/search", &[], b"{}");
    assert_eq!(r.status, 404, "{}", r.body);
    drop(s);

    if !crate::mcp::have_client() {
        return;
    }
    // Over MCP: the seed's five tools; an episode stored is found.
    let episode = json!({"do": "call", "name": "memory.store", "arguments": {
        "text": "r2 found the blue ladder behind the greenhouse door.", "source_type": "robot_episodic",
        "metadata": {"robot_id": "r2", "time": "2026-11-21T10:00", "location": "greenhouse", "objects": ["blue ladder"], "persons": []},
        "knowledge_base": kb_arg}});
    let ask = json!({"do": "call", "name": "memory.robot_search", "arguments": {
        "robot_id": "r2", "query": "Where is the blue ladder?", "today": "2026-11-21", "knowledge_base": kb_arg}});
    let bad = json!({"do": "call", "name": "memory.store", "arguments": {
        "text": "no place", "source_type": "robot_episodic", "metadata": {"robot_id": "r2", "time": "2026-11-21"}, "knowledge_base": kb_arg}});
    let mut c = Command::new("python3");
    c.current_dir(repo())
        .arg(repo().join("tests/mcp/client.py"))
        .arg("stdio")
        .arg(json!([{"do": "list"}, episode, ask, bad]).to_string())
        .arg("--")
        .arg(bin())
        .args(["mcp", "workflows/conhub", "--allow-write", &kb_arg]);
    let out = crate::mcp::client(c, &[]);
    let mut names: Vec<&str> = out[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "graph.ask",
            "memory.analyze_query",
            "memory.robot_context",
            "memory.robot_search",
            "memory.search",
            "memory.store"
        ]
    );
    let stored = out[1]["result"]["structuredContent"]["source_id"]
        .as_str()
        .unwrap();
    assert!(stored.starts_with("stored/2026-11-21-"), "{stored}");
    assert_eq!(
        out[2]["result"]["structuredContent"]["answer"], "greenhouse",
        "{}",
        out[2]
    );
    assert_eq!(
        out[2]["result"]["structuredContent"]["episodes"][0]["source_id"],
        stored
    );
    assert_eq!(out[3]["result"]["isError"], true, "{}", out[3]);
    assert!(
        out[3]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("a robot episode needs metadata.location (text)"),
        "{}",
        out[3]
    );
}
