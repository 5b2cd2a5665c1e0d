// A small syntax highlighter for yaml, json, xml/html, toml, properties and text: each
// line is split into tokens by a few regular expressions and wrapped in spans whose
// classes the theme colours (hl-k keys, hl-s strings, hl-n numbers/booleans, hl-c
// comments, hl-t tags/sections, hl-p punctuation). Highlighting never changes the text.

import { escapeHtml } from './ui.js';

const span = (cls, s) => `<span class="hl-${cls}">${escapeHtml(s)}</span>`;
const SCALAR = /^(true|false|null|~|yes|no|on|off|-?\d[\d_]*(\.\d+)?([eE][-+]?\d+)?|0x[0-9a-fA-F]+)$/;

function value(v) {
  const t = v.trim();
  if (!t) return escapeHtml(v);
  const lead = v.slice(0, v.indexOf(t));
  const tail = v.slice(v.indexOf(t) + t.length);
  if (/^(["']).*\1$/.test(t)) return escapeHtml(lead) + span('s', t) + escapeHtml(tail);
  if (SCALAR.test(t)) return escapeHtml(lead) + span('n', t) + escapeHtml(tail);
  return escapeHtml(v);
}

// Splits a trailing `# comment` outside quotes.
function splitComment(line, marks) {
  let q = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (q) { if (c === q) q = null; continue; }
    if (c === '"' || c === "'") q = c;
    else if (marks.includes(c) && (i === 0 || /\s/.test(line[i - 1]))) return [line.slice(0, i), line.slice(i)];
  }
  return [line, ''];
}

function yamlLine(line) {
  if (/^\s*#/.test(line)) return span('c', line);
  if (/^(---|\.\.\.)\s*$/.test(line)) return span('p', line);
  const [code, comment] = splitComment(line, '#');
  const m = /^(\s*(?:-\s+)?)([^\s:#'"][^:#]*?|"[^"]*"|'[^']*')(\s*:)(\s.*|$)/.exec(code);
  let out;
  if (m) out = escapeHtml(m[1]) + span('k', m[2]) + span('p', m[3]) + value(m[4]);
  else {
    const d = /^(\s*-\s+)(.*)$/.exec(code);
    out = d ? span('p', d[1]) + value(d[2]) : value(code);
  }
  return out + (comment ? span('c', comment) : '');
}

function propertiesLine(line) {
  if (/^\s*[#!]/.test(line)) return span('c', line);
  const m = /^(\s*)((?:\\.|[^=:\s])+)(\s*[=:]\s*|\s+)(.*)$/.exec(line);
  if (!m) return escapeHtml(line);
  return escapeHtml(m[1]) + span('k', m[2]) + span('p', m[3]) + span('s', m[4]);
}

function tomlLine(line) {
  if (/^\s*#/.test(line)) return span('c', line);
  const [code, comment] = splitComment(line, '#');
  let out;
  const sec = /^(\s*)(\[\[?[^\]]*\]\]?)(\s*)$/.exec(code);
  if (sec) out = escapeHtml(sec[1]) + span('t', sec[2]) + escapeHtml(sec[3]);
  else {
    const m = /^(\s*)([\w.\-"' ]+?)(\s*=\s*)(.*)$/.exec(code);
    out = m ? escapeHtml(m[1]) + span('k', m[2]) + span('p', m[3]) + value(m[4]) : escapeHtml(code);
  }
  return out + (comment ? span('c', comment) : '');
}

function json(text) {
  const re = /("(?:\\.|[^"\\])*")(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)|([{}\[\],])/g;
  let out = '', last = 0, m;
  while ((m = re.exec(text))) {
    out += escapeHtml(text.slice(last, m.index));
    if (m[1]) out += m[2] ? span('k', m[1]) + span('p', m[2]) : span('s', m[1]);
    else if (m[3]) out += span('n', m[3]);
    else out += span('p', m[4]);
    last = re.lastIndex;
  }
  return out + escapeHtml(text.slice(last));
}

function xml(text) {
  const re = /(<!--[\s\S]*?(?:-->|$))|(<\/?[\w:.\-]+)((?:\s+[\w:.\-]+(?:\s*=\s*(?:"[^"]*"|'[^']*'))?)*)(\s*\/?>)?|(<\?[\s\S]*?\?>)/g;
  let out = '', last = 0, m;
  while ((m = re.exec(text))) {
    out += escapeHtml(text.slice(last, m.index));
    if (m[1]) out += span('c', m[1]);
    else if (m[5]) out += span('c', m[5]);
    else {
      out += span('t', m[2]);
      out += (m[3] || '').replace(/([\w:.\-]+)(\s*=\s*)?("[^"]*"|'[^']*')?/g, (_, a, eq, v) =>
        span('k', a) + (eq ? escapeHtml(eq) : '') + (v ? span('s', v) : '')).replace(/&(?!amp;|lt;|gt;|quot;)/g, '&amp;');
      if (m[4]) out += span('t', m[4]);
    }
    last = re.lastIndex;
  }
  return out + escapeHtml(text.slice(last));
}

const BY_LINE = { yaml: yamlLine, properties: propertiesLine, toml: tomlLine };

// HTML of `text` highlighted as `type`, one string per line (so an error line can be
// marked).
export function highlightLines(text, type) {
  const perLine = BY_LINE[type];
  if (perLine) return text.split('\n').map(perLine);
  if (type === 'json') return json(text).split('\n');
  if (type === 'xml' || type === 'html') return xml(text).split('\n');
  return text.split('\n').map(escapeHtml);
}
