// Change requests and review policies (docs/change-requests.md), over Nacelle's own API
// `/nacos/nacelle/v1`: the list of requests, one request (its keys, the side-by-side diff
// of every key against the server's content, its timeline and the actions its state
// allows), the review policies, and what the editor needs to propose a change instead of
// publishing. The console decides nothing: a button the state offers may still be refused
// by the server (who may approve is a permission), and its reason is shown where the
// action was taken.

import { nacelle, session } from './api.js';
import { h, table, field, modal, confirmDanger, diffPane, errorBox, showError, toast, fmtTime, hashFor, keyParams, pager, pageSizeOf, fetchPage } from './ui.js';
import { t } from './i18n.js';
import { stateText } from './messages.js';

// The console names the default namespace '' ; Nacelle's API 'public'.
export const consoleNs = (id) => (id === 'public' ? '' : id || '');
export const apiNs = (id) => id || 'public';

// A page of Nacelle's API ({totalCount, pageNumber, pagesAvailable, pageItems}) as the
// console's pager reads it.
export const asPage = (p) => ({ total: p.totalCount, pageNo: p.pageNumber, pages: p.pagesAvailable, items: p.pageItems || [] });

// ---------- review policies ----------
/** The policies of the namespaces the user sees; none when they cannot be read. */
export async function reviewPolicies() {
  try { return await nacelle.get('/review-policies'); } catch { return []; }
}

/** Whether a group pattern (exact, `*` wildcards, case kept) covers `group`, as the server's. */
export function groupMatches(pattern, group) {
  const esc = pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp('^' + esc.join('.*') + '$', 's').test(group);
}

/** The policy covering a key (the one asking the most approvals), or null. */
export function policyFor(policies, namespace, group) {
  let best = null;
  for (const p of policies || []) {
    if (consoleNs(p.namespaceId) !== (namespace || '') || !groupMatches(p.groupPattern, group)) continue;
    if (!best || p.requiredApprovals > best.requiredApprovals) best = p;
  }
  return best;
}

/** Proposes `content` for key `k` as a change request; resolves with the request. */
export function proposeChange(k, { content, type, title, description, draft }) {
  return nacelle.post('/changes', {}, { json: {
    namespaceId: apiNs(k.namespace), title, description, draft: !!draft,
    items: [{ group: k.group, dataId: k.dataId, content, type }],
  } });
}

/** An administrator's reason for writing past a policy, as the `X-Nacelle-Emergency`
 * header carries it: a header holds printable ASCII, anything else is percent-encoded. */
export function emergencyHeader(reason) {
  const r = reason.trim();
  return { 'X-Nacelle-Emergency': /^[\x20-\x7e]*$/.test(r) ? r : encodeURIComponent(r) };
}

const STATE_CLASS = { open: 'warn', approved: 'ok', rejected: 'bad', published: 'ok', closed: '', draft: '' };
const stateTag = (s) => h('span', { class: 'tag ' + (STATE_CLASS[s] || ''), 'data-state': s }, stateText(s));
const staleTag = () => h('span', { class: 'tag bad', 'data-stale': 'true' }, t('stale'));

// ---------- the list ----------
export async function changesPage(view, q, ctx) {
  const size = pageSizeOf(q);
  const nsParam = q.ns ?? ctx.namespace;
  const state = h('select', { id: 'cr-state', 'aria-label': t('State') },
    h('option', { value: '' }, t('every state')),
    ['draft', 'open', 'approved', 'rejected', 'published', 'closed'].map((s) => h('option', { value: s }, stateText(s))));
  state.value = q.state || '';
  const ns = h('select', { id: 'cr-ns', 'aria-label': t('Namespace') },
    h('option', { value: '*' }, t('every namespace')),
    ctx.namespaces().map((n) => h('option', { value: n.id }, n.name)));
  ns.value = nsParam;
  const go = () => { location.hash = hashFor('changes', { state: state.value || undefined, ns: ns.value, pageSize: q.pageSize }); };
  state.onchange = go;
  ns.onchange = go;
  const res = await fetchPage(async (pageNo) => asPage(await nacelle.get('/changes', {
    namespaceId: nsParam === '*' ? undefined : apiNs(nsParam), state: q.state || undefined, pageNo, pageSize: size,
  })), q, 'changes');
  const nsName = (id) => { const n = ctx.namespaces().find((x) => x.id === consoleNs(id)); return n ? n.name : id; };
  view.replaceChildren(
    h('div', { class: 'bar' }, h('h1', { class: 'grow' }, t('Change requests')),
      h('a', { class: 'btn', id: 'policies-link', href: hashFor('policies', {}) }, t('Review policies'))),
    h('p', { class: 'muted' }, t('A change request holds one or more key changes, reviewed and then published in one transaction. Propose one from the editor of a config.')),
    h('div', { class: 'bar panel' }, field(t('State'), state), field(t('Namespace'), ns)),
    table([
      { label: '#', cell: (c) => h('a', { href: hashFor('change', { id: c.id }), 'data-change': c.id }, String(c.id)) },
      { label: t('Title'), cell: (c) => h('a', { class: 'data', href: hashFor('change', { id: c.id }) }, c.title) },
      { label: t('Namespace'), cell: (c) => nsName(c.namespaceId) },
      { label: t('Author'), cell: (c) => (c.author ? h('span', { class: 'data' }, c.author) : h('span', { class: 'muted' }, '—')) },
      { label: t('State'), cell: (c) => [stateTag(c.state), c.stale ? [' ', staleTag()] : '',
        c.publishAt ? [' ', h('span', { class: 'tag', title: fmtTime(c.publishAt) }, t('scheduled'))] : ''] },
      { label: t('Keys'), num: true, cell: (c) => String(c.itemCount) },
      { label: t('Updated'), cell: (c) => fmtTime(c.updatedTime) },
    ], res.items, t('No change request here.')),
    pager(res, q, 'changes', { noun: ['{n} change request', '{n} change requests'], id: 'changes-pager' }),
  );
}

// ---------- one request ----------
const EVENT_WORDS = {
  created: 'created', opened: 'opened', edited: 'edited', commented: 'commented', approved: 'approved',
  rejected: 'rejected', rebased: 'rebased', stale: 'found stale', scheduled: 'scheduled', published: 'published', closed: 'closed',
};

function eventText(e) {
  if (e.kind === 'scheduled') return e.text ? t('publish at {when}', { when: fmtTime(Number(e.text)) }) : t('schedule cleared');
  if (e.kind === 'stale') return t('changed on the server since: {keys}', { keys: e.text });
  return e.text;
}

export async function changePage(view, q, ctx) {
  const id = q.id;
  const cr = await nacelle.get('/change', { id });
  let diffs = null, diffErr = null;
  try { diffs = await nacelle.get('/change/diff', { id }); } catch (e) { diffErr = e; }
  const s = session();
  const me = s ? s.username : null;
  const admin = !!(s && s.globalAdmin);
  // Without authentication there are no users: the server decides alone.
  const mine = !s || me === cr.author || admin;
  const final = cr.state === 'published' || cr.state === 'closed';
  const moved = (diffs || []).some((d) => d.moved);
  const errSlot = h('div', { id: 'change-error' });

  // One action: the server's answer re-renders the page; its refusal is shown in `slot`.
  const act = async (what, params, slot) => {
    try {
      await nacelle.post('/change/' + what, { id, ...params });
      return true;
    } catch (e) { showError(slot, e); return false; }
  };
  const done = (msg) => { toast(msg); ctx.rerender(); };
  // A dialog with a text (comment, reason); `required`: the text may not be blank.
  const textDialog = async (title, label, button, what, { required = false, cls = 'primary', versioned = true, intro = '' } = {}) => {
    const text = h('textarea', { id: 'cr-text', rows: 3, maxlength: 4096 });
    const err = h('div', { id: 'cr-dialog-error' });
    const v = await modal(title, h('div', {}, intro ? h('p', { class: 'muted' }, intro) : '', field(label, text), err), [
      { label: t('Cancel'), value: 'cancel' },
      { label: button, value: 'ok', class: cls, action: async () => {
        if (required && !text.value.trim()) { showError(err, { message: t('Write the reason first.') }); return false; }
        return act(what, { text: text.value, ...(versioned ? { version: cr.version } : {}) }, err);
      } },
    ], { small: true });
    return v === 'ok';
  };

  const buttons = [];
  const btn = (what, label, onclick, cls = '') => buttons.push(h('button', { type: 'button', class: cls, 'data-action': what, onclick }, label));
  if (mine && (cr.state === 'draft' || cr.state === 'rejected')) {
    btn('open', t('Open for review'), async () => { if (await act('open', { version: cr.version }, errSlot)) done(t('Opened for review')); }, 'primary');
  }
  // Who may review is a permission only the server knows (`a` on every key, not the
  // author): Approve and Reject are offered to every signed-in user while the request is
  // under review, and a refusal is shown in the dialog.
  if (s && (cr.state === 'open' || cr.state === 'approved')) {
    btn('approve', t('Approve'), async () => {
      if (await textDialog(t('Approve change request {id}', { id }), t('Comment (optional)'), t('Approve'), 'approve', { intro: t('You approve version {version} of this request, as shown on this page.', { version: cr.version }) })) done(t('Approved'));
    }, 'primary');
    btn('reject', t('Reject'), async () => {
      if (await textDialog(t('Reject change request {id}', { id }), t('Reason'), t('Reject'), 'reject', { required: true, cls: 'danger solid' })) done(t('Rejected'));
    }, 'danger');
  }
  const ready = (cr.state === 'approved' || (cr.state === 'open' && cr.requiredApprovals === 0)) && !cr.stale;
  if (ready) {
    btn('publish', t('Publish'), async () => {
      const err = h('div', { id: 'cr-dialog-error' });
      const v = await modal(t('Publish change request {id}', { id }), h('div', {},
        h('p', {}, t('Writes its {n} key(s) in one transaction: if any of them changed on the server since the request was written, nothing is written.', { n: cr.itemCount })), err), [
        { label: t('Cancel'), value: 'cancel' },
        { label: t('Publish'), value: 'ok', class: 'primary', action: () => act('publish', { version: cr.version }, err) },
      ], { small: true });
      if (v === 'ok') done(t('Published change request {id}', { id }));
    }, 'primary');
  }
  if (mine && !final && (cr.stale || moved)) {
    btn('rebase', t('Rebase'), async () => {
      const ok = await confirmDanger(t('Rebase change request {id}', { id }),
        t('The keys\' current server content becomes the base of the request. Earlier approvals no longer count: it is reviewed again.'), t('Rebase'));
      if (ok && await act('rebase', { version: cr.version }, errSlot)) done(t('Rebased'));
    });
  }
  if (mine && !final && cr.state !== 'draft' && cr.state !== 'rejected') {
    btn('schedule', cr.publishAt ? t('Reschedule') : t('Schedule'), async () => {
      const at = h('input', { type: 'datetime-local', id: 'cr-at', value: cr.publishAt ? localInput(cr.publishAt) : '' });
      const err = h('div', { id: 'cr-dialog-error' });
      const v = await modal(t('Schedule the publish of change request {id}', { id }), h('div', {},
        h('p', { class: 'muted' }, t('The server publishes it at that time if it is approved then (and not stale); a cluster publishes it once.')), field(t('Publish at'), at), err), [
        { label: t('Cancel'), value: 'cancel' },
        cr.publishAt ? { label: t('Clear the schedule'), value: 'clear', action: () => act('schedule', { publishAt: '' }, err) } : null,
        { label: t('Schedule'), value: 'ok', class: 'primary', action: async () => {
          const ms = at.value ? new Date(at.value).getTime() : NaN;
          if (!Number.isFinite(ms)) { showError(err, { message: t('Choose a date and time.') }); return false; }
          return act('schedule', { publishAt: ms }, err);
        } },
      ].filter(Boolean), { small: true });
      if (v === 'ok') done(t('Scheduled'));
      if (v === 'clear') done(t('Schedule cleared'));
    });
  }
  if (mine && !final) {
    btn('close', t('Close'), async () => {
      if (await textDialog(t('Close change request {id}', { id }), t('Reason (optional)'), t('Close request'), 'close', { cls: 'danger solid', versioned: false, intro: t('A closed request is kept, but it can no longer be published.') })) done(t('Closed'));
    }, 'danger');
  }

  const typeOf = {};
  for (const i of cr.items || []) typeOf[`${i.group}/${i.dataId}`] = i.type || 'text';
  const diffSection = diffErr ? errorBox(diffErr) : h('div', { class: 'stack', id: 'change-diffs' }, (diffs || []).map((d) => {
    const name = `${d.group} / ${d.dataId}`;
    const cur = d.current ?? '';
    const prop = d.proposed ?? '';
    return h('section', { class: 'panel card', 'data-key': `${d.group}/${d.dataId}` },
      h('div', { class: 'bar' }, h('h3', { class: 'grow' }, h('a', { href: hashFor('edit', keyParams({ namespace: consoleNs(cr.namespaceId), group: d.group, dataId: d.dataId })) }, name), ' ',
        h('span', { class: 'tag' + (d.op === 'remove' ? ' bad' : '') }, d.op === 'remove' ? t('remove') : t('publish')),
        d.current == null ? [' ', h('span', { class: 'tag' }, t('new config'))] : '',
        d.moved && !final ? [' ', h('span', { class: 'tag bad', 'data-moved': 'true', title: t('based on md5 {md5}', { md5: d.baseMd5 || '—' }) }, t('changed on the server since'))] : '')),
      diffPane(cur, prop, typeOf[`${d.group}/${d.dataId}`] || 'text', {
        from: d.current == null ? t('on the server: nothing') : t('on the server now'),
        to: d.op === 'remove' ? t('removed') : t('proposed'),
      }));
  }));

  const comment = h('textarea', { id: 'cr-comment', rows: 2, maxlength: 4096, placeholder: t('Add a comment') });
  const commentErr = h('div', { id: 'cr-comment-error' });
  const sendComment = async () => {
    if (!comment.value.trim()) { showError(commentErr, { message: t('Write the comment first.') }); return; }
    if (await act('comment', { text: comment.value }, commentErr)) done(t('Comment added'));
  };
  const approvals = cr.requiredApprovals === 0
    ? t('no review policy covers these keys: it may be published without approval')
    : t('{n} of {m}', { n: cr.approvers.length, m: cr.requiredApprovals }) + (cr.approvers.length ? ` (${cr.approvers.join(', ')})` : '');
  view.replaceChildren(
    h('div', { class: 'crumbs' }, h('a', { href: hashFor('changes', {}) }, t('Change requests')), ' / #' + cr.id),
    h('h1', { id: 'change-title' }, h('span', { class: 'data' }, cr.title), h('span', { class: 'sub' }, '#' + cr.id), ' ', stateTag(cr.state), cr.stale ? [' ', staleTag()] : ''),
    cr.description ? h('p', { class: 'cr-desc data', id: 'change-description' }, cr.description) : '',
    h('dl', { class: 'kv panel' },
      h('dt', {}, t('Namespace')), h('dd', {}, h('code', {}, cr.namespaceId)),
      h('dt', {}, t('Author')), h('dd', { id: 'change-author', class: 'data' }, cr.author || '—'),
      h('dt', {}, t('Approvals')), h('dd', { id: 'change-approvals' }, approvals),
      h('dt', {}, t('Version')), h('dd', {}, String(cr.version)),
      h('dt', {}, t('Created')), h('dd', {}, fmtTime(cr.createdTime)),
      h('dt', {}, t('Updated')), h('dd', {}, fmtTime(cr.updatedTime)),
      cr.publishAt ? [h('dt', {}, t('Publish at')), h('dd', { id: 'change-publish-at' }, fmtTime(cr.publishAt))] : ''),
    cr.stale ? h('div', { class: 'notice', role: 'alert', id: 'change-stale' }, t('A key changed on the server since this request was written: publishing it wrote nothing. Look at the diff below, then rebase.')) : '',
    buttons.length ? h('div', { class: 'bar', id: 'change-actions' }, buttons) : '',
    errSlot,
    h('h2', {}, t('Changes against the server'), h('span', { class: 'sub' }, t('{n} key(s)', { n: cr.itemCount }))),
    cr.state === 'published' ? h('p', { class: 'muted', id: 'change-published-note' }, t('The request is published: each key is compared with what the server holds now.')) : '',
    diffSection,
    h('h2', {}, t('Timeline')),
    h('ol', { class: 'timeline', id: 'change-timeline' }, (cr.events || []).map((e) => h('li', { 'data-event': e.kind },
      h('span', { class: 'tag' + (e.kind === 'approved' || e.kind === 'published' ? ' ok' : e.kind === 'rejected' || e.kind === 'stale' ? ' bad' : '') }, t(EVENT_WORDS[e.kind] || e.kind)),
      ' ', h('strong', { class: e.user ? 'data' : '' }, e.user || t('anonymous')), ' ', h('span', { class: 'muted' }, fmtTime(e.time)),
      eventText(e) ? h('div', { class: 'event-text' + (e.kind === 'scheduled' || e.kind === 'stale' ? '' : ' data') }, eventText(e)) : ''))),
    h('div', { class: 'bar comment-bar' }, h('label', { class: 'f grow' }, t('Comment'), comment),
      h('button', { type: 'button', id: 'cr-comment-send', onclick: sendComment }, t('Comment'))),
    commentErr,
  );
}

// A time as a `datetime-local` input holds it (the user's local time, to the minute).
function localInput(ms) {
  const d = new Date(ms);
  return new Date(ms - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
}

// ---------- review policies ----------
export async function policiesPage(view, q, ctx) {
  const list = await nacelle.get('/review-policies');
  // A namespace created since the console loaded them can be chosen too.
  await ctx.reloadNamespaces();
  const s = session();
  const admin = !s || s.globalAdmin;
  const errSlot = h('div', { id: 'policy-error' });
  const nsName = (id) => { const n = ctx.namespaces().find((x) => x.id === consoleNs(id)); return n ? n.name : id; };
  const ns = h('select', { id: 'pol-ns' }, ctx.namespaces().map((n) => h('option', { value: n.id }, n.name)));
  ns.value = ctx.namespace;
  const pattern = h('input', { id: 'pol-group', value: '*', autocomplete: 'off', placeholder: 'PAY*' });
  const approvals = h('input', { id: 'pol-approvals', type: 'number', min: 1, max: 10, value: 1 });
  const set = async (e) => {
    e.preventDefault();
    try {
      await nacelle.post('/review-policies', { namespaceId: apiNs(ns.value), groupPattern: pattern.value.trim() || '*', requiredApprovals: approvals.value });
      toast(t('Review policy set'));
      ctx.rerender();
    } catch (err) { showError(errSlot, err); }
  };
  const remove = async (p) => {
    if (!(await confirmDanger(t('Remove review policy'), t('Remove the policy {pattern} of namespace {ns}? Direct writes to its keys are accepted again.', { pattern: p.groupPattern, ns: nsName(p.namespaceId) }), t('Remove')))) return;
    try { await nacelle.del('/review-policies', { namespaceId: p.namespaceId, groupPattern: p.groupPattern }); toast(t('Review policy removed')); ctx.rerender(); }
    catch (err) { showError(errSlot, err); }
  };
  view.replaceChildren(
    h('div', { class: 'crumbs' }, h('a', { href: hashFor('changes', {}) }, t('Change requests')), ' / ', t('review policies')),
    h('h1', {}, t('Review policies')),
    h('p', { class: 'muted' }, t('While a policy covers a key (its namespace, and its group by the pattern: exact, or with * wildcards), direct writes to it are refused on every protocol and changes go through a change request with that many approvals.')),
    admin ? h('form', { class: 'bar panel', id: 'policy-form', onsubmit: set },
      field(t('Namespace'), ns), field(t('Group pattern'), pattern), field(t('Approvals'), approvals),
      h('button', { type: 'submit', class: 'primary', id: 'pol-set' }, t('Set policy')))
      : h('p', { class: 'notice' }, t('Only administrators set review policies.')),
    errSlot,
    table([
      { label: t('Namespace'), cell: (p) => nsName(p.namespaceId) },
      { label: t('Group pattern'), cell: (p) => h('code', {}, p.groupPattern) },
      { label: t('Approvals'), num: true, cell: (p) => String(p.requiredApprovals) },
      { label: t('Set by'), cell: (p) => p.updatedBy || h('span', { class: 'muted' }, '—') },
      { label: t('When'), cell: (p) => fmtTime(p.updatedTime) },
      { label: '', class: 'actions', cell: (p) => admin ? h('button', { type: 'button', class: 'link danger', 'data-remove-policy': `${p.namespaceId}:${p.groupPattern}`, onclick: () => remove(p) }, t('Remove')) : '' },
    ], list, t('No review policy: every namespace takes direct writes.')),
  );
}
