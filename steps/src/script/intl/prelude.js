// Run once per script engine, before any script: puts ours in front of
// boa's Intl where boa's differs from Node's. `number` and `date` are the
// native formatters (intl/number.rs, intl/date.rs), `relative` the one
// of Intl.RelativeTimeFormat (intl/relative.rs); they are reachable from
// here only. Options travel to them as JSON text.
(function (number, date, relative) {
  const BoaNumberFormat = Intl.NumberFormat;
  const BoaDateTimeFormat = Intl.DateTimeFormat;
  // A format object of ours -> { json: its resolved options as JSON, local }.
  const own = new WeakMap();
  // The same locales and options resolve alike: a script that formats
  // many values resolves them once (a few hundred kept, then started over).
  const memo = new Map();
  function memoized(key, make) {
    let found = memo.get(key);
    if (found === undefined) {
      if (memo.size >= 256) memo.clear();
      found = make();
      memo.set(key, found);
    }
    return found;
  }
  const define = (o, name, value) =>
    Object.defineProperty(o, name, { value, writable: true, configurable: true });
  const method = (name, f) => ({ [name](...args) { return f.apply(this, args); } })[name];

  // ECMA-402's GetOption for the options ours reads: 's' text, 'n'
  // number, 'b' boolean, 'g' useGrouping's boolean or text.
  function read(options, kinds) {
    if (options === undefined) return {};
    if (options === null) throw new TypeError('Cannot convert undefined or null to object');
    const o = Object(options);
    const out = {};
    for (const k of Object.keys(kinds)) {
      const v = o[k];
      if (v === undefined) continue;
      const kind = kinds[k];
      out[k] = kind === 'n' ? Number(v)
        : kind === 'b' ? Boolean(v)
        : kind === 'g' ? (typeof v === 'boolean' ? v : String(v))
        : String(v);
    }
    return out;
  }

  // The locale Node reports: the one asked for, where boa resolves it to
  // the same language (boa says `de` for `de-DE`); boa's otherwise.
  function localeOf(locales, Boa) {
    let got;
    try {
      got = new Boa(locales).resolvedOptions().locale;
    } catch (e) {
      if (e instanceof RangeError) throw new RangeError('Incorrect locale information provided');
      throw e;
    }
    const asked = Intl.getCanonicalLocales(locales)[0];
    const language = (tag) => tag.split('-')[0];
    return asked !== undefined && language(asked) === language(got) ? asked : got;
  }

  // ---- Numbers are ours (every style, formatToParts) but for the
  // notations other than standard and other numbering systems.
  const NUMBER_OPTIONS = {
    style: 's', currency: 's', currencyDisplay: 's', currencySign: 's', unit: 's', unitDisplay: 's',
    minimumIntegerDigits: 'n', minimumFractionDigits: 'n', maximumFractionDigits: 'n',
    minimumSignificantDigits: 'n', maximumSignificantDigits: 'n', useGrouping: 'g',
    signDisplay: 's', notation: 's', roundingMode: 's', roundingIncrement: 'n',
    trailingZeroDisplay: 's', numberingSystem: 's',
  };
  const oursToo = (o) => (o.style !== undefined && o.style !== 'decimal')
    || ((o.notation === undefined || o.notation === 'standard') && o.numberingSystem === undefined);
  function makeNumber(locales, options, target, caller) {
    const asked = read(options, NUMBER_OPTIONS);
    if (!oursToo(asked)) return null;
    const json = memoized(JSON.stringify(['number', locales, asked, caller]), () => {
      asked.locale = localeOf(locales, BoaNumberFormat);
      asked.caller = caller;
      return number('resolve', JSON.stringify(asked));
    });
    const self = Object.create(target.prototype);
    own.set(self, { json });
    return self;
  }
  const NumberFormat = function NumberFormat(locales, options) {
    const target = new.target === undefined ? NumberFormat : new.target;
    return makeNumber(locales, options, target, 'Intl.NumberFormat')
      || Reflect.construct(BoaNumberFormat, [locales, options], target);
  };
  const numberProto = BoaNumberFormat.prototype;
  const boaNumberFormat = Object.getOwnPropertyDescriptor(numberProto, 'format').get;
  const boaNumberResolved = numberProto.resolvedOptions;
  const numberJson = (self) => {
    const f = own.get(self);
    return f ? f.json : JSON.stringify(boaNumberResolved.call(self));
  };
  Object.defineProperty(numberProto, 'format', {
    get() {
      const f = own.get(this);
      if (!f) return boaNumberFormat.call(this);
      return (x) => number('format', f.json, Number(x));
    },
    configurable: true,
  });
  define(numberProto, 'formatToParts', method('formatToParts', function (x) {
    return number('parts', numberJson(this), Number(x));
  }));
  define(numberProto, 'resolvedOptions', method('resolvedOptions', function () {
    const f = own.get(this);
    return f ? JSON.parse(f.json) : boaNumberResolved.call(this);
  }));
  define(numberProto, 'constructor', NumberFormat);
  Object.defineProperty(NumberFormat, 'prototype', { value: numberProto, writable: false });
  NumberFormat.supportedLocalesOf = BoaNumberFormat.supportedLocalesOf;
  define(Intl, 'NumberFormat', NumberFormat);
  const boaNumberToLocale = Number.prototype.toLocaleString;
  define(Number.prototype, 'toLocaleString', method('toLocaleString', function (locales, options) {
    const x = Number.prototype.valueOf.call(this);
    const f = makeNumber(locales, options, NumberFormat, 'Number.prototype.toLocaleString');
    return f ? f.format(x) : boaNumberToLocale.call(x, locales, options);
  }));
  // V8 joins a list's items with ',' (boa with ', ').
  define(Array.prototype, 'toLocaleString', method('toLocaleString', function (locales, options) {
    return Array.prototype.map.call(this, (x) => (x === undefined || x === null ? '' : x.toLocaleString(locales, options))).join(',');
  }));

  // ---- Dates are ours (a numeric year written whole, a zone's name,
  // formatToParts) but for dayPeriod, other calendars and numbering
  // systems, which stay boa's.
  const DATE_OPTIONS = {
    weekday: 's', era: 's', year: 's', month: 's', day: 's', dayPeriod: 's', hour: 's', minute: 's',
    second: 's', fractionalSecondDigits: 'n', timeZoneName: 's', hour12: 'b', hourCycle: 's',
    timeZone: 's', dateStyle: 's', timeStyle: 's', calendar: 's', numberingSystem: 's',
  };
  const ours = (o) => o.dayPeriod === undefined && o.calendar === undefined && o.numberingSystem === undefined;
  // The IANA name Node reports: Temporal's spelling, the UTC aliases as
  // 'UTC'; the system's zone where none is named.
  function zoneOf(name) {
    if (name === undefined) return Temporal.Now.timeZoneId();
    // Node 20 has no offset zones ('+05:30').
    if (/^[+-]/.test(name)) throw new RangeError('Invalid time zone specified: ' + name);
    let id;
    try {
      id = Temporal.Instant.fromEpochMilliseconds(0).toZonedDateTimeISO(name).timeZoneId;
    } catch (e) {
      throw new RangeError('Invalid time zone specified: ' + name);
    }
    return /^(etc\/)?(utc|uct|gmt|gmt0|universal|zulu)$/i.test(id) ? 'UTC' : id;
  }
  function makeDate(locales, options, required, defaults, target, caller) {
    const asked = read(options, DATE_OPTIONS);
    if (!ours(asked)) return null;
    const local = asked.timeZone === undefined;
    const key = JSON.stringify(['date', locales, asked, required, defaults, caller]);
    const resolved = memoized(key, () => {
      asked.timeZone = zoneOf(asked.timeZone);
      asked.locale = localeOf(locales, BoaDateTimeFormat);
      return { json: date('resolve', JSON.stringify(asked), required, defaults, caller), zone: asked.timeZone };
    });
    const self = Object.create(target.prototype);
    own.set(self, { json: resolved.json, zone: resolved.zone, local });
    return self;
  }
  const DateTimeFormat = function DateTimeFormat(locales, options) {
    const target = new.target === undefined ? DateTimeFormat : new.target;
    return makeDate(locales, options, 'any', 'date', target, 'Intl.DateTimeFormat')
      || Reflect.construct(BoaDateTimeFormat, [locales, options], target);
  };
  // The date and time of day at `x` in the format's time zone: the
  // script's own clock for the local zone, Temporal for a named one.
  // `date(op, json, ...)` with the fields of `x` in the format's zone:
  // the script's own clock for the local zone, Temporal for a named one.
  function atTime(op, f, x) {
    const t = x === undefined ? Date.now() : Number(x);
    if (!Number.isFinite(t) || Math.abs(t) > 8.64e15) throw new RangeError('Invalid time value');
    const ms = Math.trunc(t);
    if (f.local || f.zone === 'UTC') {
      const d = new Date(ms);
      return f.local
        ? date(op, f.json, d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds(), d.getMilliseconds(), -60 * d.getTimezoneOffset())
        : date(op, f.json, d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds(), 0);
    }
    const z = Temporal.Instant.fromEpochMilliseconds(ms).toZonedDateTimeISO(f.zone);
    return date(op, f.json, z.year, z.month, z.day, z.hour, z.minute, z.second, z.millisecond, Math.round(z.offsetNanoseconds / 1e9));
  }
  const dateProto = BoaDateTimeFormat.prototype;
  const boaDateFormat = Object.getOwnPropertyDescriptor(dateProto, 'format').get;
  const boaDateResolved = dateProto.resolvedOptions;
  const dateParts = (self, x) => {
    const f = own.get(self);
    if (!f) {
      throw new TypeError('formatToParts is not supported in script steps with dayPeriod, calendar or numberingSystem');
    }
    return atTime('parts', f, x);
  };
  // V8's format writes a plain space where ICU writes a narrow no-break
  // one (before AM/PM); its formatToParts keeps ICU's.
  const v8Spaces = (s) => String(s).replace(/\u202f/g, ' ');
  Object.defineProperty(dateProto, 'format', {
    get() {
      if (!own.has(this)) {
        const boaFormat = boaDateFormat.call(this);
        return (x) => v8Spaces(boaFormat(x));
      }
      const f = own.get(this);
      return (x) => atTime('format', f, x);
    },
    configurable: true,
  });
  define(dateProto, 'formatToParts', method('formatToParts', function (x) { return dateParts(this, x); }));
  define(dateProto, 'resolvedOptions', method('resolvedOptions', function () {
    const f = own.get(this);
    return f ? JSON.parse(date('reported', f.json)) : boaDateResolved.call(this);
  }));
  define(dateProto, 'constructor', DateTimeFormat);
  Object.defineProperty(DateTimeFormat, 'prototype', { value: dateProto, writable: false });
  DateTimeFormat.supportedLocalesOf = BoaDateTimeFormat.supportedLocalesOf;
  define(Intl, 'DateTimeFormat', DateTimeFormat);
  for (const [name, required, defaults] of [
    ['toLocaleString', 'any', 'all'],
    ['toLocaleDateString', 'date', 'date'],
    ['toLocaleTimeString', 'time', 'time'],
  ]) {
    const boaMethod = Date.prototype[name];
    define(Date.prototype, name, method(name, function (locales, options) {
      const t = Date.prototype.getTime.call(this);
      if (Number.isNaN(t)) return 'Invalid Date';
      const f = makeDate(locales, options, required, defaults, DateTimeFormat, 'Date.prototype.' + name);
      return f ? f.format(t) : v8Spaces(boaMethod.call(this, locales, options));
    }));
  }
  // ---- Intl.RelativeTimeFormat, which boa lacks.
  const RelativeTimeFormat = function RelativeTimeFormat(locales, options) {
    if (new.target === undefined) throw new TypeError("Constructor Intl.RelativeTimeFormat requires 'new'");
    const asked = read(options, { style: 's', numeric: 's' });
    const json = memoized(JSON.stringify(['relative', locales, asked]), () => {
      asked.locale = localeOf(locales, BoaNumberFormat);
      return relative('resolve', JSON.stringify(asked));
    });
    const self = Object.create(new.target.prototype);
    own.set(self, { json });
    return self;
  };
  const relativeOf = (self) => {
    const f = own.get(self);
    if (!f) throw new TypeError('Method Intl.RelativeTimeFormat.prototype.format called on incompatible receiver');
    return f;
  };
  const relativeProto = RelativeTimeFormat.prototype;
  define(relativeProto, 'format', method('format', function (value, unit) {
    return relative('format', relativeOf(this).json, Number(value), String(unit));
  }));
  define(relativeProto, 'formatToParts', method('formatToParts', function (value, unit) {
    return relative('parts', relativeOf(this).json, Number(value), String(unit));
  }));
  define(relativeProto, 'resolvedOptions', method('resolvedOptions', function () {
    return JSON.parse(relativeOf(this).json);
  }));
  Object.defineProperty(relativeProto, Symbol.toStringTag, { value: 'Intl.RelativeTimeFormat', configurable: true });
  RelativeTimeFormat.supportedLocalesOf = BoaNumberFormat.supportedLocalesOf;
  if (Intl.RelativeTimeFormat === undefined) define(Intl, 'RelativeTimeFormat', RelativeTimeFormat);
})
