// Records, from Node's ICU (CLDR), how each locale writes each of
// ECMA-402's simple units, and the compound units CLDR names itself
// (kilometer-per-hour, …), for steps/src/script/intl/units.txt: ICU4X has
// the units of a few measures only.
//
//   npm pack cldr-core && tar xzf cldr-core-*.tgz
//   node scripts/intl_units.js package/availableLocales.json > steps/src/script/intl/units.txt
//
// A block per locale (`@de`), then a line per unit and width (`s`hort,
// `l`ong, `n`arrow): the unit, the width, and each plural category's
// pattern, `{0}` where the number stands. A locale's line equal to its
// fallback's (`de-AT` -> `de` -> `en`) is left out; the reader falls back
// the same way.
const fs = require('fs');
const { spawnSync } = require('child_process');
const WIDTHS = { s: 'short', l: 'long', n: 'narrow' };
const NUMBER = ['integer', 'decimal', 'fraction', 'group'];
// The compounds of sanctioned units that CLDR has as units of their own.
const COMPOUNDS = ['kilometer-per-hour', 'meter-per-second', 'mile-per-hour', 'liter-per-kilometer', 'mile-per-gallon'];
const fallback = (l) => (l.includes('-') ? l.slice(0, l.lastIndexOf('-')) : l === 'en' ? null : 'en');

function linesOf(locale) {
  const rules = new Intl.PluralRules(locale);
  const categories = rules.resolvedOptions().pluralCategories;
  // A number of each plural category.
  const samples = {};
  for (const n of [...Array(200).keys(), 0.5, 1.5, 2.5, 1000000]) {
    const c = rules.select(n);
    if (!(c in samples)) samples[c] = n;
    if (Object.keys(samples).length === categories.length) break;
  }
  const lines = [];
  for (const unit of [...Intl.supportedValuesOf('unit'), ...COMPOUNDS]) {
    for (const [w, unitDisplay] of Object.entries(WIDTHS)) {
      const f = new Intl.NumberFormat(locale, { style: 'unit', unit, unitDisplay, numberingSystem: 'latn', useGrouping: false });
      const patterns = Object.entries(samples).map(([c, n]) => {
        const text = f.formatToParts(n).map((p) => (NUMBER.includes(p.type) ? '\0' : p.value)).join('');
        return `${c}=${text.replace(/\0+/g, '{0}')}`;
      });
      lines.push(`${unit} ${w}\t${patterns.join('\t')}`);
    }
  }
  return lines;
}

if (process.argv[2] === '--one') {
  // One locale per process: V8 aborts on a few of CLDR's locales.
  process.stdout.write(linesOf(process.argv[3]).join('\n'));
} else {
  const locales = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')).availableLocales.full;
  const all = {};
  for (const locale of locales) {
    const one = spawnSync(process.execPath, [__filename, '--one', locale], { encoding: 'utf8', maxBuffer: 1 << 26 });
    if (one.status === 0) all[locale] = one.stdout.split('\n');
  }
  console.log(`# Recorded with Node ${process.versions.node}, ICU ${process.versions.icu} (CLDR ${process.versions.cldr}) by scripts/intl_units.js.`);
  for (const locale of Object.keys(all)) {
    let parent = fallback(locale);
    while (parent && !all[parent]) parent = fallback(parent);
    const inherited = new Set(parent ? all[parent] : []);
    const own = all[locale].filter((line) => !inherited.has(line));
    if (own.length) console.log([`@${locale}`, ...own].join('\n'));
  }
}
