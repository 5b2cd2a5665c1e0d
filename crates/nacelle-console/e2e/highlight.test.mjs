// The highlighter never changes the text: for every type and sample, the HTML with its
// tags removed and its entities decoded is the input, line for line. Run with
// `node --test highlight.test.mjs` (crates/nacelle/tests/console_browser.rs does).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { highlightLines } from '../assets/highlight.js';

const decode = (html) => html.replace(/<[^>]*>/g, '')
  .replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&amp;/g, '&');

const SAMPLES = {
  yaml: ['a: 1\nb:\n  - "x: y" # c\n  - \'q\'\n---\nurl: http://h/#frag\nk: <v> & "w"\n', '- [1, 2]\n-   key: value'],
  json: ['{\n  "a": [1, 2.5e3, true, null],\n  "s": "x\\"y <&>"\n}', '[{"k":"v"}]'],
  xml: ['<?xml version="1.0"?>\n<!-- c -->\n<a x="1" y=\'2\'>t &amp; <b/></a>', '<a\n  x="1">\n</a>', '<!-- open'],
  toml: ['# t\n[s]\nk = "v" # c\n[[arr]]\nn = 1\n', 'a.b = [1, "#no"]'],
  properties: ['# c\n! d\na=b\nc : d\ne f\nk\\ s=v <x>', ''],
  text: ['anything <b> & "q"'],
  html: ['<p class="x">hi &lt;</p>'],
};

for (const [type, samples] of Object.entries(SAMPLES)) {
  test(`${type}: highlighting keeps the text`, () => {
    for (const text of samples) {
      const lines = highlightLines(text, type);
      assert.equal(lines.length, text.split('\n').length, `${type}: line count`);
      assert.equal(lines.map(decode).join('\n'), text, `${type}: ${JSON.stringify(text)}`);
    }
  });
}

test('keys, strings and comments are marked', () => {
  assert.match(highlightLines('a: "x" # c', 'yaml')[0], /hl-k">a<.*hl-s">&quot;x&quot;<.*hl-c"># c</);
  assert.match(highlightLines('{"a": 1}', 'json')[0], /hl-k">&quot;a&quot;<.*hl-n">1</);
  assert.match(highlightLines('[s]', 'toml')[0], /hl-t">\[s\]</);
});
