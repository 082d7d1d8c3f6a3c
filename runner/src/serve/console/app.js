// The marktoflow run console: a thin page over the run API (docs/console.md).
// Everything shown is built with DOM nodes and text, never parsed as HTML:
// a workflow's text or a run's output cannot inject markup.
"use strict";

const main = document.getElementById("main");
const announce = document.getElementById("announce");
let leave = []; // what the current page stops when another opens

// ---------- helpers ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === "class") el.className = v;
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function say(text) {
  announce.textContent = text;
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

function token() {
  return sessionStorage.getItem("marktoflow-token");
}

async function api(path, opts = {}) {
  const headers = Object.assign({ Accept: "application/json" }, opts.headers || {});
  if (token()) headers.Authorization = `Bearer ${token()}`;
  if (opts.json !== undefined) {
    headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(opts.json);
  }
  const r = await fetch(path, { method: opts.method || "GET", headers, body: opts.body });
  let body = null;
  try {
    body = await r.json();
  } catch (_) {
    body = null;
  }
  if (r.status === 401) askToken();
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

function askToken() {
  const form = document.getElementById("token-form");
  form.hidden = false;
  document.getElementById("token-input").focus();
}

document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem("marktoflow-token", document.getElementById("token-input").value);
  e.target.hidden = true;
  route();
});

function badge(status) {
  return h("span", { class: `badge s-${status}`, "data-status": status }, status);
}

function ms(n) {
  if (n === null || n === undefined) return "";
  if (n < 1000) return `${n} ms`;
  if (n < 60000) return `${(n / 1000).toFixed(n < 10000 ? 2 : 1)} s`;
  const m = Math.floor(n / 60000);
  return `${m} min ${Math.round((n % 60000) / 1000)} s`;
}

function when(t) {
  if (!t) return "";
  const d = new Date(t);
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

function short(id) {
  return id.slice(-8);
}

function json(v) {
  return JSON.stringify(v, null, 2);
}

function problem(err) {
  return h("div", { class: "notice bad", role: "alert" }, err.message || String(err));
}

function page(title, ...children) {
  document.title = `${title} · marktoflow`;
  main.replaceChildren(h("h1", {}, title), ...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

/// Repeats `fn` every `ms` while this page is shown and the tab visible.
function every(msec, fn) {
  const t = setInterval(() => {
    if (!document.hidden) fn();
  }, msec);
  leave.push(() => clearInterval(t));
}

// ---------- workflows ----------

async function workflowsPage() {
  let shown = "";
  async function render() {
    const data = await api("/workflows");
    // Redrawn only when something changed (`serve --watch` reloaded), so
    // focus and reading are not disturbed.
    const text = JSON.stringify(data);
    if (text === shown) return;
    shown = text;
    drawWorkflows(data);
  }
  await render();
  every(3000, () => render().catch(() => {}));
}

/// "about 12 min left" from seconds.
function timeLeft(s) {
  if (s === null || s === undefined) return "";
  if (s < 90) return `, about ${Math.round(s)} s left`;
  if (s < 5400) return `, about ${Math.round(s / 60)} min left`;
  return `, about ${(s / 3600).toFixed(1)} h left`;
}

function drawWorkflows({ workflows, broken, background }) {
  const tasks = (background || []).filter((t) => t.running || t.error);
  const working = tasks.length
    ? h("div", { class: "card", "data-background": "" },
      h("strong", {}, "In the background"),
      h("ul", {}, tasks.map((t) => h("li", {},
        t.running
          ? [`${t.task}: ${t.done.toLocaleString()} of ${t.total.toLocaleString()} chunks`, timeLeft(t.eta_seconds),
            " ", h("progress", { max: String(t.total || 1), value: String(t.done) })]
          : `${t.task}: stopped (${t.error})`))))
    : null;
  const problems = (broken || []).length
    ? h("div", { class: "card error", role: "alert", "data-broken": "" },
      h("strong", {}, "Files that did not load (skipped until fixed)"),
      h("ul", {}, broken.map((b) => h("li", {},
        h("code", {}, b.line ? `${b.file}:${b.line}:${b.column}` : b.file), " ", b.message))))
    : null;
  const rows = workflows.map((w) =>
    h("tr", {},
      h("td", {}, h("a", { href: `#/workflows/${encodeURIComponent(w.workflow)}` }, w.name || w.workflow)),
      h("td", {}, (w.triggers || []).join(", ")),
      h("td", {}, w.path ? h("code", {}, `${w.method} ${w.path}`) : ""),
      h("td", {}, w.last_run
        ? h("a", { href: `#/runs/${w.last_run.run_id}`, "data-last-run": w.last_run.status }, badge(w.last_run.status), " ", when(w.last_run.created_at))
        : h("span", { class: "muted" }, "never")),
      h("td", {}, w.next ? h("span", { title: w.next.shown, "data-next": "" }, when(w.next.at)) : ""),
      h("td", { class: "muted" }, w.file),
      h("td", {}, h("a", { href: `#/runs?workflow=${encodeURIComponent(w.workflow)}` }, "runs")),
    ));
  page("Workflows", problems, working,
    workflows.length
      ? h("table", {},
        h("thead", {}, h("tr", {}, ["Workflow", "Triggers", "Route", "Last run", "Next", "File", ""].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, rows))
      : h("p", { class: "muted" }, "This server serves no workflows."));
}

function field(input) {
  const id = `in-${input.name}`;
  const label = h("label", { for: id }, input.name, input.required ? " *" : "");
  let control;
  const def = input.default;
  if (input.enum && input.enum.length) {
    control = h("select", { id, name: input.name, required: input.required },
      input.required ? null : h("option", { value: "" }, "(default)"),
      input.enum.map((v) => h("option", { value: JSON.stringify(v), selected: JSON.stringify(v) === JSON.stringify(def) }, String(v))));
  } else if (input.type === "boolean") {
    control = h("input", { id, name: input.name, type: "checkbox", checked: def === true });
  } else if (input.type === "number" || input.type === "integer") {
    control = h("input", {
      id, name: input.name, type: "number", required: input.required,
      step: input.type === "integer" ? "1" : "any", min: input.min, max: input.max,
      value: def ?? "",
    });
  } else if (input.type === "array" || input.type === "object") {
    control = h("textarea", { id, name: input.name, required: input.required, spellcheck: "false", placeholder: input.type === "array" ? "[ … ] (JSON)" : "{ … } (JSON)" },
      def !== null && def !== undefined ? json(def) : "");
  } else {
    control = h("input", { id, name: input.name, type: "text", required: input.required, value: def ?? "" });
  }
  control.dataset.type = input.type;
  const hintId = `${id}-hint`;
  const hint = input.description ? h("div", { class: "hint", id: hintId }, input.description) : null;
  if (hint) control.setAttribute("aria-describedby", hintId);
  return h("div", { class: "field", "data-input": input.name }, label, control, hint,
    h("div", { class: "problem", id: `${id}-problem`, role: "status" }));
}

function readForm(form, inputs) {
  const values = {};
  let ok = true;
  for (const input of inputs) {
    const el = form.elements[input.name];
    const problem = form.querySelector(`#in-${CSS.escape(input.name)}-problem`);
    problem.textContent = "";
    if (input.type === "boolean" && !(input.enum && input.enum.length)) {
      values[input.name] = el.checked;
      continue;
    }
    const text = el.value;
    if (text === "") continue; // the default applies
    try {
      if (input.enum && input.enum.length) values[input.name] = JSON.parse(text);
      else if (input.type === "number" || input.type === "integer") values[input.name] = Number(text);
      else if (input.type === "array" || input.type === "object") values[input.name] = JSON.parse(text);
      else values[input.name] = text;
    } catch (e) {
      problem.textContent = `Not valid JSON: ${e.message}`;
      el.setAttribute("aria-invalid", "true");
      ok = false;
    }
  }
  return ok ? values : null;
}

async function workflowPage(id) {
  const wf = await api(`/workflows/${encodeURIComponent(id)}`);
  const form = h("form", { class: "inputs", "aria-label": "Start a run" }, wf.inputs.map(field));
  const status = h("div", { role: "status" });
  const start = h("button", { type: "submit" }, "Start run");
  form.append(h("div", { class: "row" }, start, status));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const values = readForm(form, wf.inputs);
    if (!values) return;
    start.disabled = true;
    status.replaceChildren("Starting…");
    try {
      const r = await api(`/workflows/${encodeURIComponent(id)}/runs`, { method: "POST", json: values });
      say("Run started");
      location.hash = `#/runs/${r.run_id}`;
    } catch (err) {
      start.disabled = false;
      status.replaceChildren(problem(err));
      for (const f of (err.body && err.body.fields) || []) {
        const p = form.querySelector(`#in-${CSS.escape(f.input)}-problem`);
        if (p) p.textContent = f.message + (f.hint ? ` (${f.hint})` : "");
      }
    }
  });
  // A webhook workflow can also start from a request body pasted as it
  // came (a GitHub delivery, say), taken as its trigger would take it.
  const replay = wf.triggers.some((t) => t.type === "webhook") ? replayForm(id) : null;
  const url = URL.createObjectURL(new Blob([wf.graph.svg], { type: "image/svg+xml" }));
  leave.push(() => URL.revokeObjectURL(url));
  const triggers = wf.triggers.length
    ? h("ul", {}, wf.triggers.map((t) => h("li", {}, h("strong", {}, t.type), " ",
      h("code", {}, Object.entries(t.config).filter(([k]) => k !== "type").map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`).join(", ")))))
    : h("p", { class: "muted" }, "No triggers: started from here, the CLI or the API.");
  page(wf.name || wf.workflow,
    wf.description ? h("p", { class: "description" }, wf.description) : null,
    h("p", { class: "muted" }, h("code", {}, wf.file), wf.version ? ` · version ${wf.version}` : "", " · ",
      h("a", { href: `#/runs?workflow=${encodeURIComponent(wf.workflow)}` }, "runs of this workflow")),
    h("h2", {}, "Start a run"),
    h("div", { class: "card" }, wf.inputs.length ? null : h("p", { class: "muted" }, "This workflow takes no inputs."), form),
    replay,
    h("h2", {}, "Triggers"), triggers,
    h("h2", {}, "Steps"),
    h("div", { class: "card graph" }, h("img", { src: url, alt: `Flowchart of ${wf.name}: ${wf.steps.map((s) => s.name).join(", then ")}` })),
    h("details", {}, h("summary", {}, "Mermaid source"), h("pre", {}, wf.graph.mermaid)));
}

function replayForm(id) {
  const body = h("textarea", { id: "replay-body", name: "body", rows: 8, spellcheck: "false", placeholder: '{"action": "opened", "issue": {"title": "…"}}' });
  const headers = h("textarea", { id: "replay-headers", name: "headers", rows: 2, spellcheck: "false", placeholder: "X-GitHub-Event: issues" });
  const status = h("div", { role: "status", "data-replay-status": "" });
  const start = h("button", { type: "submit" }, "Start from this body");
  const form = h("form", { class: "inputs", "aria-label": "Start from a request body" },
    h("div", { class: "field" }, h("label", { for: "replay-body" }, "Request body (JSON)"), body),
    h("div", { class: "field" }, h("label", { for: "replay-headers" }, "Headers, one `Name: value` a line"), headers),
    h("div", { class: "row" }, start, status));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    let parsed;
    try {
      parsed = body.value.trim() === "" ? {} : JSON.parse(body.value);
    } catch (err) {
      status.replaceChildren(`Not valid JSON: ${err.message}`);
      body.setAttribute("aria-invalid", "true");
      return;
    }
    const named = {};
    for (const line of headers.value.split("\n")) {
      const at = line.indexOf(":");
      if (at > 0) named[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    start.disabled = true;
    status.replaceChildren("Starting…");
    try {
      const r = await api(`/workflows/${encodeURIComponent(id)}/replay`, { method: "POST", json: { body: parsed, headers: named } });
      say("Run started");
      location.hash = `#/runs/${r.run_id}`;
    } catch (err) {
      start.disabled = false;
      status.replaceChildren(problem(err));
    }
  });
  return [h("h2", {}, "Start from a request body"),
    h("div", { class: "card" }, h("p", { class: "muted" },
      "Paste a request as the sender sends it: its trigger's event filter and input mapping apply, its authentication does not."), form)];
}

// ---------- runs ----------

// The server's words for run states and what started a run (the page's
// data block), so a new one needs no change here.
const { statuses: STATUSES, triggers: TRIGGERS } = JSON.parse(document.getElementById("vocabulary").textContent);
const SINCE = [["", "any time"], ["1h", "last hour"], ["24h", "last 24 hours"], ["7d", "last 7 days"], ["30d", "last 30 days"]];

async function runsPage(params) {
  const { workflows } = await api("/workflows").catch(() => ({ workflows: [] }));
  const select = (name, label, options) => h("label", {}, label,
    h("select", { name, on: { change: apply } },
      options.map(([v, t]) => h("option", { value: v, selected: (params.get(name) || "") === v }, t))));
  const filters = h("form", { class: "filters", "aria-label": "Filter runs" },
    select("workflow", "Workflow", [["", "all"], ...workflows.map((w) => [w.workflow, w.name || w.workflow])]),
    select("status", "Status", [["", "all"], ...STATUSES.map((s) => [s, s])]),
    select("trigger", "Trigger", [["", "all"], ...TRIGGERS.map((s) => [s, s])]),
    select("since", "Started", SINCE),
    h("label", {}, "Search", h("input", { name: "q", type: "search", value: params.get("q") || "", placeholder: "in inputs and outputs", on: { change: apply } })));
  filters.addEventListener("submit", (e) => { e.preventDefault(); apply(); });
  function apply() {
    const q = new URLSearchParams();
    for (const el of filters.elements) if (el.value) q.set(el.name, el.value);
    location.hash = `#/runs${q.toString() ? "?" + q : ""}`;
  }
  const body = h("div", {});
  const live = h("p", { class: "live" });
  page("Runs", filters, body, live);
  async function load() {
    const q = new URLSearchParams(params);
    if (!q.get("limit")) q.set("limit", "25");
    const r = await api(`/runs?${q}`);
    const offset = r.offset || 0;
    const rows = r.runs.map((run) => h("tr", { "data-run": run.run_id },
      h("td", {}, h("a", { href: `#/runs/${run.run_id}` }, h("code", {}, short(run.run_id)))),
      h("td", {}, run.workflow),
      h("td", { class: "brief", "data-inputs": "" }, run.inputs || ""),
      h("td", { class: "brief", "data-outputs": "" }, run.outputs || ""),
      h("td", {}, badge(run.status)),
      h("td", {}, run.trigger || ""),
      h("td", {}, when(run.created_at)),
      h("td", {}, ms(run.duration_ms))));
    const pageTo = (off) => {
      const n = new URLSearchParams(params);
      if (off > 0) n.set("offset", off); else n.delete("offset");
      location.hash = `#/runs?${n}`;
    };
    body.replaceChildren(
      r.runs.length
        ? h("table", {}, h("caption", { class: "visually-hidden" }, "Runs, newest first"),
          h("thead", {}, h("tr", {}, ["Run", "Workflow", "Inputs", "Outputs", "Status", "Trigger", "Started", "Duration"].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", {}, rows))
        : h("p", { class: "muted" }, "No runs match."),
      h("div", { class: "pager" },
        h("button", { class: "secondary", disabled: offset === 0, on: { click: () => pageTo(Math.max(0, offset - r.limit)) } }, "Newer"),
        h("span", { class: "muted" }, r.total ? `${offset + 1}–${offset + r.runs.length} of ${r.total}` : ""),
        h("button", { class: "secondary", disabled: !r.next, on: { click: () => pageTo(offset + r.limit) } }, "Older")));
    live.textContent = `Updated ${new Date().toLocaleTimeString()}; refreshes every 2 s.`;
  }
  await load();
  every(2000, () => load().catch(() => {}));
}

// What model calls spent: `claude-sonnet-4 · 1200 in / 80 out tokens · $0.0048`.
function spent(u) {
  const parts = [u.model, `${u.input_tokens} in / ${u.output_tokens} out tokens`];
  if (u.calls > 1) parts.push(`${u.calls} calls`);
  const c = u.cost_usd;
  if (c !== undefined && c !== null) parts.push(c > 0 && c < 0.00005 ? "<$0.0001" : `$${c < 1 ? c.toFixed(4) : c.toFixed(2)}`);
  return parts.filter(Boolean).join(" · ");
}

function stepNode(step, retryFrom, onRetry) {
  const title = h("span", { class: "name" }, step.name);
  const meta = [
    badge(step.status),
    step.iteration ? h("span", { class: "muted" }, `iteration ${step.iteration}`) : null,
    step.duration_ms !== null && step.duration_ms !== undefined ? h("span", { class: "muted" }, ms(step.duration_ms)) : null,
    step.attempts > 1 ? h("span", { class: "muted" }, `${step.attempts} attempts`) : null,
    step.reused ? h("span", { class: "muted" }, "reused from the earlier run") : null,
    step.usage ? h("span", { class: "muted", "data-step-usage": "" }, spent(step.usage)) : null,
    step.name !== step.id ? h("code", { class: "muted" }, step.id) : null,
  ];
  const retry = step.depth === 0 && retryFrom.includes(step.id)
    ? h("button", { class: "secondary", "data-retry": step.id, on: { click: () => onRetry(step.id) } }, "Retry from here")
    : null;
  const details = [];
  if (step.error) details.push(h("pre", { class: "step-error" }, step.error));
  if (step.inputs !== null && step.inputs !== undefined) {
    details.push(h("details", { "data-step-inputs": "" }, h("summary", {}, "Inputs"), h("pre", {}, json(step.inputs))));
  }
  if (step.output !== null && step.output !== undefined && step.status !== "running") {
    details.push(h("details", {}, h("summary", {}, "Output"), h("pre", {}, json(step.output))));
  }
  return h("li", { class: "step", "data-step": step.id, "data-step-status": step.status },
    h("div", { class: "head" }, title, ...meta, retry),
    ...details,
    step.children && step.children.length
      ? h("ol", { "aria-label": `Steps inside ${step.name}` }, step.children.map((c) => stepNode(c, retryFrom, onRetry)))
      : null);
}

function errorBox(err, status) {
  if (!err) return null;
  // Cancelling is a choice, not a failure: said plainly, not in red.
  if (status === "cancelled") {
    return h("div", { class: "card", role: "status", "data-cancelled": "" },
      h("strong", {}, err.step ? `Cancelled during step ${err.step}` : "The run was cancelled"));
  }
  const place = err.place || (err.line ? { file: err.file, line: err.line, column: err.column } : null);
  // The workflow refused the request itself (`workflow.exit` with a 4xx/5xx).
  if (status === "rejected") {
    return h("div", { class: "card", role: "status", "data-rejected": "" },
      h("strong", {}, err.step ? `Rejected by step ${err.step}` : "The workflow rejected the request"),
      h("pre", {}, err.message),
      place ? h("div", { class: "where" }, `${place.file}:${place.line}:${place.column}`) : null);
  }
  return h("div", { class: "card error", role: "alert", "data-error": "" },
    h("strong", {}, err.step ? `Step ${err.step} failed` : "The run failed"),
    h("pre", {}, err.message),
    place ? h("div", { class: "where" }, `${place.file}:${place.line}:${place.column}`) : null,
    place && place.source ? h("pre", {}, `${String(place.line).padStart(4)} | ${place.source}`) : null);
}

// Citations as `answer.extract`/`answer.verify` give them: each opens onto
// the lines it quotes, with the note's path and line numbers.
function isCitations(v) {
  return Array.isArray(v) && v.length > 0 &&
    v.every((c) => c && typeof c === "object" && typeof c.path === "string" && "quote" in c);
}

function citationsView(list) {
  return h("ol", { class: "citations", "data-citations": "" }, list.map((c) =>
    h("li", { "data-citation": c.id || "" },
      h("details", {},
        h("summary", {}, h("code", {}, c.path), c.lines ? ` lines ${c.lines}` : ""),
        h("blockquote", { "data-quote": "" }, h("pre", {}, String(c.quote || "")))))));
}

function outputsView(outputs) {
  if (outputs === null || outputs === undefined) return h("p", { class: "muted" }, "None yet.");
  if (typeof outputs === "object" && !Array.isArray(outputs)) {
    return h("dl", {}, Object.entries(outputs).map(([k, v]) => [
      h("dt", {}, h("strong", {}, k)),
      h("dd", { "data-output": k },
        typeof v === "string" ? h("pre", {}, v) : isCitations(v) ? citationsView(v) : h("pre", {}, json(v))),
    ]));
  }
  return h("pre", {}, json(outputs));
}

async function runPage(id) {
  let stream = null;
  let reload = null;
  const controller = new AbortController();
  leave.push(() => controller.abort());
  leave.push(() => clearTimeout(reload));
  const liveLine = h("p", { class: "live", "aria-live": "polite" });

  async function retry(from) {
    try {
      const q = from ? `?from=${encodeURIComponent(from)}` : "";
      const r = await api(`/runs/${id}/retry${q}`, { method: "POST" });
      say("Retry started");
      location.hash = `#/runs/${r.run_id}`;
    } catch (err) {
      main.prepend(problem(err));
    }
  }
  async function cancel() {
    try {
      await api(`/runs/${id}/cancel`, { method: "POST" });
      say("Cancelling");
      liveLine.textContent = "Cancelling…";
    } catch (err) {
      main.prepend(problem(err));
    }
  }
  async function pause() {
    try {
      await api(`/runs/${id}/pause`, { method: "POST" });
      say("Pausing");
      liveLine.textContent = "Pausing before the next step…";
    } catch (err) {
      main.prepend(problem(err));
    }
  }
  async function render() {
    const run = await api(`/runs/${id}`);
    const going = run.status === "queued" || run.status === "running";
    const actions = h("div", { class: "row" },
      run.cancellable && going ? h("button", { class: "secondary", "data-action": "pause", on: { click: pause } }, "Pause") : null,
      run.status === "waiting" ? h("a", { href: "#/waiting", "data-action": "answer" }, "Answer or resume it") : null,
      run.cancellable ? h("button", { class: "danger", "data-action": "cancel", on: { click: cancel } }, "Cancel run") : null,
      run.retry_from && run.retry_from.length ? h("button", { class: "secondary", "data-action": "retry", on: { click: () => retry(null) } }, "Retry") : null);
    page(`Run ${short(run.run_id)}`,
      h("div", { class: "row" }, badge(run.status),
        h("a", { href: `#/workflows/${encodeURIComponent(run.workflow)}` }, run.workflow),
        h("span", { class: "muted" }, `started ${when(run.created_at)} by ${run.trigger || "?"}`),
        run.duration_ms ? h("span", { class: "muted" }, ms(run.duration_ms)) : null,
        run.usage ? h("span", { class: "muted", "data-run-usage": "" }, `spent ${spent(run.usage)}`) : null,
        run.retry_of ? h("span", {}, "retry of ", h("a", { href: `#/runs/${run.retry_of}` }, short(run.retry_of))) : null),
      h("p", { class: "muted" }, h("code", {}, run.run_id)),
      actions, liveLine,
      errorBox(run.error, run.status),
      h("h2", {}, "Outputs"), h("div", { class: "card", "data-outputs": "" }, outputsView(run.outputs)),
      h("h2", {}, "Steps"),
      h("div", { class: "card" }, run.steps && run.steps.length
        ? h("ol", { class: "timeline", "aria-label": "Steps" }, run.steps.map((s) => stepNode(s, run.retry_from || [], retry)))
        : h("p", { class: "muted" }, going ? "Waiting for the first step…" : "No steps ran.")),
      h("h2", {}, "Inputs"), h("pre", {}, json(run.inputs || {})),
      run.logs && run.logs.length
        ? [h("h2", {}, "Logs"), h("pre", { class: "logs" }, run.logs.map((l) => `[${l.level}] ${l.step}: ${l.message}`).join("\n"))]
        : null);
    if (going && !stream) follow();
    if (!going) {
      liveLine.textContent = "";
      say(`Run ${run.status}`);
    }
    return run;
  }
  function later() {
    clearTimeout(reload);
    reload = setTimeout(() => render().catch(() => {}), 250);
  }
  // Live progress: the run's event stream (SSE), read with fetch so the
  // token header goes with it; each event re-reads the run.
  async function follow() {
    stream = true;
    try {
      const headers = token() ? { Authorization: `Bearer ${token()}` } : {};
      const r = await fetch(`/runs/${id}/events`, { headers, signal: controller.signal });
      if (!r.ok || !r.body) throw new Error(`HTTP ${r.status}`);
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const chunk = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = chunk.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          if (!data) continue;
          const ev = JSON.parse(data);
          if (ev.event === "step_started") liveLine.textContent = `Running ${ev.name}…`;
          later();
        }
      }
    } catch (_) {
      // The stream is gone (the run is not in this server's memory, or
      // the page changed): fall back to polling.
      if (!controller.signal.aborted) every(1500, () => render().catch(() => {}));
      return;
    }
    later();
  }
  await render();
}

// ---------- waiting for you ----------

// A wait's fields as inputs: `choices` are an input's `enum`.
function asInput(f) {
  return Object.assign({}, f, { enum: f.choices || null });
}

function waitCard(w, done) {
  const inputs = w.fields.map(asInput);
  const form = h("form", { class: "inputs", "aria-label": `Answer ${w.title || w.step_name}`, "data-wait": `${w.run_id}/${w.step}` },
    inputs.map(field));
  const status = h("div", { role: "status" });
  let decision = null;
  const buttons = [];
  if (w.mode === "approval") {
    form.append(h("div", { class: "field" }, h("label", { for: `c-${w.run_id}` }, "Comment"),
      h("textarea", { id: `c-${w.run_id}`, name: "comment" })));
    for (const [value, text, style] of [["approve", "Approve", ""], ["reject", "Reject", "danger"]]) {
      const b = h("button", { type: "submit", "data-decision": value, class: style || null }, text);
      b.addEventListener("click", () => { decision = value; });
      buttons.push(b);
    }
  } else {
    buttons.push(h("button", { type: "submit" }, w.mode === "pause" ? "Resume" : "Send"));
  }
  form.append(h("div", { class: "row" }, ...buttons, status));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const values = readForm(form, inputs);
    if (!values) return;
    if (w.mode === "approval") {
      values.decision = decision;
      const c = form.elements.comment.value;
      if (c) values.comment = c;
    }
    for (const b of buttons) b.disabled = true;
    status.replaceChildren("Sending…");
    try {
      const r = await api(w.answer, { method: "POST", json: values, headers: { "X-Marktoflow-Console": "1" } });
      say(r.status === "counted" ? "Approval counted" : "Answered");
      status.replaceChildren(r.status === "counted" ? `Counted: ${r.approvals} of ${r.needed}` : "Answered: the run goes on.");
      done();
    } catch (err) {
      for (const b of buttons) b.disabled = false;
      status.replaceChildren(problem(err));
      for (const f of (err.body && err.body.fields) || []) {
        const p = form.querySelector(`#in-${CSS.escape(f.field)}-problem`);
        if (p) p.textContent = f.message;
      }
    }
  });
  return h("div", { class: "card", "data-waiting": w.run_id },
    h("h2", {}, w.title || w.step_name),
    h("p", { class: "muted" }, w.workflow, " · ", h("a", { href: `#/runs/${w.run_id}` }, `run ${short(w.run_id)}`),
      " · waiting since ", when(w.created_at), w.deadline ? [" · expires ", when(w.deadline)] : "",
      w.mode === "approval" && w.approvals > 1 ? ` · ${w.votes.length} of ${w.approvals} approvals` : ""),
    w.prompt ? h("p", { class: "description" }, w.prompt) : null,
    form);
}

async function waitingPage() {
  async function render() {
    const { waits } = await api("/waits");
    page("Waiting for you",
      waits.length ? waits.map((w) => waitCard(w, () => setTimeout(() => render().catch(() => {}), 800)))
        : h("p", { class: "muted" }, "No run waits for an answer."));
  }
  await render();
}

// ---------- router ----------

async function health() {
  try {
    const r = await fetch("/health");
    const j = await r.json();
    document.getElementById("health").textContent = `${j.status} · ${j.running} running · ${j.queued} queued`;
  } catch (_) {
    document.getElementById("health").textContent = "server unreachable";
  }
}

async function route() {
  for (const f of leave) f();
  leave = [];
  const hash = location.hash.replace(/^#/, "") || "/workflows";
  const [path, query] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === parts[0]) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    if (parts[0] === "runs" && parts[1]) await runPage(parts[1]);
    else if (parts[0] === "runs") await runsPage(new URLSearchParams(query || ""));
    else if (parts[0] === "workflows" && parts[1]) await workflowPage(parts[1]);
    else if (parts[0] === "waiting") await waitingPage();
    else await workflowsPage();
  } catch (err) {
    page("Something went wrong", problem(err));
  }
  main.focus({ preventScroll: true });
}

window.addEventListener("hashchange", route);
health();
setInterval(() => {
  if (!document.hidden) health();
}, 5000);
route();
