// Drives the run console in headless Chromium with Playwright (npm
// `playwright-core`, Debian's `chromium`), as a person would: start the
// flagship from its form, watch runs live, open them, retry from a step,
// cancel a slow run; screenshots go to SHOTS. Exits non-zero on the first
// failed expectation, printing what it saw.
//
// Environment: BASE (http://127.0.0.1:PORT), MODULES (a node_modules with
// playwright-core), CHROMIUM (the browser), SHOTS (a folder), FLAG (a file
// the flaky workflow waits for; this script creates it), WATCHED (a folder
// the server follows with `--watch`; this script writes workflows into it).
import { createRequire } from "module";
import fs from "fs";
import os from "os";
import path from "path";

const { BASE, MODULES, CHROMIUM, SHOTS, FLAG, WATCHED } = process.env;
const require = createRequire(path.join(MODULES, "noop.js"));
const { chromium } = require("playwright-core");

const errors = [];
const step = (what) => console.log(`· ${what}`);
function expect(cond, what) {
  if (!cond) throw new Error(`expected: ${what}`);
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "marktoflow-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM,
  headless: true,
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
  ],
  viewport: { width: 1280, height: 900 },
});
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(30000);
page.on("console", (m) => {
  if (m.type() === "error") errors.push(`console: ${m.text()}`);
});
page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
const runStatus = () => page.locator("main .row .badge").first().getAttribute("data-status");
async function waitStatus(want, timeout = 60000) {
  await page.waitForFunction(
    (w) => {
      const b = document.querySelector("main .row .badge");
      return b && w.includes(b.dataset.status);
    },
    want, { timeout });
  return runStatus();
}
const runId = () => decodeURIComponent(new URL(page.url()).hash.split("/")[2] || "");

try {
  // The workflows page lists what the server serves.
  step("workflows page");
  await page.goto(`${BASE}/`);
  await page.waitForSelector("main table");
  expect(page.url().endsWith("/console#/workflows") || page.url().endsWith("/console"), `redirected to the console, at ${page.url()}`);
  const names = await page.locator("main tbody tr td:first-child").allTextContents();
  for (const n of ["LifeOS Retrieval Engine (indexed)", "Slow", "Flaky"]) expect(names.includes(n), `${n} in ${names}`);
  await shot("01-workflows");

  // The flagship's form, generated from its inputs, starts a run.
  step("flagship form");
  await page.getByRole("link", { name: "LifeOS Retrieval Engine" }).click();
  await page.waitForSelector("form.inputs");
  const labels = await page.locator("form.inputs label").allTextContents();
  expect(labels.some((l) => l.startsWith("query") && l.includes("*")), `query is required: ${labels}`);
  // Every control has a label (accessible names).
  const unlabelled = await page.$$eval("form.inputs input, form.inputs select, form.inputs textarea",
    (els) => els.filter((e) => !e.labels || e.labels.length === 0).map((e) => e.name));
  expect(unlabelled.length === 0, `every input has a label: ${unlabelled}`);
  const graph = await page.locator(".graph img").evaluate((img) => img.decode().then(() => img.naturalWidth));
  expect(graph > 100, `the graph is drawn (${graph}px wide)`);
  await page.getByLabel("query").fill("What is the API key for Apollo?");
  // Phrased by the (fake) model: the run has a model call to show.
  await page.getByLabel("phrase").check();
  await shot("02-flagship-form");
  // Keyboard only: Enter in the field submits the form.
  await page.getByLabel("query").press("Enter");
  await page.waitForURL(/#\/runs\/[0-9a-f-]+$/);
  const flagship = runId();
  expect(await waitStatus(["completed", "failed"]) === "completed", "the flagship run completes");
  const answer = await page.locator('[data-output="answer"]').textContent();
  expect(answer.includes("APOLLO-KEY-7f3a-EXAMPLE"), `the answer is shown: ${answer}`);
  // Each citation opens onto the lines it quotes, with path and line numbers.
  const cites = page.locator('[data-output="citations"] [data-citation]');
  expect(await cites.count() >= 1, "the citations are listed");
  const cited = await cites.first().locator("summary").textContent();
  expect(/\.md lines \d+(-\d+)?$/.test(cited), `a citation names its note and lines: ${cited}`);
  await cites.first().locator("summary").click();
  const quote = await cites.first().locator("[data-quote]").textContent();
  expect(quote.includes("APOLLO-KEY-7f3a-EXAMPLE"), `the cited lines are quoted: ${quote}`);
  const steps = await page.locator(".timeline > li[data-step]").count();
  expect(steps >= 3, `the steps are listed (${steps})`);
  // What its model call spent: on the run, and on the agent step.
  const spentRun = await page.locator("[data-run-usage]").textContent();
  expect(/^spent .*\d+ in \/ \d+ out tokens/.test(spentRun), `the run's spend is shown: ${spentRun}`);
  const spentStep = await page.locator("[data-step-usage]").first().textContent();
  expect(/\d+ in \/ \d+ out tokens/.test(spentStep), `the agent step's spend is shown: ${spentStep}`);
  expect(await page.getByText("What is the API key for Apollo?").count() > 0, "the inputs are shown");
  await shot("03-flagship-run");

  // A failing run shows its error where it is written; retried from the
  // failed step once its cause is fixed, it completes, reusing the rest.
  step("flaky run, error and retry from a step");
  await page.goto(`${BASE}/console#/workflows/console-flaky`);
  await page.getByLabel("flag").fill(FLAG);
  await page.getByRole("button", { name: "Start run" }).click();
  await page.waitForURL(/#\/runs\/[0-9a-f-]+$/);
  const failed = runId();
  expect(await waitStatus(["completed", "failed"]) === "failed", "the flaky run fails first");
  const where = await page.locator("[data-error] .where").textContent();
  expect(/flaky\.md:\d+:\d+$/.test(where), `the error says where: ${where}`);
  const src = await page.locator("[data-error] pre").last().textContent();
  expect(src.includes("|"), `the source line is shown: ${src}`);
  const iterations = await page.locator('li[data-step="each_item"] li[data-step="shout"]').allTextContents();
  expect(iterations.length === 3 && iterations[2].includes("iteration 3"), `loop iterations are told apart: ${iterations}`);
  await shot("04-failed-run");
  fs.writeFileSync(FLAG, "ok\n");
  await page.locator('button[data-retry="check"]').click();
  await page.waitForURL((u) => u.hash.startsWith("#/runs/") && !u.hash.endsWith(failed));
  expect(await waitStatus(["completed", "failed"]) === "completed", "the retry completes");
  expect(await page.getByText("reused from the earlier run").count() >= 2, "steps before `check` are reused");
  expect((await page.locator('[data-output="result"]').textContent()).includes("checked: ok"), "the retry's output");
  expect(await page.getByRole("link", { name: failed.slice(-8) }).count() === 1, "the retry links to the run it retries");
  await shot("05-retried-run");

  // A slow run: live progress over the event stream, then cancelled.
  step("slow run, live, cancelled");
  await page.goto(`${BASE}/console#/workflows/console-slow`);
  await page.getByRole("button", { name: "Start run" }).click();
  await page.waitForURL(/#\/runs\/[0-9a-f-]+$/);
  await waitStatus(["running"]);
  await page.waitForSelector('li[data-step="busy"][data-step-status="running"]');
  await shot("06-running");
  await page.getByRole("button", { name: "Cancel run" }).click();
  expect(await waitStatus(["cancelled", "failed", "completed"], 20000) === "cancelled", "the run is cancelled");
  // Said as a cancellation, not as a failure in red.
  await page.waitForSelector("[data-cancelled]");
  expect(await page.locator("[data-error]").count() === 0, "a cancelled run shows no error box");

  // A webhook workflow starts from a pasted request body too.
  step("slow run from a request body");
  await page.goto(`${BASE}/console#/workflows/console-slow`);
  await page.getByLabel("Request body (JSON)").fill('{"seconds": 1}');
  await page.getByRole("button", { name: "Start from this body" }).click();
  await page.waitForURL(/#\/runs\/[0-9a-f-]+$/);
  expect(await waitStatus(["completed", "failed"]) === "completed", "the run from a body completes");
  expect(await page.getByText('"seconds": 1').count() > 0, "its input came from the body");

  // The workflows page shows each workflow's latest run.
  step("workflows page, latest runs");
  await page.goto(`${BASE}/console#/workflows`);
  await page.waitForSelector("main tbody tr a[data-last-run]");
  const slowLast = await page.locator("main tbody tr", { hasText: "Slow" }).locator("[data-last-run]").getAttribute("data-last-run");
  expect(slowLast === "completed", `the slow workflow's latest run is the one from a body: ${slowLast}`);
  const flakyLast = await page.locator("main tbody tr", { hasText: "Flaky" }).locator("[data-last-run]").getAttribute("data-last-run");
  expect(flakyLast === "completed", `the flaky workflow's latest run is its retry: ${flakyLast}`);

  // The runs list: filters and live updates.
  step("runs list");
  await page.goto(`${BASE}/console#/runs`);
  await page.waitForSelector("main tbody tr");
  const rows = await page.locator("main tbody tr").count();
  expect(rows >= 4, `every run is listed (${rows})`);
  await page.getByLabel("Status").selectOption("failed");
  await page.waitForFunction(() => location.hash.includes("status=failed"));
  await page.waitForFunction(() => {
    const b = [...document.querySelectorAll("main tbody .badge")].map((e) => e.dataset.status);
    return b.length > 0 && b.every((s) => s === "failed");
  });
  expect((await page.locator("main tbody tr").count()) === 1, "only the failed run");
  await shot("07-runs-failed");
  // Runs told apart by their inputs, and found by them.
  await page.getByLabel("Status").selectOption("");
  await page.waitForFunction(() => !location.hash.includes("status="));
  await page.getByLabel("Search").fill("this text is in no run");
  await page.getByLabel("Search").press("Enter");
  await page.waitForFunction(() => location.hash.includes("q="));
  await page.waitForSelector("main p.muted >> text=No runs match.");
  await page.getByLabel("Search").fill("");
  await page.getByLabel("Search").press("Enter");
  await page.waitForFunction(() => !location.hash.includes("q="));
  await page.waitForFunction(() => [...document.querySelectorAll("main td[data-inputs]")].some((td) => td.textContent.length > 0));
  // A run started elsewhere (here: the API) appears without reloading.
  await page.getByLabel("Status").selectOption("");
  await page.waitForFunction(() => !location.hash.includes("status="));
  await page.waitForFunction(() => document.querySelectorAll("main tbody tr").length > 1);
  const started = await (await fetch(`${BASE}/workflows/console-slow/runs`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ seconds: 1 }),
  })).json();
  // Found without navigating: the list refreshes itself.
  await page.waitForSelector(`tr[data-run="${started.run_id}"]`, { timeout: 10000 });
  expect(page.url().endsWith("#/runs"), "still on the same page");

  // `serve --watch`: a file that does not load is listed with its error;
  // fixed, it is served.
  step("a broken file, then fixed");
  await page.goto(`${BASE}/console#/workflows`);
  fs.writeFileSync(path.join(WATCHED, "draft.md"), "---\nworkflow: {id: draft, name: Draft}\n---\n\n```yaml\naction: core.nope\n```\n");
  await page.waitForSelector("[data-broken]", { timeout: 15000 });
  const broken = await page.locator("[data-broken]").textContent();
  expect(broken.includes("draft.md:6:9") && broken.includes("core.nope"), `the error is shown: ${broken}`);
  await shot("08-broken-file");
  fs.writeFileSync(path.join(WATCHED, "draft.md"), "---\nworkflow: {id: draft, name: Draft}\n---\n\n```yaml\naction: core.set\ninputs: {ok: true}\n```\n");
  await page.waitForSelector('a[href="#/workflows/draft"]', { timeout: 15000 });
  expect(await page.locator("[data-broken]").count() === 0, "the error is gone once fixed");

  // A run that waits for an approval: answered from "Waiting for you".
  step("waiting for you: approve a refund");
  const refund = await page.evaluate(async (base) => {
    const r = await fetch(`${base}/workflows/refund-approval/runs`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ amount: 320, customer: "Grace" }),
    });
    return (await r.json()).run_id;
  }, BASE);
  await page.goto(`${BASE}/console#/runs/${refund}`);
  expect(await waitStatus(["waiting"]) === "waiting", "the run waits");
  await page.click('a[data-nav="waiting"]');
  const card = page.locator(`[data-waiting="${refund}"]`);
  await card.waitFor();
  expect((await card.locator("h2").textContent()) === "Refund 320 EUR to Grace?", "the wait's title");
  // The form keeps a field's bounds (the browser refuses -1 before sending).
  expect(await card.locator('input[name="refund"]').getAttribute("min") === "0", "the field's bound");
  await card.locator('input[name="refund"]').fill("160");
  await card.locator('textarea[name="comment"]').fill("half");
  await shot("11-waiting");
  await card.locator('button[data-decision="approve"]').click();
  await card.locator('[role="status"]', { hasText: "Answered" }).waitFor();
  await page.goto(`${BASE}/console#/runs/${refund}`);
  expect(await waitStatus(["completed"]) === "completed", "the answered run completes");
  const outputs = await page.locator("main").textContent();
  expect(outputs.includes("approved") && outputs.includes("160"), `its outputs: ${outputs.slice(0, 400)}`);

  // A slow run paused from its page, then resumed from "Waiting for you".
  step("pause a running run, resume it");
  const slowRun = await page.evaluate(async (base) => {
    const r = await fetch(`${base}/workflows/long-job/runs`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: "{}",
    });
    return (await r.json()).run_id;
  }, BASE);
  await page.goto(`${BASE}/console#/runs/${slowRun}`);
  await page.click('button[data-action="pause"]');
  expect(await waitStatus(["waiting"]) === "waiting", "the run pauses");
  await page.click('a[data-action="answer"]');
  const paused = page.locator(`[data-waiting="${slowRun}"]`);
  await paused.waitFor();
  await paused.locator("button", { hasText: "Resume" }).click();
  await paused.locator('[role="status"]', { hasText: "Answered" }).waitFor();
  await page.goto(`${BASE}/console#/runs/${slowRun}`);
  expect(await waitStatus(["completed"]) === "completed", "the resumed run completes");

  // Dark mode and a phone-sized screen.
  step("dark mode, phone");
  await page.emulateMedia({ colorScheme: "dark" });
  await page.goto(`${BASE}/console#/runs/${flagship}`);
  await waitStatus(["completed"]);
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  expect(bg !== "rgb(247, 248, 250)", `the dark scheme applies (${bg})`);
  await shot("09-dark");
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await waitStatus(["completed"]);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow <= 1, `no sideways scrolling on a phone (${overflow}px)`);
  await shot("10-phone");

  expect(errors.length === 0, `no console errors: ${errors.join("; ")}`);
  console.log("console: all checks passed");
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
} catch (e) {
  console.log(`FAILED: ${e.message}`);
  console.log(`at ${page.url()}`);
  if (errors.length) console.log(`console errors: ${errors.join("; ")}`);
  try {
    await shot("failure");
    console.log((await page.locator("main").innerText()).slice(0, 3000));
  } catch (_) {}
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
  process.exit(1);
}
