// Records, from Node's ICU (CLDR's availableFormats), which numeric date
// and time fields each locale pads with a zero, for
// steps/src/script/intl/padding.txt. ICU4X formats dates from CLDR's
// fixed date lengths, which pad where the locale's numeric skeletons do
// not (de: 05.03.2024 where Node writes 5.3.2024), and has no skeletons.
//
//   npm pack cldr-core && tar xzf cldr-core-*.tgz
//   node scripts/intl_padding.js package/availableLocales.json > steps/src/script/intl/padding.txt
//
// Each line: a locale, then nine 0/1 flags: day and month of year-month-day,
// day and month of month-day, month of year-month, the hour in the
// locale's 12-hour and in its 24-hour cycle, and the same two with the
// seconds and the zone's name shown (en-GB pads `03:04:05` but writes
// `3:04:05 GMT`).
const fs = require('fs');
const { spawnSync } = require('child_process');
const at = Date.UTC(2024, 2, 5, 9, 7, 9);
const padded = (locale, options, type) => {
  const part = new Intl.DateTimeFormat(locale, { timeZone: 'UTC', numberingSystem: 'latn', ...options })
    .formatToParts(at).find((p) => p.type === type);
  return part && part.value.length === 2 && part.value.startsWith('0') ? '1' : '0';
};
const n = 'numeric';
function flagsOf(locale) {
  return [
    padded(locale, { year: n, month: n, day: n }, 'day'),
    padded(locale, { year: n, month: n, day: n }, 'month'),
    padded(locale, { month: n, day: n }, 'day'),
    padded(locale, { month: n, day: n }, 'month'),
    padded(locale, { year: n, month: n }, 'month'),
    padded(locale, { hour: n, minute: n, hourCycle: 'h12' }, 'hour'),
    padded(locale, { hour: n, minute: n, hourCycle: 'h23' }, 'hour'),
    padded(locale, { hour: n, minute: n, second: n, hourCycle: 'h12', timeZoneName: 'short' }, 'hour'),
    padded(locale, { hour: n, minute: n, second: n, hourCycle: 'h23', timeZoneName: 'short' }, 'hour'),
  ].join('');
}
if (process.argv[2] === '--one') {
  // One locale per process: V8 aborts on a few of CLDR's locales.
  process.stdout.write(flagsOf(process.argv[3]));
} else {
  const locales = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')).availableLocales.full;
  console.log(`# Recorded with Node ${process.versions.node}, ICU ${process.versions.icu} (CLDR ${process.versions.cldr}) by scripts/intl_padding.js.`);
  for (const locale of locales) {
    const one = spawnSync(process.execPath, [__filename, '--one', locale], { encoding: 'utf8' });
    if (one.status === 0 && /^[01]{9}$/.test(one.stdout)) console.log(`${locale} ${one.stdout}`);
  }
}
