// The audit trail (docs/audit.md), for administrators: entries filtered by time, user,
// target prefix and action, newest first, paged; and the server's verification of the
// hash chain (whole, or the first broken entry).

import { nacelle } from './api.js';
import { h, table, field, errorBox, fmtTime, hashFor, pager, pageSizeOf, fetchPage } from './ui.js';
import { t } from './i18n.js';
import { asPage } from './changes.js';

// The actions the trail records (the core's `AuditAction`).
export const AUDIT_ACTIONS = ['publish', 'remove', 'gray-publish', 'gray-stop', 'promote', 'import', 'clone', 'metadata',
  'login', 'login-failed', 'refused', 'user-create', 'user-delete', 'password-change', 'role-add', 'role-delete',
  'permission-add', 'permission-delete', 'namespace-create', 'namespace-update', 'namespace-delete',
  'change-create', 'change-event', 'change-publish', 'policy-change', 'emergency-write', 'schema-set', 'schema-remove'];

// A `datetime-local` value and ms since the epoch, both ways (the user's local time).
const toMs = (v) => { const ms = v ? new Date(v).getTime() : NaN; return Number.isFinite(ms) ? ms : undefined; };
const toInput = (ms) => {
  const n = Number(ms);
  if (!ms || !Number.isFinite(n)) return '';
  return new Date(n - new Date(n).getTimezoneOffset() * 60000).toISOString().slice(0, 16);
};

export async function auditPage(view, q) {
  const size = pageSizeOf(q);
  const since = h('input', { type: 'datetime-local', id: 'a-since', value: toInput(q.since) });
  const until = h('input', { type: 'datetime-local', id: 'a-until', value: toInput(q.until) });
  const user = h('input', { id: 'a-user', value: q.user || '', autocomplete: 'off' });
  const key = h('input', { id: 'a-key', value: q.key || '', placeholder: 'public/DEFAULT_GROUP/', autocomplete: 'off' });
  // The actions by their names in the trail (as the API and `nacelle audit ls --action` take them).
  const action = h('select', { id: 'a-action' }, h('option', { value: '' }, t('every action')), AUDIT_ACTIONS.map((a) => h('option', { value: a, class: 'data' }, a)));
  action.value = q.action || '';
  const search = (e) => {
    e.preventDefault();
    location.hash = hashFor('audit', { since: toMs(since.value), until: toMs(until.value), user: user.value.trim() || undefined,
      key: key.value.trim() || undefined, action: action.value || undefined, pageSize: q.pageSize });
  };
  const res = await fetchPage(async (pageNo) => asPage(await nacelle.get('/audit', {
    since: q.since || undefined, until: q.until || undefined, user: q.user || undefined, key: q.key || undefined,
    action: q.action || undefined, pageNo, pageSize: size,
  })), q, 'audit');
  const out = h('div', { id: 'verify-result', 'aria-live': 'polite' });
  const verify = async () => {
    out.replaceChildren(h('p', { class: 'muted' }, t('Verifying…')));
    try {
      const v = await nacelle.get('/audit/verify');
      const retained = v.anchorSeq > 0 ? ' ' + t('(entries up to {seq} were removed by retention; the chain is checked from there)', { seq: v.anchorSeq }) : '';
      out.replaceChildren(v.ok
        ? h('div', { class: 'panel okmsg', role: 'status', 'data-ok': 'true' }, h('strong', {}, t('The chain is whole.')), ' ',
          t('{checked} entries checked, up to entry {lastSeq}.', { checked: v.checked, lastSeq: v.lastSeq }) + retained)
        : h('div', { class: 'error', role: 'alert', 'data-ok': 'false', 'data-broken': v.broken ? v.broken.seq : '' },
          h('strong', {}, t('The chain is broken at entry {seq}.', { seq: v.broken ? v.broken.seq : '?' })), ' ',
          v.broken ? v.broken.message : '', ' ', t('({checked} entries checked before it.)', { checked: v.checked })));
    } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  view.replaceChildren(
    h('div', { class: 'bar' }, h('h1', { class: 'grow' }, t('Audit trail')),
      h('button', { type: 'button', id: 'verify-chain', onclick: verify }, t('Verify chain'))),
    out,
    h('form', { class: 'bar panel', role: 'search', onsubmit: search },
      field(t('Since'), since), field(t('Until'), until), field(t('User'), user), field(t('Target starts with'), key), field(t('Action'), action),
      h('button', { type: 'submit', class: 'primary', id: 'audit-search' }, t('Search'))),
    table([
      { label: '#', num: true, cell: (e) => String(e.seq) },
      { label: t('When'), cell: (e) => fmtTime(e.time) },
      { label: t('User'), cell: (e) => (e.user ? h('span', { class: 'data' }, e.user) : h('span', { class: 'muted' }, t('anonymous'))) },
      { label: t('From'), cell: (e) => h('code', {}, e.address || '—') },
      { label: t('Protocol'), cell: (e) => h('span', { class: 'data' }, e.protocol) },
      { label: t('Action'), cell: (e) => h('span', { class: 'tag', 'data-action': e.action }, e.action) },
      // A change request's events name it by its id: a link to it.
      { label: t('Target'), cell: (e) => {
        const m = e.action.startsWith('change-') ? /^(\d+)(\s.*)?$/s.exec(e.target) : null;
        return m ? [h('a', { href: hashFor('change', { id: m[1] }), 'data-change': m[1] }, h('code', {}, '#' + m[1])), m[2] ? h('code', {}, m[2]) : '']
          : h('code', { class: 'wrap' }, e.target);
      } },
      { label: t('Outcome'), cell: (e) => (e.outcome === 'ok' ? h('span', { class: 'tag ok' }, t('ok'))
        : h('span', { class: 'tag bad data wrap' }, e.outcome)) },
      { label: t('Detail'), cell: (e) => [e.detail ? h('span', { class: 'wrap data' }, e.detail) : '',
        e.changeId != null ? [' ', h('a', { href: hashFor('change', { id: e.changeId }) }, t('change #{id}', { id: e.changeId }))] : ''] },
    ], res.items, t('No entry matches.')),
    pager(res, q, 'audit', { noun: ['{n} entry', '{n} entries'], id: 'audit-pager' }),
  );
}
