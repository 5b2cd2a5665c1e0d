// The config editor: CodeMirror 6 (editor.bundle.js, built from ../editor-src) with the
// type's syntax mode; validation by the server following its mode for the namespace
// (`reject` blocks, `warn` asks for confirmation, `off` says nothing; the error's line is
// marked); a merge view of the change before every publish, and compare-and-set: the
// publish carries the md5 of the version that was opened, and a conflict is shown instead
// of overwriting. Unpublished edits are kept as a draft in localStorage per key until
// published or discarded, and leaving the page with them asks first (app.js's guard).

import { api, session } from './api.js';
import { h, field, modal, diffPane, errorBox, showError, toast, fmtTime, hashFor, keyParams } from './ui.js';
import { t } from './i18n.js';
import { codeEditor, TYPES } from './editor.bundle.js';
import { reviewPolicies, policyFor, proposeChange, emergencyHeader } from './changes.js';

export function typeFromName(dataId) {
  const ext = (dataId.split('.').pop() || '').toLowerCase();
  return { yml: 'yaml', yaml: 'yaml', json: 'json', xml: 'xml', toml: 'toml', properties: 'properties', html: 'html', htm: 'html' }[ext] || 'text';
}

// Nacos's rule for names (the core's `is_valid_name`): letters, digits and `_ - . :`.
const NAME = /^[\p{Alphabetic}\p{N}_.:-]+$/u;
/** What is wrong with a dataId or group as typed, in words for people; '' when nothing. */
export function nameProblem(label, value, max) {
  if (!value.trim()) return t('{label} is required.', { label });
  const bad = [...value].find((c) => !NAME.test(c));
  if (bad !== undefined) {
    const shown = bad === ' ' ? t('a space') : `“${bad}”`;
    return t('{label} cannot contain {shown}: use letters, digits and _ - . : only.', { label, shown });
  }
  const n = [...value].length;
  if (n > max) return t('{label} is too long: {n} characters, at most {max}.', { label, n, max });
  return '';
}

/** A code area in a `.editor` box (`id`, default `content`); `el.editor` is the API. */
export function codeArea(initial, type, onInput, opts = {}) {
  const el = h('div', { class: 'editor', id: opts.id || 'content' });
  const ed = codeEditor(el, { doc: initial, type, onChange: onInput, readOnly: !!opts.readOnly, label: opts.label || t('Content') });
  el.editor = ed;
  return {
    el, editor: ed,
    get value() { return ed.value; },
    set value(v) { ed.value = v; },
    setType: (t) => ed.setType(t),
    markError: (line) => ed.markError(line),
    goTo: (line) => ed.goTo(line),
    focus: () => ed.focus(),
  };
}

// ---------- drafts ----------
const DRAFT = 'nacelle.draft:';
export const draftKey = (k) => DRAFT + JSON.stringify([k.namespace || '', k.group || '', k.dataId || '']);
function readDraft(k) {
  try { return JSON.parse(localStorage.getItem(draftKey(k)) || 'null'); } catch { return null; }
}
function writeDraft(k, d) {
  try { localStorage.setItem(draftKey(k), JSON.stringify(d)); return true; } catch { return false; }
}
function dropDraft(k) { try { localStorage.removeItem(draftKey(k)); } catch { /* nothing kept */ } }

export async function editorPage(view, q, ctx) {
  const isNew = !q.dataId;
  const key = { namespace: q.namespace ?? ctx.namespace, group: isNew ? '' : (q.group || 'DEFAULT_GROUP'), dataId: q.dataId || '' };
  let opened = null;
  if (!isNew) {
    try { opened = await api.get('/config', keyParams(key)); }
    catch (e) { if (e.status !== 404) throw e; }
    if (!opened) {
      view.replaceChildren(h('h1', {}, t('Config not found')), errorBox({ message: t('{group} / {dataId} does not exist in this namespace.', { group: key.group, dataId: key.dataId }) }),
        h('a', { class: 'btn', href: hashFor('configs', {}) }, t('Back to configs')));
      return;
    }
  }
  // Under a review policy, publishing proposes a change request instead (an administrator
  // may still publish directly, giving an emergency reason).
  const policies = await reviewPolicies();
  const draft = readDraft(key);
  const base = opened ? opened.content : '';
  const useDraft = draft && typeof draft.content === 'string' && (draft.content !== base || isNew);
  const start = useDraft ? draft : {};
  const dataId = h('input', { id: 'f-dataId', value: isNew ? (start.dataId || '') : key.dataId, required: true, disabled: !isNew, autocomplete: 'off', 'aria-describedby': 'f-dataId-error' });
  const group = h('input', { id: 'f-group', value: isNew ? (start.group || 'DEFAULT_GROUP') : key.group, required: true, disabled: !isNew, autocomplete: 'off', 'aria-describedby': 'f-group-error' });
  const typeSel = h('select', { id: 'f-type' }, TYPES.map((t) => h('option', { value: t }, t)));
  typeSel.value = start.type || (opened ? opened.type : typeFromName(key.dataId));
  const appName = h('input', { id: 'f-app', value: start.appName ?? (opened?.appName || ''), autocomplete: 'off' });
  const desc = h('input', { id: 'f-desc', value: start.desc ?? (opened?.desc || ''), autocomplete: 'off' });
  const tags = h('input', { id: 'f-tags', value: start.tags ?? (opened?.tags || ''), placeholder: 'a,b', autocomplete: 'off' });
  const dataIdErr = h('div', { class: 'field-error', id: 'f-dataId-error', role: 'alert' });
  const groupErr = h('div', { class: 'field-error', id: 'f-group-error', role: 'alert' });
  const status = h('div', { class: 'status', id: 'validation', 'aria-live': 'polite' });
  const errSlot = h('div', { id: 'publish-error' });
  const draftSlot = h('div', { id: 'draft' });
  let validateTimer = null, draftTimer = null;
  let dirty = !!useDraft;

  const currentKey = () => (isNew ? { namespace: key.namespace, group: group.value.trim(), dataId: dataId.value.trim() } : key);
  const policyNow = () => policyFor(policies, key.namespace, currentKey().group);
  const policySlot = h('div', { id: 'review-policy' });
  let publishBtn = null;
  const showPolicy = () => {
    const p = policyNow();
    if (publishBtn) publishBtn.textContent = p ? t('Review & propose') : t('Review & publish');
    policySlot.replaceChildren(p ? h('div', { class: 'notice', role: 'status' },
      t('Changes to this config are reviewed: policy {pattern} of this namespace asks {n} approval(s). Publishing proposes a change request.', { pattern: p.groupPattern, n: p.requiredApprovals }),
      ' ', h('a', { href: hashFor('changes', { ns: key.namespace }) }, t('Change requests'))) : '');
  };
  const snapshot = () => ({ content: code.value, type: typeSel.value, dataId: dataId.value, group: group.value,
    appName: appName.value, desc: desc.value, tags: tags.value, baseMd5: opened ? opened.md5 : '', saved: Date.now() });
  // The draft is saved a moment after the last change (a 1 MB text is not copied on every
  // keystroke); equal to what is stored, it is dropped.
  const saveDraft = () => {
    clearTimeout(draftTimer);
    const s = snapshot();
    const same = !isNew && s.content === base && s.type === opened.type && s.appName === (opened.appName || '')
      && s.desc === (opened.desc || '') && s.tags === (opened.tags || '');
    if (same || (isNew && !s.content && !s.dataId.trim())) { dropDraft(key); dirty = false; return; }
    dirty = true;
    writeDraft(key, s);
  };
  const changed = () => { dirty = true; clearTimeout(draftTimer); draftTimer = setTimeout(saveDraft, 400); };

  const code = codeArea(useDraft ? draft.content : base, typeSel.value, () => {
    changed();
    clearTimeout(validateTimer);
    validateTimer = setTimeout(() => validate(false).catch(() => {}), 500);
  });
  let lastValid = null;

  async function validate(show = true) {
    try {
      const r = await api.post('/validate', { namespace: key.namespace, type: typeSel.value, content: code.value });
      lastValid = r;
      if (r.mode === 'off') {
        // The server does not check this namespace's content: neither does the page.
        code.markError(null);
        status.replaceChildren();
        return { ...r, ok: true };
      }
      code.markError(r.ok ? null : r.line);
      if (r.ok) {
        status.replaceChildren(h('span', { class: 'tag ok' }, t('valid {type}', r)));
      } else {
        const where = r.line ? (r.column ? t('line {line}, column {column}', r) : t('line {line}', r)) : '';
        status.replaceChildren(
          h('span', { class: 'tag bad' }, t('invalid {type}', r)),
          h('span', { class: 'error', role: 'alert', id: 'validation-error' }, (where ? where + ': ' : '') + r.message),
          r.mode === 'warn' ? h('span', { class: 'muted', id: 'validation-mode' }, t('This namespace accepts it (validation mode warn): publishing asks you to confirm.'))
            : h('span', { class: 'muted', id: 'validation-mode' }, t('This namespace refuses invalid content (validation mode reject).')),
          r.line ? h('button', { type: 'button', class: 'link', onclick: () => code.goTo(r.line) }, t('Go to line')) : '');
      }
      return r;
    } catch (e) {
      if (show) status.replaceChildren(errorBox(e));
      throw e;
    }
  }

  // Id and group rules as the user types.
  const checkNames = () => {
    if (!isNew) return true;
    const a = nameProblem(t('Data ID'), dataId.value.trim(), 255);
    const b = nameProblem(t('Group'), group.value.trim(), 128);
    dataIdErr.textContent = dataId.value ? a : '';
    groupErr.textContent = b;
    dataId.setAttribute('aria-invalid', a && dataId.value ? 'true' : 'false');
    group.setAttribute('aria-invalid', b ? 'true' : 'false');
    return !a && !b;
  };
  dataId.addEventListener('input', () => { typeSel.value = typeFromName(dataId.value); code.setType(typeSel.value); checkNames(); changed(); });
  group.addEventListener('input', () => { checkNames(); changed(); showPolicy(); });
  for (const f of [appName, desc, tags]) f.addEventListener('input', changed);
  typeSel.addEventListener('change', () => { code.setType(typeSel.value); changed(); validate(); });

  const discard = () => {
    clearTimeout(draftTimer);
    dropDraft(key);
    dirty = false;
  };
  ctx.setLeaveGuard({
    dirty: () => { if (dirty) { clearTimeout(draftTimer); saveDraft(); } return dirty; },
    what: () => currentKey().dataId || t('a new config'),
    discard,
  });

  async function reviewAndPublish() {
    showError(errSlot, null);
    const k = currentKey();
    if (!checkNames()) { (dataIdErr.textContent ? dataId : group).focus(); return; }
    if (!code.value.trim()) { showError(errSlot, { message: t('The content is empty.') }); return; }
    if (isNew) {
      // An id already taken is said before the review, with a way to it.
      const there = await api.get('/config', keyParams(k)).catch(() => null);
      if (there) {
        errSlot.replaceChildren(h('div', { class: 'error', role: 'alert', id: 'exists' },
          t('{group} / {dataId} already exists in this namespace. ', { group: k.group, dataId: k.dataId }), h('a', { href: hashFor('edit', keyParams(k)) }, t('Open it to edit it')), '.'));
        return;
      }
    }
    let v;
    try { v = await validate(); } catch { return; }
    if (!v.ok && v.mode === 'reject') { code.goTo(v.line || 1); return; }
    const pubErr = h('div');
    const policy = policyNow();
    if (policy) { await proposeDialog(k, v, policy); return; }
    const message = h('input', { type: 'text', id: 'publish-message', maxlength: '1024', placeholder: t('Why this change (kept in the history)') });
    const warning = v.ok ? '' : h('div', { class: 'notice', role: 'alert', id: 'invalid-warning' },
      (v.line ? t('Not valid {type} (line {line}): {message}.', v) : t('Not valid {type}: {message}.', v)) + ' ' + t('The server accepts it in this namespace, but clients that parse it may fail. Publish anyway?'));
    const body = h('div', {},
      h('p', { class: 'muted' }, isNew ? t('New config {group} / {dataId} ({value}).', { group: k.group, dataId: k.dataId, value: typeSel.value })
        : t('Changes to {group} / {dataId} against the version opened at {v2}.', { group: k.group, dataId: k.dataId, v2: fmtTime(opened.modified) })),
      warning,
      diffPane(opened ? opened.content : '', code.value, typeSel.value, { from: opened ? t('published') : t('nothing'), to: t('yours') }), field(t('Message'), message), pubErr);
    const choice = await modal(t('Review and publish'), body, [
      { label: t('Cancel'), value: 'cancel' },
      { label: v.ok ? t('Publish') : t('Publish anyway'), value: 'publish', class: 'primary', action: () => publishNow(k, message.value.trim(), pubErr) },
    ]);
    if (choice === 'publish') published(k);
  }

  // The publish itself (compare-and-set on the version opened); `headers`: an emergency
  // reason. True when published; a refusal or a conflict is shown in `pubErr`.
  async function publishNow(k, msg, pubErr, headers) {
    try {
      const r = await api.post('/config', { ...keyParams(k), content: code.value, type: typeSel.value,
        appName: appName.value, desc: desc.value, tags: tags.value,
        casMd5: opened ? opened.md5 : '', message: msg }, headers ? { headers } : undefined);
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
          t('Someone else changed this config since you opened it (now md5 {md5}, {when}{by}). Nothing was published. Your text is kept: review again to see the diff against their version.', { md5: opened.md5, when: fmtTime(opened.modified), by: opened.srcUser ? t(' by {user}', { user: opened.srcUser }) : '' })));
      } else if (e.conflict) {
        pubErr.replaceChildren(h('div', { class: 'notice', role: 'alert', id: 'conflict' },
          t('{group} / {dataId} was created by someone else a moment ago. Nothing was published: open it from the configs list to edit it.', { group: k.group, dataId: k.dataId })));
      } else {
        pubErr.replaceChildren(errorBox(e));
      }
      return false;
    }
  }

  function published(k) {
    discard();
    toast(t('Published {dataId}', { dataId: k.dataId }));
    location.hash = hashFor('edit', keyParams(k));
    if (!isNew) ctx.rerender();
  }

  // Under a review policy: the change against the server's version becomes a change
  // request (open for review, or a draft); an administrator may publish it directly
  // instead, with an emergency reason (audited by the server).
  async function proposeDialog(k, v, policy) {
    const err = h('div', { id: 'propose-error' });
    const title = h('input', { type: 'text', id: 'cr-title', maxlength: '256', value: t('Update {dataId}', { dataId: k.dataId }) });
    const description = h('textarea', { id: 'cr-description', rows: 2, maxlength: 4096, placeholder: t('Why this change') });
    const asDraft = h('input', { type: 'checkbox', id: 'cr-draft' });
    const admin = !!(session() && session().globalAdmin);
    const reason = h('input', { type: 'text', id: 'emergency-reason', maxlength: '1024', placeholder: t('e.g. incident 42: rolling back the pool size') });
    const warning = v.ok ? '' : h('div', { class: 'notice', role: 'alert', id: 'invalid-warning' },
      (v.line ? t('Not valid {type} (line {line}): {message}.', v) : t('Not valid {type}: {message}.', v)) + ' ' + t('The server accepts it in this namespace, but clients that parse it may fail. Publish anyway?'));
    const body = h('div', {},
      h('p', { class: 'muted' }, t('Namespace policy {pattern} asks {n} approval(s) for this config: your change becomes a change request, published once it is approved.', { pattern: policy.groupPattern, n: policy.requiredApprovals })),
      warning,
      diffPane(opened ? opened.content : '', code.value, typeSel.value, { from: opened ? t('published') : t('nothing'), to: t('yours') }),
      h('div', { class: 'form' }, h('div', { class: 'wide' }, field(t('Title'), title)), h('div', { class: 'wide' }, field(t('Description'), description))),
      h('label', { class: 'radio' }, asDraft, ' ', t('Keep it as a draft (open it for review later)')),
      admin ? h('details', { id: 'emergency' }, h('summary', {}, t('Emergency: publish directly (administrators)')),
        h('p', { class: 'muted' }, t('Writes past the review policy now. The reason is kept in the audit trail.')), field(t('Reason'), reason)) : '',
      err);
    let created = null;
    const choice = await modal(t('Review and propose'), body, [
      { label: t('Cancel'), value: 'cancel' },
      admin ? { label: t('Publish now (emergency)'), value: 'emergency', class: 'danger', action: async () => {
        const details = body.querySelector('#emergency');
        if (!reason.value.trim()) {
          if (details) details.open = true;
          showError(err, { message: t('An emergency publish needs a reason.') });
          reason.focus();
          return false;
        }
        return publishNow(k, '', err, emergencyHeader(reason.value));
      } } : null,
      { label: t('Propose change'), value: 'propose', class: 'primary', action: async () => {
        if (!title.value.trim()) { showError(err, { message: t('A change request needs a title.') }); title.focus(); return false; }
        try {
          created = await proposeChange(k, { content: code.value, type: typeSel.value, title: title.value.trim(), description: description.value, draft: asDraft.checked });
          return true;
        } catch (e) { showError(err, e); return false; }
      } },
    ].filter(Boolean));
    if (choice === 'emergency') published(k);
    if (choice === 'propose' && created) {
      discard();
      toast(t('Change request #{id} proposed', { id: created.id }));
      location.hash = hashFor('change', { id: created.id });
    }
  }

  if (useDraft) {
    draftSlot.replaceChildren(h('div', { class: 'notice', role: 'status' },
      t('Your unpublished edits from {v0} are restored (kept in this browser).', { v0: fmtTime(draft.saved) }),
      opened && draft.baseMd5 && draft.baseMd5 !== opened.md5 ? ' ' + t('The config was published since you made them: review the diff before publishing.') : '',
      ' ', h('button', { type: 'button', class: 'link danger', id: 'discard-draft', onclick: () => { discard(); ctx.rerender(); } }, t('Discard my edits'))));
  }

  publishBtn = h('button', { type: 'button', class: 'primary', id: 'review', onclick: reviewAndPublish, title: t('Ctrl+S') }, t('Review & publish'));
  showPolicy();
  view.onkeydown = (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === 's') { e.preventDefault(); reviewAndPublish(); }
  };
  const links = opened ? [
    h('a', { class: 'btn', href: hashFor('history', { ...keyParams(key), type: opened.type }) }, t('History')),
    h('a', { class: 'btn', href: hashFor('gray', keyParams(key)) }, t('Gray release')),
    h('a', { class: 'btn', href: hashFor('listeners', keyParams(key)) }, t('Listeners')),
  ] : [];
  view.replaceChildren(
    h('div', { class: 'crumbs' }, h('a', { href: hashFor('configs', {}) }, t('Configs')), ' / ', isNew ? t('new') : `${key.group} / ${key.dataId}`),
    h('h1', {}, isNew ? t('New config') : key.dataId, opened ? h('span', { class: 'sub' }, t('md5 {md5} · modified {when}{by}', { md5: opened.md5, when: fmtTime(opened.modified), by: opened.srcUser ? t(' by {user}', { user: opened.srcUser }) : '' })) : ''),
    policySlot,
    draftSlot,
    h('div', { class: 'meta' }, h('div', {}, field(t('Data ID'), dataId), dataIdErr), h('div', {}, field(t('Group'), group), groupErr),
      field(t('Type'), typeSel), field(t('App'), appName), field(t('Tags'), tags), field(t('Description'), desc)),
    code.el,
    status,
    errSlot,
    h('div', { class: 'bar' }, publishBtn, h('button', { type: 'button', onclick: () => validate() }, t('Validate')), ...links,
      h('span', { class: 'muted grow' }, h('kbd', {}, t('Ctrl')), '+', h('kbd', {}, 'S'), ' ', t('reviews the diff and publishes'))),
  );
  if (isNew) { dataId.dataset.autofocus = '1'; if (dataId.value) checkNames(); }
  else code.el.querySelector('.cm-content').dataset.autofocus = '1';
  if (code.value) validate(false).catch(() => {});
}
