// Parses Mermaid diagrams with mermaid's own parser (under jsdom: the
// Mermaid CLI needs a headless browser download), for tests/integration/graph.rs:
//   node mermaid-parse.mjs FILE...   -> one line per file: `ok TYPE` or `error MESSAGE`
// Exits 1 when any file fails to parse.
import { JSDOM } from 'jsdom';
import { readFileSync } from 'node:fs';

const dom = new JSDOM('<!doctype html><html><body></body></html>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
globalThis.DOMParser = dom.window.DOMParser;
globalThis.Element = dom.window.Element;
const { default: mermaid } = await import('mermaid');
mermaid.initialize({ startOnLoad: false });

let failed = false;
for (const file of process.argv.slice(2)) {
  try {
    const r = await mermaid.parse(readFileSync(file, 'utf8'));
    process.stdout.write(`ok ${r.diagramType} ${file}\n`);
  } catch (e) {
    failed = true;
    process.stdout.write(`error ${file}: ${String(e.message ?? e).split('\n').join(' | ')}\n`);
  }
}
process.exit(failed ? 1 : 0);
