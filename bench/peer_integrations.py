#!/usr/bin/env python3
"""Runs the peer's example workflows that use its service integrations
against fake services on 127.0.0.1, unchanged: each bundled service's base
URL is pointed at the fake (`MARKTOFLOW_<NAME>_BASE_URL`), agent steps at a
fake Anthropic, and every request is checked as the real API documents it
(method, auth header, JSON body where the API takes one). Prints, per
example, whether it ran and which requests it made.

    python3 bench/peer_integrations.py PEER_CHECKOUT/examples [--bin target/release/marktoflow]

The peer's repository is public (github.com/marktoflow/marktoflow);
nothing of it is kept here. The fakes answer in each API's reply shape
with fixed data; they check requests, not the business logic of the
examples.
"""

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The examples that use only bundled integrations (bench/peer_examples.py
# lists them), with inputs for their required ones (`{base}` is the fakes'
# address, for an example that takes its API's URL as an input).
EXAMPLES = {
    "agent-task-executor/workflow-slack.md": {"channel": "C123", "instructions": "List the files"},
    "agent-task-executor/workflow-telegram.md": {"chat_id": 42, "instructions": "List the files"},
    "code-review/workflow.md": {"repo": "acme/app", "pr_number": 7},
    "codebase-qa/workflow-telegram.md": {"chat_id": 42, "question": "Where is main?"},
    "dependency-update/workflow.md": {"repo": "acme/app"},
    "incident-response/workflow.md": {"incident_id": "INC-1", "severity": "high", "service": "api",
                                      "description": "Errors are up"},
    "secrets-example/workflow.md": {"message": "hello"},
    "sheets-report/workflow.md": {"spreadsheet_id": "S1"},
    "tests/control-flow/data-pipeline.md": {"api_url": "{base}/orders/orders"},
    "tests/control-flow/incident-router.md": {"incident": {"severity": "critical", "title": "DB down",
                                                           "description": "no writes", "affected_services": "db"}},
    "tests/control-flow/parallel-fetch.md": {"jira_project": "OPS", "github_repo": "acme/app"},
    "tests/sub-workflows/common/send-notification.md": {"channel": "#ops", "message": "hi"},
    "tests/sub-workflows/user-onboarding.md": {"username": "ann", "email": "ann@example.com"},
    "gmail-notification/workflow.md": {"to": "ann@example.com", "subject": "Hi", "body": "Hello"},
    "oauth-refresh-demo/workflow.md": {"recipient": "ann@example.com"},
    "google-docs-create/workflow.md": {"title": "Notes", "content": "Hello", "add_content": True},
    "google-drive-create-file/workflow.md": {"filename": "notes.txt", "content": "Hello"},
}

HITS = []
PROBLEMS = []


def reply_for(service, method, path, body):
    if service == "orders":
        return 200, {"orders": [{"id": 1, "amount": 1500, "customer": "Ann"},
                                {"id": 2, "amount": 200, "customer": "Bob"},
                                {"id": 3, "amount": 1000, "customer": "Cy"}]}
    if service == "slack":
        if path.startswith("/conversations.history"):
            return 200, {"ok": True, "messages": [{"ts": "1700000000.1", "user": "U1", "text": "Deployed api"}],
                         "has_more": False, "response_metadata": {"next_cursor": ""}}
        if path.startswith("/conversations.create"):
            return 200, {"ok": True, "channel": {"id": "C999", "name": (body or {}).get("name", "x")}}
        return 200, {"ok": True, "channel": "C123", "ts": "1700000000.2",
                     "message": {"text": (body or {}).get("text", ""), "ts": "1700000000.2"}}
    if service == "github":
        if method == "GET" and "/pulls/" in path and path.endswith("/files"):
            return 200, [{"filename": "src/app.js", "status": "modified", "additions": 3, "deletions": 1,
                          "changes": 4, "patch": "@@ -1 +1 @@\n-a\n+b"}]
        if method == "GET" and "/pulls/" in path:
            return 200, {"number": 7, "title": "Fix", "body": "Fixes it", "state": "open", "user": {"login": "ann"},
                         "head": {"sha": "abc123", "ref": "fix"}, "base": {"ref": "main"}, "html_url": "https://github.example/pr/7",
                         "additions": 3, "deletions": 1, "changed_files": 1}
        if method == "GET" and "/contents/" in path:
            content = base64.b64encode(json.dumps({"dependencies": {"left-pad": "1.0.0"}}).encode()).decode()
            return 200, {"path": path.split("/contents/")[1].split("?")[0], "sha": "s1", "encoding": "base64",
                         "content": content}
        if method == "GET" and path.startswith("/search/"):
            return 200, {"total_count": 0, "incomplete_results": False, "items": []}
        if method == "GET" and path.count("/") == 3:
            return 200, {"full_name": "acme/app", "default_branch": "main", "name": "app"}
        if method == "GET":
            return 200, []
        return 201, {"id": 1, "number": 8, "html_url": "https://github.example/x/8", "ref": "refs/heads/x",
                     "object": {"sha": "abc123"}, "commit": {"sha": "c1"}, "content": {"sha": "s2"}}
    if service == "jira":
        if "search" in path:
            return 200, {"issues": [{"key": "OPS-1", "fields": {"summary": "Broken", "status": {"name": "Blocked"},
                                                                 "priority": {"name": "High"},
                                                                 "assignee": {"displayName": "Ann"}}}],
                         "total": 1, "startAt": 0, "maxResults": 50, "isLast": True}
        return 201, {"id": "10001", "key": "OPS-2", "self": "https://jira.example/rest/api/3/issue/10001"}
    if service == "telegram":
        return 200, {"ok": True, "result": {"message_id": 5, "chat": {"id": 42}, "date": 1700000000,
                                             "text": (body or {}).get("text", "")}}
    if service == "pagerduty":
        return 201, {"incident": {"id": "P1", "incident_number": 1, "status": "triggered",
                                  "html_url": "https://pd.example/incidents/P1"}}
    if service == "sheets":
        if path == "/token":
            return 200, {"access_token": "ya29.fake", "expires_in": 3600}
        if method == "GET":
            return 200, {"range": "Sheet1!A1:C3", "values": [["name", "amount", "status"], ["a", "10", "paid"],
                                                              ["b", "5", "open"]]}
        return 200, {"spreadsheetId": "S1", "updatedCells": 3}
    if service == "gmail":
        if path == "/token":
            return 200, {"access_token": "ya29.fake", "expires_in": 3600}
        return 200, {"id": "m1", "threadId": "t1", "labelIds": ["SENT"]}
    if service == "docs":
        if path == "/token":
            return 200, {"access_token": "ya29.fake", "expires_in": 3600}
        if path == "/v1/documents":
            return 200, {"documentId": "D1", "title": (body or {}).get("title", "")}
        return 200, {"documentId": "D1", "replies": [{}]}
    if service == "drive":
        if path == "/token":
            return 200, {"access_token": "ya29.fake", "expires_in": 3600}
        return 200, {"id": "F1", "name": "notes.txt", "mimeType": "text/plain", "webViewLink": "https://drive.example/F1"}
    if service == "anthropic":
        return 200, {"id": "msg", "type": "message", "role": "assistant", "model": (body or {}).get("model", "m"),
                     "content": [{"type": "text", "text": "Looks good. Nothing to change."}],
                     "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 5}}
    return 200, {}


AUTH = {
    "slack": lambda h: h.get("authorization", "").startswith("Bearer "),
    "github": lambda h: h.get("authorization", "").startswith("Bearer ") and "github" in h.get("accept", ""),
    "jira": lambda h: h.get("authorization", "").startswith("Basic "),
    "pagerduty": lambda h: h.get("authorization", "").startswith("Token token="),
    "sheets": lambda h: True,
    "gmail": lambda h: h.get("authorization", "") == "Bearer ya29.fake",
    "docs": lambda h: h.get("authorization", "") == "Bearer ya29.fake",
    "drive": lambda h: h.get("authorization", "") == "Bearer ya29.fake",
    "telegram": lambda h: True,
    "anthropic": lambda h: bool(h.get("x-api-key")),
}


class Handler(BaseHTTPRequestHandler):
    def handle_any(self):
        n = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(n) if n else b""
        parts = self.path.split("/", 2)
        service = parts[1]
        path = "/" + (parts[2] if len(parts) > 2 else "")
        if service == "telegram":
            path = "/" + path.split("/", 2)[2] if path.count("/") >= 2 else path
        headers = {k.lower(): v for k, v in self.headers.items()}
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        HITS.append((service, self.command, path))
        check = AUTH.get(service)
        if check and path != "/token" and not check(headers):
            PROBLEMS.append(f"{service} {self.command} {path}: no auth header as the API asks")
        wants = "multipart/related" if path.startswith("/upload/") else "application/json"
        if self.command in ("POST", "PUT", "PATCH") and raw and path != "/token" and \
                not headers.get("content-type", "").startswith(wants):
            PROBLEMS.append(f"{service} {self.command} {path}: body is not JSON")
        status, out = reply_for(service, self.command, path, body if isinstance(body, dict) else None)
        data = json.dumps(out).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("examples")
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "marktoflow"))
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    env = dict(os.environ)
    for k in list(env):
        if k.endswith("_API_KEY") or k.startswith("MARKTOFLOW_LOCAL"):
            del env[k]
    env.update({
        "MARKTOFLOW_SLACK_BASE_URL": f"{base}/slack",
        "MARKTOFLOW_GITHUB_BASE_URL": f"{base}/github",
        "MARKTOFLOW_JIRA_BASE_URL": f"{base}/jira",
        "MARKTOFLOW_TELEGRAM_BASE_URL": base + "/telegram/bot{auth.token}",
        "MARKTOFLOW_PAGERDUTY_BASE_URL": f"{base}/pagerduty",
        "MARKTOFLOW_SHEETS_BASE_URL": f"{base}/sheets/v4",
        "MARKTOFLOW_SHEETS_TOKEN_URL": f"{base}/sheets/token",
        "MARKTOFLOW_GMAIL_BASE_URL": f"{base}/gmail/gmail/v1",
        "MARKTOFLOW_GMAIL_TOKEN_URL": f"{base}/gmail/token",
        "MARKTOFLOW_DOCS_BASE_URL": f"{base}/docs/v1",
        "MARKTOFLOW_DOCS_TOKEN_URL": f"{base}/docs/token",
        "MARKTOFLOW_DRIVE_BASE_URL": f"{base}/drive",
        "MARKTOFLOW_DRIVE_TOKEN_URL": f"{base}/drive/token",
        "ANTHROPIC_BASE_URL": f"{base}/anthropic",
        "ANTHROPIC_API_KEY": "fake-key",
        "SLACK_BOT_TOKEN": "xoxb-fake", "GITHUB_TOKEN": "ghp_fake", "TELEGRAM_BOT_TOKEN": "123:fake",
        "JIRA_HOST": "jira.example", "JIRA_EMAIL": "ann@example.com", "JIRA_USERNAME": "ann",
        "JIRA_API_TOKEN": "jira-fake", "PAGERDUTY_API_TOKEN": "pd-fake", "PAGERDUTY_API_KEY": "pd-fake",
        "PAGERDUTY_SERVICE_ID": "PSVC", "PAGERDUTY_SCHEDULE_ID": "PSCHED", "GITHUB_ORG": "acme", "GITHUB_REPO": "app",
        "GOOGLE_CLIENT_ID": "cid", "GOOGLE_CLIENT_SECRET": "csecret", "GOOGLE_REFRESH_TOKEN": "1//refresh",
        "CODEBASE_PATH": ".", "MARKTOFLOW_RETRY_BASE_MS": "10",
    })
    ran, failed = [], []
    for rel, inputs in EXAMPLES.items():
        path = os.path.join(args.examples, rel)
        start = len(HITS)
        with tempfile.TemporaryDirectory() as store:
            cmd = [binary, "run", os.path.basename(path), "--json", "--quiet", "--no-store",
                   "--allow-read", os.path.abspath(args.examples)]
            for k, v in inputs.items():
                v = v.replace("{base}", base) if isinstance(v, str) else json.dumps(v)
                cmd += ["--input", f"{k}={v}"]
            r = subprocess.run(cmd, cwd=os.path.dirname(path), env=env, capture_output=True, text=True, timeout=120)
        calls = sorted({f"{s} {m} {p.split('?')[0]}" for s, m, p in HITS[start:] if s != "anthropic"})
        try:
            out = json.loads(r.stdout)
        except ValueError:
            out = {"status": "no JSON", "error": {"message": (r.stderr.strip().splitlines() or ["?"])[0]}}
        if out.get("status") == "completed":
            ran.append((rel, calls))
        else:
            failed.append((rel, out.get("status"), (out.get("error") or {}).get("message", ""), calls))
    print(f"{len(EXAMPLES)} examples using bundled integrations: {len(ran)} ran to completion against the fakes, "
          f"{len(failed)} did not; {len(PROBLEMS)} requests not as the APIs document\n")
    for rel, calls in ran:
        print(f"  ran  {rel}: {len(calls)} kinds of request: {', '.join(calls)}")
    for rel, status, why, calls in failed:
        print(f"  {status:<8} {rel}: {why[:300]}\n           requests: {', '.join(calls)}")
    for p in PROBLEMS:
        print(f"  problem: {p}")
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
