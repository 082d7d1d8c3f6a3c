//! Service integrations declared as data, on the real binary, against fake
//! services on 127.0.0.1 that check each request as the real API documents
//! it (method, path, headers, body) and answer in its reply's shape:
//! pagination, a 429 with `Retry-After`, errors, OAuth, secrets kept out of
//! what a run shows, hosts, and a project's own integration.

use crate::fake_service::{Answer, FakeService, Hit};
use crate::support::{cmd, run, tempdir};
use serde_json::{json, Value};
use std::sync::Arc;

fn ok(body: Value) -> Answer {
    (200, Vec::new(), body.to_string())
}

/// Slack's Web API: a 429 first (with `Retry-After`), then messages posted;
/// history in two pages by cursor; an unknown channel is `ok: false`.
fn slack() -> FakeService {
    FakeService::start(Arc::new(|hit: &Hit, n: usize| {
        let path = hit.path.as_str();
        if path == "/chat.postMessage" && n == 0 {
            return (
                429,
                vec![("Retry-After", "1".into())],
                json!({"ok": false, "error": "ratelimited"}).to_string(),
            );
        }
        if path == "/chat.postMessage" {
            let channel = hit.json()["channel"].as_str().unwrap_or("").to_string();
            if channel == "#nowhere" {
                return ok(json!({"ok": false, "error": "channel_not_found"}));
            }
            return ok(
                json!({"ok": true, "channel": "C1", "ts": "1700000000.000100",
                             "message": {"text": hit.json()["text"], "type": "message"}}),
            );
        }
        if path.starts_with("/conversations.history?") {
            if path.contains("cursor=page2") {
                return ok(
                    json!({"ok": true, "messages": [{"ts": "3", "text": "three"}], "has_more": false,
                                 "response_metadata": {"next_cursor": ""}}),
                );
            }
            return ok(
                json!({"ok": true, "messages": [{"ts": "1", "text": "one"}, {"ts": "2", "text": "two"}],
                             "has_more": true, "response_metadata": {"next_cursor": "page2"}}),
            );
        }
        (
            404,
            Vec::new(),
            json!({"ok": false, "error": "unknown_method"}).to_string(),
        )
    }))
}

const SLACK_FLOW: &str = "---
workflow: {id: notify}
tools:
  slack:
    sdk: '@slack/web-api'
    auth: {token: '${SLACK_BOT_TOKEN}'}
    options: {base_url: '${SLACK_API}'}
inputs:
  channel: {type: string, default: '#ops'}
outputs:
  ts: {type: string}
  texts: {type: array}
---

```yaml
id: post
action: slack.chat.postMessage
inputs: {channel: '{{ inputs.channel }}', text: 'Deploy finished'}
```

```yaml
id: history
action: slack.conversations.history
inputs: {channel: C1, limit: 2, all_pages: true}
```

```yaml
action: workflow.set_outputs
inputs:
  ts: '{{ steps.post.output.ts }}'
  texts: \"{{ steps.history.output.messages | map(attribute='text') | list }}\"
```
";

#[test]
fn slack_posts_retries_a_429_and_reads_every_page_as_its_api_says() {
    let d = tempdir();
    let svc = slack();
    std::fs::write(d.path().join("notify.md"), SLACK_FLOW).unwrap();
    let token = "xoxb-test-secret-1234";
    let go = |extra: &[&str]| {
        run(cmd(d.path())
            .args(["run", "notify.md", "--json", "--quiet"])
            .args(extra)
            .env("SLACK_BOT_TOKEN", token)
            .env("SLACK_API", &svc.base)
            .env("MARKTOFLOW_RETRY_BASE_MS", "10"))
    };
    let r = go(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(
        j["outputs"],
        json!({"ts": "1700000000.000100", "texts": ["one", "two", "three"]})
    );
    let hits = svc.hits();
    let shown: Vec<String> = hits
        .iter()
        .map(|h| format!("{} {}", h.method, h.path))
        .collect();
    assert_eq!(
        shown,
        [
            "POST /chat.postMessage",
            "POST /chat.postMessage",
            "GET /conversations.history?channel=C1&limit=2",
            "GET /conversations.history?channel=C1&limit=2&cursor=page2",
        ]
    );
    for h in &hits {
        assert_eq!(
            h.header("authorization"),
            Some(format!("Bearer {token}").as_str())
        );
    }
    assert_eq!(hits[1].header("content-type"), Some("application/json"));
    assert_eq!(
        hits[1].json(),
        json!({"channel": "#ops", "text": "Deploy finished"})
    );
    // The token is in no output, log or record of the run.
    let id = j["run_id"].as_str().unwrap();
    let shown = run(cmd(d.path()).args(["show", id, "--json"]));
    for text in [&r.stdout, &r.stderr, &shown.stdout] {
        assert!(!text.contains(token), "{text}");
    }
    // Slack's `ok: false` fails the step with Slack's reason.
    let r = go(&["--input", "channel=#nowhere"]);
    assert_eq!(r.code, 1, "{r:?}");
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert_eq!(
        message,
        format!(
            "Slack POST {}/chat.postMessage: channel_not_found",
            svc.base
        )
    );
}

/// GitHub's REST API: pages by `Link` header, Octokit's reply shape.
fn github() -> FakeService {
    FakeService::start(Arc::new(|hit: &Hit, _| {
        let base = hit
            .header("host")
            .map(|h| format!("http://{h}"))
            .unwrap_or_default();
        match (hit.method.as_str(), hit.path.as_str()) {
            ("GET", "/repos/acme/app/pulls?state=open") => (
                200,
                vec![("Link", format!("<{base}/repos/acme/app/pulls?state=open&page=2>; rel=\"next\", <{base}/repos/acme/app/pulls?state=open&page=2>; rel=\"last\""))],
                json!([{"number": 1, "title": "One"}, {"number": 2, "title": "Two"}]).to_string(),
            ),
            ("GET", "/repos/acme/app/pulls?state=open&page=2") => ok(json!([{"number": 3, "title": "Three"}])),
            ("POST", "/repos/acme/app/issues") => (201, Vec::new(), json!({"number": 42, "html_url": "https://github.com/acme/app/issues/42", "title": hit.json()["title"]}).to_string()),
            ("GET", "/repos/acme/app/contents/docs/guide%20one.md") => ok(json!({"path": "docs/guide one.md", "content": "aGk="})),
            _ => (404, Vec::new(), json!({"message": "Not Found"}).to_string()),
        }
    }))
}

#[test]
fn github_lists_every_page_by_link_and_opens_an_issue_in_octokits_shape() {
    let d = tempdir();
    let svc = github();
    std::fs::write(
        d.path().join("gh.md"),
        "---\nworkflow: {id: gh}\ntools:\n  github: {sdk: '@octokit/rest', auth: {token: '${GH_PAT}'}, options: {base_url: '${GH_API}'}}\n---\n\n```yaml\nid: prs\naction: github.pulls.list\ninputs: {owner: acme, repo: app, state: open, all_pages: true}\n```\n\n```yaml\nid: issue\naction: github.rest.issues.create\ninputs: {owner: acme, repo: app, title: 'Release {{ steps.prs.output.data | length }} PRs', labels: [release]}\n```\n\n```yaml\nid: file\naction: github.repos.getContent\ninputs: {owner: acme, repo: app, path: docs/guide one.md}\n```\n\n```yaml\naction: workflow.set_outputs\ninputs:\n  titles: \"{{ steps.prs.output.data | map(attribute='title') | list }}\"\n  issue: '{{ steps.issue.output.data.number }}'\n  status: '{{ steps.issue.output.status }}'\n  path: '{{ steps.file.output.data.path }}'\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path())
        .args(["run", "gh.md", "--json", "--quiet"])
        .env("GH_PAT", "ghp_fake0123456789")
        .env("GH_API", &svc.base));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["outputs"],
        json!({"titles": ["One", "Two", "Three"], "issue": 42, "status": 201, "path": "docs/guide one.md"})
    );
    let hits = svc.hits();
    let create = hits.iter().find(|h| h.method == "POST").unwrap();
    assert_eq!(
        create.json(),
        json!({"title": "Release 3 PRs", "labels": ["release"]})
    );
    assert_eq!(create.header("accept"), Some("application/vnd.github+json"));
    assert_eq!(create.header("x-github-api-version"), Some("2022-11-28"));
    assert_eq!(
        create.header("authorization"),
        Some("Bearer ghp_fake0123456789")
    );
    // A token the environment does not mark as secret is still kept out
    // of what the run shows.
    assert!(!r.stdout.contains("ghp_fake0123456789") && !r.stderr.contains("ghp_fake0123456789"));
}

#[test]
fn jira_sends_basic_auth_to_its_host_and_pages_by_token() {
    let d = tempdir();
    let svc = FakeService::start(Arc::new(|hit: &Hit, _| {
        match (hit.method.as_str(), hit.path.as_str()) {
            ("POST", "/rest/api/3/search/jql") => {
                let body = hit.json();
                if body["nextPageToken"] == "t2" {
                    ok(
                        json!({"issues": [{"key": "OPS-3", "fields": {"summary": "Third"}}], "isLast": true}),
                    )
                } else {
                    ok(
                        json!({"issues": [{"key": "OPS-1", "fields": {"summary": "First"}}, {"key": "OPS-2", "fields": {"summary": "Second"}}], "nextPageToken": "t2", "isLast": false}),
                    )
                }
            }
            ("POST", "/rest/api/3/issue") => (
                201,
                Vec::new(),
                json!({"id": "10001", "key": "OPS-4"}).to_string(),
            ),
            _ => (
                404,
                Vec::new(),
                json!({"errorMessages": ["no such resource"]}).to_string(),
            ),
        }
    }));
    std::fs::write(
        d.path().join("j.md"),
        "---\nworkflow: {id: j}\ntools:\n  jira:\n    sdk: jira.js\n    auth: {host: '${JIRA_HOST}', email: ann@example.com, api_token: '${JIRA_API_TOKEN}'}\n---\n\n```yaml\nid: blocked\naction: jira.issueSearch.searchForIssuesUsingJql\ninputs: {jql: 'project = OPS AND status = Blocked', fields: [summary], all_pages: true}\n```\n\n```yaml\nid: created\naction: jira.createIssue\ninputs:\n  fields: {project: {key: OPS}, summary: 'Blocked: {{ steps.blocked.output.issues | length }}', issuetype: {name: Task}}\n```\n\n```yaml\naction: workflow.set_outputs\ninputs:\n  keys: \"{{ steps.blocked.output.issues | map(attribute='key') | list }}\"\n  created: '{{ steps.created.output.key }}'\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path())
        .args(["run", "j.md", "--json", "--quiet"])
        .env("JIRA_HOST", &svc.base)
        .env("JIRA_API_TOKEN", "jira-secret-5678"));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["outputs"],
        json!({"keys": ["OPS-1", "OPS-2", "OPS-3"], "created": "OPS-4"})
    );
    let hits = svc.hits();
    use base64::Engine as _;
    let basic =
        base64::engine::general_purpose::STANDARD.encode("ann@example.com:jira-secret-5678");
    assert!(hits
        .iter()
        .all(|h| h.header("authorization") == Some(format!("Basic {basic}").as_str())));
    assert_eq!(
        hits[0].json(),
        json!({"jql": "project = OPS AND status = Blocked", "fields": ["summary"]})
    );
    assert_eq!(hits[1].json()["nextPageToken"], "t2");
    assert_eq!(
        hits[2].json(),
        json!({"fields": {"project": {"key": "OPS"}, "summary": "Blocked: 3", "issuetype": {"name": "Task"}}})
    );
}

#[test]
fn a_token_in_the_url_never_shows_and_the_services_host_is_allowed_for_its_tool_only() {
    let d = tempdir();
    let svc = FakeService::start(Arc::new(|hit: &Hit, _| {
        if hit.path.ends_with("/sendMessage") {
            (400, Vec::new(), json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"}).to_string())
        } else {
            ok(json!({"ok": true, "result": true}))
        }
    }));
    // The workflow limits its hosts; Telegram's (the fake's) is allowed for
    // the Telegram tool only.
    std::fs::write(
        d.path().join("tg.md"),
        "---\nworkflow: {id: tg}\npermissions: {hosts: [example.com]}\ntools:\n  telegram: {sdk: telegram, auth: {token: '${TG_BOT}'}, options: {base_url: '${TG_API}/bot{auth.token}'}}\ninputs:\n  via_http: {type: boolean, default: false}\n---\n\n```yaml\nid: typing\naction: telegram.sendChatAction\ninputs: {chat_id: 42, action: typing}\n```\n\n```yaml\nid: raw\ncondition: '{{ inputs.via_http }}'\naction: http.get\ninputs: {url: '${TG_API}/health'}\n```\n\n```yaml\nid: send\naction: telegram.sendMessage\ninputs: {chat_id: 42, text: hi}\n```\n",
    )
    .unwrap();
    let secret = "123456:AAbbCCddEEff";
    let go = |extra: &[&str]| {
        run(cmd(d.path())
            .args(["run", "tg.md", "--json", "--quiet"])
            .args(extra)
            .env("TG_BOT", secret)
            .env("TG_API", &svc.base))
    };
    let r = go(&[]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["error"]["step"], "send");
    assert_eq!(
        j["error"]["message"],
        format!("Telegram POST {}/bot[redacted]/sendMessage returned HTTP 400 Bad Request: Bad Request: chat not found", svc.base)
    );
    assert!(
        !r.stdout.contains(secret) && !r.stderr.contains(secret),
        "{r:?}"
    );
    assert_eq!(svc.hits()[0].path, format!("/bot{secret}/sendChatAction"));
    // `http.get` to the same host is the workflow's own call: refused.
    let r = go(&["--input", "via_http=true"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["error"]["step"], "raw", "{r:?}");
}

#[test]
fn a_projects_own_integration_is_a_yaml_file_with_no_code() {
    let d = tempdir();
    let svc = FakeService::start(Arc::new(|hit: &Hit, _| match hit.path.as_str() {
        "/v1/current?city=Oslo&units=metric" => ok(json!({"city": "Oslo", "temp": 4})),
        _ => (
            404,
            Vec::new(),
            json!({"message": "no such city"}).to_string(),
        ),
    }));
    let dir = d.path().join(".marktoflow/integrations");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("weather.yaml"),
        "name: weather\ntitle: Weather\nsdks: [weather-api]\nbase_url: '{options.base_url|https://api.weather.example}/v1'\nauth:\n  header: {X-Api-Key: '{auth.key}'}\nmethods:\n  getCurrent:\n    doc: The weather now in a city.\n    request: GET /current\n    inputs:\n      city: {type: string, required: true, doc: The city}\n      units: {type: string, doc: metric or imperial}\n",
    )
    .unwrap();
    // `actions` lists the service's methods.
    let a = run(cmd(d.path()).args(["actions", "weather"]));
    assert_eq!(
        (a.code, a.stdout.as_str()),
        (0, "weather.getCurrent   The weather now in a city.\n                     inputs: city*, units\n")
    );
    let flow = |step: &str| {
        format!("---\nworkflow: {{id: w}}\ntools:\n  weather: {{sdk: weather-api, auth: {{key: '${{WEATHER_KEY}}'}}, options: {{base_url: '${{WEATHER_API}}'}}}}\n---\n\n```yaml\n{step}\n```\n")
    };
    std::fs::write(
        d.path().join("w.md"),
        flow("action: weather.getCurrent\ninputs: {city: Oslo, units: metric}"),
    )
    .unwrap();
    let r = run(cmd(d.path())
        .args(["run", "w.md", "--json", "--quiet"])
        .env("WEATHER_KEY", "k-123456")
        .env("WEATHER_API", &svc.base));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["steps"][0]["output"],
        json!({"city": "Oslo", "temp": 4})
    );
    assert_eq!(svc.hits()[0].header("x-api-key"), Some("k-123456"));
    // Its methods are checked as any action's when the workflow loads.
    std::fs::write(
        d.path().join("w.md"),
        flow("action: weather.getCurent\ninputs: {city: Oslo}"),
    )
    .unwrap();
    let v = run(cmd(d.path()).args(["validate", "w.md"]));
    assert_eq!(v.code, 2);
    assert!(
        v.stderr.contains(
            "unknown action `weather.getCurent`: tool `weather` has no method `getCurent`"
        ) && v.stderr.contains("did you mean `weather.getCurrent`?"),
        "{}",
        v.stderr
    );
    std::fs::write(
        d.path().join("w.md"),
        flow("action: weather.getCurrent\ninputs: {town: Oslo}"),
    )
    .unwrap();
    let v = run(cmd(d.path()).args(["validate", "w.md"]));
    assert_eq!(v.code, 2);
    assert!(v.stderr.contains("`town`"), "{}", v.stderr);
    // A declaration that does not read is named, and the bundled ones stay.
    std::fs::write(dir.join("broken.yaml"), "name: b\ntitle: B\nsdks: [b]\nbase_url: https://b\nmethods:\n  x: {doc: d, request: GET x}\n").unwrap();
    let a = run(cmd(d.path()).args(["actions", "slack.chat.postMessage"]));
    assert_eq!(a.code, 0);
    assert!(
        a.stderr.contains("integration `")
            && a.stderr.contains(
                "broken.yaml` is not loaded: method `x`: the path `x` must start with `/`"
            ),
        "{}",
        a.stderr
    );
}

#[test]
fn google_sheets_exchanges_its_refresh_token_and_sends_the_request_body() {
    let d = tempdir();
    let svc = FakeService::start(Arc::new(|hit: &Hit, _| {
        match (hit.method.as_str(), hit.path.as_str()) {
            ("POST", "/token") => ok(
                json!({"access_token": "ya29.fake-access", "expires_in": 3600, "token_type": "Bearer"}),
            ),
            ("GET", "/v4/spreadsheets/S1/values/Data!A1:B2") => {
                ok(json!({"range": "Data!A1:B2", "values": [["a", "1"], ["b", "2"]]}))
            }
            ("PUT", p) if p.starts_with("/v4/spreadsheets/S1/values/Report!A1?") => {
                ok(json!({"updatedCells": 2}))
            }
            _ => (
                404,
                Vec::new(),
                json!({"error": {"message": "not found"}}).to_string(),
            ),
        }
    }));
    std::fs::write(
        d.path().join("s.md"),
        "---\nworkflow: {id: s}\ntools:\n  sheets:\n    sdk: google-sheets\n    auth: {client_id: cid, client_secret: '${GOOGLE_CLIENT_SECRET}', refresh_token: '${GOOGLE_REFRESH_TOKEN}'}\n    options: {base_url: '${SHEETS}/v4', token_url: '${SHEETS}/token'}\n---\n\n```yaml\nid: read\naction: sheets.spreadsheets.values.get\ninputs: {spreadsheetId: S1, range: 'Data!A1:B2'}\n```\n\n```yaml\nid: write\naction: sheets.spreadsheets.values.update\ninputs:\n  spreadsheetId: S1\n  range: 'Report!A1'\n  valueInputOption: USER_ENTERED\n  requestBody: {values: [['rows', '{{ steps.read.output.values | length }}']]}\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path())
        .args(["run", "s.md", "--json", "--quiet"])
        .env("GOOGLE_CLIENT_SECRET", "secret-abcdef")
        .env("GOOGLE_REFRESH_TOKEN", "1//refresh-xyz")
        .env("SHEETS", &svc.base));
    assert_eq!(r.code, 0, "{r:?}");
    let hits = svc.hits();
    let shown: Vec<String> = hits
        .iter()
        .map(|h| format!("{} {}", h.method, h.path))
        .collect();
    assert_eq!(
        shown,
        [
            "POST /token",
            "GET /v4/spreadsheets/S1/values/Data!A1:B2",
            "PUT /v4/spreadsheets/S1/values/Report!A1?valueInputOption=USER_ENTERED",
        ]
    );
    assert_eq!(
        hits[0].body,
        "grant_type=refresh_token&client_id=cid&client_secret=secret-abcdef&refresh_token=1%2F%2Frefresh-xyz"
    );
    assert_eq!(
        hits[1].header("authorization"),
        Some("Bearer ya29.fake-access")
    );
    assert_eq!(hits[2].json(), json!({"values": [["rows", 2]]}));
}

#[test]
fn gmail_sends_a_built_message_and_docs_appends_through_a_body_template() {
    let d = tempdir();
    let svc = FakeService::start(Arc::new(|hit: &Hit, _| {
        match (hit.method.as_str(), hit.path.as_str()) {
            ("POST", "/token") => ok(json!({"access_token": "ya29.g", "expires_in": 3600})),
            ("POST", "/gmail/users/me/messages/send") => {
                ok(json!({"id": "m1", "threadId": "t1", "labelIds": ["SENT"]}))
            }
            ("POST", "/docs/documents") => {
                ok(json!({"documentId": "D1", "title": hit.json()["title"]}))
            }
            ("POST", "/docs/documents/D1:batchUpdate") => {
                ok(json!({"documentId": "D1", "replies": [{}]}))
            }
            _ => (
                404,
                Vec::new(),
                json!({"error": {"message": "not found"}}).to_string(),
            ),
        }
    }));
    std::fs::write(
        d.path().join("g.md"),
        "---\nworkflow: {id: g}\ntools:\n  gmail: {sdk: google-gmail, auth: {client_id: c, client_secret: s, refresh_token: r}}\n  docs: {sdk: google-docs, auth: {client_id: c, client_secret: s, refresh_token: r}}\n---\n\n```yaml\nid: mail\naction: gmail.sendEmail\ninputs: {to: [ann@example.com, bob@example.com], subject: Weekly notes, body: '<b>Done</b>', isHtml: true}\n```\n\n```yaml\nid: doc\naction: docs.createDocument\ninputs: {title: Notes}\n```\n\n```yaml\nid: add\naction: docs.appendText\ninputs: {documentId: '{{ steps.doc.output.documentId }}', text: 'Sent {{ steps.mail.output.id }}'}\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path())
        .args(["run", "g.md", "--json", "--quiet"])
        .env("MARKTOFLOW_GMAIL_BASE_URL", format!("{}/gmail", svc.base))
        .env("MARKTOFLOW_DOCS_BASE_URL", format!("{}/docs", svc.base))
        .env("MARKTOFLOW_GMAIL_TOKEN_URL", format!("{}/token", svc.base))
        .env("MARKTOFLOW_DOCS_TOKEN_URL", format!("{}/token", svc.base)));
    assert_eq!(r.code, 0, "{r:?}");
    let hits = svc.hits();
    let mail = hits.iter().find(|h| h.path.ends_with("/send")).unwrap();
    use base64::Engine as _;
    let raw = mail.json()["raw"].as_str().unwrap().to_string();
    let message = String::from_utf8(
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(raw)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        message,
        "To: ann@example.com, bob@example.com\r\nSubject: =?UTF-8?B?V2Vla2x5IG5vdGVz?=\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=UTF-8\r\nContent-Transfer-Encoding: base64\r\n\r\nPGI+RG9uZTwvYj4="
    );
    assert_eq!(mail.header("authorization"), Some("Bearer ya29.g"));
    let append = hits
        .iter()
        .find(|h| h.path.ends_with(":batchUpdate"))
        .unwrap();
    assert_eq!(
        append.json(),
        json!({"requests": [{"insertText": {"text": "Sent m1", "endOfSegmentLocation": {}}}]})
    );
}

#[test]
fn an_openapi_documents_operations_are_a_services_methods() {
    let d = tempdir();
    let svc = FakeService::start(Arc::new(|hit: &Hit, _| {
        match (hit.method.as_str(), hit.path.as_str()) {
            ("GET", "/v2/pets?limit=2") => {
                ok(json!([{"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}]))
            }
            ("POST", "/v2/pets") => (
                201,
                Vec::new(),
                json!({"id": 3, "name": hit.json()["name"]}).to_string(),
            ),
            ("GET", "/v2/pets/3") => ok(json!({"id": 3, "name": "Kit"})),
            _ => (404, Vec::new(), json!({"message": "no"}).to_string()),
        }
    }));
    let dir = d.path().join(".marktoflow/integrations");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = json!({
        "openapi": "3.0.3",
        "info": {"title": "Pets", "version": "1"},
        "servers": [{"url": "https://pets.example/v2"}],
        "paths": {
            "/pets": {
                "get": {"operationId": "listPets", "summary": "Lists pets.",
                        "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer"}, "description": "How many"}],
                        "responses": {"200": {"description": "The pets"}}},
                "post": {"operationId": "createPet", "summary": "Adds a pet.",
                         "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}}},
                         "responses": {"201": {"description": "The pet"}}}
            },
            "/pets/{petId}": {
                "parameters": [{"$ref": "#/components/parameters/PetId"}],
                "get": {"operationId": "showPet", "summary": "One pet.", "responses": {"200": {"description": "The pet"}}}
            }
        },
        "components": {
            "parameters": {"PetId": {"name": "petId", "in": "path", "required": true, "schema": {"type": "integer"}}},
            "schemas": {"NewPet": {"type": "object", "required": ["name"],
                                   "properties": {"name": {"type": "string", "description": "Its name"}, "tag": {"type": "string"}}}}
        }
    });
    std::fs::write(dir.join("pets.openapi.json"), spec.to_string()).unwrap();
    std::fs::write(
        dir.join("pets.yaml"),
        "name: pets\ntitle: Pets\nsdks: [pets-api]\nopenapi: pets.openapi.json\nauth: {bearer: token}\naliases: {list: listPets}\n",
    )
    .unwrap();
    let a = run(cmd(d.path()).args(["actions", "pets"]));
    assert_eq!(
        (a.code, a.stdout.as_str(), a.stderr.as_str()),
        (
            0,
            "pets.createPet       Adds a pet.\n                     inputs: name*, tag\npets.list            The same as `pets.listPets` (the peer's spelling).\n                     inputs: limit\npets.listPets        Lists pets.\n                     inputs: limit\npets.showPet         One pet.\n                     inputs: petId*\n",
            ""
        )
    );
    std::fs::write(
        d.path().join("p.md"),
        "---\nworkflow: {id: p}\ntools:\n  pets: {sdk: pets-api, auth: {token: t0k3n}, options: {base_url: '${PETS}/v2'}}\n---\n\n```yaml\nid: all\naction: pets.list\ninputs: {limit: 2}\n```\n\n```yaml\nid: new\naction: pets.createPet\ninputs: {name: Kit}\n```\n\n```yaml\nid: one\naction: pets.showPet\ninputs: {petId: '{{ steps.new.output.id }}'}\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path())
        .args(["run", "p.md", "--json", "--quiet"])
        .env("PETS", &svc.base));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["steps"][2]["output"],
        json!({"id": 3, "name": "Kit"})
    );
    let hits = svc.hits();
    assert_eq!(hits[1].json(), json!({"name": "Kit"}));
    assert!(hits
        .iter()
        .all(|h| h.header("authorization") == Some("Bearer t0k3n")));
}

#[test]
fn drive_uploads_a_files_content_and_metadata_in_one_multipart_request() {
    let d = tempdir();
    let svc = FakeService::start(Arc::new(|hit: &Hit, _| {
        match (hit.method.as_str(), hit.path.as_str()) {
            ("POST", "/token") => ok(json!({"access_token": "ya29.d", "expires_in": 3600})),
            ("POST", "/upload/drive/v3/files?uploadType=multipart") => {
                ok(json!({"id": "F1", "name": "notes.txt"}))
            }
            _ => (
                404,
                Vec::new(),
                json!({"error": {"message": "not found"}}).to_string(),
            ),
        }
    }));
    std::fs::write(
        d.path().join("dr.md"),
        "---\nworkflow: {id: dr}\ntools:\n  drive: {sdk: google-drive, auth: {client_id: c, client_secret: s, refresh_token: r}}\n---\n\n```yaml\nid: up\naction: drive.createFile\ninputs: {name: notes.txt, content: \"line one\\nline two\", contentType: text/plain, parents: [P1]}\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path())
        .args(["run", "dr.md", "--json", "--quiet"])
        .env("MARKTOFLOW_DRIVE_BASE_URL", &svc.base)
        .env("MARKTOFLOW_DRIVE_TOKEN_URL", format!("{}/token", svc.base)));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["steps"][0]["output"],
        json!({"id": "F1", "name": "notes.txt"})
    );
    let up = svc
        .hits()
        .into_iter()
        .find(|h| h.path.starts_with("/upload"))
        .unwrap();
    let ctype = up.header("content-type").unwrap().to_string();
    let boundary = ctype
        .strip_prefix("multipart/related; boundary=")
        .expect(&ctype)
        .to_string();
    assert_eq!(
        up.body,
        format!("--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{{\"name\":\"notes.txt\",\"mimeType\":\"text/plain\",\"parents\":[\"P1\"]}}\r\n--{boundary}\r\nContent-Type: text/plain\r\n\r\nline one\nline two\r\n--{boundary}--\r\n")
    );
    assert_eq!(up.header("authorization"), Some("Bearer ya29.d"));
}

#[test]
fn pagerduty_discord_linear_and_notion_requests_are_as_their_apis_document() {
    let d = tempdir();
    let svc = FakeService::start(Arc::new(|hit: &Hit, _| {
        match (hit.method.as_str(), hit.path.as_str()) {
            ("POST", "/pd/incidents") => (
                201,
                Vec::new(),
                json!({"incident": {"id": "P1", "status": "triggered"}}).to_string(),
            ),
            ("POST", "/discord/channels/C9/messages") => {
                ok(json!({"id": "M1", "channel_id": "C9", "content": hit.json()["content"]}))
            }
            ("POST", "/linear/graphql") => ok(
                json!({"data": {"issueCreate": {"success": true, "issue": {"identifier": "ENG-1"}}}}),
            ),
            ("POST", "/notion/databases/DB1/query") => {
                if hit.json()["start_cursor"] == "c2" {
                    ok(json!({"results": [{"id": "p3"}], "has_more": false, "next_cursor": null}))
                } else {
                    ok(
                        json!({"results": [{"id": "p1"}, {"id": "p2"}], "has_more": true, "next_cursor": "c2"}),
                    )
                }
            }
            _ => (404, Vec::new(), json!({"message": "no"}).to_string()),
        }
    }));
    std::fs::write(
        d.path().join("four.md"),
        "---\nworkflow: {id: four}\ntools:\n  pagerduty: {sdk: '@pagerduty/pdjs', auth: {token: pd-secret-1, from: ops@example.com}}\n  discord: {sdk: discord, auth: {token: dc-secret-2}}\n  linear: {sdk: linear, auth: {api_key: lin_api_3}}\n  notion: {sdk: notion, auth: {token: secret_notion_4}}\n---\n\n```yaml\nid: page\naction: pagerduty.incidents.create\ninputs: {title: DB down, service: {id: PSVC, type: service_reference}, urgency: high}\n```\n\n```yaml\nid: say\naction: discord.sendMessage\ninputs: {channelId: C9, content: 'Paged {{ steps.page.output.incident.id }}'}\n```\n\n```yaml\nid: issue\naction: linear.graphql\ninputs: {query: 'mutation($t: String!) { issueCreate(input: {title: $t, teamId: \"T\"}) { success issue { identifier } } }', variables: {t: DB down}}\n```\n\n```yaml\nid: pages\naction: notion.databases.query\ninputs: {database_id: DB1, all_pages: true}\n```\n\n```yaml\naction: workflow.set_outputs\ninputs:\n  linear: '{{ steps.issue.output.data.issueCreate.issue.identifier }}'\n  notion: \"{{ steps.pages.output.results | map(attribute='id') | list }}\"\n```\n",
    )
    .unwrap();
    let r = run(cmd(d.path())
        .args(["run", "four.md", "--json", "--quiet"])
        .env("MARKTOFLOW_PAGERDUTY_BASE_URL", format!("{}/pd", svc.base))
        .env(
            "MARKTOFLOW_DISCORD_BASE_URL",
            format!("{}/discord", svc.base),
        )
        .env("MARKTOFLOW_LINEAR_BASE_URL", format!("{}/linear", svc.base))
        .env("MARKTOFLOW_NOTION_BASE_URL", format!("{}/notion", svc.base)));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["outputs"],
        json!({"linear": "ENG-1", "notion": ["p1", "p2", "p3"]})
    );
    let hits = svc.hits();
    let at = |p: &str| hits.iter().find(|h| h.path.starts_with(p)).unwrap().clone();
    let pd = at("/pd/");
    assert_eq!(pd.header("authorization"), Some("Token token=pd-secret-1"));
    assert_eq!(pd.header("from"), Some("ops@example.com"));
    assert_eq!(
        pd.header("accept"),
        Some("application/vnd.pagerduty+json;version=2")
    );
    assert_eq!(
        pd.json(),
        json!({"incident": {"title": "DB down", "service": {"id": "PSVC", "type": "service_reference"}, "urgency": "high"}})
    );
    let dc = at("/discord/");
    assert_eq!(dc.header("authorization"), Some("Bot dc-secret-2"));
    assert_eq!(dc.json(), json!({"content": "Paged P1"}));
    let lin = at("/linear/");
    assert_eq!(lin.header("authorization"), Some("lin_api_3"));
    assert_eq!(lin.json()["variables"], json!({"t": "DB down"}));
    let no = at("/notion/");
    assert_eq!(no.header("authorization"), Some("Bearer secret_notion_4"));
    assert_eq!(no.header("notion-version"), Some("2022-06-28"));
}
