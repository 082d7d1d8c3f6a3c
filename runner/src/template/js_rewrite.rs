//! Gives the peer's templates the meaning they have in Nunjucks, whose
//! compiled templates run on JavaScript values, by rewriting the parsed
//! template before minijinja compiles it (minijinja has no hook for its
//! operators or its scopes):
//!
//! - `a + b` becomes `__js_add(a, b)`, and so on for `-`, `*`, `/`, `//`,
//!   `%`, `**` (see [`super::js_ops`]); two number literals are left alone;
//! - a condition (`{% if %}`, `elif`, an inline `if`, a loop's `if`, `not`,
//!   and the operands of `and`/`or` inside them) is wrapped in
//!   `__js_truthy(…)`, so `[]` and `{}` are true; elsewhere `a or b` and
//!   `a and b` keep JavaScript's value when `a` is a name or a path
//!   (`(a if __js_truthy(a) else b)`);
//! - a `{% set x %}` inside a `{% for %}` updates the `x` of the enclosing
//!   scope when that scope sets `x` too, as Nunjucks' frames do (a
//!   minijinja loop is a scope of its own): such a variable is mirrored in
//!   a namespace and read back after each loop that sets it.
//!
//! Nothing is rewritten when the text does not parse: compiling it reports
//! the error.

use std::borrow::Cow;
use std::collections::BTreeSet;

use minijinja::machinery::ast::{BinOpKind, CallArg, Expr, Stmt, UnaryOpKind};
use minijinja::machinery::{parse, parse_expr, Span};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::ValueKind;

use super::compat::RawBlocks;
use super::js_ops::{BINARY, COMPARE, CONCAT, NEG, TRUTHY};
use super::rewrite::{apply, Edit, Translated};

/// The namespace that carries loop-set variables out of loops.
const CARRY: &str = "__nj";

/// A template's text with the rewrites applied; `None` if nothing changes.
pub(crate) fn template(src: &str) -> Option<Translated> {
    let operators = src.bytes().any(|b| b"+-*/%~=<>".contains(&b));
    let words = [" or ", " and ", " if ", "not "];
    if !src.contains("{%")
        && !operators
        && !has_mapping(src)
        && !words.iter().any(|w| src.contains(w))
    {
        return None;
    }
    let (text, strict) = strict_operators(src, true);
    let ast = parse(&text, "<template>", SyntaxConfig::default()).ok()?;
    let mut w = Walker::new(&text);
    w.strict = strict;
    w.stmt(&ast);
    w.carry_loop_sets();
    let out = w.finish();
    out.or_else(|| unchanged(text))
}

/// Whether `src` may hold a mapping literal (whose bare keys are
/// rewritten): a `{` that opens no tag, comment or expression.
fn has_mapping(src: &str) -> bool {
    let b = src.as_bytes();
    (0..b.len()).any(|i| {
        b[i] == b'{'
            && !matches!(b.get(i + 1), Some(b'{' | b'%' | b'#'))
            && (i == 0 || b[i - 1] != b'{')
    })
}

/// An expression's text with the rewrites applied; `boolean` when its value
/// is used as a condition.
pub(crate) fn expression(src: &str, boolean: bool) -> Option<Translated> {
    let (text, strict) = strict_operators(src, false);
    let e = parse_expr(&text).ok()?;
    let mut w = Walker::new(&text);
    w.strict = strict;
    w.expr(&e, boolean);
    let out = w.finish();
    out.or_else(|| unchanged(text))
}

/// Nunjucks' `===` and `!==`, which minijinja does not parse, as `==` and
/// `!=` followed by a space (offsets do not move), with where they were.
/// In a template only tags and expressions are read, never its text.
fn strict_operators(src: &str, template: bool) -> (Cow<'_, str>, Vec<usize>) {
    if !src.contains("==") {
        return (Cow::Borrowed(src), Vec::new());
    }
    let b = src.as_bytes();
    let raw = RawBlocks::of(if template { src } else { "" });
    let mut found = Vec::new();
    let mut i = 0;
    let mut code = !template;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let rest = &b[i..];
        if template && quote.is_none() {
            if !code && (rest.starts_with(b"{{") || rest.starts_with(b"{%")) {
                code = !raw.contains(i);
                i += 2;
                continue;
            }
            if code && (rest.starts_with(b"}}") || rest.starts_with(b"%}")) {
                code = false;
                i += 2;
                continue;
            }
        }
        if code {
            match quote {
                Some(_) if b[i] == b'\\' => i += 1,
                Some(q) if b[i] == q => quote = None,
                Some(_) => {}
                None if b[i] == b'\'' || b[i] == b'"' => quote = Some(b[i]),
                None if rest.starts_with(b"===") || rest.starts_with(b"!==") => {
                    found.push(i);
                    i += 3;
                    continue;
                }
                None => {}
            }
        }
        i += 1;
    }
    if found.is_empty() {
        return (Cow::Borrowed(src), found);
    }
    let mut text = src.as_bytes().to_vec();
    for &at in &found {
        text[at + 2] = b' ';
    }
    // Only ASCII bytes changed.
    (
        Cow::Owned(String::from_utf8(text).unwrap_or_else(|_| src.to_string())),
        found,
    )
}

/// `text` as it stands when only [`strict_operators`] changed it.
fn unchanged(text: Cow<'_, str>) -> Option<Translated> {
    match text {
        Cow::Borrowed(_) => None,
        Cow::Owned(t) => Some(Translated {
            origin: (0..=t.len()).collect(),
            text: t,
        }),
    }
}

/// A `{% set name … %}`.
struct SetSite<'a> {
    name: &'a str,
    /// The scope it is in: 0 the template, else a macro (see `Walker::scopes`).
    scope: usize,
    /// The loops it is inside, outermost first.
    loops: Vec<usize>,
    /// Where its tag ends, and the tag's whitespace marker (`-`, `+`, none).
    close: usize,
    marker: &'static str,
}

/// A `{% for %}`.
struct LoopSite {
    scope: usize,
    /// The loops it is inside.
    loops: Vec<usize>,
    /// Where its `{% for %}` tag ends (its body starts), and the tag's marker.
    open: Option<(usize, &'static str)>,
    /// Where its `{% endfor %}` ends, and that tag's marker.
    close: Option<(usize, &'static str)>,
}

struct Walker<'s> {
    src: &'s str,
    /// Edits, each with a rank: at one offset, closing parentheses (0) go
    /// before openings (1).
    edits: Vec<(u8, Edit)>,
    sets: Vec<SetSite<'s>>,
    loops: Vec<LoopSite>,
    /// The loops being walked, outermost first.
    path: Vec<usize>,
    /// Where each scope's body starts (the template's at 0, a macro's
    /// after its tag), with the tag's marker; `None` when it is not found.
    scopes: Vec<Option<(usize, &'static str)>>,
    scope: usize,
    /// Where `===` and `!==` were (see [`strict_operators`]).
    strict: Vec<usize>,
}

fn start(s: Span) -> usize {
    s.start_offset as usize
}

fn end(s: Span) -> usize {
    s.end_offset as usize
}

/// Where the text of `e` starts, without parentheses around it. A
/// filter's, test's, attribute's, index's or call's span starts at its own
/// part, and a comparison's at the token before it, so the leftmost part
/// decides.
fn lo(src: &str, e: &Expr) -> usize {
    match e {
        Expr::Filter(f) => f.expr.as_ref().map_or(start(e.span()), |x| lo(src, x)),
        Expr::Test(t) => lo(src, &t.expr),
        Expr::GetAttr(g) => lo(src, &g.expr),
        Expr::GetItem(g) => lo(src, &g.expr),
        Expr::Slice(s) => lo(src, &s.expr),
        Expr::Call(c) => lo(src, &c.expr),
        Expr::BinOp(b) => outer_lo(src, &b.left),
        Expr::Compare(c) => outer_lo(src, &c.expr),
        Expr::IfExpr(i) => outer_lo(src, &i.true_expr),
        // `-x` and `not x` start at their operator; `a not in b` is a `not`
        // around `a in b`, spanning from before `a`.
        Expr::UnaryOp(u) => {
            let at = start(e.span());
            let text = src.get(at..).unwrap_or_default();
            if text.starts_with('-') || text.starts_with("not") {
                at
            } else {
                outer_lo(src, &u.expr)
            }
        }
        _ => start(e.span()),
    }
}

/// Where the text of `e` ends, without parentheses around it.
fn hi(src: &str, e: &Expr) -> usize {
    let own = end(e.span());
    match e {
        Expr::BinOp(b) => outer_hi(src, &b.right),
        Expr::Compare(c) => c.ops.last().map_or(own, |op| outer_hi(src, &op.expr)),
        Expr::IfExpr(i) => outer_hi(src, i.false_expr.as_ref().unwrap_or(&i.test_expr)),
        Expr::UnaryOp(u) => outer_hi(src, &u.expr),
        _ => own,
    }
}

/// Where `e` starts and ends with the parentheses that enclose it alone
/// (`(a) + b`: `(a)`; `(a + b)`: neither `a` nor `b` alone).
fn parens(src: &str, e: &Expr) -> (usize, usize) {
    let (from, to) = (lo(src, e), hi(src, e));
    let b = src.as_bytes();
    let mut opens = Vec::new();
    for i in (0..from.min(b.len())).rev() {
        match b[i] {
            b'(' => opens.push(i),
            c if c.is_ascii_whitespace() => {}
            _ => break,
        }
    }
    let mut closes = Vec::new();
    for (j, &c) in b.iter().enumerate().skip(to) {
        match c {
            b')' => closes.push(j + 1),
            c if c.is_ascii_whitespace() => {}
            _ => break,
        }
    }
    match opens.len().min(closes.len()) {
        0 => (from, to),
        k => (opens[k - 1], closes[k - 1]),
    }
}

fn outer_lo(src: &str, e: &Expr) -> usize {
    parens(src, e).0
}

fn outer_hi(src: &str, e: &Expr) -> usize {
    parens(src, e).1
}

fn is_number(e: &Expr) -> bool {
    match e {
        Expr::Const(c) => c.value.kind() == ValueKind::Number,
        Expr::UnaryOp(u) => matches!(u.op, UnaryOpKind::Neg) && is_number(&u.expr),
        _ => false,
    }
}

/// Cheap to evaluate twice and free of effects: a name, a constant, an
/// attribute or constant index of one, or a literal list or map of them.
fn is_path(e: &Expr) -> bool {
    match e {
        Expr::Var(_) | Expr::Const(_) => true,
        Expr::List(l) => l.items.iter().all(is_path),
        Expr::Tuple(t) => t.items.iter().all(is_path),
        Expr::Map(m) => m.keys.iter().chain(&m.values).all(is_path),
        Expr::GetAttr(g) => is_path(&g.expr),
        Expr::GetItem(g) => is_path(&g.expr) && matches!(g.subscript_expr, Expr::Const(_)),
        _ => false,
    }
}

/// Where a `{% macro name(args) %}` tag whose arguments end at `from` closes.
fn macro_open(src: &str, from: usize) -> Option<(usize, &'static str)> {
    let rest = src.get(from..)?;
    let close = rest.find(')')?;
    if !rest[..close].trim().is_empty() {
        return None;
    }
    tag_end(src, from + close + 1)
}

/// Where the tag whose content ends at `from` closes (after `%}`), and its
/// whitespace marker; a loop's `recursive` may come before.
fn tag_end(src: &str, from: usize) -> Option<(usize, &'static str)> {
    let rest = src.get(from..)?;
    let i = rest.find("%}")?;
    let before = rest[..i].trim();
    let (words, marker) = match before.strip_suffix(['-', '+']) {
        Some(w) => (w.trim(), if before.ends_with('-') { "-" } else { "+" }),
        None => (before, ""),
    };
    if !(words.is_empty() || words == "recursive") {
        return None;
    }
    Some((from + i + 2, marker))
}

impl<'s> Walker<'s> {
    fn new(src: &'s str) -> Self {
        Walker {
            src,
            edits: Vec::new(),
            sets: Vec::new(),
            loops: Vec::new(),
            path: Vec::new(),
            scopes: vec![Some((0, "+"))],
            scope: 0,
            strict: Vec::new(),
        }
    }

    fn finish(mut self) -> Option<Translated> {
        self.edits.sort_by_key(|(rank, e)| (e.at, *rank));
        apply(self.src, self.edits.into_iter().map(|(_, e)| e).collect())
    }

    fn open(&mut self, at: usize, text: impl Into<std::borrow::Cow<'static, str>>) {
        self.edits.push((1, Edit::insert(at, text)));
    }

    fn close(&mut self, at: usize) {
        self.edits.push((0, Edit::insert(at, ")")));
    }

    fn wrap(&mut self, e: &Expr, function: &'static str) {
        self.open(lo(self.src, e), format!("{function}("));
        self.close(hi(self.src, e));
    }

    /// The offset and length of the operator between two operands.
    /// The offset and length of the operator between two operands, made
    /// of the characters `chars` (of letters when `chars` is empty).
    fn operator(&self, left: &Expr, right: &Expr, chars: &str) -> Option<(usize, usize)> {
        let (from, to) = (outer_hi(self.src, left), outer_lo(self.src, right));
        let gap = self.src.get(from..to)?;
        let part = |c: char| {
            if chars.is_empty() {
                c.is_ascii_alphabetic()
            } else {
                chars.contains(c)
            }
        };
        let at = gap.find(part)?;
        let len = gap[at..].find(|c| !part(c)).unwrap_or(gap.len() - at);
        Some((from + at, len))
    }

    /// `left op right` as `function(left, right)`.
    fn call(&mut self, e: &Expr, at: usize, len: usize, function: &str) {
        self.open(lo(self.src, e), format!("{function}("));
        self.edits.push((1, Edit::new(at, len, ",")));
        self.close(hi(self.src, e));
    }

    fn expr(&mut self, e: &Expr, boolean: bool) {
        match e {
            Expr::BinOp(b) => match b.op {
                BinOpKind::ScAnd | BinOpKind::ScOr => {
                    if !boolean && is_path(&b.left) {
                        if let Some((at, len)) = self.operator(&b.left, &b.right, "") {
                            let left =
                                &self.src[outer_lo(self.src, &b.left)..outer_hi(self.src, &b.left)];
                            let not = if matches!(b.op, BinOpKind::ScAnd) {
                                "not "
                            } else {
                                ""
                            };
                            let text = format!("if {not}{TRUTHY}({left}) else");
                            self.open(lo(self.src, e), "(");
                            self.edits.push((1, Edit::new(at, len, text)));
                            self.close(hi(self.src, e));
                        }
                    }
                    self.expr(&b.left, boolean);
                    self.expr(&b.right, boolean);
                    return;
                }
                BinOpKind::Add
                | BinOpKind::Sub
                | BinOpKind::Mul
                | BinOpKind::Div
                | BinOpKind::FloorDiv
                | BinOpKind::Rem
                | BinOpKind::Pow => {
                    // Two number literals add, subtract and multiply alike;
                    // minijinja refuses to divide by a zero literal.
                    let plain = matches!(b.op, BinOpKind::Add | BinOpKind::Sub | BinOpKind::Mul);
                    if !(plain && is_number(&b.left) && is_number(&b.right)) {
                        if let Some((at, len)) = self.operator(&b.left, &b.right, "+-*/%") {
                            let op = &self.src[at..at + len];
                            if let Some((_, function)) = BINARY.iter().find(|(o, _)| *o == op) {
                                self.call(e, at, len, function);
                            }
                        }
                    }
                    self.expr(&b.left, false);
                    self.expr(&b.right, false);
                }
                BinOpKind::Concat => {
                    if let Some((at, len)) = self.operator(&b.left, &b.right, "~") {
                        self.call(e, at, len, CONCAT);
                    }
                    self.expr(&b.left, false);
                    self.expr(&b.right, false);
                }
                BinOpKind::Eq
                | BinOpKind::Ne
                | BinOpKind::Lt
                | BinOpKind::Lte
                | BinOpKind::Gt
                | BinOpKind::Gte => {
                    if let Some((at, len)) = self.operator(&b.left, &b.right, "=!<>") {
                        // `===` was read as `==` followed by a space.
                        let strict = self.strict.contains(&at);
                        let op = match &self.src[at..at + len] {
                            "==" if strict => "===",
                            "!=" if strict => "!==",
                            op => op,
                        };
                        if let Some((_, function)) = COMPARE.iter().find(|(o, _)| *o == op) {
                            self.call(e, at, len, function);
                        }
                    }
                    self.expr(&b.left, false);
                    self.expr(&b.right, false);
                    return;
                }
                // `in` gives a boolean.
                _ => {
                    self.expr(&b.left, false);
                    self.expr(&b.right, false);
                    return;
                }
            },
            Expr::UnaryOp(u) => match u.op {
                UnaryOpKind::Not => {
                    self.expr(&u.expr, true);
                    return;
                }
                UnaryOpKind::Neg => {
                    // `-'2'` is -2 in JavaScript; minijinja refuses it.
                    if !is_number(&u.expr) {
                        self.edits
                            .push((1, Edit::new(start(u.span()), 1, format!("{NEG}("))));
                        self.close(hi(self.src, e));
                    }
                    self.expr(&u.expr, false)
                }
            },
            Expr::Compare(c) => {
                self.expr(&c.expr, false);
                for op in &c.ops {
                    self.expr(&op.expr, false);
                }
                return;
            }
            Expr::Test(t) => {
                self.expr(&t.expr, false);
                self.args(&t.args);
                return;
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr, true);
                self.expr(&i.true_expr, boolean);
                if let Some(f) = &i.false_expr {
                    self.expr(f, boolean);
                }
                if boolean {
                    return;
                }
            }
            Expr::Filter(f) => {
                if let Some(x) = &f.expr {
                    self.expr(x, false);
                }
                self.args(&f.args);
            }
            Expr::GetAttr(g) => self.expr(&g.expr, false),
            Expr::GetItem(g) => {
                self.expr(&g.expr, false);
                self.expr(&g.subscript_expr, false);
            }
            Expr::Slice(s) => {
                self.expr(&s.expr, false);
                for x in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(x, false);
                }
            }
            Expr::Call(c) => {
                self.expr(&c.expr, false);
                self.args(&c.args);
            }
            Expr::List(l) => l.items.iter().for_each(|x| self.expr(x, false)),
            Expr::Tuple(t) => t.items.iter().for_each(|x| self.expr(x, false)),
            Expr::Map(m) => {
                for key in &m.keys {
                    match key {
                        // `{style: 'percent'}`: a bare key is its name, as in
                        // JavaScript (minijinja would look the variable up).
                        Expr::Var(v) => {
                            let span = v.span();
                            let text = format!("'{}'", v.id);
                            self.edits
                                .push((1, Edit::new(start(span), end(span) - start(span), text)));
                        }
                        key => self.expr(key, false),
                    }
                }
                m.values.iter().for_each(|x| self.expr(x, false));
            }
            Expr::Const(c) if c.value.kind() == ValueKind::Bool => return,
            Expr::Var(_) | Expr::Const(_) => {}
        }
        if boolean {
            self.wrap(e, TRUTHY);
        }
    }

    fn args(&mut self, args: &[CallArg]) {
        for a in args {
            match a {
                CallArg::Pos(x)
                | CallArg::Kwarg(_, x)
                | CallArg::PosSplat(x)
                | CallArg::KwargSplat(x) => self.expr(x, false),
            }
        }
    }

    fn stmts(&mut self, body: &[Stmt<'s>]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt<'s>) {
        match s {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitExpr(e) => self.expr(&e.expr, false),
            Stmt::ForLoop(f) => {
                self.expr(&f.iter, false);
                if let Some(c) = &f.filter_expr {
                    self.expr(c, true);
                }
                let id = self.loops.len();
                let header = outer_hi(self.src, f.filter_expr.as_ref().unwrap_or(&f.iter));
                self.loops.push(LoopSite {
                    scope: self.scope,
                    loops: self.path.clone(),
                    open: tag_end(self.src, header),
                    close: tag_end(self.src, end(f.span())),
                });
                self.path.push(id);
                self.stmts(&f.body);
                self.path.pop();
                self.stmts(&f.else_body);
            }
            Stmt::IfCond(i) => {
                self.expr(&i.expr, true);
                self.stmts(&i.true_body);
                self.stmts(&i.false_body);
            }
            Stmt::WithBlock(w) => {
                for (_, x) in &w.assignments {
                    self.expr(x, false);
                }
                self.stmts(&w.body);
            }
            Stmt::Set(x) => {
                self.expr(&x.expr, false);
                self.record_set(&x.target, end(x.span()));
            }
            Stmt::SetBlock(x) => {
                if let Some(f) = &x.filter {
                    self.expr(f, false);
                }
                self.stmts(&x.body);
                self.record_set(&x.target, end(x.span()));
            }
            Stmt::AutoEscape(a) => {
                self.expr(&a.enabled, false);
                self.stmts(&a.body);
            }
            Stmt::FilterBlock(f) => {
                self.expr(&f.filter, false);
                self.stmts(&f.body);
            }
            Stmt::Macro(m) => {
                m.defaults.iter().for_each(|x| self.expr(x, false));
                let header = m
                    .args
                    .iter()
                    .chain(&m.defaults)
                    .map(|x| hi(self.src, x))
                    .max();
                let from = header.unwrap_or_else(|| {
                    // No arguments: just after `(`.
                    let at = start(m.span());
                    self.src[at..].find('(').map_or(at, |i| at + i + 1)
                });
                self.macro_body(&m.body, macro_open(self.src, from));
            }
            Stmt::CallBlock(c) => {
                self.expr(&c.call.expr, false);
                self.args(&c.call.args);
                self.macro_body(&c.macro_decl.body, None);
            }
            Stmt::Do(d) => {
                self.expr(&d.call.expr, false);
                self.args(&d.call.args);
            }
            Stmt::Block(b) => self.stmts(&b.body),
            _ => {}
        }
    }

    /// A macro has a scope of its own: its sets are not carried.
    /// A macro is a scope of its own, whose body starts at `open`.
    fn macro_body(&mut self, body: &[Stmt<'s>], open: Option<(usize, &'static str)>) {
        self.scopes.push(open);
        let was = std::mem::replace(&mut self.scope, self.scopes.len() - 1);
        let path = std::mem::take(&mut self.path);
        self.stmts(body);
        self.path = path;
        self.scope = was;
    }

    fn record_set(&mut self, target: &Expr<'s>, content_end: usize) {
        let Expr::Var(v) = target else {
            return;
        };
        if let Some((close, marker)) = tag_end(self.src, content_end) {
            self.sets.push(SetSite {
                name: v.id,
                scope: self.scope,
                loops: self.path.clone(),
                close,
                marker,
            });
        }
    }

    /// Nunjucks' `set` writes to the nearest enclosing scope that has the
    /// name: a variable set both in a loop and in a scope around it is kept
    /// in a namespace as well, and read back from it after the loop.
    fn carry_loop_sets(&mut self) {
        let inside = |outer: &[usize], inner: &[usize]| {
            inner.len() > outer.len() && inner.starts_with(outer)
        };
        // (scope, name) of each variable set in a loop and around it.
        let carried: BTreeSet<(usize, &'s str)> = self
            .sets
            .iter()
            .filter(|s| {
                self.sets
                    .iter()
                    .any(|o| o.scope == s.scope && o.name == s.name && inside(&o.loops, &s.loops))
            })
            .filter(|s| self.scopes[s.scope].is_some())
            .map(|s| (s.scope, s.name))
            .collect();
        let mut edits = Vec::new();
        let scopes: BTreeSet<usize> = carried.iter().map(|c| c.0).collect();
        for scope in scopes {
            if let Some((at, marker)) = self.scopes[scope] {
                let text = format!("{{% set {CARRY} = namespace() {marker}%}}");
                edits.push((0, Edit::insert(at, text)));
            }
        }
        for s in &self.sets {
            if carried.contains(&(s.scope, s.name)) {
                let text = format!("{{% set {CARRY}.{n} = {n} {m}%}}", n = s.name, m = s.marker);
                edits.push((0, Edit::insert(s.close, text)));
            }
        }
        // Each pass of a minijinja loop starts from the scope around it,
        // so the value is read back at the start of every pass as well as
        // after the loop.
        for (id, l) in self.loops.iter().enumerate() {
            let (Some(open), Some(close)) = (l.open, l.close) else {
                continue;
            };
            let mut body = l.loops.clone();
            body.push(id);
            for &(scope, name) in carried.iter().filter(|c| c.0 == l.scope) {
                let named = || {
                    self.sets
                        .iter()
                        .filter(|s| s.scope == scope && s.name == name)
                };
                let set_in_loop = named().any(|s| s.loops.starts_with(&body));
                let set_around = named().any(|s| l.loops.starts_with(&s.loops));
                if set_in_loop && set_around {
                    for (at, marker) in [open, close] {
                        let text = format!("{{% set {name} = {CARRY}.{name} {marker}%}}");
                        edits.push((0, Edit::insert(at, text)));
                    }
                }
            }
        }
        self.edits.extend(edits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(src: &str) -> String {
        template(src).map_or_else(|| src.to_string(), |t| t.text)
    }

    fn e(src: &str, boolean: bool) -> String {
        expression(src, boolean).map_or_else(|| src.to_string(), |t| t.text)
    }

    #[test]
    fn operators_become_calls() {
        assert_eq!(t("{{ a + 1 }}"), "{{ __js_add(a , 1) }}");
        assert_eq!(t("{{ 1 + 2 }}"), "{{ 1 + 2 }}");
        assert_eq!(
            t("{{ (a + b) * -c }}"),
            "{{ __js_mul((__js_add(a , b)) , __js_neg(c)) }}"
        );
        assert_eq!(t("{{ a+b*c }}"), "{{ __js_add(a,__js_mul(b,c)) }}");
        assert_eq!(
            t("{{ a // 2 ** b }}"),
            "{{ __js_floordiv(a , __js_pow(2 , b)) }}"
        );
        assert_eq!(t("{{ x | f(a - 1) }}"), "{{ x | f(__js_sub(a , 1)) }}");
        assert_eq!(t("{{ a ~ b }}"), "{{ __js_cat(a , b) }}");
        // `===` is strict, `==` loose; text outside tags is left alone.
        assert_eq!(
            t("a === b {{ x === 1 }} {{ y !== '===' }}{% if z == 2 %}{% endif %}"),
            "a === b {{ __js_seq(x ,  1) }} {{ __js_sne(y ,  '===') }}{% if __js_eq(z , 2) %}{% endif %}"
        );
        assert_eq!(
            t("{{ (a) < (b + 1) }}"),
            "{{ __js_lt((a) , (__js_add(b , 1))) }}"
        );
        assert_eq!(t("{{ a not in b }}"), "{{ a not in b }}");
        // Nothing in a raw block is touched.
        assert_eq!(
            t("{% raw %}{{ a === b }}{% endraw %}"),
            "{% raw %}{{ a === b }}{% endraw %}"
        );
        assert_eq!(e("'7' + n", false), "__js_add('7' , n)");
    }

    #[test]
    fn conditions_judge_as_javascript() {
        assert_eq!(
            t("{% if xs %}y{% endif %}"),
            "{% if __js_truthy(xs) %}y{% endif %}"
        );
        assert_eq!(
            t("{% if not xs and y > 1 %}y{% elif m.a %}{% endif %}"),
            "{% if not __js_truthy(xs) and __js_gt(y , 1) %}y{% elif __js_truthy(m.a) %}{% endif %}"
        );
        assert_eq!(
            t("{{ 'T' if m else 'F' }}"),
            "{{ 'T' if __js_truthy(m) else 'F' }}"
        );
        assert_eq!(t("{{ a or 'x' }}"), "{{ (a if __js_truthy(a) else 'x') }}");
        assert_eq!(
            t("{{ a.b and c }}"),
            "{{ (a.b if not __js_truthy(a.b) else c) }}"
        );
        assert_eq!(t("{{ f(a) or 'x' }}"), "{{ f(a) or 'x' }}");
        assert_eq!(
            t("{% if a is defined %}{% endif %}"),
            "{% if a is defined %}{% endif %}"
        );
        assert_eq!(t("{% if true %}{% endif %}"), "{% if true %}{% endif %}");
        assert_eq!(
            e("xs and not ys", true),
            "__js_truthy(xs) and not __js_truthy(ys)"
        );
        assert_eq!(e("xs | length > 0", true), "__js_gt(xs | length , 0)");
    }

    #[test]
    fn loop_sets_are_carried_out() {
        assert_eq!(
            t("{% set n = 0 %}{% for i in xs %}{% set n = n + i -%}\n{% endfor %}{{ n }}"),
            "{% set __nj = namespace() +%}{% set n = 0 %}{% set __nj.n = n %}\
             {% for i in xs %}{% set n = __nj.n %}{% set n = __js_add(n , i) -%}{% set __nj.n = n -%}\n\
             {% endfor %}{% set n = __nj.n %}{{ n }}"
        );
        // Set only inside the loop: local to it, nothing to carry.
        assert_eq!(
            t("{% for i in xs %}{% set k = i %}{% endfor %}"),
            "{% for i in xs %}{% set k = i %}{% endfor %}"
        );
        // A macro's sets are its own: the template's `n` is not the macro's.
        assert_eq!(
            t("{% set n = 0 %}{% macro m() %}{% for i in xs %}{% set n = i %}{% endfor %}{% endmacro %}"),
            "{% set n = 0 %}{% macro m() %}{% for i in xs %}{% set n = i %}{% endfor %}{% endmacro %}"
        );
        assert_eq!(
            t("{% macro m(a, b=1) -%}{% set r = 0 %}{% for i in a %}{% set r = r + i %}{% endfor %}{% endmacro %}"),
            "{% macro m(a, b=1) -%}{% set __nj = namespace() -%}{% set r = 0 %}{% set __nj.r = r %}\
             {% for i in a %}{% set r = __nj.r %}{% set r = __js_add(r , i) %}{% set __nj.r = r %}\
             {% endfor %}{% set r = __nj.r %}{% endmacro %}"
        );
        // Does not parse: left to the compiler's error.
        assert_eq!(t("{% if %}"), "{% if %}");
    }
}

#[cfg(test)]
mod fuzz {
    use crate::template::Templates;
    use serde_json::json;

    const CORPUS: &[&str] = &[
        "{% set n = 0 %}{% for i in xs %}{% if i > 1 %}{% set n = n + i %}{% endif %}{% endfor %}{{ n }}",
        "{{ (a + '1') * -b }}|{{ a === b }}|{{ x or 'd' }}|{{ m and m.k }}|{{ 'é' ~ a ~ none }}",
        "{% macro m(a, b=1) -%}{% set r = 0 %}{% for i in a %}{% set r = r + i %}{% endfor %}{{ r }}{%- endmacro %}{{ m(xs) }}",
        "{% for k, v in m %}{{ k }}={{ v // 2 ** 3 }}{% else %}none{% endfor %}{{ xs | length > 0 }}",
        "{{ 'a' if not xs else ('b' if m else 'c') }}{# c #}\n{% raw %}{{ a === b }}{% endraw %}",
    ];
    const TOKENS: &[&str] = &[
        "(",
        ")",
        "{{",
        "}}",
        "{%",
        "%}",
        "===",
        "!==",
        "==",
        "-",
        "+",
        "*",
        "**",
        "//",
        "~",
        " or ",
        " and ",
        "not ",
        " if ",
        " else ",
        "'",
        "\"",
        "{% set n = 1 %}",
        "{% for i in xs %}",
        "{% endfor %}",
        "é",
        "\u{1F600}",
        "|",
        ".length",
        "[",
        "]",
        "-%}",
        "{%-",
    ];

    /// Mutated templates render or fail with an error; the rewrite never
    /// panics (byte offsets inside multi-byte text, unbalanced parentheses,
    /// tags cut in half).
    #[test]
    fn mutated_templates_never_panic() {
        let t = Templates::new();
        let ctx = Templates::context(
            &json!({}),
            json!({"a": "7", "b": 2, "xs": [1, 2, 3], "m": {"k": []}, "x": null})
                .as_object()
                .unwrap(),
            &json!({}),
            &json!({}),
        );
        let mut rng = fastrand::Rng::with_seed(36);
        for _ in 0..3000 {
            let mut s = CORPUS[rng.usize(..CORPUS.len())].to_string();
            for _ in 0..rng.usize(1..5) {
                let mut at = rng.usize(..=s.len());
                while !s.is_char_boundary(at) {
                    at -= 1;
                }
                if rng.bool() {
                    s.insert_str(at, TOKENS[rng.usize(..TOKENS.len())]);
                } else {
                    let mut end = (at + rng.usize(1..8)).min(s.len());
                    while !s.is_char_boundary(end) {
                        end += 1;
                    }
                    s.replace_range(at..end, "");
                }
            }
            let _ = t.render_str(&s, &ctx);
            let _ = t.eval_condition(&s, &ctx);
            let _ = t.check(&s, false);
        }
    }
}
