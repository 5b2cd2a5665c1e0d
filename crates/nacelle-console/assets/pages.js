// The pages besides the editor: namespaces, configs, history, gray release, listeners,
// cluster. Each renders into `view` from the console API; errors are shown where the
// action was taken.

import { api, nacelle, exportConfigs, importZip, cloneConfigs } from './api.js';
import { h, table, field, modal, confirmDanger, diffPane, errorBox, showError, toast, fmtTime, hashFor, keyParams, pager, pageSizeOf, pageNoOf, fetchPage } from './ui.js';
import { t } from './i18n.js';
import { codeArea } from './editor.js';

// ---------- namespaces ----------
export async function namespacesPage(view, q, ctx) {
  const list = await api.get('/namespaces');
  const errSlot = h('div', { id: 'ns-error' });
  const edit = async (ns) => {
    const id = h('input', { id: 'ns-id', value: ns ? ns.id : '', disabled: !!ns, placeholder: t('blank: a random id'), autocomplete: 'off' });
    const name = h('input', { id: 'ns-name', value: ns ? ns.name : '', required: true, autocomplete: 'off' });
    const desc = h('input', { id: 'ns-desc', value: ns ? ns.desc : '', autocomplete: 'off' });
    const err = h('div');
    const body = h('div', { class: 'form' }, field(t('Namespace id'), id), field(t('Name'), name), h('div', { class: 'wide' }, field(t('Description'), desc)), h('div', { class: 'wide' }, err));
    const v = await modal(ns ? t('Edit namespace {name}', { name: ns.name }) : t('Create namespace'), body, [
      { label: t('Cancel'), value: 'cancel' },
      { label: ns ? t('Save') : t('Create'), value: 'ok', class: 'primary', action: async () => {
        try {
          if (ns) await api.put('/namespaces', { id: ns.id, name: name.value, desc: desc.value });
          else await api.post('/namespaces', { id: id.value.trim(), name: name.value, desc: desc.value });
          return true;
        } catch (e) { err.replaceChildren(errorBox(e)); return false; }
      } },
    ], { small: true });
    if (v === 'ok') { toast(ns ? t('Namespace saved') : t('Namespace created')); await ctx.reloadNamespaces(); ctx.rerender(); }
  };
  const remove = async (ns) => {
    const text = ns.configCount > 0
      ? t('Namespace “{name}” still holds {configCount} config(s). Deleting it hides them from the console (the configs stay in the database). Delete anyway?', { name: ns.name, configCount: ns.configCount })
      : t('Delete the empty namespace “{name}”?', { name: ns.name });
    if (!(await confirmDanger(t('Delete namespace'), text))) return;
    try {
      await api.del('/namespaces', { id: ns.id, confirm: ns.configCount > 0 ? 'true' : undefined });
      toast(t('Namespace deleted')); await ctx.reloadNamespaces(); ctx.rerender();
    } catch (e) { showError(errSlot, e); }
  };
  view.replaceChildren(
    h('div', { class: 'bar' }, h('h1', { class: 'grow' }, t('Namespaces')),
      h('button', { type: 'button', class: 'primary', id: 'ns-create', onclick: () => edit(null) }, t('Create namespace'))),
    errSlot,
    table([
      { label: t('Name'), cell: (n) => h('a', { href: '#/configs', onclick: () => ctx.setNamespace(n.id) }, n.name) },
      { label: t('Id'), cell: (n) => h('code', {}, n.id || t('(public)')) },
      { label: t('Description'), cell: (n) => n.desc },
      { label: t('Configs'), num: true, cell: (n) => String(n.configCount) },
      { label: '', class: 'actions', cell: (n) => n.builtin ? h('span', { class: 'muted' }, t('built in')) : [
        h('button', { type: 'button', class: 'link', 'data-edit': n.id, onclick: () => edit(n) }, t('Edit')),
        h('button', { type: 'button', class: 'link danger', 'data-delete': n.id, onclick: () => remove(n) }, t('Delete'))] },
    ], list),
  );
}

// A content that does not parse, in words: its type, line and the parser's message.
function invalidText(v) {
  return v.line ? t('Not valid {type} (line {line}): {message}.', v) : t('Not valid {type}: {message}.', v);
}

// ---------- configs ----------
// Nacos's transfer APIs (import, clone) answer `{code, message, data}`; the data holds the
// counts and the names skipped, failed or not recognized.
function transferResult(r) {
  const d = (r && r.data) || {};
  const names = (list) => (list || []).map((x) => x.itemName || `${x.group} / ${x.dataId}`).join(', ');
  return h('div', { class: 'panel', id: 'transfer-result', role: 'status' },
    h('p', {}, h('strong', {}, t('{n} imported', { n: d.succCount ?? 0 })), t(' · {v0} skipped', { v0: d.skipCount ?? 0 }),
      d.unrecognizedCount ? t(' · {unrecognizedCount} not recognized', { unrecognizedCount: d.unrecognizedCount }) : ''),
    d.skipData?.length ? h('p', { class: 'muted', 'data-list': 'skipped' }, t('Skipped: '), names(d.skipData)) : '',
    d.failData?.length ? h('p', { class: 'error', 'data-list': 'failed' }, t('Not imported: '), names(d.failData)) : '',
    d.unrecognizedData?.length ? h('p', { class: 'notice', 'data-list': 'unrecognized' }, t('Not recognized (not GROUP/dataId): '), names(d.unrecognizedData)) : '');
}

const POLICIES = [
  ['ABORT', 'Stop at the first config that already exists (those before it are written)'],
  ['SKIP', 'Skip configs that already exist'],
  ['OVERWRITE', 'Overwrite configs that already exist'],
];
function policyChoice(name) {
  return h('fieldset', { class: 'policy' }, h('legend', {}, t('When a config already exists')),
    POLICIES.map(([v, label], i) => h('label', { class: 'radio' }, h('input', { type: 'radio', name, value: v, checked: i === 0 }), ' ', t(label))));
}

async function importDialog(ctx) {
  const file = h('input', { type: 'file', id: 'import-file', accept: '.zip,application/zip' });
  const bar = h('progress', { id: 'import-progress', max: 100, value: 0, hidden: true });
  const out = h('div', { id: 'import-out' });
  let done = false;
  const body = h('div', {}, h('p', { class: 'muted' }, t('A Nacos export (a zip of GROUP/dataId entries, with or without .meta.yml) into namespace {v0}.', { v0: ctx.namespaceName() })),
    field(t('Zip file'), file), policyChoice('import-policy'), bar, out);
  await modal(t('Import configs'), body, [
    { label: t('Close'), value: 'cancel' },
    { label: t('Import'), value: 'ok', class: 'primary', action: async () => {
      if (done) return true;
      const f = file.files[0];
      if (!f) { out.replaceChildren(errorBox({ message: t('Choose a zip file first.') })); return false; }
      const policy = body.querySelector('input[name=import-policy]:checked').value;
      bar.hidden = false; bar.value = 0;
      out.replaceChildren();
      try {
        const r = await importZip(f, ctx.namespace, policy, (p) => { bar.value = p; });
        bar.value = 100;
        out.replaceChildren(transferResult(r));
        if (r.code !== 200 && r.code !== 0) out.prepend(errorBox({ message: r.message || t('The import failed.') }));
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
  const body = h('div', {}, h('p', { class: 'muted' }, t('Copy {group} / {dataId} (content, type and metadata) into another namespace.', { group: c.group, dataId: c.dataId })),
    h('div', { class: 'form' }, field(t('Namespace'), target), field(t('Data ID'), dataId), field(t('Group'), group)), policyChoice('clone-policy'), out);
  await modal(t('Clone config'), body, [
    { label: t('Close'), value: 'cancel' },
    { label: t('Clone'), value: 'ok', class: 'primary', action: async () => {
      if (done) return true;
      const policy = body.querySelector('input[name=clone-policy]:checked').value;
      try {
        const r = await cloneConfigs(target.value, policy, [{ cfgId: c.id, dataId: dataId.value.trim(), group: group.value.trim() }]);
        out.replaceChildren(transferResult(r));
        if (r.code !== 200 && r.code !== 0) out.prepend(errorBox({ message: r.message || t('The clone failed.') }));
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
  const delBtn = h('button', { type: 'button', class: 'danger', id: 'delete-selected', disabled: true }, t('Delete selected'));
  const expBtn = h('button', { type: 'button', id: 'export-selected', disabled: true }, t('Export selected'));
  const sync = () => { delBtn.disabled = expBtn.disabled = selected.size === 0; };
  delBtn.onclick = async () => {
    if (!(await confirmDanger(t('Delete configs'), t('Delete {size} selected config(s)? Their history is kept.', { size: selected.size })))) return;
    try { const r = await api.del('/configs', { ids: [...selected].join(',') }); toast(t('Deleted {removed} config(s)', { removed: r.removed })); ctx.rerender(); }
    catch (e) { showError(errSlot, e); }
  };
  expBtn.onclick = async () => {
    try { const n = await exportConfigs([...selected]); toast(t('Exported {size} config(s), {n} bytes', { size: selected.size, n })); }
    catch (e) { showError(errSlot, e); }
  };
  const removeOne = async (c) => {
    if (!(await confirmDanger(t('Delete config'), t('Delete {group} / {dataId}? Its history is kept: it can be rolled back.', { group: c.group, dataId: c.dataId })))) return;
    try { await api.del('/configs', { ids: String(c.id) }); toast(t('Deleted {dataId}', { dataId: c.dataId })); ctx.rerender(); }
    catch (e) { showError(errSlot, e); }
  };
  const all = h('input', { type: 'checkbox', 'aria-label': t('Select all on this page'), onchange: () => {
    view.querySelectorAll('input[data-id]').forEach((c) => { c.checked = all.checked; c.dispatchEvent(new Event('change')); });
  } });
  view.replaceChildren(
    h('div', { class: 'bar' }, h('h1', { class: 'grow' }, t('Configs'), h('span', { class: 'sub' }, ctx.namespaceName())),
      h('button', { type: 'button', id: 'import', onclick: () => importDialog(ctx) }, t('Import')),
      h('a', { class: 'btn primary', id: 'new-config', href: hashFor('edit', { namespace: ns }) }, t('New config'))),
    h('form', { class: 'bar panel', onsubmit: search, role: 'search' },
      field(t('Data ID'), dataId), field(t('Group'), group), field(t('App'), app),
      h('button', { type: 'submit', class: 'primary' }, t('Search')), h('span', { class: 'grow' }),
      expBtn, delBtn),
    errSlot,
    table([
      { label: all, cell: (c) => h('input', { type: 'checkbox', 'data-id': c.id, 'aria-label': t('Select {dataId}', { dataId: c.dataId }),
        onchange: (e) => { e.target.checked ? selected.add(c.id) : selected.delete(c.id); sync(); } }) },
      { label: t('Data ID'), cell: (c) => h('a', { href: hashFor('edit', keyParams(c)) }, c.dataId) },
      { label: t('Group'), cell: (c) => c.group },
      { label: t('Type'), cell: (c) => h('span', { class: 'tag' }, c.type) },
      { label: t('App'), cell: (c) => c.appName || h('span', { class: 'muted' }, '—') },
      { label: t('Last modified'), cell: (c) => fmtTime(c.modified) },
      { label: '', class: 'actions', cell: (c) => h('div', { class: 'rowacts' },
        h('a', { href: hashFor('history', { ...keyParams(c), type: c.type }) }, t('History')),
        h('a', { href: hashFor('gray', keyParams(c)) }, t('Gray')),
        h('a', { href: hashFor('listeners', keyParams(c)) }, t('Listeners')),
        h('button', { type: 'button', class: 'link', 'data-clone': c.dataId, onclick: () => cloneDialog(c, ctx) }, t('Clone')),
        h('button', { type: 'button', class: 'link danger', 'data-delete-config': c.dataId, onclick: () => removeOne(c) }, t('Delete'))) },
    ], res.items, t('No config matches.')),
    pager(res, q, 'configs', { noun: ['{n} config', '{n} configs'], id: 'configs-pager' }),
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
  const diffBtn = h('button', { type: 'button', id: 'diff-selected', disabled: true }, t('Diff selected'));
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
  const name = (v) => (v === 'current' ? t('current') : t('version {nid}', { nid: v }));
  const showDiff = async (from, to) => {
    try {
      const [a, b] = await Promise.all([textOf(from), textOf(to)]);
      out.replaceChildren(h('h2', {}, t('Diff: {v0} → {v1}', { v0: name(from), v1: name(to) })), diffPane(a, b, q.type || 'text', { from: name(from), to: name(to) }));
    } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  diffBtn.onclick = () => { const [a, b] = [...picks].sort((x, y) => x - y); showDiff(String(a), String(b)); };
  const showEntry = async (nid) => {
    try {
      const e = await api.get('/history/entry', { ...keyParams(key), nid });
      const area = codeArea(e.content, q.type || 'text', null, { readOnly: true, id: 'version-content', label: t('Version {nid}', { nid }) });
      area.el.classList.add('short');
      out.replaceChildren(h('h2', {}, t('Version {nid}', { nid }), h('span', { class: 'sub' }, t('{when} · {who} from {ip}', { when: fmtTime(e.modified), who: e.srcUser || t('unknown user'), ip: e.srcIp || '?' }))), area.el);
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
    const v = await modal(t('Roll back to version {nid}?', { nid }), h('div', {},
      h('p', {}, t('This publishes the content of version {nid} as the current config of {dataId}. Listeners get it at once.', { nid, dataId: key.dataId })),
      diffPane(now ? now.content : '', target, q.type || 'text', { from: t('current'), to: t('version {nid}', { nid }) }), err), [
      { label: t('Cancel'), value: 'cancel' },
      { label: t('Roll back'), value: 'ok', class: 'danger solid', action: async () => {
        try { await api.post('/history/rollback', { ...keyParams(key), nid, casMd5: now ? now.md5 : '' }); return true; }
        catch (e) {
          err.replaceChildren(e.conflict
            ? h('div', { class: 'notice', role: 'alert' }, t('The config changed since this page was opened; nothing was rolled back. Reload the history and try again.'))
            : errorBox(e));
          return false;
        }
      } },
    ]);
    if (v === 'ok') { toast(t('Rolled back to version {nid}', { nid })); ctx.rerender(); }
  };
  const OPS = { I: t('created'), U: t('updated'), D: t('deleted') };
  const GRAY_OPS = { I: t('published'), U: t('changed'), D: t('stopped or promoted') };
  view.replaceChildren(
    h('div', { class: 'crumbs' }, h('a', { href: hashFor('configs', {}) }, t('Configs')), ' / ', h('a', { href: hashFor('edit', keyParams(key)) }, `${key.group} / ${key.dataId}`), ' / ', t('history')),
    h('div', { class: 'bar' }, h('h1', { class: 'grow' }, t('History'), h('span', { class: 'sub' }, key.dataId)), diffBtn),
    h('p', { class: 'muted' }, t('Each row is the version an operation replaced (as Nacos records history). Select two to diff them.')),
    table([
      { label: '', cell: (r) => h('input', { type: 'checkbox', 'data-nid': r.nid, 'aria-label': t('Select version {nid}', { nid: r.nid }), onchange: (e) => pick(r.nid, e.target.checked) }) },
      { label: t('Version'), cell: (r) => h('button', { type: 'button', class: 'link', onclick: () => showEntry(r.nid) }, String(r.nid)) },
      { label: t('Operation'), cell: (r) => h('span', { class: 'tag' + (r.op === 'D' ? ' bad' : '') }, OPS[r.op] || r.op) },
      { label: t('When'), cell: (r) => fmtTime(r.modified) },
      { label: t('Who'), cell: (r) => r.srcUser || h('span', { class: 'muted' }, '—') },
      { label: t('From'), cell: (r) => h('code', {}, r.srcIp || '—') },
      // A write by a change request names it: a link to its page.
      { label: t('Message'), cell: (r) => [r.message || (r.changeId == null ? h('span', { class: 'muted' }, '—') : ''),
        r.changeId != null ? [r.message ? ' ' : '', h('a', { href: hashFor('change', { id: r.changeId }), 'data-history-change': r.changeId }, t('change #{id}', { id: r.changeId }))] : ''] },
      { label: 'md5', cell: (r) => h('code', {}, (r.md5 || '').slice(0, 10)) },
      { label: '', class: 'actions', cell: (r) => [
        h('button', { type: 'button', class: 'link', 'data-diff-current': r.nid, onclick: () => showDiff(String(r.nid), 'current') }, t('Diff with current')),
        h('button', { type: 'button', class: 'link danger', 'data-rollback': r.nid, onclick: () => rollback(r.nid) }, t('Roll back'))] },
    ], res.items, t('No history yet.')),
    pager(res, q, 'history', { noun: ['{n} version', '{n} versions'], id: 'history-pager' }),
    out,
    h('h2', {}, t('Gray operations'), h('span', { class: 'sub' }, t('{total} in all', { total: gres.total }))),
    table([
      { label: t('Gray'), cell: (r) => h('span', { class: 'tag warn' }, r.grayName) },
      { label: t('Rule'), cell: (r) => h('code', {}, r.ruleExpr || r.ruleType) },
      { label: t('Operation'), cell: (r) => h('span', { class: 'tag' + (r.op === 'D' ? ' bad' : '') }, GRAY_OPS[r.op] || r.op) },
      { label: t('When'), cell: (r) => fmtTime(r.modified) },
      { label: t('Who'), cell: (r) => r.srcUser || h('span', { class: 'muted' }, '—') },
      { label: t('From'), cell: (r) => h('code', {}, r.srcIp || '—') },
      { label: '', class: 'actions', cell: (r) => h('button', { type: 'button', class: 'link', 'data-gray-nid': r.nid, onclick: () => {
        const a = codeArea(r.content, q.type || 'text', null, { readOnly: true, id: 'gray-version-content', label: t('Gray {grayName}', { grayName: r.grayName }) });
        a.el.classList.add('short');
        out.replaceChildren(h('h2', {}, t(r.op === 'I' ? 'Gray {name}: the version published at {when}' : 'Gray {name}: the version replaced at {when}', { name: r.grayName, when: fmtTime(r.modified) })), a.el);
      } }, t('Content')) },
    ], gres.items, t('No gray release of this config yet.')),
    gres.pages > 1 ? pager(gres, q, 'history', { noun: ['{n} gray operation', '{n} gray operations'], id: 'gray-history-pager', param: 'gpageNo', sizes: false }) : '',
  );
}

// ---------- gray release ----------
// A client's IP, and the one it reports about itself when that differs: gray rules match
// the reported one (as Nacos does).
function ipCell(ip, reported) {
  if (!reported || reported === ip) return h('code', {}, ip);
  return h('span', {}, h('code', {}, ip), ' ', h('span', { class: 'muted' }, t('reports {ip}', { ip: reported })));
}

function listenerTable(rows, empty) {
  return table([
    { label: 'IP', cell: (l) => ipCell(l.ip, l.grayIp) },
    { label: t('App'), cell: (l) => l.app || h('span', { class: 'muted' }, '—') },
    { label: t('Transport'), cell: (l) => l.transport },
    { label: t('Holds md5'), cell: (l) => h('code', {}, (l.heldMd5 || '—').slice(0, 12)) },
    { label: t('Served'), cell: (l) => l.gray ? h('span', { class: 'tag warn' }, t('gray {name}', { name: l.gray })) : h('span', { class: 'tag' }, t('formal')) },
    { label: t('State'), cell: (l) => l.inSync ? h('span', { class: 'tag ok' }, t('in sync')) : h('span', { class: 'tag bad' }, t('behind')) },
  ], rows, empty);
}

export async function grayPage(view, q, ctx) {
  const key = { namespace: q.namespace ?? ctx.namespace, group: q.group, dataId: q.dataId };
  const [cfg, res] = await Promise.all([api.get('/config', keyParams(key)), api.get('/grays', keyParams(key))]);
  const errSlot = h('div', { id: 'gray-error' });
  const by = h('select', { id: 'g-by' }, h('option', { value: 'ips' }, t('IP list (beta)')), h('option', { value: 'labels' }, t('Label expression')), h('option', { value: 'app' }, t('App name')));
  const ips = h('input', { id: 'g-ips', placeholder: '10.0.0.5, 10.1.0.0/16', autocomplete: 'off' });
  const expr = h('input', { id: 'g-expr', placeholder: 'env=pre&&region=hz', autocomplete: 'off' });
  const app = h('input', { id: 'g-app', placeholder: 'shop', autocomplete: 'off' });
  const name = h('input', { id: 'g-name', placeholder: 'canary', autocomplete: 'off' });
  const prio = h('input', { id: 'g-priority', type: 'number', placeholder: '0', autocomplete: 'off' });
  const fIps = field(t('IPs or CIDRs'), ips), fExpr = field(t('Labels'), expr), fApp = field(t('App name'), app), fName = field(t('Gray name'), name), fPrio = field(t('Priority'), prio);
  const syncBy = () => { fIps.hidden = by.value !== 'ips'; fExpr.hidden = by.value !== 'labels'; fApp.hidden = by.value !== 'app'; fName.hidden = fPrio.hidden = by.value === 'ips'; };
  by.onchange = syncBy; syncBy();
  const area = codeArea(cfg.content, cfg.type, null, { id: 'gray-content', label: t('Gray content') });
  area.el.classList.add('short');
  const createErr = h('div', { id: 'gray-create-error' });
  const create = async () => {
    createErr.replaceChildren();
    const v = await api.post('/validate', { namespace: key.namespace, type: cfg.type, content: area.value });
    if (!v.ok && v.mode === 'reject') { area.markError(v.line); createErr.replaceChildren(errorBox({ message: invalidText(v) })); return; }
    const err = h('div');
    const warn = !v.ok && v.mode === 'warn' ? h('div', { class: 'notice', role: 'alert' }, invalidText(v) + ' ' + t('The server accepts it in this namespace. Publish anyway?')) : '';
    const ok = await modal(t('Publish gray'), h('div', {}, h('p', { class: 'muted' }, t('The gray content against the formal config:')), warn,
      diffPane(cfg.content, area.value, cfg.type, { from: t('formal'), to: t('gray') }), err), [
      { label: t('Cancel'), value: 'cancel' },
      { label: t('Publish gray'), value: 'ok', class: 'primary', action: async () => {
        try {
          await api.post('/grays', { ...keyParams(key), by: by.value, ips: ips.value, expr: expr.value, app: app.value, name: name.value, priority: prio.value, content: area.value });
          return true;
        } catch (e) { err.replaceChildren(errorBox(e)); return false; }
      } }]);
    if (ok === 'ok') { toast(t('Gray published')); ctx.rerender(); }
  };
  const act = async (what, g) => {
    const text = what === 'promote'
      ? t('Promote gray “{name}”: its content becomes the formal config for every client, and the gray is removed.', { name: g.name })
      : t('Abandon gray “{name}”: the clients it reaches get the formal config again.', { name: g.name });
    if (!(await confirmDanger(what === 'promote' ? t('Promote gray') : t('Abandon gray'), text, what === 'promote' ? t('Promote') : t('Abandon')))) return;
    try { await api.post('/grays/' + what, { ...keyParams(key), name: g.name }); toast(what === 'promote' ? t('Promoted') : t('Abandoned')); ctx.rerender(); }
    catch (e) { showError(errSlot, e); }
  };
  // A gray's content, read-only, or its diff against the formal config, inside its card.
  const showGray = (g, slot, diff) => {
    if (slot.dataset.showing === (diff ? 'diff' : 'content')) { slot.replaceChildren(); slot.dataset.showing = ''; return; }
    slot.dataset.showing = diff ? 'diff' : 'content';
    if (diff) slot.replaceChildren(diffPane(cfg.content, g.content, cfg.type, { from: t('formal'), to: t('gray {name}', { name: g.name }) }));
    else {
      const a = codeArea(g.content, cfg.type, null, { readOnly: true, id: `gray-view-${g.name}`, label: t('Content of gray {name}', { name: g.name }) });
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
    formTitle.textContent = t('Edit gray “{name}”', { name: g.name });
    formTitle.scrollIntoView({ block: 'start' });
    area.focus();
  };
  const formTitle = h('h2', { id: 'gray-form-title' }, t('New gray'));
  const cards = res.grays.map((g) => { const slot = h('div', { class: 'gray-out' }); return h('section', { class: 'panel card', 'data-gray': g.name },
    h('div', { class: 'bar' }, h('h3', { class: 'grow' }, `${g.name} `, h('span', { class: 'tag' }, g.kind)),
      h('button', { type: 'button', 'data-view': g.name, onclick: () => showGray(g, slot, false) }, t('Content')),
      h('button', { type: 'button', 'data-diff': g.name, onclick: () => showGray(g, slot, true) }, t('Diff with formal')),
      g.kind === 'tag' ? '' : h('button', { type: 'button', 'data-edit-gray': g.name, onclick: () => editGray(g) }, t('Edit')),
      h('button', { type: 'button', class: 'primary', 'data-promote': g.name, onclick: () => act('promote', g) }, t('Promote')),
      h('button', { type: 'button', class: 'danger', 'data-abandon': g.name, onclick: () => act('abandon', g) }, t('Abandon'))),
    h('dl', { class: 'kv' }, h('dt', {}, t('Rule')), h('dd', {}, h('code', {}, g.expr)), h('dt', {}, t('Priority')), h('dd', {}, g.kind === 'beta' ? t('first (a beta wins over every other gray)') : g.kind === 'tag' ? t('second (tags come right after the beta)') : String(g.priority)),
      h('dt', {}, 'md5'), h('dd', {}, h('code', {}, g.md5)), h('dt', {}, t('Published')), h('dd', {}, fmtTime(g.modified))),
    slot,
    h('h2', {}, t('Connected clients it reaches now ({length})', { length: g.listeners.length })),
    listenerTable(g.listeners, t('No connected client matches this rule.'))); });
  view.replaceChildren(
    h('div', { class: 'crumbs' }, h('a', { href: hashFor('configs', {}) }, t('Configs')), ' / ', h('a', { href: hashFor('edit', keyParams(key)) }, `${key.group} / ${key.dataId}`), ' / ', t('gray')),
    h('h1', {}, t('Gray release'), h('span', { class: 'sub' }, t('{dataId} · {formalListeners} listener(s) on the formal config', { dataId: key.dataId, formalListeners: res.formalListeners }))),
    errSlot,
    cards.length ? h('div', { class: 'stack', id: 'grays' }, cards) : h('p', { class: 'muted', id: 'grays' }, t('No gray release of this config.')),
    formTitle,
    h('div', { class: 'panel' },
      h('div', { class: 'bar' }, field(t('Release to'), by), fIps, fExpr, fApp, fName, fPrio),
      area.el, createErr,
      h('div', { class: 'bar' }, h('button', { type: 'button', class: 'primary', id: 'gray-create', onclick: create }, t('Review & publish gray')))),
  );
}

// ---------- listeners ----------
/** What a client holds, as a tag: the formal config, a gray, or an unknown md5. */
function holdsTag(holds) {
  if (holds === 'formal') return h('span', { class: 'tag' }, t('formal'));
  if (holds.startsWith('gray:')) return h('span', { class: 'tag warn' }, t('gray {name}', { name: holds.slice(5) }));
  return h('span', { class: 'tag bad' }, t('unknown'));
}

/** "formal 3 · gray beta 1 · unknown 0" of one count object. */
function countsText(c) {
  const parts = [t('formal {n}', { n: c.formal })];
  for (const [name, n] of Object.entries(c.grays || {})) parts.push(t('gray {name} {n}', { name, n }));
  parts.push(t('unknown {n}', { n: c.unknown }));
  return parts.join(' · ');
}

/** The live view of a key (/nacos/nacelle/v1/clients): counts per node and in total,
 * then every client with what it holds and since when. */
function liveView(v) {
  const nodes = v.nodes || [];
  const clients = nodes.flatMap((n) => (n.clients || []).map((c) => ({ ...c, node: n.node })));
  return h('div', { id: 'live-view' },
    h('div', { class: 'panel' },
      h('div', { class: 'muted' }, t('Across the cluster')),
      h('div', { class: 'mono', id: 'live-total' }, `${v.total.total} · ${countsText(v.total)}`),
      v.complete ? null : h('p', { class: 'tag bad', id: 'live-incomplete' }, t('Not every node answered: the counts cover those that did.'))),
    table([
      { label: t('Node'), cell: (n) => h('code', {}, n.node) },
      { label: t('Clients'), cell: (n) => n.error ? '—' : String(n.counts.total) },
      { label: t('Holds'), cell: (n) => n.error ? h('span', { class: 'tag bad' }, t('not asked: {error}', { error: n.error })) : countsText(n.counts) },
    ], nodes, t('No node answered.')),
    table([
      { label: t('Node'), cell: (l) => h('code', {}, l.node) },
      { label: 'IP', cell: (l) => ipCell(l.ip, l.reportedIp) },
      { label: t('App'), cell: (l) => l.app || h('span', { class: 'muted' }, '—') },
      { label: t('Transport'), cell: (l) => l.protocol },
      { label: t('Holds'), cell: (l) => holdsTag(l.holds) },
      { label: t('Holds md5'), cell: (l) => h('code', {}, (l.heldMd5 || '—').slice(0, 12)) },
      { label: t('Served'), cell: (l) => l.servedGray ? h('span', { class: 'tag warn' }, t('gray {name}', { name: l.servedGray })) : h('span', { class: 'tag' }, t('formal')) },
      { label: t('State'), cell: (l) => l.inSync ? h('span', { class: 'tag ok' }, t('in sync')) : h('span', { class: 'tag bad' }, t('behind')) },
      { label: t('Since'), cell: (l) => fmtTime(l.since) },
    ], clients, t('No client listens to this config.')));
}

export async function listenersPage(view, q, ctx) {
  const ip = h('input', { id: 'l-ip', value: q.ip || '', placeholder: '10.0.0.5', autocomplete: 'off' });
  const dataId = h('input', { id: 'l-dataId', value: q.dataId || '', autocomplete: 'off' });
  const group = h('input', { id: 'l-group', value: q.group || 'DEFAULT_GROUP', autocomplete: 'off' });
  let body = h('p', { class: 'muted' }, t('Look up the clients listening to a config, or what one client IP listens to.'));
  if (q.dataId) {
    const key = { namespace: q.namespace ?? ctx.namespace, group: q.group || 'DEFAULT_GROUP', dataId: q.dataId };
    const live = await nacelle.get('/clients', { namespaceId: key.namespace, groupName: key.group, dataId: key.dataId });
    body = h('div', {}, h('h2', {}, t('Clients listening to {group} / {dataId} ({length})', { group: key.group, dataId: key.dataId, length: live.total.total })), liveView(live));
  } else if (q.ip) {
    const rows = await api.get('/listeners/ip', { ip: q.ip });
    body = h('div', {}, h('h2', {}, t('What {ip} listens to ({length})', { ip: q.ip, length: rows.length })), table([
      { label: t('Namespace'), cell: (l) => h('code', {}, l.namespace || 'public') },
      { label: t('Group'), cell: (l) => l.group },
      { label: t('Data ID'), cell: (l) => h('a', { href: hashFor('edit', keyParams(l)) }, l.dataId) },
      { label: t('App'), cell: (l) => l.app || '—' },
      { label: t('Transport'), cell: (l) => l.transport },
      { label: t('Holds md5'), cell: (l) => h('code', {}, (l.heldMd5 || '—').slice(0, 12)) },
      { label: t('Served'), cell: (l) => l.gray ? h('span', { class: 'tag warn' }, t('gray {name}', { name: l.gray })) : t('formal') },
      { label: t('State'), cell: (l) => l.inSync ? h('span', { class: 'tag ok' }, t('in sync')) : h('span', { class: 'tag bad' }, t('behind')) },
    ], rows, t('This IP listens to nothing.')));
  }
  view.replaceChildren(
    h('h1', {}, t('Listeners')),
    h('div', { class: 'grid2' },
      h('form', { class: 'panel bar', onsubmit: (e) => { e.preventDefault(); location.hash = hashFor('listeners', { namespace: ctx.namespace, dataId: dataId.value.trim(), group: group.value.trim() }); } },
        field(t('Data ID'), dataId), field(t('Group'), group), h('button', { type: 'submit', class: 'primary' }, t('By config'))),
      h('form', { class: 'panel bar', onsubmit: (e) => { e.preventDefault(); location.hash = hashFor('listeners', { ip: ip.value.trim() }); } },
        field(t('Client IP'), ip), h('button', { type: 'submit', class: 'primary' }, t('By IP')))),
    body);
}

// ---------- cluster ----------
export async function clusterPage(view) {
  const c = await api.get('/cluster');
  const STATE = { UP: 'ok', SUSPICIOUS: 'warn', DOWN: 'bad' };
  view.replaceChildren(
    h('h1', {}, t('Cluster'), h('span', { class: 'sub' }, c.clustered ? t('{length} members sharing one database', { length: c.members.length }) : t('a single node'))),
    h('div', { class: 'cards' },
      h('div', { class: 'panel' }, h('div', { class: 'muted' }, t('Configs in memory')), h('div', { class: 'mono' }, String(c.configs))),
      h('div', { class: 'panel' }, h('div', { class: 'muted' }, t('Listeners on this node')), h('div', { class: 'mono' }, String(c.listeners)))),
    h('h2', {}, t('Members')),
    table([
      { label: t('Member'), cell: (m) => [h('code', {}, m.address || t('(this node)')), m.self ? h('span', { class: 'tag' }, t('this node')) : ''] },
      { label: t('Health'), cell: (m) => h('span', { class: 'tag ' + (STATE[m.state] || '') }, m.state) },
      { label: t('Last check'), cell: (m) => fmtTime(m.lastRefresh) },
      { label: t('Failed checks'), num: true, cell: (m) => String(m.failCount) },
      { label: t('Notified via gRPC'), num: true, cell: (m) => String(m.notified.grpc) },
      { label: t('via HTTP'), num: true, cell: (m) => String(m.notified.http) },
      { label: t('Failed notifications'), num: true, cell: (m) => String(m.notified.failed) },
    ], c.members));
}
