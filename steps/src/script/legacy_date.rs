//! The date texts V8 reads besides ISO 8601 (`new Date('March 5, 2024')`,
//! `Date.parse('05 Mar 2024 10:15:32 GMT')`, `'2024/03/05 10:00 PM'`),
//! which boa refuses. The peer's workflows were written and tested on V8,
//! so a text it reads must give the same date here: this follows V8's
//! legacy date parser (`src/date/dateparser*.h`) rule for rule — words
//! before the first number ignored, text in parentheses ignored, month
//! names by their first three letters, `am`/`pm`, `UT`/`UTC`/`GMT`/`Z` and
//! the North American zone names, `+hhmm` offsets after a time or `GMT`,
//! numbers read as year, month and day by V8's order rules (a two-digit
//! year is 19xx from 50, else 20xx; a missing year is 2001).
//!
//! [`install`] puts a `Date` in front of boa's that asks boa first and this
//! reader only for what boa calls invalid, so nothing boa reads changes.

use boa_engine::{Context, JsResult, JsValue, NativeFunction, Source};

use super::js::fn_obj;

/// A date as the text gives it: the calendar fields, and the offset from
/// UTC in seconds when the text names one (else it is local time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LegacyDate {
    pub year: i64,
    /// 0-based, as JavaScript counts months.
    pub month: i64,
    pub day: i64,
    pub hour: i64,
    pub minute: i64,
    pub second: i64,
    pub millisecond: i64,
    pub offset_seconds: Option<i64>,
}

const NONE: i64 = i64::MIN;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Keyword {
    Month(i64),
    AmPm(i64),
    Zone(i64),
    /// `t`, ISO's time separator; a garbage word in a legacy text.
    TimeSeparator,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Token {
    Number { value: i64, digits: usize },
    Symbol(char),
    Word { keyword: Keyword, len: usize },
    Space,
    Unknown,
    End,
}

impl Token {
    fn is_sign(self) -> bool {
        matches!(self, Token::Symbol('+' | '-'))
    }

    fn is_z(self) -> bool {
        matches!(
            self,
            Token::Word {
                keyword: Keyword::Zone(0),
                len: 1
            }
        )
    }
}

struct Scanner {
    chars: Vec<char>,
    at: usize,
    next: Token,
}

impl Scanner {
    fn new(text: &str) -> Scanner {
        let mut s = Scanner {
            chars: text.chars().collect(),
            at: 0,
            next: Token::End,
        };
        s.next = s.scan();
        s
    }

    fn peek(&self) -> Token {
        self.next
    }

    fn next(&mut self) -> Token {
        let t = self.next;
        self.next = self.scan();
        t
    }

    fn skip_symbol(&mut self, c: char) -> bool {
        if self.next == Token::Symbol(c) {
            self.next();
            true
        } else {
            false
        }
    }

    fn scan(&mut self) -> Token {
        let Some(&c) = self.chars.get(self.at) else {
            return Token::End;
        };
        if c.is_ascii_digit() {
            let start = self.at;
            let mut value: i64 = 0;
            while let Some(d) = self.chars.get(self.at).and_then(|c| c.to_digit(10)) {
                // V8 stops accumulating near the int range; the digits still count.
                if value < i64::from(i32::MAX) / 10 - 10 {
                    value = value * 10 + i64::from(d);
                }
                self.at += 1;
            }
            return Token::Number {
                value,
                digits: self.at - start,
            };
        }
        if matches!(c, ':' | '-' | '+' | '.' | ')') {
            self.at += 1;
            return Token::Symbol(c);
        }
        if c >= 'A' && !is_space(c) {
            let start = self.at;
            while self
                .chars
                .get(self.at)
                .is_some_and(|&c| c >= 'A' && !is_space(c))
            {
                self.at += 1;
            }
            let word: String = self.chars[start..self.at]
                .iter()
                .take(3)
                .flat_map(|c| c.to_lowercase())
                .collect();
            let len = self.at - start;
            return Token::Word {
                keyword: keyword(&word, len),
                len,
            };
        }
        if is_space(c) {
            while self.chars.get(self.at).is_some_and(|&c| is_space(c)) {
                self.at += 1;
            }
            return Token::Space;
        }
        if c == '(' {
            let mut depth = 0;
            while let Some(&c) = self.chars.get(self.at) {
                self.at += 1;
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
            }
            return Token::Unknown;
        }
        self.at += 1;
        Token::Unknown
    }
}

/// JavaScript's white space and line terminators, as V8's scanner reads them.
fn is_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// What a word means: its first three letters, lower-cased. A longer word
/// is only ever a month's name.
fn keyword(prefix: &str, len: usize) -> Keyword {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    if let Some(i) = MONTHS.iter().position(|m| *m == prefix) {
        return Keyword::Month(i as i64 + 1);
    }
    if len > 3 {
        return Keyword::Other;
    }
    match prefix {
        "am" => Keyword::AmPm(0),
        "pm" => Keyword::AmPm(12),
        "ut" | "utc" | "z" | "gmt" => Keyword::Zone(0),
        "cdt" => Keyword::Zone(-5),
        "cst" => Keyword::Zone(-6),
        "edt" => Keyword::Zone(-4),
        "est" => Keyword::Zone(-5),
        "mdt" => Keyword::Zone(-6),
        "mst" => Keyword::Zone(-7),
        "pdt" => Keyword::Zone(-7),
        "pst" => Keyword::Zone(-8),
        "t" => Keyword::TimeSeparator,
        _ => Keyword::Other,
    }
}

#[derive(Default)]
struct Day {
    comp: Vec<i64>,
    named_month: Option<i64>,
}

impl Day {
    fn add(&mut self, n: i64) -> bool {
        if self.comp.len() == 3 {
            return false;
        }
        self.comp.push(n);
        true
    }

    fn write(mut self) -> Option<(i64, i64, i64)> {
        if self.comp.is_empty() {
            return None;
        }
        // Day and month default to 1.
        self.comp.resize(3, 1);
        let c = &self.comp;
        let is_day = |x: i64| (1..=31).contains(&x);
        let (mut year, month, day) = match self.named_month {
            None if !is_day(c[0]) => (c[0], c[1], c[2]),
            None => (c[2], c[0], c[1]),
            Some(m) if !is_day(c[0]) => (c[0], m, c[1]),
            Some(m) => (c[1], m, c[0]),
        };
        if (0..=49).contains(&year) {
            year += 2000;
        } else if (50..=99).contains(&year) {
            year += 1900;
        }
        ((1..=12).contains(&month) && is_day(day)).then_some((year, month - 1, day))
    }
}

#[derive(Default)]
struct Time {
    comp: Vec<i64>,
    hour_offset: Option<i64>,
}

impl Time {
    fn is_empty(&self) -> bool {
        self.comp.is_empty()
    }

    fn is_expecting(&self, n: i64) -> bool {
        match self.comp.len() {
            1 | 2 => (0..=59).contains(&n),
            3 => (0..=999).contains(&n),
            _ => false,
        }
    }

    fn add(&mut self, n: i64) -> bool {
        if self.comp.len() == 4 {
            return false;
        }
        self.comp.push(n);
        true
    }

    fn add_final(&mut self, n: i64) -> bool {
        if !self.add(n) {
            return false;
        }
        self.comp.resize(4, 0);
        true
    }

    fn write(mut self) -> Option<[i64; 4]> {
        self.comp.resize(4, 0);
        let [mut hour, minute, second, ms] =
            [self.comp[0], self.comp[1], self.comp[2], self.comp[3]];
        if let Some(offset) = self.hour_offset {
            if !(0..=12).contains(&hour) {
                return None;
            }
            hour = hour % 12 + offset;
        }
        let valid = (0..=23).contains(&hour)
            && (0..=59).contains(&minute)
            && (0..=59).contains(&second)
            && (0..=999).contains(&ms);
        // A 24th hour is midnight at the day's end.
        (valid || (hour, minute, second, ms) == (24, 0, 0, 0)).then_some([hour, minute, second, ms])
    }
}

struct Zone {
    sign: i64,
    hour: i64,
    minute: i64,
}

impl Zone {
    fn set(&mut self, hours: i64) {
        self.sign = if hours < 0 { -1 } else { 1 };
        self.hour = hours.abs();
        self.minute = 0;
    }

    fn is_expecting(&self, n: i64) -> bool {
        self.hour != NONE && self.minute == NONE && (0..=59).contains(&n)
    }

    fn is_utc(&self) -> bool {
        self.hour == 0 && self.minute == 0
    }

    fn write(self) -> Option<i64> {
        if self.sign == NONE {
            return None;
        }
        let hour = if self.hour == NONE { 0 } else { self.hour };
        let minute = if self.minute == NONE { 0 } else { self.minute };
        Some(self.sign * (hour * 3600 + minute * 60))
    }
}

/// The date in `text` as V8's legacy parser reads it; `None` where V8
/// gives an invalid date.
pub(crate) fn parse(text: &str) -> Option<LegacyDate> {
    let mut s = Scanner::new(text);
    let mut day = Day::default();
    let mut time = Time::default();
    let mut zone = Zone {
        sign: NONE,
        hour: NONE,
        minute: NONE,
    };
    let mut has_read_number = false;
    while s.peek() != Token::End {
        match s.next() {
            Token::Number { value: n, .. } => {
                has_read_number = true;
                if s.skip_symbol(':') {
                    if s.skip_symbol(':') {
                        if !time.is_empty() {
                            return None;
                        }
                        time.add(n);
                        time.add(0);
                    } else {
                        if !time.add(n) {
                            return None;
                        }
                        if s.peek() == Token::Symbol('.') {
                            s.next();
                        }
                    }
                } else if s.peek() == Token::Symbol('.') && time.is_expecting(n) {
                    s.next();
                    time.add(n);
                    let Token::Number { value, digits } = s.next() else {
                        return None;
                    };
                    time.add_final(milliseconds(value, digits));
                } else if zone.is_expecting(n) {
                    zone.minute = n;
                } else if time.is_expecting(n) {
                    time.add_final(n);
                    // The time must end the text or be followed by a space,
                    // `Z` or an offset.
                    let p = s.peek();
                    if !(p == Token::End || p == Token::Space || p.is_z() || p.is_sign()) {
                        return None;
                    }
                } else {
                    if !day.add(n) {
                        return None;
                    }
                    s.skip_symbol('-');
                }
            }
            Token::Word { keyword, .. } => match keyword {
                Keyword::AmPm(h) if !time.is_empty() => time.hour_offset = Some(h),
                Keyword::Month(m) => {
                    day.named_month = Some(m);
                    s.skip_symbol('-');
                }
                Keyword::Zone(h) if has_read_number => zone.set(h),
                _ => {
                    // Words are ignored only before the first number, and
                    // must be apart from it.
                    if has_read_number || matches!(s.peek(), Token::Number { .. }) {
                        return None;
                    }
                }
            },
            t if t.is_sign() && (zone.is_utc() || !time.is_empty()) => {
                zone.sign = if t == Token::Symbol('-') { -1 } else { 1 };
                let (mut n, mut digits) = (0, 0);
                if let Token::Number { value, digits: d } = s.peek() {
                    s.next();
                    n = value;
                    digits = d;
                }
                has_read_number = true;
                if s.peek() == Token::Symbol(':') {
                    zone.hour = n;
                    zone.minute = NONE;
                } else if digits <= 2 {
                    zone.hour = n;
                    zone.minute = 0;
                } else if digits <= 4 {
                    zone.hour = n / 100;
                    zone.minute = n % 100;
                } else {
                    return None;
                }
            }
            t if (t.is_sign() || t == Token::Symbol(')')) && has_read_number => return None,
            _ => {}
        }
    }
    let (year, month, day) = day.write()?;
    let [hour, minute, second, millisecond] = time.write()?;
    Some(LegacyDate {
        year,
        month,
        day,
        hour,
        minute,
        second,
        millisecond,
        offset_seconds: zone.write(),
    })
}

/// A fraction of a second's digits as milliseconds (V8 reads three).
fn milliseconds(value: i64, digits: usize) -> i64 {
    match digits {
        0 => 0,
        1 => value * 100,
        2 => value * 10,
        3 => value,
        // Only the first three digits count: drop the others.
        n => {
            let extra = u32::try_from(n - 3).unwrap_or(u32::MAX).min(18);
            value / 10i64.pow(extra)
        }
    }
}

/// Boa's `Date`, asked first; this reader for what it calls invalid.
const WRAP_DATE: &str = r#"(function (readLegacy) {
  const BoaDate = globalThis.Date;
  const boaParse = BoaDate.parse;
  function legacy(text) {
    const r = readLegacy(String(text));
    if (r === null) return NaN;
    const d = new BoaDate(0);
    if (r[7] === null) {
      d.setFullYear(r[0], r[1], r[2]);
      d.setHours(r[3], r[4], r[5], r[6]);
      return d.getTime();
    }
    d.setUTCFullYear(r[0], r[1], r[2]);
    d.setUTCHours(r[3], r[4], r[5], r[6]);
    return d.getTime() - r[7] * 1000;
  }
  function parse(text) {
    const t = boaParse(text);
    return t === t ? t : legacy(text);
  }
  const LegacyDate = function Date(...args) {
    if (new.target === undefined) return BoaDate();
    if (args.length === 1 && typeof args[0] === 'string') {
      const t = boaParse(args[0]);
      if (t !== t) return Reflect.construct(BoaDate, [legacy(args[0])], new.target);
    }
    return Reflect.construct(BoaDate, args, new.target);
  };
  Object.defineProperty(LegacyDate, 'prototype', { value: BoaDate.prototype, writable: false });
  Object.defineProperty(BoaDate.prototype, 'constructor', { value: LegacyDate, writable: true, configurable: true });
  Object.defineProperty(LegacyDate, 'length', { value: 7 });
  LegacyDate.parse = parse;
  LegacyDate.UTC = BoaDate.UTC;
  LegacyDate.now = BoaDate.now;
  Object.defineProperty(globalThis, 'Date', { value: LegacyDate, writable: true, configurable: true });
})"#;

fn read_legacy(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let text = args
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string(ctx)?
        .to_std_string_escaped();
    Ok(match parse(&text) {
        None => JsValue::null(),
        Some(d) => {
            let fields = [
                d.year,
                d.month,
                d.day,
                d.hour,
                d.minute,
                d.second,
                d.millisecond,
            ];
            let mut values: Vec<JsValue> =
                fields.iter().map(|&n| JsValue::from(n as f64)).collect();
            values.push(
                d.offset_seconds
                    .map_or(JsValue::null(), |o| JsValue::from(o as f64)),
            );
            boa_engine::object::builtins::JsArray::from_iter(values, ctx).into()
        }
    })
}

/// Puts the `Date` that also reads V8's legacy texts in front of boa's.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let wrap = ctx.eval(Source::from_bytes(WRAP_DATE))?;
    let reader = fn_obj(
        ctx,
        "readLegacyDate",
        NativeFunction::from_fn_ptr(read_legacy),
        1,
    );
    let wrap = wrap.as_callable().ok_or_else(|| {
        boa_engine::JsNativeError::typ().with_message("the Date wrapper is not callable")
    })?;
    wrap.call(&JsValue::undefined(), &[reader.into()], ctx)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[year, month (0-based), day, hour, minute, second, ms]` and the offset.
    fn date(f: [i64; 7], offset_seconds: Option<i64>) -> Option<LegacyDate> {
        Some(LegacyDate {
            year: f[0],
            month: f[1],
            day: f[2],
            hour: f[3],
            minute: f[4],
            second: f[5],
            millisecond: f[6],
            offset_seconds,
        })
    }

    #[test]
    fn reads_what_v8_reads() {
        let cases = [
            ("March 5, 2024", date([2024, 2, 5, 0, 0, 0, 0], None)),
            (
                "05 Mar 2024 10:15:32 GMT",
                date([2024, 2, 5, 10, 15, 32, 0], Some(0)),
            ),
            (
                "Tue, 05 Mar 2024 10:15:32 +0130",
                date([2024, 2, 5, 10, 15, 32, 0], Some(5400)),
            ),
            ("2024/03/05 10:00 PM", date([2024, 2, 5, 22, 0, 0, 0], None)),
            ("3/5/24", date([2024, 2, 5, 0, 0, 0, 0], None)),
            ("March 5", date([2001, 2, 5, 0, 0, 0, 0], None)),
            (
                "Mar 5 2024 10:15:32.5 PST",
                date([2024, 2, 5, 10, 15, 32, 500], Some(-8 * 3600)),
            ),
            ("2024-03-05 10:00", date([2024, 2, 5, 10, 0, 0, 0], None)),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), want, "{text}");
        }
    }

    #[test]
    fn any_text_is_read_or_refused_without_a_panic() {
        const PARTS: [&str; 24] = [
            "Mar",
            "march",
            "2024",
            "5",
            "99999999999",
            "12",
            ":",
            "::",
            ".",
            "-",
            "+",
            ")",
            "(",
            "((",
            " ",
            "pm",
            "GMT",
            "Z",
            "T",
            "é",
            "\u{feff}",
            "0930",
            "x",
            ",",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..20_000 {
            let text: String = (0..rng.usize(0..12))
                .map(|_| PARTS[rng.usize(..PARTS.len())])
                .collect();
            if let Some(d) = parse(&text) {
                assert!(
                    (0..12).contains(&d.month) && (1..=31).contains(&d.day),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn refuses_what_v8_refuses() {
        for text in [
            "",
            "tomorrow",
            "March",
            "13/45/2024",
            "2024 nonsense",
            "25:00",
            "1 2 3 4",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}
