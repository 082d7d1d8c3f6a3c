// Parses Mermaid diagrams with the real Mermaid (npm `mermaid`, in a DOM
// from `jsdom`): one JSON list of {name, text} on stdin, one line per
// diagram on stdout: `ok NAME` or `error NAME: MESSAGE`.
import { JSDOM } from 'jsdom';
import fs from 'fs';

const dom = new JSDOM('<!doctype html><html><body></body></html>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import('mermaid');

for (const { name, text } of JSON.parse(fs.readFileSync(0, 'utf8'))) {
  try {
    await mermaid.parse(text);
    console.log(`ok ${name}`);
  } catch (e) {
    console.log(`error ${name}: ${String(e.message || e).split('\n').join(' ')}`);
  }
}
