// The pages besides the editor: namespaces, configs, history, gray release, listeners,
// cluster. Each renders into `view` from the console API; errors are shown where the
// action was taken.

import { api, exportConfigs, importZip, cloneConfigs } from './api.js';
import { h, table, field, modal, confirmDanger, diffPane, errorBox, showError, toast, fmtTime, hashFor, keyParams, pager, pageSizeOf, pageNoOf, fetchPage } from './ui.js';
import { codeArea } from './editor.js';

// ---------- namespaces ----------
export async function namespacesPage(view, q, ctx) {
  const list = await api.get('/namespaces');
  const errSlot = h('div', { id: 'ns-error' });
  const edit = async (ns) => {
    const id = h('input', { id: 'ns-id', value: ns ? ns.id : '', disabled: !!ns, placeholder: 'blank: a random id', autocomplete: 'off' });
    const name = h('input', { id: 'ns-name', value: ns ? ns.name : '', required: true, autocomplete: 'off' });
    const desc = h('input', { id: 'ns-desc', value: ns ? ns.desc : '', autocomplete: 'off' });
    const err = h('div');
    const body = h('div', { class: 'form' }, field('Namespace id', id), field('Name', name), h('div', { class: 'wide' }, field('Description', desc)), h('div', { class: 'wide' }, err));
    const v = await modal(ns ? `Edit namespace ${ns.name}` : 'Create namespace', body, [
      { label: 'Cancel', value: 'cancel' },
      { label: ns ? 'Save' : 'Create', value: 'ok', class: 'primary', action: async () => {
        try {
          if (ns) await api.put('/namespaces', { id: ns.id, name: name.value, desc: desc.value });
          else await api.post('/namespaces', { id: id.value.trim(), name: name.value, desc: desc.value });
          return true;
        } catch (e) { err.replaceChildren(errorBox(e)); return false; }
      } },
    ], { small: true });
    if (v === 'ok') { toast(ns ? 'Namespace saved' : 'Namespace created'); await ctx.reloadNamespaces(); ctx.rerender(); }
  };
  const remove = async (ns) => {
    const text = ns.configCount > 0
      ? `Namespace “${ns.name}” still holds ${ns.configCount} config(s). Deleting it hides them from the console (the configs stay in the database). Delete anyway?`
      : `Delete the empty namespace “${ns.name}”?`;
    if (!(await confirmDanger('Delete namespace', text))) return;
    try {
      await api.del('/namespaces', { id: ns.id, confirm: ns.configCount > 0 ? 'true' : undefined });
      toast('Namespace deleted'); await ctx.reloadNamespaces(); ctx.rerender();
    } catch (e) { showError(errSlot, e); }
  };
  view.replaceChildren(
    h('div', { class: 'bar' }, h('h1', { class: 'grow' }, 'Namespaces'),
      h('button', { type: 'button', class: 'primary', id: 'ns-create', onclick: () => edit(null) }, 'Create namespace')),
    errSlot,
    table([
      { label: 'Name', cell: (n) => h('a', { href: '#/configs', onclick: () => ctx.setNamespace(n.id) }, n.name) },
      { label: 'Id', cell: (n) => h('code', {}, n.id || '(public)') },
      { label: 'Description', cell: (n) => n.desc },
      { label: 'Configs', num: true, cell: (n) => String(n.configCount) },
      { label: '', class: 'actions', cell: (n) => n.builtin ? h('span', { class: 'muted' }, 'built in') : [
        h('button', { type: 'button', class: 'link', 'data-edit': n.id, onclick: () => edit(n) }, 'Edit'),
        h('button', { type: 'button', class: 'link danger', 'data-delete': n.id, onclick: () => remove(n) }, 'Delete')] },
    ], list),
  );
}

// ---------- configs ----------
// Nacos's transfer APIs (import, clone) answer `{code, message, data}`; the data holds the
// counts and the names skipped, failed or not recognized.
function transferResult(r) {
  const d = (r && r.data) || {};
  const names = (list) => (list || []).map((x) => x.itemName || `${x.group} / ${x.dataId}`).join(', ');
  return h('div', { class: 'panel', id: 'transfer-result', role: 'status' },
    h('p', {}, h('strong', {}, `${d.succCount ?? 0} imported`), ` · ${d.skipCount ?? 0} skipped`,
      d.unrecognizedCount ? ` · ${d.unrecognizedCount} not recognized` : ''),
    d.skipData?.length ? h('p', { class: 'muted', 'data-list': 'skipped' }, 'Skipped (already there): ', names(d.skipData)) : '',
    d.failData?.length ? h('p', { class: 'error', 'data-list': 'failed' }, 'Not imported: ', names(d.failData)) : '',
    d.unrecognizedData?.length ? h('p', { class: 'notice', 'data-list': 'unrecognized' }, 'Not recognized (not GROUP/dataId): ', names(d.unrecognizedData)) : '');
}

const POLICIES = [
  ['ABORT', 'Stop at the first config that already exists (nothing is written)'],
  ['SKIP', 'Skip configs that already exist'],
  ['OVERWRITE', 'Overwrite configs that already exist'],
];
function policyChoice(name) {
  return h('fieldset', { class: 'policy' }, h('legend', {}, 'When a config already exists'),
    POLICIES.map(([v, label], i) => h('label', { class: 'radio' }, h('input', { type: 'radio', name, value: v, checked: i === 0 }), ' ', label)));
}

async function importDialog(ctx) {
  const file = h('input', { type: 'file', id: 'import-file', accept: '.zip,application/zip' });
  const bar = h('progress', { id: 'import-progress', max: 100, value: 0, hidden: true });
  const out = h('div', { id: 'import-out' });
  let done = false;
  const body = h('div', {}, h('p', { class: 'muted' }, `A Nacos export (a zip of GROUP/dataId entries, with or without .meta.yml) into namespace ${ctx.namespaceName()}.`),
    field('Zip file', file), policyChoice('import-policy'), bar, out);
  await modal('Import configs', body, [
    { label: 'Close', value: 'cancel' },
    { label: 'Import', value: 'ok', class: 'primary', action: async () => {
      if (done) return true;
      const f = file.files[0];
      if (!f) { out.replaceChildren(errorBox({ message: 'Choose a zip file first.' })); return false; }
      const policy = body.querySelector('input[name=import-policy]:checked').value;
      bar.hidden = false; bar.value = 0;
      out.replaceChildren();
      try {
        const r = await importZip(f, ctx.namespace, policy, (p) => { bar.value = p; });
        bar.value = 100;
        out.replaceChildren(transferResult(r));
        if (r.code !== 200 && r.code !== 0) out.prepend(errorBox({ message: r.message || 'The import failed.' }));
        done = true;
        body.closest('dialog').querySelector('button[data-value=ok]').textContent = 'Done';
      } catch (e) { out.replaceChildren(errorBox(e)); }
      return false;
    } },
  ]);
  if (done) ctx.rerender();
}

async function cloneDialog(c, ctx) {
  const target = h('select', { id: 'clone-ns' }, ctx.namespaces().map((n) => h('option', { value: n.id }, n.name)));
  target.value = (ctx.namespaces().find((n) => n.id !== c.namespace) || {}).id ?? '';
  const dataId = h('input', { id: 'clone-dataId', value: c.dataId, autocomplete: 'off' });
  const group = h('input', { id: 'clone-group', value: c.group, autocomplete: 'off' });
  const out = h('div', { id: 'clone-out' });
  let done = false;
  const body = h('div', {}, h('p', { class: 'muted' }, `Copy ${c.group} / ${c.dataId} (content, type and metadata) into another namespace.`),
    h('div', { class: 'form' }, field('Namespace', target), field('Data ID', dataId), field('Group', group)), policyChoice('clone-policy'), out);
  await modal('Clone config', body, [
    { label: 'Close', value: 'cancel' },
    { label: 'Clone', value: 'ok', class: 'primary', action: async () => {
      if (done) return true;
      const policy = body.querySelector('input[name=clone-policy]:checked').value;
      try {
        const r = await cloneConfigs(target.value, policy, [{ cfgId: c.id, dataId: dataId.value.trim(), group: group.value.trim() }]);
        out.replaceChildren(transferResult(r));
        if (r.code !== 200 && r.code !== 0) out.prepend(errorBox({ message: r.message || 'The clone failed.' }));
        else { done = true; body.closest('dialog').querySelector('button[data-value=ok]').textContent = 'Done'; }
      } catch (e) { out.replaceChildren(errorBox(e)); }
      return false;
    } },
  ]);
  if (done) ctx.rerender();
}

export async function configsPage(view, q, ctx) {
  const ns = ctx.namespace;
  const size = pageSizeOf(q);
  const dataId = h('input', { id: 'q-dataId', value: q.dataId || '', placeholder: 'app-*.yaml', autocomplete: 'off' });
  const group = h('input', { id: 'q-group', value: q.group || '', placeholder: '*', autocomplete: 'off' });
  const app = h('input', { id: 'q-app', value: q.appName || '', placeholder: '*', autocomplete: 'off' });
  const wild = (v) => { v = v.trim(); return v && !v.includes('*') ? `*${v}*` : v; };
  const search = (e) => { e && e.preventDefault(); location.hash = hashFor('configs', { dataId: dataId.value, group: group.value, appName: app.value, pageSize: q.pageSize }); };
  const res = await fetchPage((pageNo) => api.get('/configs', { namespace: ns, dataId: wild(q.dataId || ''), group: wild(q.group || ''), appName: wild(q.appName || ''), pageNo, pageSize: size }), q, 'configs');
  const selected = new Set();
  const errSlot = h('div', { id: 'configs-error' });
  const delBtn = h('button', { type: 'button', class: 'danger', id: 'delete-selected', disabled: true }, 'Delete selected');
  const expBtn = h('button', { type: 'button', id: 'export-selected', disabled: true }, 'Export selected');
  const sync = () => { delBtn.disabled = expBtn.disabled = selected.size === 0; };
  delBtn.onclick = async () => {
    if (!(await confirmDanger('Delete configs', `Delete ${selected.size} selected config(s)? Their history is kept.`))) return;
    try { const r = await api.del('/configs', { ids: [...selected].join(',') }); toast(`Deleted ${r.removed} config(s)`); ctx.rerender(); }
    catch (e) { showError(errSlot, e); }
  };
  expBtn.onclick = async () => {
    try { const n = await exportConfigs([...selected]); toast(`Exported ${selected.size} config(s), ${n} bytes`); }
    catch (e) { showError(errSlot, e); }
  };
  const removeOne = async (c) => {
    if (!(await confirmDanger('Delete config', `Delete ${c.group} / ${c.dataId}? Its history is kept: it can be rolled back.`))) return;
    try { await api.del('/configs', { ids: String(c.id) }); toast(`Deleted ${c.dataId}`); ctx.rerender(); }
    catch (e) { showError(errSlot, e); }
  };
  const all = h('input', { type: 'checkbox', 'aria-label': 'Select all on this page', onchange: () => {
    view.querySelectorAll('input[data-id]').forEach((c) => { c.checked = all.checked; c.dispatchEvent(new Event('change')); });
  } });
  view.replaceChildren(
    h('div', { class: 'bar' }, h('h1', { class: 'grow' }, 'Configs', h('span', { class: 'sub' }, ctx.namespaceName())),
      h('button', { type: 'button', id: 'import', onclick: () => importDialog(ctx) }, 'Import'),
      h('a', { class: 'btn primary', id: 'new-config', href: hashFor('edit', { namespace: ns }) }, 'New config')),
    h('form', { class: 'bar panel', onsubmit: search, role: 'search' },
      field('Data ID', dataId), field('Group', group), field('App', app),
      h('button', { type: 'submit', class: 'primary' }, 'Search'), h('span', { class: 'grow' }),
      expBtn, delBtn),
    errSlot,
    table([
      { label: all, cell: (c) => h('input', { type: 'checkbox', 'data-id': c.id, 'aria-label': `Select ${c.dataId}`,
        onchange: (e) => { e.target.checked ? selected.add(c.id) : selected.delete(c.id); sync(); } }) },
      { label: 'Data ID', cell: (c) => h('a', { href: hashFor('edit', keyParams(c)) }, c.dataId) },
      { label: 'Group', cell: (c) => c.group },
      { label: 'Type', cell: (c) => h('span', { class: 'tag' }, c.type) },
      { label: 'App', cell: (c) => c.appName || h('span', { class: 'muted' }, '—') },
      { label: 'Last modified', cell: (c) => fmtTime(c.modified) },
      { label: '', class: 'actions', cell: (c) => h('div', { class: 'rowacts' },
        h('a', { href: hashFor('history', { ...keyParams(c), type: c.type }) }, 'History'),
        h('a', { href: hashFor('gray', keyParams(c)) }, 'Gray'),
        h('a', { href: hashFor('listeners', keyParams(c)) }, 'Listeners'),
        h('button', { type: 'button', class: 'link', 'data-clone': c.dataId, onclick: () => cloneDialog(c, ctx) }, 'Clone'),
        h('button', { type: 'button', class: 'link danger', 'data-delete-config': c.dataId, onclick: () => removeOne(c) }, 'Delete')) },
    ], res.items, 'No config matches.'),
    pager(res, q, 'configs', { noun: 'config', id: 'configs-pager' }),
  );
}

// ---------- history ----------
export async function historyPage(view, q, ctx) {
  const key = { namespace: q.namespace ?? ctx.namespace, group: q.group, dataId: q.dataId };
  const size = pageSizeOf(q);
  const res = await fetchPage((pageNo) => api.get('/history', { ...keyParams(key), pageNo, pageSize: size }), q, 'history');
  const gres = await api.get('/history/gray', { ...keyParams(key), pageNo: pageNoOf({ pageNo: q.gpageNo }), pageSize: 10 });
  const out = h('div', { id: 'history-out' });
  const picks = [];
  const diffBtn = h('button', { type: 'button', id: 'diff-selected', disabled: true }, 'Diff selected');
  const pick = (nid, on) => {
    const i = picks.indexOf(nid);
    if (on && i < 0) picks.push(nid);
    if (!on && i >= 0) picks.splice(i, 1);
    while (picks.length > 2) {
      const drop = picks.shift();
      const box = view.querySelector(`input[data-nid="${drop}"]`);
      if (box) box.checked = false;
    }
    diffBtn.disabled = picks.length !== 2;
  };
  // The text of a version: a history nid, or `current` (the formal config now).
  const textOf = async (v) => (v === 'current'
    ? (await api.get('/config', keyParams(key)).catch((e) => { if (e.status === 404) return { content: '' }; throw e; })).content
    : (await api.get('/history/entry', { ...keyParams(key), nid: v })).content);
  const name = (v) => (v === 'current' ? 'current' : 'version ' + v);
  const showDiff = async (from, to) => {
    try {
      const [a, b] = await Promise.all([textOf(from), textOf(to)]);
      out.replaceChildren(h('h2', {}, `Diff: ${name(from)} → ${name(to)}`), diffPane(a, b, q.type || 'text', { from: name(from), to: name(to) }));
    } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  diffBtn.onclick = () => { const [a, b] = [...picks].sort((x, y) => x - y); showDiff(String(a), String(b)); };
  const showEntry = async (nid) => {
    try {
      const e = await api.get('/history/entry', { ...keyParams(key), nid });
      const area = codeArea(e.content, q.type || 'text', null, { readOnly: true, id: 'version-content', label: `Version ${nid}` });
      area.el.classList.add('short');
      out.replaceChildren(h('h2', {}, `Version ${nid}`, h('span', { class: 'sub' }, `${fmtTime(e.modified)} · ${e.srcUser || 'unknown user'} from ${e.srcIp || '?'}`)), area.el);
    } catch (err) { out.replaceChildren(errorBox(err)); }
  };
  const rollback = async (nid) => {
    let now = null, target;
    try {
      // The version the confirmation shows is the one replaced: compare-and-set on it.
      now = await api.get('/config', keyParams(key)).catch((e) => { if (e.status === 404) return null; throw e; });
      target = await textOf(String(nid));
    } catch (e) { out.replaceChildren(errorBox(e)); return; }
    const err = h('div');
    const v = await modal(`Roll back to version ${nid}?`, h('div', {},
      h('p', {}, `This publishes the content of version ${nid} as the current config of ${key.dataId}. Listeners get it at once.`),
      diffPane(now ? now.content : '', target, q.type || 'text', { from: 'current', to: `version ${nid}` }), err), [
      { label: 'Cancel', value: 'cancel' },
      { label: 'Roll back', value: 'ok', class: 'danger solid', action: async () => {
        try { await api.post('/history/rollback', { ...keyParams(key), nid, casMd5: now ? now.md5 : '' }); return true; }
        catch (e) {
          err.replaceChildren(e.conflict
            ? h('div', { class: 'notice', role: 'alert' }, 'The config changed since this page was opened; nothing was rolled back. Reload the history and try again.')
            : errorBox(e));
          return false;
        }
      } },
    ]);
    if (v === 'ok') { toast(`Rolled back to version ${nid}`); ctx.rerender(); }
  };
  const OPS = { I: 'created', U: 'updated', D: 'deleted' };
  const GRAY_OPS = { I: 'published', U: 'changed', D: 'stopped or promoted' };
  view.replaceChildren(
    h('div', { class: 'crumbs' }, h('a', { href: hashFor('configs', {}) }, 'Configs'), ' / ', h('a', { href: hashFor('edit', keyParams(key)) }, `${key.group} / ${key.dataId}`), ' / history'),
    h('div', { class: 'bar' }, h('h1', { class: 'grow' }, 'History', h('span', { class: 'sub' }, key.dataId)), diffBtn),
    h('p', { class: 'muted' }, 'Each row is the version an operation replaced (as Nacos records history). Select two to diff them.'),
    table([
      { label: '', cell: (r) => h('input', { type: 'checkbox', 'data-nid': r.nid, 'aria-label': `Select version ${r.nid}`, onchange: (e) => pick(r.nid, e.target.checked) }) },
      { label: 'Version', cell: (r) => h('button', { type: 'button', class: 'link', onclick: () => showEntry(r.nid) }, String(r.nid)) },
      { label: 'Operation', cell: (r) => h('span', { class: 'tag' + (r.op === 'D' ? ' bad' : '') }, OPS[r.op] || r.op) },
      { label: 'When', cell: (r) => fmtTime(r.modified) },
      { label: 'Who', cell: (r) => r.srcUser || h('span', { class: 'muted' }, '—') },
      { label: 'From', cell: (r) => h('code', {}, r.srcIp || '—') },
      { label: 'md5', cell: (r) => h('code', {}, (r.md5 || '').slice(0, 10)) },
      { label: '', class: 'actions', cell: (r) => [
        h('button', { type: 'button', class: 'link', 'data-diff-current': r.nid, onclick: () => showDiff(String(r.nid), 'current') }, 'Diff with current'),
        h('button', { type: 'button', class: 'link danger', 'data-rollback': r.nid, onclick: () => rollback(r.nid) }, 'Roll back')] },
    ], res.items, 'No history yet.'),
    pager(res, q, 'history', { noun: 'version', id: 'history-pager' }),
    out,
    h('h2', {}, 'Gray operations', h('span', { class: 'sub' }, `${gres.total} in all`)),
    table([
      { label: 'Gray', cell: (r) => h('span', { class: 'tag warn' }, r.grayName) },
      { label: 'Rule', cell: (r) => h('code', {}, r.ruleExpr || r.ruleType) },
      { label: 'Operation', cell: (r) => h('span', { class: 'tag' + (r.op === 'D' ? ' bad' : '') }, GRAY_OPS[r.op] || r.op) },
      { label: 'When', cell: (r) => fmtTime(r.modified) },
      { label: 'Who', cell: (r) => r.srcUser || h('span', { class: 'muted' }, '—') },
      { label: 'From', cell: (r) => h('code', {}, r.srcIp || '—') },
      { label: '', class: 'actions', cell: (r) => h('button', { type: 'button', class: 'link', 'data-gray-nid': r.nid, onclick: () => {
        const a = codeArea(r.content, q.type || 'text', null, { readOnly: true, id: 'gray-version-content', label: `Gray ${r.grayName}` });
        a.el.classList.add('short');
        out.replaceChildren(h('h2', {}, `Gray ${r.grayName}: the version ${r.op === 'I' ? 'published' : 'replaced'} at ${fmtTime(r.modified)}`), a.el);
      } }, 'Content') },
    ], gres.items, 'No gray release of this config yet.'),
    gres.pages > 1 ? pager(gres, q, 'history', { noun: 'gray operation', id: 'gray-history-pager', param: 'gpageNo', sizes: false }) : '',
  );
}

// ---------- gray release ----------
function listenerTable(rows, empty) {
  return table([
    { label: 'IP', cell: (l) => h('code', {}, l.ip) },
    { label: 'App', cell: (l) => l.app || h('span', { class: 'muted' }, '—') },
    { label: 'Transport', cell: (l) => l.transport },
    { label: 'Holds md5', cell: (l) => h('code', {}, (l.heldMd5 || '—').slice(0, 12)) },
    { label: 'Served', cell: (l) => l.gray ? h('span', { class: 'tag warn' }, `gray ${l.gray}`) : h('span', { class: 'tag' }, 'formal') },
    { label: 'State', cell: (l) => l.inSync ? h('span', { class: 'tag ok' }, 'in sync') : h('span', { class: 'tag bad' }, 'behind') },
  ], rows, empty);
}

export async function grayPage(view, q, ctx) {
  const key = { namespace: q.namespace ?? ctx.namespace, group: q.group, dataId: q.dataId };
  const [cfg, res] = await Promise.all([api.get('/config', keyParams(key)), api.get('/grays', keyParams(key))]);
  const errSlot = h('div', { id: 'gray-error' });
  const by = h('select', { id: 'g-by' }, h('option', { value: 'ips' }, 'IP list (beta)'), h('option', { value: 'labels' }, 'Label expression'), h('option', { value: 'app' }, 'App name'));
  const ips = h('input', { id: 'g-ips', placeholder: '10.0.0.5, 10.1.0.0/16', autocomplete: 'off' });
  const expr = h('input', { id: 'g-expr', placeholder: 'env=pre&&region=hz', autocomplete: 'off' });
  const app = h('input', { id: 'g-app', placeholder: 'shop', autocomplete: 'off' });
  const name = h('input', { id: 'g-name', placeholder: 'canary', autocomplete: 'off' });
  const prio = h('input', { id: 'g-priority', type: 'number', placeholder: '0', autocomplete: 'off' });
  const fIps = field('IPs or CIDRs', ips), fExpr = field('Labels', expr), fApp = field('App name', app), fName = field('Gray name', name), fPrio = field('Priority', prio);
  const syncBy = () => { fIps.hidden = by.value !== 'ips'; fExpr.hidden = by.value !== 'labels'; fApp.hidden = by.value !== 'app'; fName.hidden = fPrio.hidden = by.value === 'ips'; };
  by.onchange = syncBy; syncBy();
  const area = codeArea(cfg.content, cfg.type, null, { id: 'gray-content', label: 'Gray content' });
  area.el.classList.add('short');
  const createErr = h('div', { id: 'gray-create-error' });
  const create = async () => {
    createErr.replaceChildren();
    const v = await api.post('/validate', { namespace: key.namespace, type: cfg.type, content: area.value });
    if (!v.ok && v.mode === 'reject') { area.markError(v.line); createErr.replaceChildren(errorBox({ message: `invalid ${v.type}${v.line ? ' at line ' + v.line : ''}: ${v.message}` })); return; }
    const err = h('div');
    const warn = !v.ok && v.mode === 'warn' ? h('div', { class: 'notice', role: 'alert' }, `This content is not valid ${v.type}${v.line ? ' (line ' + v.line + ')' : ''}: ${v.message}. The server accepts it in this namespace. Publish anyway?`) : '';
    const ok = await modal('Publish gray', h('div', {}, h('p', { class: 'muted' }, 'The gray content against the formal config:'), warn,
      diffPane(cfg.content, area.value, cfg.type, { from: 'formal', to: 'gray' }), err), [
      { label: 'Cancel', value: 'cancel' },
      { label: 'Publish gray', value: 'ok', class: 'primary', action: async () => {
        try {
          await api.post('/grays', { ...keyParams(key), by: by.value, ips: ips.value, expr: expr.value, app: app.value, name: name.value, priority: prio.value, content: area.value });
          return true;
        } catch (e) { err.replaceChildren(errorBox(e)); return false; }
      } }]);
    if (ok === 'ok') { toast('Gray published'); ctx.rerender(); }
  };
  const act = async (what, g) => {
    const text = what === 'promote'
      ? `Promote gray “${g.name}”: its content becomes the formal config for every client, and the gray is removed.`
      : `Abandon gray “${g.name}”: the clients it reaches get the formal config again.`;
    if (!(await confirmDanger(what === 'promote' ? 'Promote gray' : 'Abandon gray', text, what === 'promote' ? 'Promote' : 'Abandon'))) return;
    try { await api.post('/grays/' + what, { ...keyParams(key), name: g.name }); toast(what === 'promote' ? 'Promoted' : 'Abandoned'); ctx.rerender(); }
    catch (e) { showError(errSlot, e); }
  };
  // A gray's content, read-only, or its diff against the formal config, inside its card.
  const showGray = (g, slot, diff) => {
    if (slot.dataset.showing === (diff ? 'diff' : 'content')) { slot.replaceChildren(); slot.dataset.showing = ''; return; }
    slot.dataset.showing = diff ? 'diff' : 'content';
    if (diff) slot.replaceChildren(diffPane(cfg.content, g.content, cfg.type, { from: 'formal', to: `gray ${g.name}` }));
    else {
      const a = codeArea(g.content, cfg.type, null, { readOnly: true, id: `gray-view-${g.name}`, label: `Content of gray ${g.name}` });
      a.el.classList.add('short');
      slot.replaceChildren(a.el);
    }
  };
  // Editing a gray: its rule and content into the form below; publishing it again under
  // the same rule (and name) replaces it.
  const editGray = (g) => {
    if (g.kind === 'beta') { by.value = 'ips'; ips.value = g.expr; }
    else { by.value = 'labels'; expr.value = g.expr; name.value = g.name; prio.value = String(g.priority ?? ''); }
    syncBy();
    area.value = g.content;
    formTitle.textContent = `Edit gray “${g.name}”`;
    formTitle.scrollIntoView({ block: 'start' });
    area.focus();
  };
  const formTitle = h('h2', { id: 'gray-form-title' }, 'New gray');
  const cards = res.grays.map((g) => { const slot = h('div', { class: 'gray-out' }); return h('section', { class: 'panel card', 'data-gray': g.name },
    h('div', { class: 'bar' }, h('h3', { class: 'grow' }, `${g.name} `, h('span', { class: 'tag' }, g.kind)),
      h('button', { type: 'button', 'data-view': g.name, onclick: () => showGray(g, slot, false) }, 'Content'),
      h('button', { type: 'button', 'data-diff': g.name, onclick: () => showGray(g, slot, true) }, 'Diff with formal'),
      g.kind === 'tag' ? '' : h('button', { type: 'button', 'data-edit-gray': g.name, onclick: () => editGray(g) }, 'Edit'),
      h('button', { type: 'button', class: 'primary', 'data-promote': g.name, onclick: () => act('promote', g) }, 'Promote'),
      h('button', { type: 'button', class: 'danger', 'data-abandon': g.name, onclick: () => act('abandon', g) }, 'Abandon')),
    h('dl', { class: 'kv' }, h('dt', {}, 'Rule'), h('dd', {}, h('code', {}, g.expr)), h('dt', {}, 'Priority'), h('dd', {}, g.kind === 'beta' ? 'first (a beta wins over every other gray)' : g.kind === 'tag' ? 'second (tags come right after the beta)' : String(g.priority)),
      h('dt', {}, 'md5'), h('dd', {}, h('code', {}, g.md5)), h('dt', {}, 'Published'), h('dd', {}, fmtTime(g.modified))),
    slot,
    h('h2', {}, `Connected clients it reaches now (${g.listeners.length})`),
    listenerTable(g.listeners, 'No connected client matches this rule.')); });
  view.replaceChildren(
    h('div', { class: 'crumbs' }, h('a', { href: hashFor('configs', {}) }, 'Configs'), ' / ', h('a', { href: hashFor('edit', keyParams(key)) }, `${key.group} / ${key.dataId}`), ' / gray'),
    h('h1', {}, 'Gray release', h('span', { class: 'sub' }, `${key.dataId} · ${res.formalListeners} listener(s) on the formal config`)),
    errSlot,
    cards.length ? h('div', { class: 'stack', id: 'grays' }, cards) : h('p', { class: 'muted', id: 'grays' }, 'No gray release of this config.'),
    formTitle,
    h('div', { class: 'panel' },
      h('div', { class: 'bar' }, field('Release to', by), fIps, fExpr, fApp, fName, fPrio),
      area.el, createErr,
      h('div', { class: 'bar' }, h('button', { type: 'button', class: 'primary', id: 'gray-create', onclick: create }, 'Review & publish gray'))),
  );
}

// ---------- listeners ----------
export async function listenersPage(view, q, ctx) {
  const ip = h('input', { id: 'l-ip', value: q.ip || '', placeholder: '10.0.0.5', autocomplete: 'off' });
  const dataId = h('input', { id: 'l-dataId', value: q.dataId || '', autocomplete: 'off' });
  const group = h('input', { id: 'l-group', value: q.group || 'DEFAULT_GROUP', autocomplete: 'off' });
  let body = h('p', { class: 'muted' }, 'Look up the clients listening to a config, or what one client IP listens to.');
  if (q.dataId) {
    const key = { namespace: q.namespace ?? ctx.namespace, group: q.group || 'DEFAULT_GROUP', dataId: q.dataId };
    const rows = await api.get('/listeners', keyParams(key));
    body = h('div', {}, h('h2', {}, `Clients listening to ${key.group} / ${key.dataId} (${rows.length})`), listenerTable(rows, 'No client listens to this config.'));
  } else if (q.ip) {
    const rows = await api.get('/listeners/ip', { ip: q.ip });
    body = h('div', {}, h('h2', {}, `What ${q.ip} listens to (${rows.length})`), table([
      { label: 'Namespace', cell: (l) => h('code', {}, l.namespace || 'public') },
      { label: 'Group', cell: (l) => l.group },
      { label: 'Data ID', cell: (l) => h('a', { href: hashFor('edit', keyParams(l)) }, l.dataId) },
      { label: 'App', cell: (l) => l.app || '—' },
      { label: 'Transport', cell: (l) => l.transport },
      { label: 'Holds md5', cell: (l) => h('code', {}, (l.heldMd5 || '—').slice(0, 12)) },
      { label: 'Served', cell: (l) => l.gray ? h('span', { class: 'tag warn' }, `gray ${l.gray}`) : 'formal' },
      { label: 'State', cell: (l) => l.inSync ? h('span', { class: 'tag ok' }, 'in sync') : h('span', { class: 'tag bad' }, 'behind') },
    ], rows, 'This IP listens to nothing.'));
  }
  view.replaceChildren(
    h('h1', {}, 'Listeners'),
    h('div', { class: 'grid2' },
      h('form', { class: 'panel bar', onsubmit: (e) => { e.preventDefault(); location.hash = hashFor('listeners', { namespace: ctx.namespace, dataId: dataId.value.trim(), group: group.value.trim() }); } },
        field('Data ID', dataId), field('Group', group), h('button', { type: 'submit', class: 'primary' }, 'By config')),
      h('form', { class: 'panel bar', onsubmit: (e) => { e.preventDefault(); location.hash = hashFor('listeners', { ip: ip.value.trim() }); } },
        field('Client IP', ip), h('button', { type: 'submit', class: 'primary' }, 'By IP'))),
    body);
}

// ---------- cluster ----------
export async function clusterPage(view) {
  const c = await api.get('/cluster');
  const STATE = { UP: 'ok', SUSPICIOUS: 'warn', DOWN: 'bad' };
  view.replaceChildren(
    h('h1', {}, 'Cluster', h('span', { class: 'sub' }, c.clustered ? `${c.members.length} members sharing one database` : 'a single node')),
    h('div', { class: 'cards' },
      h('div', { class: 'panel' }, h('div', { class: 'muted' }, 'Configs in memory'), h('div', { class: 'mono' }, String(c.configs))),
      h('div', { class: 'panel' }, h('div', { class: 'muted' }, 'Listeners on this node'), h('div', { class: 'mono' }, String(c.listeners)))),
    h('h2', {}, 'Members'),
    table([
      { label: 'Member', cell: (m) => [h('code', {}, m.address || '(this node)'), m.self ? h('span', { class: 'tag' }, ' this node') : ''] },
      { label: 'Health', cell: (m) => h('span', { class: 'tag ' + (STATE[m.state] || '') }, m.state) },
      { label: 'Last check', cell: (m) => fmtTime(m.lastRefresh) },
      { label: 'Failed checks', num: true, cell: (m) => String(m.failCount) },
      { label: 'Notified via gRPC', num: true, cell: (m) => String(m.notified.grpc) },
      { label: 'via HTTP', num: true, cell: (m) => String(m.notified.http) },
      { label: 'Failed notifications', num: true, cell: (m) => String(m.notified.failed) },
    ], c.members));
}
