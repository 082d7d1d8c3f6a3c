//! `script.execute` end to end: real boa in real worker processes.
//!
//! This binary is its own worker: started with `__script-worker` it calls
//! `worker_main()`, as the runner's binary does. Prints `N passed, N failed`.

use marktoflow_steps::agent::{AgentHub, AgentOverrides};
use marktoflow_steps::core::sandbox::Sandbox;
use marktoflow_steps::core::{
    action::{Action, Call, Capabilities},
    error::ActionError,
    signals::{Cancel, LogLevel, LogLine},
};
use marktoflow_steps::script::{
    worker_main, ScriptAction, ScriptError, ScriptHost, ScriptJob, ScriptLimits, WORKER_ARG,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Suite {
    host: Arc<ScriptHost>,
    root: PathBuf,
    sandbox: Sandbox,
    passed: usize,
    failed: usize,
}

type Outcome = (Result<Value, ScriptError>, Vec<LogLine>);

impl Suite {
    async fn run_with(&self, code: &str, context: Value, timeout: Option<Duration>) -> Outcome {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = {
            let logs = logs.clone();
            move |l: LogLine| logs.lock().unwrap().push(l)
        };
        let job = ScriptJob {
            globals: Default::default(),
            code: code.to_string(),
            context,
            sandbox: self.sandbox.clone(),
            timeout,
        };
        let r = self.host.run(job, &sink, &Cancel::default()).await;
        let logs = logs.lock().unwrap().clone();
        (r, logs)
    }

    async fn run(&self, code: &str) -> Result<Value, ScriptError> {
        self.run_with(code, json!({}), None).await.0
    }

    fn check(&mut self, name: &str, ok: bool, detail: impl std::fmt::Debug) {
        if ok {
            self.passed += 1;
            println!("ok   {name}");
        } else {
            self.failed += 1;
            println!("FAIL {name}: {detail:?}");
        }
    }

    /// The script's value must equal `want`.
    async fn eq(&mut self, name: &str, code: &str, want: Value) {
        let got = self.run(code).await;
        let ok = got.as_ref() == Ok(&want);
        self.check(name, ok, (got, want));
    }

    /// The script must fail with exactly this message.
    async fn err(&mut self, name: &str, code: &str, want: &str) {
        let got = self.run(code).await;
        let ok = matches!(&got, Err(e) if e.to_string() == want);
        self.check(name, ok, (got.map_err(|e| e.to_string()), want));
    }
}

fn setup_tree(base: &Path) -> PathBuf {
    let _ = std::fs::remove_dir_all(base);
    let root = base.join("root");
    std::fs::create_dir_all(root.join("notes/sub")).unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::write(root.join("notes/b.md"), "# Beta\nsecond note\n").unwrap();
    std::fs::write(
        root.join("notes/a.md"),
        "# Alpha\nfirst note about Apollo\n",
    )
    .unwrap();
    std::fs::write(
        root.join("notes/sub/c.md"),
        "# Gamma\nApollo deadline is Friday\n",
    )
    .unwrap();
    std::fs::write(root.join("notes/Z.txt"), "zzz").unwrap();
    std::fs::write(base.join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink(base.join("secret.txt"), root.join("link.txt")).unwrap();
    root
}

const SEED_STEP2: &str = r#"const response = context.query_analysis_raw;
let analysis;

try {
  const jsonMatch = response.match(/```json\s*([\s\S]*?)\s*```/);
  if (jsonMatch) {
    analysis = JSON.parse(jsonMatch[1]);
  } else {
    analysis = JSON.parse(response);
  }
} catch (e) {
  analysis = {
    search_terms: context.inputs.query.split(' ').filter(t => t.length > 2),
    entities: [],
    query_type: 'factual'
  };
}

return analysis;
"#;

const SEED_STEP3: &str = r#"const fs = require('fs');
const path = require('path');

const basePath = context.inputs.knowledge_base;
const scope = context.inputs.search_scope;
const maxResults = context.inputs.max_results;
const analysis = context.query_analysis;

// Build search paths based on scope
let searchPaths = [basePath];
if (scope === 'work') {
  searchPaths = [path.join(basePath, 'Work')];
} else if (scope === 'personal') {
  searchPaths = [path.join(basePath, 'Personal')];
} else if (scope !== 'all' && scope) {
  searchPaths = [path.join(basePath, scope)];
}

// If expected location is known, prioritize it
if (analysis.expected_location) {
  searchPaths.unshift(path.join(basePath, analysis.expected_location));
}

const results = [];
const searchTerms = analysis.search_terms.map(t => t.toLowerCase());
const entities = analysis.entities.map(e => e.toLowerCase());

function searchFile(filePath) {
  try {
    const content = fs.readFileSync(filePath, 'utf8');
    const contentLower = content.toLowerCase();

    // Calculate relevance score
    let score = 0;

    // Check for search terms
    for (const term of searchTerms) {
      if (contentLower.includes(term)) {
        score += 10;
        // Bonus for title match
        const lines = content.split('\n');
        const firstLine = lines[0].toLowerCase();
        if (firstLine.includes(term)) {
          score += 20;
        }
      }
    }

    // Check for entity matches
    for (const entity of entities) {
      if (contentLower.includes(entity)) {
        score += 15;
      }
    }

    // Path relevance for expected location
    if (analysis.expected_location) {
      const relativePath = path.relative(basePath, filePath);
      if (relativePath.startsWith(analysis.expected_location)) {
        score += 25;
      }
    }

    if (score > 0) {
      return {
        path: path.relative(basePath, filePath),
        score,
        content: content.substring(0, 2000), // Limit content size
        preview: content.substring(0, 200).replace(/\n/g, ' ')
      };
    }
  } catch (e) {
    // Skip unreadable files
  }
  return null;
}

function searchDirectory(dirPath) {
  if (results.length >= maxResults * 2) return;

  try {
    const items = fs.readdirSync(dirPath);
    for (const item of items) {
      const fullPath = path.join(dirPath, item);
      const stat = fs.statSync(fullPath);

      if (stat.isDirectory()) {
        searchDirectory(fullPath);
      } else if (item.endsWith('.md')) {
        const result = searchFile(fullPath);
        if (result) {
          results.push(result);
        }
      }
    }
  } catch (e) {
    // Skip inaccessible directories
  }
}

for (const searchPath of searchPaths) {
  if (fs.existsSync(searchPath)) {
    searchDirectory(searchPath);
  }
}

// Sort by score and take top results
results.sort((a, b) => b.score - a.score);
const topResults = results.slice(0, maxResults);

return {
  found: topResults.length > 0,
  count: topResults.length,
  results: topResults
};
"#;

const SEED_STEP4B: &str = r#"const answer = context.ai_answer;
const sources = context.search_results.results.map(r => r.path);

// Parse confidence
let confidence = 70;
if (answer.includes('Confidence: high')) {
  confidence = 90;
} else if (answer.includes('Confidence: low')) {
  confidence = 40;
}

// Clean up answer format
let cleanAnswer = answer;
if (answer.includes('Answer:')) {
  cleanAnswer = answer.split('Sources:')[0].replace('Answer:', '').trim();
}

return {
  answer: cleanAnswer,
  sources: sources,
  confidence: confidence,
  raw_response: answer
};
"#;

const SEED_STEP4_ELSE: &str = r#"return {
  answer: "I couldn't find any information about that in your knowledge base. Try rephrasing your question or adding more context.",
  sources: [],
  confidence: 0
};
"#;

const SEED_STEP5: &str = r#"return {
  answer: context.final_answer.answer,
  sources: context.final_answer.sources,
  confidence: context.final_answer.confidence
};
"#;

async fn semantics(s: &mut Suite) {
    s.eq("number", "return 1 + 1;", json!(2)).await;
    s.eq("string", "return 'héllo';", json!("héllo")).await;
    s.eq("float", "return 0.5;", json!(0.5)).await;
    s.eq(
        "object",
        "return {a: [1, null, true], b: {c: 'd'}};",
        json!({"a": [1, null, true], "b": {"c": "d"}}),
    )
    .await;
    s.eq("no return is null", "const x = 1;", Value::Null).await;
    s.eq("undefined is null", "return undefined;", Value::Null)
        .await;
    s.eq("NaN is null", "return NaN;", Value::Null).await;
    s.eq(
        "functions dropped",
        "return {a: 1, f() {}, u: undefined};",
        json!({"a": 1}),
    )
    .await;
    s.eq(
        "date as ISO",
        "return {d: new Date(0)};",
        json!({"d": "1970-01-01T00:00:00.000Z"}),
    )
    .await;
    s.eq(
        "await",
        "const v = await Promise.resolve(41); return v + 1;",
        json!(42),
    )
    .await;
    s.eq(
        "await timers",
        "const t = Date.now(); await new Promise(r => setTimeout(r, 50)); return Date.now() - t >= 45;",
        json!(true),
    )
    .await;
    s.eq(
        "timer order",
        "const o = []; setTimeout(() => o.push(2), 20); setTimeout(() => o.push(1), 5); \
         queueMicrotask(() => o.push(0)); await new Promise(r => setTimeout(r, 40)); return o;",
        json!([0, 1, 2]),
    )
    .await;
    s.eq(
        "interval",
        "let n = 0; await new Promise(r => { const id = setInterval(() => { if (++n === 3) { clearInterval(id); r(); } }, 1); }); return n;",
        json!(3),
    )
    .await;
    s.eq(
        "top-level comment last",
        "return 3 // trailing comment",
        json!(3),
    )
    .await;
    let (r, _) = s
        .run_with("return context.a.b * 2;", json!({"a": {"b": 21}}), None)
        .await;
    s.check("context global", r == Ok(json!(42)), r);
    s.eq(
        "standard builtins",
        "return [Math.max(1, 2), JSON.stringify({a: 1}), 'a-b'.split('-'), [3,1,2].sort()];",
        json!([2, "{\"a\":1}", ["a", "b"], [1, 2, 3]]),
    )
    .await;
    // String fast paths (see script/fast.rs) agree with Node.
    s.eq(
        "string fast paths",
        r#"return ["Hello World".includes("World"), "abc".includes("c", 3), "abc".includes(), "a undefined".includes(),
          "abc".indexOf("c"), "abc".indexOf("z"), "abcabc".indexOf("c", 3), "ÀÉÎ×Þß µ ÿ".toLowerCase(),
          "İSTANBUL ΑΒΓ".toLowerCase(), String.prototype.toLowerCase.call(5), "héllo wörld".includes("wö"),
          "héllo".indexOf("l"), "".includes(""), String.prototype.includes.call(123, "2"),
          "x".toLowerCase.name, "x".includes.length];"#,
        json!([true, false, false, true, 2, -1, 5, "àéî×þß µ ÿ", "i̇stanbul αβγ", "5", true, 2, true, true, "toLowerCase", 1]),
    )
    .await;
    s.err(
        "includes rejects a RegExp",
        "return 'abc'.includes(/b/);",
        "TypeError: First argument to String.prototype.includes must not be a regular expression",
    )
    .await;
    s.eq(
        "no process",
        "return [typeof process, typeof Buffer, typeof fetch];",
        json!(["undefined", "undefined", "undefined"]),
    )
    .await;

    s.err("throw Error", "throw new Error('boom');", "Error: boom")
        .await;
    // boa's wording differs from V8's ("x is not a function").
    s.err(
        "TypeError",
        "const x = 1; x();",
        "TypeError: not a callable function",
    )
    .await;
    let r = s.run("null.foo;").await;
    s.check(
        "TypeError on null",
        matches!(&r, Err(ScriptError::Thrown(m)) if m.starts_with("TypeError:")),
        r,
    );
    s.err("reject string", "await Promise.reject('nope');", "nope")
        .await;
    s.err(
        "async throw",
        "await null; throw new RangeError('r');",
        "RangeError: r",
    )
    .await;
    s.err("throw object", "throw {code: 1};", "{ code: 1 }")
        .await;
    s.err(
        "unknown module",
        "require('child_process');",
        "Error: Cannot find module 'child_process'",
    )
    .await;
    s.eq(
        "module error caught",
        "try { require('http'); } catch (e) { return [e.message, e.code]; }",
        json!(["Cannot find module 'http'", "MODULE_NOT_FOUND"]),
    )
    .await;
    let r = s.run("await new Promise(() => {});").await;
    s.check(
        "never settles",
        matches!(&r, Err(ScriptError::Thrown(m)) if m.contains("never")),
        r,
    );

    // Syntax errors: position relative to the code.
    let r = s.run("const a = 1;\nconst b = ;\nreturn a;").await;
    let ok = matches!(
        &r,
        Err(ScriptError::Compile {
            line: Some(2),
            column: Some(_),
            ..
        })
    ) && r
        .as_ref()
        .unwrap_err()
        .to_string()
        .starts_with("script compilation failed: ");
    s.check("syntax error line", ok, r);
    let r = s.run("let x = 1;\nif (x) {\n  return 1;\n").await;
    s.check(
        "unclosed block",
        matches!(&r, Err(ScriptError::Compile { line: Some(_), .. })),
        r,
    );
    let r = s.run("return 1 +* 2;").await;
    s.check(
        "syntax error line 1",
        matches!(&r, Err(ScriptError::Compile { line: Some(1), .. })),
        r,
    );

    // console, in order, with levels.
    let (r, logs) = s
        .run_with(
            "console.log('one', 2, {a: [1, 'x']}); console.info('%s is %d', 'n', 5); \
             console.warn('w'); console.error(new Error('e')); console.debug(null, undefined, true); \
             for (let i = 0; i < 5; i++) console.log(i); return 'done';",
            json!({}),
            None,
        )
        .await;
    let want: Vec<(LogLevel, &str)> = vec![
        (LogLevel::Info, "one 2 { a: [ 1, 'x' ] }"),
        (LogLevel::Info, "n is 5"),
        (LogLevel::Warn, "w"),
        (LogLevel::Error, "Error: e"),
        (LogLevel::Debug, "null undefined true"),
        (LogLevel::Info, "0"),
        (LogLevel::Info, "1"),
        (LogLevel::Info, "2"),
        (LogLevel::Info, "3"),
        (LogLevel::Info, "4"),
    ];
    let got: Vec<(LogLevel, &str)> = logs.iter().map(|l| (l.level, l.message.as_str())).collect();
    s.check(
        "console lines in order",
        r == Ok(json!("done")) && got == want,
        (r, got),
    );
}

async fn path_module(s: &mut Suite) {
    // Expected values printed by Node 20 (`path.posix`) for the same calls.
    let code = r#"const p = require('path');
return [
 p.join('a','../b','c/'), p.join('/a/b','../../..','x'), p.join('a','','b'), p.join(), p.join('..','a'), p.join('./LifeOS','Work'),
 p.normalize('/foo/bar//baz/asdf/quux/..'), p.normalize('./'), p.normalize(''), p.normalize('../../a/./b/'),
 p.relative('/a/b','/a/b/c/d.md'), p.relative('/data/orandea/test/aaa','/data/orandea/impl/bbb'), p.relative('/a/b','/a'), p.relative('/','/a/b'), p.relative('/a/bc','/a/b'),
 p.dirname('/a/b/'), p.dirname('a'), p.dirname('/'), p.dirname('a/b'),
 p.basename('/a/b/quux.html'), p.basename('/a/b/quux.html','.html'), p.basename('a/b/'), p.basename('aaa/bbb','b'), p.basename('file.md/','.md'),
 p.extname('index.html'), p.extname('index.coffee.md'), p.extname('index.'), p.extname('.index'), p.extname('.index.md'),
 p.isAbsolute('/x'), p.isAbsolute('x'), p.sep, p.delimiter,
 p.parse('/home/user/dir/file.txt'), p.format({dir:'/home/user/dir', base:'file.txt'}),
 p.resolve('/foo/bar','./baz'), p.resolve('/foo/bar','/tmp/file/'), p.posix === p, require('node:path') === p,
];"#;
    let want = json!([
        "b/c/", "/x", "a/b", ".", "../a", "LifeOS/Work",
        "/foo/bar/baz/asdf", "./", ".", "../../a/b/",
        "c/d.md", "../../impl/bbb", "..", "a/b", "../b",
        "/a", ".", "/", "a",
        "quux.html", "quux", "b", "bb", "file",
        ".html", ".md", ".", "", ".md",
        true, false, "/", ":",
        {"root": "/", "dir": "/home/user/dir", "base": "file.txt", "ext": ".txt", "name": "file"},
        "/home/user/dir/file.txt",
        "/foo/bar/baz", "/tmp/file", true, true
    ]);
    s.eq("path like node", code, want).await;
    let cwd = s.sandbox.cwd.to_string_lossy().into_owned();
    s.eq(
        "path.resolve uses sandbox cwd",
        "const p = require('path'); return [p.resolve('x/y'), p.relative('notes', 'notes/sub/c.md')];",
        json!([format!("{cwd}/x/y"), "sub/c.md"]),
    )
    .await;
    s.err(
        "path type error",
        "require('path').join('a', 5);",
        "TypeError: The \"path\" argument must be of type string. Received type number (5)",
    )
    .await;
}

async fn fs_module(s: &mut Suite) {
    s.eq(
        "readFileSync utf8",
        "return require('fs').readFileSync('notes/a.md', 'utf8');",
        json!("# Alpha\nfirst note about Apollo\n"),
    )
    .await;
    s.eq(
        "readFileSync no encoding is a string",
        "return require('fs').readFileSync('notes/a.md').length;",
        json!(32),
    )
    .await;
    s.eq(
        "readFileSync {encoding}",
        "return require('node:fs').readFileSync('notes/b.md', {encoding: 'utf8'});",
        json!("# Beta\nsecond note\n"),
    )
    .await;
    s.eq(
        "readFileSync base64",
        "return require('fs').readFileSync('notes/Z.txt', 'base64');",
        json!("enp6"),
    )
    .await;
    s.eq(
        "readdirSync sorted",
        "return require('fs').readdirSync('notes');",
        json!(["Z.txt", "a.md", "b.md", "sub"]),
    )
    .await;
    s.eq(
        "readdirSync withFileTypes",
        "return require('fs').readdirSync('notes', {withFileTypes: true}).map(d => [d.name, d.isFile(), d.isDirectory(), d.isSymbolicLink()]);",
        json!([["Z.txt", true, false, false], ["a.md", true, false, false], ["b.md", true, false, false], ["sub", false, true, false]]),
    )
    .await;
    s.eq(
        "readdirSync recursive",
        "return require('fs').readdirSync('notes', {recursive: true});",
        json!(["Z.txt", "a.md", "b.md", "sub", "sub/c.md"]),
    )
    .await;
    s.eq(
        "statSync",
        "const fs = require('fs'); const st = fs.statSync('notes/a.md'); const d = fs.statSync('notes');
         return [st.isFile(), st.isDirectory(), st.isSymbolicLink(), st.size, typeof st.mtimeMs, st.mtime instanceof Date,
                 Math.abs(st.mtime.getTime() - st.mtimeMs) < 1, st.birthtimeMs > 0, st.ctimeMs > 0, d.isDirectory()];",
        json!([true, false, false, 32, "number", true, true, true, true, true]),
    )
    .await;
    s.eq(
        "lstatSync sees the link",
        "const fs = require('fs'); return [fs.lstatSync('link.txt').isSymbolicLink(), fs.lstatSync('notes').isDirectory()];",
        json!([true, true]),
    )
    .await;
    s.eq(
        "existsSync",
        "const fs = require('fs'); return [fs.existsSync('notes/a.md'), fs.existsSync('nope.md'), fs.existsSync('/etc/passwd'), fs.existsSync('link.txt'), fs.existsSync()];",
        json!([true, false, false, false, false]),
    )
    .await;
    s.eq(
        "ENOENT shape",
        "try { require('fs').readFileSync('missing.md', 'utf8'); } catch (e) { return [String(e), e.code, e.errno, e.syscall, e.path]; }",
        json!(["Error: ENOENT: no such file or directory, open 'missing.md'", "ENOENT", -2, "open", "missing.md"]),
    )
    .await;
    s.eq(
        "stat ENOENT",
        "try { require('fs').statSync('nope'); } catch (e) { return [e.message, e.code, require('fs').statSync('nope', {throwIfNoEntry: false})]; }",
        json!(["ENOENT: no such file or directory, stat 'nope'", "ENOENT", null]),
    )
    .await;
    s.eq(
        "readdir ENOTDIR",
        "try { require('fs').readdirSync('notes/a.md'); } catch (e) { return e.code; }",
        json!("ENOTDIR"),
    )
    .await;
    s.eq(
        "write, append, read, mkdir",
        "const fs = require('fs');
         const made = fs.mkdirSync('out/x/y', {recursive: true});
         fs.writeFileSync('out/x/y/f.txt', 'hello');
         fs.appendFileSync('out/x/y/f.txt', ' world');
         fs.writeFileSync('out/obj.txt', {a: 1});
         fs.writeFileSync('out/n.txt', 42);
         let again; try { fs.mkdirSync('out/x'); } catch (e) { again = e.code; }
         return [made.endsWith('/out/x'), fs.readFileSync('out/x/y/f.txt', 'utf8'), fs.readFileSync('out/obj.txt', 'utf8'),
                 fs.readFileSync('out/n.txt', 'utf8'), again, fs.mkdirSync('out/x', {recursive: true})];",
        json!([true, "hello world", "[object Object]", "42", "EEXIST", null]),
    )
    .await;
    s.eq(
        "rename, copy, unlink, rm",
        "const fs = require('fs');
         fs.writeFileSync('out/r1.txt', 'r');
         fs.renameSync('out/r1.txt', 'out/r2.txt');
         fs.copyFileSync('notes/a.md', 'out/copy.md');
         const c = fs.readFileSync('out/copy.md', 'utf8').startsWith('# Alpha');
         fs.unlinkSync('out/r2.txt');
         fs.rmSync('out/x', {recursive: true});
         fs.rmSync('out/none', {force: true});
         return [c, fs.existsSync('out/r2.txt'), fs.existsSync('out/x')];",
        json!([true, false, false]),
    )
    .await;
    s.eq(
        "fs.promises",
        "const fsp = require('fs/promises'); const t = await fsp.readFile('notes/b.md', 'utf8');
         let code; try { await require('fs').promises.readFile('nope'); } catch (e) { code = e.code; }
         return [t.length, code];",
        json!([19, "ENOENT"]),
    )
    .await;
}

async fn sandbox_tests(s: &mut Suite) {
    let r = s
        .run("return require('fs').readFileSync('/etc/passwd', 'utf8');")
        .await;
    let ok = matches!(&r, Err(ScriptError::Thrown(m)) if m.starts_with("Error: EACCES: access denied: `/etc/passwd` is outside the allowed read roots"));
    s.check("read /etc/passwd refused", ok, r);
    s.eq(
        "denial has code EACCES",
        "try { require('fs').readFileSync('/etc/passwd'); } catch (e) { return [e.code, e.syscall, e.path]; }",
        json!(["EACCES", "open", "/etc/passwd"]),
    )
    .await;
    s.eq(
        "../ escape refused",
        "try { require('fs').readFileSync('../secret.txt', 'utf8'); return 'read!'; } catch (e) { return e.code; }",
        json!("EACCES"),
    )
    .await;
    s.eq(
        "notes/../../ escape refused",
        "try { require('fs').readFileSync('notes/../../secret.txt', 'utf8'); return 'read!'; } catch (e) { return e.code; }",
        json!("EACCES"),
    )
    .await;
    s.eq(
        "symlink out refused",
        "const fs = require('fs'); const r = [];
         for (const f of [() => fs.readFileSync('link.txt', 'utf8'), () => fs.statSync('link.txt')]) {
           try { f(); r.push('allowed'); } catch (e) { r.push(e.code); } }
         return r;",
        json!(["EACCES", "EACCES"]),
    )
    .await;
    s.eq(
        "write outside write roots refused",
        "const fs = require('fs'); const r = [];
         for (const p of ['notes/new.md', '../evil.txt', '/tmp/evil.txt', 'out/../evil.txt']) {
           try { fs.writeFileSync(p, 'x'); r.push('written'); } catch (e) { r.push(e.code); } }
         try { fs.mkdirSync('newdir'); r.push('made'); } catch (e) { r.push(e.code); }
         try { fs.unlinkSync('notes/a.md'); r.push('deleted'); } catch (e) { r.push(e.code); }
         return r;",
        json!(["EACCES", "EACCES", "EACCES", "EACCES", "EACCES", "EACCES"]),
    )
    .await;
    let exists =
        s.root.join("notes/new.md").exists() || s.root.parent().unwrap().join("evil.txt").exists();
    s.check("nothing written outside", !exists, ());
    s.eq(
        "readdir outside refused",
        "try { require('fs').readdirSync('/'); return 'listed'; } catch (e) { return e.code; }",
        json!("EACCES"),
    )
    .await;
}

async fn limit_tests(s: &mut Suite) {
    let t = Instant::now();
    let (r, _) = s
        .run_with(
            "while (true) {}",
            json!({}),
            Some(Duration::from_millis(300)),
        )
        .await;
    let el = t.elapsed();
    s.check(
        "endless loop stopped",
        r == Err(ScriptError::Timeout(Duration::from_millis(300))) && el < Duration::from_secs(3),
        (&r, el, r.as_ref().map_err(|e| e.to_string())),
    );
    s.eq(
        "host runs the next script",
        "return 'still here';",
        json!("still here"),
    )
    .await;

    let r = s
        .run("function f(n) { return f(n + 1) + 1; } return f(0);")
        .await;
    let ok = matches!(&r, Err(ScriptError::Thrown(m)) if m == "RangeError: Maximum call stack size exceeded");
    s.check("deep recursion", ok, r);
    let r = s
        .run("function g() { return [1].map(g); } return g();")
        .await;
    let ok = matches!(&r, Err(ScriptError::Thrown(m)) if m.contains("RangeError"));
    s.check("deep recursion through natives", ok, r);
    s.eq(
        "recursion depth like node",
        "function d(n) { return n === 0 ? 0 : 1 + d(n - 1); } return d(5000);",
        json!(5000),
    )
    .await;

    let t = Instant::now();
    let r = s
        .run("const s = 'x'.repeat(1e6); const a = []; while (true) { a.push(s + a.length); }")
        .await;
    let el = t.elapsed();
    s.check(
        "huge allocation stopped",
        matches!(&r, Err(ScriptError::MemoryLimit(_))),
        (r.as_ref().map_err(|e| e.to_string()), el),
    );
    let r = s
        .run("const s = 'x'.repeat(2 ** 29); return s.length;")
        .await;
    s.check(
        "huge string refused",
        matches!(&r, Err(ScriptError::MemoryLimit(_))),
        r.map_err(|e| e.to_string()),
    );
    s.eq("host fine after memory failures", "return 7;", json!(7))
        .await;
    let r = s.run("return 'x'.repeat(20 * 1024 * 1024);").await;
    s.check(
        "a result over 16 MiB refused, not held",
        matches!(&r, Err(ScriptError::TooLarge(_))),
        r.map(|v| v.to_string().len()).map_err(|e| e.to_string()),
    );
    s.eq("host fine after a refused result", "return 8;", json!(8))
        .await;

    // A worker that crashes (native stack overflow in boa's parser) is
    // reported with its stderr and replaced.
    let r = s
        .run("return eval('['.repeat(200000) + ']'.repeat(200000)).length;")
        .await;
    let ok = matches!(&r, Err(ScriptError::WorkerDied(m)) if m.contains("stack overflow") && m.contains("stderr:"));
    s.check("crashed worker reported", ok, r.map_err(|e| e.to_string()));
    s.eq("crashed worker replaced", "return 8;", json!(8)).await;

    // Scripts running at the same time get their own workers.
    // Each script says when it waited: the three waits overlap (each
    // started before any ended), which one worker in turn cannot do.
    let code = "const start = Date.now(); await new Promise(r => setTimeout(r, 300)); return [context.i, start, Date.now()];";
    let (a, b, c) = tokio::join!(
        s.run_with(code, json!({"i": 1}), None),
        s.run_with(code, json!({"i": 2}), None),
        s.run_with(code, json!({"i": 3}), None),
    );
    let spans: Vec<(i64, i64, i64)> = [&a.0, &b.0, &c.0]
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .filter_map(|v| Some((v[0].as_i64()?, v[1].as_i64()?, v[2].as_i64()?)))
        .collect();
    let latest_start = spans.iter().map(|s| s.1).max();
    let earliest_end = spans.iter().map(|s| s.2).min();
    s.check(
        "concurrent scripts",
        spans.iter().map(|s| s.0).collect::<Vec<_>>() == [1, 2, 3] && latest_start < earliest_end,
        (a.0, b.0, c.0),
    );
    s.check(
        "pool capped",
        s.host.idle_workers() <= 2,
        s.host.idle_workers(),
    );

    // Cancellation.
    let cancel = Cancel::default();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c2.cancel();
    });
    let job = ScriptJob {
        globals: Default::default(),
        code: "while (true) {}".into(),
        context: json!({}),
        sandbox: s.sandbox.clone(),
        timeout: None,
    };
    let t = Instant::now();
    let r = s.host.run(job, &|_l: LogLine| {}, &cancel).await;
    let el = t.elapsed();
    s.check(
        "cancel stops the script",
        r == Err(ScriptError::Cancelled) && el < Duration::from_secs(3),
        (r, el),
    );

    // No state leaks between scripts that share a worker.
    s.eq(
        "set a global",
        "globalThis.leak = 1; Object.prototype.polluted = 1; return 1;",
        json!(1),
    )
    .await;
    s.eq(
        "fresh globals",
        "return [typeof leak, ({}).polluted === undefined];",
        json!(["undefined", true]),
    )
    .await;
    s.check(
        "idle workers kept",
        s.host.idle_workers() >= 1,
        s.host.idle_workers(),
    );

    // Logs streamed before the end: a log sink sees lines while the script runs.
    let seen = Arc::new(Mutex::new(None::<Instant>));
    let seen2 = seen.clone();
    let sink = move |_l: LogLine| {
        seen2.lock().unwrap().get_or_insert_with(Instant::now);
    };
    let job = ScriptJob {
        globals: Default::default(),
        code: "console.log('early'); await new Promise(r => setTimeout(r, 300)); return 1;".into(),
        context: json!({}),
        sandbox: s.sandbox.clone(),
        timeout: None,
    };
    let r = s.host.run(job, &sink, &Cancel::default()).await;
    let done = Instant::now();
    // The script sleeps 300 ms after logging: the line must come well before.
    let ahead = seen.lock().unwrap().map(|i| done.duration_since(i));
    s.check(
        "logs are streamed",
        r == Ok(json!(1)) && ahead.is_some_and(|d| d > Duration::from_millis(200)),
        (r, ahead),
    );
}

async fn seed(s: &mut Suite) {
    let kb = s.root.join("kb");
    for (rel, text) in [
        (
            "Work/Projects/Apollo/overview.md",
            "# Apollo overview\nThe Apollo deadline is March 3.\nOwner: Priya\n",
        ),
        (
            "Work/Projects/Apollo/budget.md",
            "# Budget\nApollo budget review pending.\n",
        ),
        (
            "Personal/journal.md",
            "# Journal\nNothing about work here.\n",
        ),
        ("Personal/notes.txt", "deadline deadline\n"),
        ("inbox.md", "# Deadline reminders\nSubmit the report.\n"),
    ] {
        let p = kb.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let raw = "Here you go:\n```json\n{\"search_terms\": [\"deadline\", \"Apollo\"], \"entities\": [\"Priya\"], \"time_context\": null, \"query_type\": \"factual\", \"expected_location\": \"Work/Projects/Apollo\"}\n```";
    let inputs = json!({"query": "When is the Apollo deadline?", "knowledge_base": "./kb", "search_scope": "all", "max_results": 5});
    let (analysis, _) = s
        .run_with(
            SEED_STEP2,
            json!({"inputs": inputs, "query_analysis_raw": raw}),
            None,
        )
        .await;
    let analysis = analysis.unwrap_or_else(|e| json!({"error": e.to_string()}));
    s.check(
        "seed step 2 (fenced JSON)",
        analysis["expected_location"] == json!("Work/Projects/Apollo"),
        &analysis,
    );
    let (fallback, _) = s
        .run_with(
            SEED_STEP2,
            json!({"inputs": inputs, "query_analysis_raw": "not json at all"}),
            None,
        )
        .await;
    s.check(
        "seed step 2 (fallback)",
        fallback == Ok(json!({"search_terms": ["When", "the", "Apollo", "deadline?"], "entities": [], "query_type": "factual"})),
        &fallback,
    );

    let ctx = json!({"inputs": inputs, "query_analysis": analysis});
    let (found, _) = s.run_with(SEED_STEP3, ctx, None).await;
    let found = found.unwrap_or_else(|e| json!({"error": e.to_string()}));
    let paths: Vec<&str> = found["results"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["path"].as_str()).collect())
        .unwrap_or_default();
    s.check(
        "seed step 3 (search)",
        found["found"] == json!(true)
            && found["count"] == json!(5)
            && paths
                == [
                    "Work/Projects/Apollo/overview.md",
                    "Work/Projects/Apollo/overview.md",
                    "Work/Projects/Apollo/budget.md",
                    "Work/Projects/Apollo/budget.md",
                    "inbox.md",
                ]
            && found["results"][0]["score"] == json!(80)
            && found["results"][4]["score"] == json!(30),
        &found,
    );

    let answer = "Answer: The Apollo deadline is March 3.\nSources: [Work/Projects/Apollo/overview.md]\nConfidence: high";
    let (fin, _) = s
        .run_with(
            SEED_STEP4B,
            json!({"ai_answer": answer, "search_results": found}),
            None,
        )
        .await;
    let fin = fin.unwrap_or_else(|e| json!({"error": e.to_string()}));
    s.check(
        "seed step 4b",
        fin["answer"] == json!("The Apollo deadline is March 3.")
            && fin["confidence"] == json!(90)
            && fin["sources"].as_array().map(Vec::len) == Some(5),
        &fin,
    );
    let (none, _) = s.run_with(SEED_STEP4_ELSE, json!({}), None).await;
    s.check(
        "seed step 4 else",
        none.as_ref().is_ok_and(|v| v["confidence"] == json!(0)),
        &none,
    );
    let (out, _) = s
        .run_with(SEED_STEP5, json!({"final_answer": fin}), None)
        .await;
    s.check(
        "seed step 5",
        out.as_ref().is_ok_and(|v| {
            v["confidence"] == json!(90) && v["answer"] == json!("The Apollo deadline is March 3.")
        }),
        &out,
    );
}

async fn action(s: &mut Suite) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l2 = lines.clone();
    let caps = Capabilities {
        clock: Arc::new(marktoflow_steps::core::time::SystemClock),
        caches: Default::default(),
        mcp: Default::default(),
        replies: None,
        approvals: None,
        workflows: None,
        usage: None,
        background: None,
        trace: None,
        step: None,
        sandbox: Arc::new(s.sandbox.clone()),
        state: Arc::new(marktoflow_steps::core::state::StateDir {
            root: std::env::temp_dir().join("marktoflow-test-state"),
            project: false,
        }),
        log: Arc::new(move |l: LogLine| l2.lock().unwrap().push(l)),
        progress: marktoflow_steps::core::signals::no_progress(),
        cancel: Cancel::default(),
        scripts: s.host.clone(),
        agents: Arc::new(AgentHub::new(AgentOverrides::default())),
        env: Arc::new(Default::default()),
        allowed_hosts: None,
    };
    let call = Call {
        globals: None,
        action: "script.execute",
        method: "execute",
        tool: None,
        declared: &[],
        model: None,
        timeout: None,
        caps: &caps,
        idempotency_key: None,
    };
    let r = ScriptAction
        .call(&call, json!({"code": "console.warn('hi', context.n); return context.n * 2;", "context": {"n": 4}}))
        .await;
    let got_lines = lines.lock().unwrap().clone();
    s.check(
        "action: value and logs",
        r == Ok(json!(8))
            && got_lines
                == vec![LogLine {
                    level: LogLevel::Warn,
                    message: "hi 4".into(),
                }],
        (&r, &got_lines),
    );
    let r = ScriptAction
        .call(
            &call,
            json!({"code": "while(true){}", "context": {}, "timeout": 200}),
        )
        .await;
    s.check(
        "action: timeout",
        r == Err(ActionError::Timeout(Duration::from_millis(200))),
        &r,
    );
    let r = ScriptAction
        .call(
            &call,
            json!({"code": "throw new Error('x')", "context": {}}),
        )
        .await;
    s.check(
        "action: failure not retryable",
        r == Err(ActionError::Failed {
            message: "Error: x".into(),
            retryable: false,
        }),
        &r,
    );
    let r = ScriptAction.call(&call, json!({"context": {}})).await;
    s.check(
        "action: code required",
        matches!(r, Err(ActionError::Input(_))),
        &r,
    );
    let step = Call {
        globals: None,
        timeout: Some(Duration::from_millis(150)),
        ..call
    };
    let r = ScriptAction
        .call(&step, json!({"code": "while(true){}", "context": {}}))
        .await;
    s.check(
        "action: step timeout",
        r == Err(ActionError::Timeout(Duration::from_millis(150))),
        &r,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(WORKER_ARG) {
        std::process::exit(worker_main());
    }
    let filter = args.iter().skip(1).find(|a| !a.starts_with('-')).cloned();
    let base = std::env::temp_dir().join(format!("mtf-script-worker-{}", std::process::id()));
    let root = setup_tree(&base);
    let sandbox = Sandbox::new(root.clone(), vec![root.clone()], vec![root.join("out")]);
    let limits = ScriptLimits {
        memory_bytes: Some(1 << 30),
        ..ScriptLimits::default()
    };
    let host = Arc::new(ScriptHost::with_limits(
        std::env::current_exe().unwrap(),
        limits,
    ));
    let mut s = Suite {
        host,
        root: sandbox.cwd.clone(),
        sandbox,
        passed: 0,
        failed: 0,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let want = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    rt.block_on(async {
        if want("semantics") {
            semantics(&mut s).await;
        }
        if want("path") {
            path_module(&mut s).await;
        }
        if want("fs") {
            fs_module(&mut s).await;
        }
        if want("sandbox") {
            sandbox_tests(&mut s).await;
        }
        if want("limits") {
            limit_tests(&mut s).await;
        }
        if want("seed") {
            seed(&mut s).await;
        }
        if want("action") {
            action(&mut s).await;
        }
    });
    drop(rt);
    let _ = std::fs::remove_dir_all(&base);
    println!("{} passed, {} failed", s.passed, s.failed);
    std::process::exit(if s.failed == 0 { 0 } else { 1 });
}
