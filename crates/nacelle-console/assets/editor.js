// The config editor: highlighted text area with line numbers, validation by the server
// (the core's check for the type; the error's line is marked), a diff against the
// current version before every publish, and compare-and-set: the publish carries the
// md5 of the version that was opened, and a conflict is shown instead of overwriting.

import { api } from './api.js';
import { h, field, modal, diffView, errorBox, showError, toast, fmtTime, hashFor, keyParams } from './ui.js';
import { highlightLines } from './highlight.js';

const TYPES = ['yaml', 'properties', 'json', 'xml', 'toml', 'text', 'html'];

function typeFromName(dataId) {
  const ext = (dataId.split('.').pop() || '').toLowerCase();
  return { yml: 'yaml', yaml: 'yaml', json: 'json', xml: 'xml', toml: 'toml', properties: 'properties', html: 'html', htm: 'html' }[ext] || 'text';
}

// A code area: a transparent textarea over a <pre> holding the highlighted text.
export function codeArea(initial, type, onInput) {
  const ta = h('textarea', { spellcheck: 'false', autocapitalize: 'off', autocomplete: 'off', 'aria-label': 'Content', id: 'content' });
  ta.value = initial;
  const pre = h('pre', { 'aria-hidden': 'true' });
  const gutter = h('pre', { class: 'gutter mono', 'aria-hidden': 'true' });
  const state = { type, errLine: null };
  const paint = () => {
    const lines = highlightLines(ta.value, state.type);
    pre.innerHTML = lines.map((l, i) => (i + 1 === state.errLine ? `<span class="line-err">${l || ' '}</span>` : l)).join('\n') + '\n';
    gutter.innerHTML = lines.map((_, i) => (i + 1 === state.errLine ? `<span class="bad">${i + 1}</span>` : String(i + 1))).join('\n') + '\n';
    pre.scrollTop = ta.scrollTop; pre.scrollLeft = ta.scrollLeft; gutter.scrollTop = ta.scrollTop;
  };
  ta.addEventListener('input', () => { paint(); onInput && onInput(); });
  ta.addEventListener('scroll', () => { pre.scrollTop = ta.scrollTop; pre.scrollLeft = ta.scrollLeft; gutter.scrollTop = ta.scrollTop; });
  ta.addEventListener('keydown', (e) => {
    if (e.key === 'Tab' && !e.shiftKey && !e.ctrlKey && !e.metaKey && !e.altKey) {
      // Two spaces; Esc then Tab leaves the editor (keyboard users are not trapped).
      if (ta.dataset.escaped === '1') { ta.dataset.escaped = ''; return; }
      e.preventDefault();
      ta.setRangeText('  ', ta.selectionStart, ta.selectionEnd, 'end');
      paint(); onInput && onInput();
    } else if (e.key === 'Escape') { ta.dataset.escaped = '1'; }
    else ta.dataset.escaped = '';
  });
  paint();
  const el = h('div', { class: 'editor' }, gutter, h('div', { class: 'code' }, pre, ta));
  return {
    el, textarea: ta,
    get value() { return ta.value; },
    set value(v) { ta.value = v; paint(); },
    setType(t) { state.type = t; paint(); },
    markError(line) { state.errLine = line || null; paint(); },
    goTo(line) {
      const lines = ta.value.split('\n');
      const pos = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
      ta.focus(); ta.setSelectionRange(pos, pos + (lines[line - 1] || '').length);
      ta.scrollTop = Math.max(0, (line - 5) * 20);
    },
  };
}

export async function editorPage(view, q, ctx) {
  const isNew = !q.dataId;
  const key = { namespace: q.namespace ?? ctx.namespace, group: q.group || 'DEFAULT_GROUP', dataId: q.dataId || '' };
  let opened = null;
  if (!isNew) {
    try { opened = await api.get('/config', keyParams(key)); }
    catch (e) { if (e.status !== 404) throw e; }
    if (!opened) {
      view.replaceChildren(h('h1', {}, 'Config not found'), errorBox({ message: `${key.group} / ${key.dataId} does not exist in this namespace.` }),
        h('a', { class: 'btn', href: hashFor('configs', {}) }, 'Back to configs'));
      return;
    }
  }
  const dataId = h('input', { id: 'f-dataId', value: key.dataId, required: true, disabled: !isNew, autocomplete: 'off' });
  const group = h('input', { id: 'f-group', value: key.group, required: true, disabled: !isNew, autocomplete: 'off' });
  const typeSel = h('select', { id: 'f-type' }, TYPES.map((t) => h('option', { value: t }, t)));
  typeSel.value = opened ? opened.type : typeFromName(key.dataId);
  const appName = h('input', { id: 'f-app', value: opened?.appName || '', autocomplete: 'off' });
  const desc = h('input', { id: 'f-desc', value: opened?.desc || '', autocomplete: 'off' });
  const status = h('div', { class: 'status', id: 'validation', 'aria-live': 'polite' });
  const errSlot = h('div', { id: 'publish-error' });
  let validateTimer = null;
  const code = codeArea(opened ? opened.content : '', typeSel.value, () => {
    clearTimeout(validateTimer);
    validateTimer = setTimeout(() => validate(false), 500);
  });
  let lastValid = null;

  async function validate(show = true) {
    try {
      const r = await api.post('/validate', { type: typeSel.value, content: code.value });
      lastValid = r;
      code.markError(r.ok ? null : r.line);
      if (r.ok) {
        status.replaceChildren(h('span', { class: 'tag ok' }, `valid ${r.type}`));
      } else {
        const where = r.line ? `line ${r.line}${r.column ? ', column ' + r.column : ''}` : '';
        status.replaceChildren(
          h('span', { class: 'tag bad' }, `invalid ${r.type}`),
          h('span', { class: 'error', role: 'alert', id: 'validation-error' }, (where ? where + ': ' : '') + r.message),
          r.line ? h('button', { type: 'button', class: 'link', onclick: () => code.goTo(r.line) }, 'Go to line') : '');
      }
      return r;
    } catch (e) {
      if (show) status.replaceChildren(errorBox(e));
      throw e;
    }
  }

  dataId.addEventListener('input', () => { if (isNew) { typeSel.value = typeFromName(dataId.value); code.setType(typeSel.value); } });
  typeSel.addEventListener('change', () => { code.setType(typeSel.value); validate(); });

  async function reviewAndPublish() {
    showError(errSlot, null);
    const k = isNew ? { namespace: key.namespace, group: group.value.trim(), dataId: dataId.value.trim() } : key;
    if (!k.dataId || !k.group) { showError(errSlot, { message: 'Data ID and group are required.' }); return; }
    if (!code.value.trim()) { showError(errSlot, { message: 'The content is empty.' }); return; }
    let v;
    try { v = await validate(); } catch { return; }
    if (!v.ok) { code.goTo(v.line || 1); return; }
    let d;
    try { d = await api.post('/diff', { old: opened ? opened.content : '', new: code.value }); }
    catch (e) { showError(errSlot, e); return; }
    const pubErr = h('div');
    const body = h('div', {},
      h('p', { class: 'muted' }, isNew ? `New config ${k.group} / ${k.dataId} (${typeSel.value}).`
        : `Changes to ${k.group} / ${k.dataId} against the version opened at ${fmtTime(opened.modified)}.`),
      diffView(d.diff), pubErr);
    const choice = await modal('Review and publish', body, [
      { label: 'Cancel', value: 'cancel' },
      { label: 'Publish', value: 'publish', class: 'primary', action: async () => {
        try {
          const r = await api.post('/config', { ...keyParams(k), content: code.value, type: typeSel.value,
            appName: appName.value, desc: desc.value, tags: opened?.tags || '',
            casMd5: opened ? opened.md5 : '' });
          k.md5 = r.md5;
          return true;
        } catch (e) {
          if (e.conflict && !isNew) {
            // Keep the text being edited; compare and compare-and-set against their
            // version from now on.
            try { opened = await api.get('/config', keyParams(k)); } catch { /* shown below */ }
            // The diff shown is against the old version: publishing from here is off.
            const btn = pubErr.closest('dialog')?.querySelector('button[data-value=publish]');
            if (btn) btn.disabled = true;
            pubErr.replaceChildren(h('div', { class: 'notice', role: 'alert', id: 'conflict' },
              `Someone else changed this config since you opened it (now md5 ${opened.md5}, ${fmtTime(opened.modified)}${opened.srcUser ? ' by ' + opened.srcUser : ''}). Nothing was published. Your text is kept: review again to see the diff against their version.`));
          } else if (e.conflict) {
            pubErr.replaceChildren(h('div', { class: 'notice', role: 'alert', id: 'conflict' },
              `${k.group} / ${k.dataId} already exists (someone created it meanwhile). Nothing was published: open it from the configs list to edit it.`));
          } else {
            pubErr.replaceChildren(errorBox(e));
          }
          return false;
        }
      } },
    ]);
    if (choice === 'publish') {
      toast(`Published ${k.dataId}`);
      location.hash = hashFor('edit', keyParams(k));
      if (!isNew) ctx.rerender();
    }
  }

  const publishBtn = h('button', { type: 'button', class: 'primary', id: 'review', onclick: reviewAndPublish, title: 'Ctrl+S' }, 'Review & publish');
  view.onkeydown = (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === 's') { e.preventDefault(); reviewAndPublish(); }
  };
  const links = opened ? [
    h('a', { class: 'btn', href: hashFor('history', { ...keyParams(key), type: opened.type }) }, 'History'),
    h('a', { class: 'btn', href: hashFor('gray', keyParams(key)) }, 'Gray release'),
    h('a', { class: 'btn', href: hashFor('listeners', keyParams(key)) }, 'Listeners'),
  ] : [];
  view.replaceChildren(
    h('div', { class: 'crumbs' }, h('a', { href: hashFor('configs', {}) }, 'Configs'), ' / ', isNew ? 'new' : `${key.group} / ${key.dataId}`),
    h('h1', {}, isNew ? 'New config' : key.dataId, opened ? h('span', { class: 'sub' }, `md5 ${opened.md5} · modified ${fmtTime(opened.modified)}${opened.srcUser ? ' by ' + opened.srcUser : ''}`) : ''),
    h('div', { class: 'meta' }, field('Data ID', dataId), field('Group', group), field('Type', typeSel), field('App', appName), field('Description', desc)),
    code.el,
    status,
    errSlot,
    h('div', { class: 'bar' }, publishBtn, h('button', { type: 'button', onclick: () => validate() }, 'Validate'), ...links,
      h('span', { class: 'muted grow' }, h('kbd', {}, 'Ctrl'), '+', h('kbd', {}, 'S'), ' reviews the diff and publishes')),
  );
  (isNew ? dataId : code.textarea).dataset.autofocus = '1';
  if (code.value) validate(false).catch(() => {});
}
