// Small DOM helpers shared by the pages: an element builder, dialogs, toasts, tables,
// time formatting, the merge view of a diff and the one place errors are turned into
// messages.

import { mergeView } from './editor.bundle.js';
import { t, locale } from './i18n.js';
import { serverText } from './messages.js';

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'html') el.innerHTML = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function escapeHtml(s) {
  return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
}

// A time in the user's language and locale.
export function fmtTime(ms) {
  if (!ms) return '—';
  return new Date(ms).toLocaleString(locale(), { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
}

export function toast(msg) {
  const el = h('div', { class: 'toast' }, msg);
  const box = document.getElementById('toasts');
  box.append(el);
  while (box.children.length > 2) box.firstChild.remove();
  setTimeout(() => el.remove(), 2500);
}

// The message of an error, where the page shows it.
export function errorBox(e) {
  if (!e) return h('div', { class: 'error', hidden: true });
  const denied = e.status === 403 || e.status === 401;
  const reason = serverText(e.message);
  const text = denied ? t('Not allowed: {reason}', { reason }) : reason;
  return h('div', { class: 'error', role: 'alert', 'data-status': e.status ?? '' }, text);
}

export function showError(slot, e) {
  slot.replaceChildren(e ? errorBox(e) : '');
}

// A modal dialog; resolves with the value of the button pressed (Esc: null).
export function modal(title, body, buttons, opts = {}) {
  return new Promise((resolve) => {
    const d = h('dialog', { class: opts.small ? 'small' : '', 'aria-label': title });
    const btns = buttons.map((b) =>
      h('button', { type: 'button', class: b.class || '', 'data-value': b.value,
        onclick: async () => {
          if (b.action) {
            try { const ok = await b.action(); if (ok === false) return; } catch { return; }
          }
          d.close(b.value);
        } }, b.label));
    d.append(h('h2', {}, title), body, h('div', { class: 'buttons' }, btns));
    // Enter in a field presses the dialog's main button (the last one).
    d.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && e.target.tagName === 'INPUT') {
        e.preventDefault();
        btns[btns.length - 1].click();
      }
    });
    d.addEventListener('close', () => { d.remove(); resolve(d.returnValue || null); });
    document.body.append(d);
    d.showModal();
    const first = d.querySelector('[autofocus]') || d.querySelector('input,select,textarea') || btns[btns.length - 1];
    if (first) first.focus();
  });
}

export async function confirmDanger(title, text, label = t('Delete')) {
  const v = await modal(title, h('p', {}, text), [
    { label: t('Cancel'), value: 'cancel' },
    { label, value: 'ok', class: 'danger solid' },
  ], { small: true });
  return v === 'ok';
}

export function table(columns, rows, empty = t('Nothing here yet.')) {
  const head = h('tr', {}, columns.map((c) => h('th', { class: c.num ? 'num' : '', scope: 'col' }, c.label)));
  const body = rows.length
    ? rows.map((r) => h('tr', {}, columns.map((c) => h('td', { class: (c.num ? 'num ' : '') + (c.class || ''), 'data-label': typeof c.label === 'string' ? c.label : null }, c.cell(r)))))
    : [h('tr', {}, h('td', { colspan: columns.length, class: 'empty' }, empty))];
  return h('div', { class: 'tablewrap' }, h('table', {}, h('thead', {}, head), h('tbody', {}, body)));
}

export function field(label, input) {
  return h('label', { class: 'f' }, label, input);
}

// A diff of two texts in CodeMirror's merge view: side by side, or in one column on a
// narrow screen; "No differences." when they are equal.
export function diffPane(a, b, type = 'text', opts = {}) {
  const box = h('div', { class: 'merge' + (opts.short ? ' short' : ''), 'aria-label': t('Diff'), 'data-changed': a !== b ? 'true' : 'false' });
  if (a === b) {
    box.append(h('p', { class: 'muted nodiff' }, t('No differences.')));
    return box;
  }
  const unified = opts.unified ?? window.innerWidth < 700;
  const labels = h('div', { class: 'merge-labels' + (unified ? ' unified' : '') },
    h('span', {}, opts.from || t('before')), unified ? ' → ' : '', h('span', {}, opts.to || t('after')));
  box.append(labels);
  const mv = mergeView(box, { a, b, type, unified });
  box.mergeView = mv;
  return box;
}

export function keyParams(k) {
  return { namespace: k.namespace || '', group: k.group, dataId: k.dataId };
}

export function hashFor(page, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null) q.set(k, v);
  const s = q.toString();
  return '#/' + page + (s ? '?' + s : '');
}

// The page size the user chose last (any list), and the sizes offered.
export const PAGE_SIZES = [10, 20, 50, 100];
export function pageSizeOf(q, fallback = 20) {
  const n = Number(q.pageSize || localStorage.getItem('nacelle.pageSize') || fallback);
  return PAGE_SIZES.includes(n) ? n : fallback;
}
// A page number from the URL: a whole number ≥ 1 (anything else is page 1).
export function pageNoOf(q) {
  const n = Math.floor(Number(q.pageNo || 1));
  return Number.isFinite(n) && n >= 1 ? n : 1;
}

// A pager: "N items · page P of M", Previous/Next, the first, last and nearby page
// numbers, and the page size (remembered).
export function pager(res, q, page, { noun = ['{n} item', '{n} items'], id = 'pager', param = 'pageNo', sizes = true } = {}) {
  const pages = Math.max(1, res.pages || 0);
  const cur = Math.min(Math.max(1, res.pageNo || 1), pages);
  const go = (n) => hashFor(page, { ...q, [param]: n });
  const nums = [...new Set([1, cur - 2, cur - 1, cur, cur + 1, cur + 2, pages])].filter((n) => n >= 1 && n <= pages).sort((a, b) => a - b);
  const links = [];
  nums.forEach((n, i) => {
    if (i && n - nums[i - 1] > 1) links.push(h('span', { class: 'gap' }, '…'));
    links.push(h('a', { class: 'btn num' + (n === cur ? ' current' : ''), href: go(n), 'data-page': n, 'aria-current': n === cur ? 'page' : null, 'aria-label': t('Page {n}', { n }) }, String(n)));
  });
  const size = h('select', { id: id + '-size', 'aria-label': t('Per page'), onchange: () => {
    localStorage.setItem('nacelle.pageSize', size.value);
    location.hash = hashFor(page, { ...q, pageSize: size.value, pageNo: 1 });
  } }, PAGE_SIZES.map((n) => h('option', { value: n }, t('{n} per page', { n }))));
  size.value = String(pageSizeOf(q));
  return h('nav', { class: 'pager', id, 'aria-label': t('Pages') },
    h('span', { class: 'count' }, t(noun[res.total === 1 ? 0 : 1], { n: res.total }) + ' · ' + t('page {p} of {m}', { p: cur, m: pages })),
    h('a', { class: 'btn', href: go(cur - 1), hidden: cur <= 1, 'data-page': 'prev' }, t('← Previous')),
    links,
    h('a', { class: 'btn', href: go(cur + 1), hidden: cur >= pages, 'data-page': 'next' }, t('Next →')),
    sizes ? size : '');
}

// A page of a list from the console API, kept in range: a page number past the last
// page shows the last page (and the URL says so).
export async function fetchPage(fetcher, q, page) {
  const pageNo = pageNoOf(q);
  let res = await fetcher(pageNo);
  if (res.pages > 0 && pageNo > res.pages) {
    res = await fetcher(res.pages);
    history.replaceState(null, '', hashFor(page, { ...q, pageNo: res.pages }));
  }
  return res;
}
