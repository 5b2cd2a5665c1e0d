// The console's change requests, review policies and audit trail (issue 35, item 6), on a
// server with authentication on:
//
//   node console-review.mjs <base-url> <screenshot-dir> <admin-user> <admin-password>
//
// The administrator sets a review policy on namespace `rev` on the policies page; the
// editor then proposes instead of publishing, and the administrator's emergency publish
// needs a reason. `alice` (rw on rev) proposes a change from the editor: the request is
// open and its diff is shown side by side; her own approval is refused with the server's
// reason (in English, then in Chinese). `bob` (rwa on rev) approves and publishes it: the
// config holds the new content. The audit page lists the events and verifies the chain.
// Chinese pages without English left, 1024 px and 390 px layouts, no script errors.
// Run by crates/nacelle/tests/console_browser.rs (`console_review_in_chromium`).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { launch } from './browser.mjs';

const [base, shots, adminUser, adminPass] = process.argv.slice(2);
if (!base || !shots || !adminUser || !adminPass) {
  console.error('usage: node console-review.mjs <base-url> <screenshot-dir> <admin-user> <admin-password>');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });

let current = 'start';
const step = (n) => { current = n; };
const ok = () => console.log(`ok ${current}`);
const check = (c, why) => { if (!c) throw new Error(why); };

const { context, cleanup } = await launch();
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(10000);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e)));
page.on('console', (m) => {
  const text = m.text();
  if (m.type() !== 'error' || text.startsWith('Failed to load resource')) return;
  if (text.startsWith('Applying inline style violates') && text.includes('style attributes')) return;
  pageErrors.push(text);
});

async function shot(name) {
  await page.evaluate(() => document.getElementById('toasts')?.replaceChildren());
  const leaked = await page.evaluate(() => (document.body.innerText.match(/\bnull\b|\bundefined\b|\[object \w+\]|NaN/) || [])[0]);
  check(!leaked, `the ${name} page shows "${leaked}"`);
  await page.screenshot({ path: join(shots, name + '.png') });
}

// A call with the page's session, as the page makes it: `{status, body}`.
async function call(method, path, params, json) {
  return page.evaluate(async ([m, p, q, j]) => {
    const s = JSON.parse(sessionStorage.getItem('nacelle.session') || 'null');
    const headers = s ? { Authorization: 'Bearer ' + s.accessToken } : {};
    const init = { method: m, headers };
    let url = p;
    if (j !== null) { init.body = JSON.stringify(j); headers['Content-Type'] = 'application/json'; url += '?' + new URLSearchParams(q); }
    else if (m === 'GET' || m === 'DELETE') url += '?' + new URLSearchParams(q);
    else { init.body = new URLSearchParams(q); headers['Content-Type'] = 'application/x-www-form-urlencoded'; }
    const r = await fetch(url, init);
    const text = await r.text();
    let body = text;
    try { body = JSON.parse(text); } catch { /* plain text */ }
    return { status: r.status, body };
  }, [method, path, params || {}, json ?? null]);
}
async function must(method, path, params) {
  const r = await call(method, path, params);
  check(r.status === 200, `${method} ${path} ${JSON.stringify(params)}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function login(user, pass) {
  await page.goto(base + '/nacos/#/login');
  await page.fill('#login-user', user);
  await page.fill('#login-pass', pass);
  await page.click('#login-submit');
  await page.locator('#sign-out').waitFor();
}
async function signOut() {
  await page.click('#sign-out');
  await page.locator('#login-user').waitFor();
}
async function typeInEditor(text, id = 'content') {
  await page.locator(`#${id} .cm-content`).click();
  await page.keyboard.press('Control+a');
  await page.keyboard.insertText(text);
}
// The sides of the merge view in `scope` ([before, after]) and whether it is side by side.
async function mergeOf(scope) {
  await page.locator(`${scope} .cm-mergeView`).first().waitFor();
  return page.evaluate((s) => {
    const mv = document.querySelector(`${s} .cm-mergeView`);
    const sides = [...mv.querySelectorAll('.cm-content')].map((c) => [...c.querySelectorAll('.cm-line')].map((l) => l.textContent).join('\n'));
    const eds = [...mv.querySelectorAll('.cm-editor')].map((e) => e.getBoundingClientRect());
    const sideBySide = eds.length === 2 && eds[1].left >= eds[0].right - 1 && Math.abs(eds[0].top - eds[1].top) < 2;
    return { sides, sideBySide };
  }, scope);
}
async function configContent(dataId) {
  const r = await call('GET', '/nacos/console/api/config', { namespace: 'rev', group: 'DEFAULT_GROUP', dataId });
  check(r.status === 200, `reading ${dataId}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.content;
}
const stateOf = () => page.locator('#change-title .tag[data-state]').getAttribute('data-state');
// English texts of the catalogue left on a Chinese page (the page's own words; the data
// shown — titles, names, keys, contents, audit fields — is not the page's).
const leftovers = () => page.evaluate(() => {
  const parts = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, { acceptNode: (n) =>
    (n.parentElement.closest('.cm-editor, script, style, [hidden], code, .data, .tag[data-action]') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT) });
  while (walk.nextNode()) parts.push(walk.currentNode.nodeValue);
  const text = parts.join(' ') + ' ' + [...document.querySelectorAll('[placeholder],[title]')]
    .map((e) => [e.getAttribute('placeholder'), e.getAttribute('title')].filter(Boolean).join(' ')).join(' ');
  const found = [];
  for (const k of window.__i18n.keys()) {
    for (const frag of k.split(/\{\w+\}/).map((f) => f.trim().replace(/^[·(（:#]+|[.:)）]+$/g, '').trim())) {
      if (frag.length < 4 || !/[a-z]{3}/i.test(frag) || frag === 'public') continue;
      const re = new RegExp(`(^|[^\\w-])${frag.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[^\\w-])`);
      if (re.test(text)) found.push(frag);
    }
  }
  return found;
});

const V0 = 'max: 1000\npool: 10\n';
const V1 = 'max: 1500\npool: 10\n';
const V2 = 'max: 2000\npool: 20\n';
const V3 = 'max: 3000\npool: 20\n';
const V4 = 'max: 2500\npool: 20\n';
let crId = null;

try {
  step('setup: namespace rev, a config, users alice (rw) and bob (rwa)');
  await login(adminUser, adminPass);
  await must('POST', '/nacos/console/api/namespaces', { id: 'rev', name: 'Reviewed', desc: '' });
  await must('POST', '/nacos/console/api/config', { namespace: 'rev', group: 'DEFAULT_GROUP', dataId: 'limits.yaml', content: V0, type: 'yaml', casMd5: '' });
  for (const [user, role, action] of [['alice', 'rev-writer', 'rw'], ['bob', 'rev-reviewer', 'rwa']]) {
    await must('POST', '/nacos/v1/auth/users', { username: user, password: `${user}-pass-123` });
    await must('POST', '/nacos/v1/auth/roles', { role, username: user });
    await must('POST', '/nacos/v1/auth/permissions', { role, resource: 'rev:*:*', action });
  }
  // The permissions page offers Nacelle's approve action.
  await page.goto(base + '/nacos/#/users?tab=permissions');
  await page.locator('td code', { hasText: 'rev:*:*' }).first().waitFor();
  const actions = await page.locator('#p-action option').allTextContents();
  check(['a', 'ra', 'wa', 'rwa'].every((a) => actions.includes(a)), `the permission actions: ${actions}`);
  ok();

  step('the administrator sets a review policy on rev (policies page)');
  await page.goto(base + '/nacos/#/changes');
  await page.click('#policies-link');
  await page.locator('#policy-form').waitFor();
  await page.selectOption('#pol-ns', 'rev');
  await page.fill('#pol-group', '*');
  await page.fill('#pol-approvals', '1');
  await page.click('#pol-set');
  await page.locator('button[data-remove-policy="rev:*"]').waitFor();
  const policies = await must('GET', '/nacos/nacelle/v1/review-policies', {});
  check(policies.data.some((p) => p.namespaceId === 'rev' && p.groupPattern === '*' && p.requiredApprovals === 1), JSON.stringify(policies));
  // A bad group pattern: the server's 400, shown.
  await page.fill('#pol-group', 'PAY ME');
  await page.click('#pol-set');
  await page.locator('#policy-error .error', { hasText: 'may hold only' }).waitFor();
  await shot('review-policies');
  ok();

  step('under the policy the editor proposes; the administrator\'s emergency publish needs a reason');
  await page.selectOption('#ns-select', 'rev');
  await page.goto(base + '/nacos/#/edit?namespace=rev&group=DEFAULT_GROUP&dataId=limits.yaml');
  await page.locator('#review-policy .notice').waitFor();
  check((await page.textContent('#review')).includes('propose'), `the button says ${await page.textContent('#review')}`);
  await typeInEditor(V1);
  await page.click('#review');
  await page.locator('dialog #cr-title').waitFor();
  await page.click('dialog button[data-value=emergency]');
  await page.locator('dialog #propose-error .error', { hasText: 'needs a reason' }).waitFor();
  await page.fill('#emergency-reason', 'incident 42: raise the limit now');
  await page.click('dialog button[data-value=emergency]');
  await page.locator('dialog').waitFor({ state: 'detached' });
  await page.locator('.status .tag').waitFor();
  check(await configContent('limits.yaml') === V1, 'the emergency publish did not write');
  await signOut();
  ok();

  step('alice (a writer) proposes a change from the editor: the request is open, its diff side by side');
  await login('alice', 'alice-pass-123');
  await page.goto(base + '/nacos/#/edit?namespace=rev&group=DEFAULT_GROUP&dataId=limits.yaml');
  await page.locator('#review-policy .notice').waitFor();
  await typeInEditor(V2);
  await page.click('#review');
  await page.locator('dialog #cr-title').waitFor();
  check(await page.locator('dialog #emergency').count() === 0, 'a writer is offered the emergency publish');
  const proposed = await mergeOf('dialog');
  check(proposed.sides[0].includes('max: 1500') && proposed.sides[1].includes('max: 2000'), `the review shows ${JSON.stringify(proposed.sides)}`);
  await page.fill('#cr-title', 'raise limits');
  await page.fill('#cr-description', 'traffic doubled');
  await page.click('dialog button[data-value=propose]');
  await page.waitForURL(/#\/change\?id=\d+/);
  crId = new URL(page.url()).hash.match(/id=(\d+)/)[1];
  await page.locator('#change-title', { hasText: 'raise limits' }).waitFor();
  check(await stateOf() === 'open', `the request is ${await stateOf()}`);
  const diff = await mergeOf('#change-diffs section[data-key="DEFAULT_GROUP/limits.yaml"]');
  check(diff.sideBySide, 'the diff is not side by side');
  check(diff.sides[0].includes('max: 1500') && diff.sides[1].includes('max: 2000') && !diff.sides[1].includes('pool: 10'), `the diff shows ${JSON.stringify(diff.sides)}`);
  check(await configContent('limits.yaml') === V1, 'proposing wrote the config');
  check(await page.locator('#change-actions button[data-action=publish]').count() === 0, 'an unapproved request offers Publish');
  await shot('change-request');
  ok();

  step('alice\'s own approval is refused with the server\'s reason (English, then Chinese)');
  await page.click('#change-actions button[data-action=approve]');
  await page.click('dialog button[data-value=ok]');
  await page.locator('dialog #cr-dialog-error .error', { hasText: 'cannot review it' }).waitFor();
  check((await page.textContent('dialog #cr-dialog-error .error')).startsWith('Not allowed: '), 'the refusal is not shown as such');
  await shot('change-self-approval');
  await page.click('dialog button[data-value=cancel]');
  await page.click('#lang');
  await page.locator('#change-title .tag[data-state=open]', { hasText: '待评审' }).waitFor();
  await page.click('#change-actions button[data-action=approve]');
  await page.click('dialog button[data-value=ok]');
  await page.locator('dialog #cr-dialog-error .error', { hasText: '作者不能批准' }).waitFor();
  await page.click('dialog button[data-value=cancel]');
  await page.click('#lang');
  await page.locator('#change-title .tag[data-state=open]', { hasText: 'open' }).waitFor();
  check(await stateOf() === 'open', 'the refused approval changed the request');
  // A comment by the author.
  await page.fill('#cr-comment', 'dashboards attached');
  await page.click('#cr-comment-send');
  await page.locator('#change-timeline li[data-event=commented]', { hasText: 'dashboards attached' }).waitFor();
  await signOut();
  ok();

  step('bob (approve permission) finds the request, approves it, then publishes it');
  await login('bob', 'bob-pass-123');
  check(await page.locator('#nav-audit').isHidden(), 'a non-admin sees the audit link');
  await page.goto(base + '/nacos/#/changes?ns=*&state=open');
  await page.locator(`a[data-change="${crId}"]`).click();
  await page.locator('#change-title', { hasText: 'raise limits' }).waitFor();
  check(await page.locator('#change-actions button[data-action=close]').count() === 0, 'a reviewer is offered the author\'s Close');
  await page.click('#change-actions button[data-action=approve]');
  await page.fill('dialog #cr-text', 'looks right');
  await page.click('dialog button[data-value=ok]');
  await page.locator('#change-title .tag[data-state=approved]').waitFor();
  await page.locator('#change-timeline li[data-event=approved]', { hasText: 'bob' }).waitFor();
  check((await page.textContent('#change-approvals')).includes('bob'), 'the approvals do not name bob');
  await page.click('#change-actions button[data-action=publish]');
  await page.click('dialog button[data-value=ok]');
  await page.locator('#change-title .tag[data-state=published]').waitFor();
  check(await configContent('limits.yaml') === V2, 'the published content is not the proposed one');
  await page.locator('#change-timeline li[data-event=published]').waitFor();
  await shot('change-published');
  // The history names the request (and its title as the message) on the row it wrote.
  await page.goto(base + '/nacos/#/history?namespace=rev&group=DEFAULT_GROUP&dataId=limits.yaml&type=yaml');
  const histRow = page.locator('tr', { has: page.locator(`a[data-history-change="${crId}"]`) });
  await histRow.waitFor();
  check((await histRow.textContent()).includes('raise limits'), `the history row: ${await histRow.textContent()}`);
  check((await histRow.textContent()).includes('bob'), 'the history row does not name bob');
  await signOut();
  ok();

  step('a draft opened for review; a stale request writes nothing; reject, rebase, schedule, close');
  await login('alice', 'alice-pass-123');
  await page.goto(base + '/nacos/#/edit?namespace=rev&group=DEFAULT_GROUP&dataId=limits.yaml');
  await page.locator('#review-policy .notice').waitFor();
  await typeInEditor(V3);
  await page.click('#review');
  await page.fill('#cr-title', 'even more');
  await page.check('#cr-draft');
  await page.click('dialog button[data-value=propose]');
  await page.waitForURL(/#\/change\?id=\d+/);
  const cr2 = new URL(page.url()).hash.match(/id=(\d+)/)[1];
  check(cr2 !== crId, 'the second request has the first one\'s id');
  await page.locator('#change-title .tag[data-state=draft]').waitFor();
  check(await page.locator('#change-actions button[data-action=approve]').count() === 0, 'a draft offers Approve');
  await page.click('#change-actions button[data-action=open]');
  await page.locator('#change-title .tag[data-state=open]').waitFor();
  await signOut();
  // Meanwhile the administrator publishes past the policy: the request's base moved.
  await login(adminUser, adminPass);
  await page.goto(base + '/nacos/#/edit?namespace=rev&group=DEFAULT_GROUP&dataId=limits.yaml');
  await page.locator('#review-policy .notice').waitFor();
  await typeInEditor(V4);
  await page.click('#review');
  await page.locator('dialog #emergency summary').click();
  await page.fill('#emergency-reason', 'incident 43');
  await page.click('dialog button[data-value=emergency]');
  await page.locator('dialog').waitFor({ state: 'detached' });
  check(await configContent('limits.yaml') === V4, 'the second emergency publish did not write');
  await signOut();
  await login('bob', 'bob-pass-123');
  await page.goto(base + `/nacos/#/change?id=${cr2}`);
  await page.locator('#change-diffs [data-moved=true]').waitFor();
  const moved = await mergeOf('#change-diffs');
  check(moved.sides[0].includes('max: 2500') && moved.sides[1].includes('max: 3000'), `the diff is not against the server's content now: ${JSON.stringify(moved.sides)}`);
  await page.click('#change-actions button[data-action=approve]');
  await page.click('dialog button[data-value=ok]');
  await page.locator('#change-title .tag[data-state=approved]').waitFor();
  await page.click('#change-actions button[data-action=publish]');
  await page.click('dialog button[data-value=ok]');
  await page.locator('dialog #cr-dialog-error .error', { hasText: 'is stale' }).waitFor();
  await page.click('dialog button[data-value=cancel]');
  check(await configContent('limits.yaml') === V4, 'a stale request wrote the config');
  await page.reload();
  await page.locator('#change-stale').waitFor();
  await page.locator('#change-title [data-stale=true]').waitFor();
  check(await page.locator('#change-actions button[data-action=publish]').count() === 0, 'a stale request offers Publish');
  check(await page.locator('#change-actions button[data-action=rebase]').count() === 0, 'a reviewer is offered the author\'s Rebase');
  await page.locator('#change-timeline li[data-event=stale]', { hasText: 'limits.yaml' }).waitFor();
  await page.click('#change-actions button[data-action=reject]');
  await page.click('dialog button[data-value=ok]');
  await page.locator('dialog #cr-dialog-error .error').waitFor();
  await page.fill('dialog #cr-text', 'rebase it first');
  await page.click('dialog button[data-value=ok]');
  await page.locator('#change-title .tag[data-state=rejected]').waitFor();
  await signOut();
  await login('alice', 'alice-pass-123');
  await page.goto(base + `/nacos/#/change?id=${cr2}`);
  await page.locator('#change-timeline li[data-event=rejected]', { hasText: 'rebase it first' }).waitFor();
  await page.click('#change-actions button[data-action=rebase]');
  await page.click('dialog button[data-value=ok]');
  await page.locator('#change-title .tag[data-state=open]').waitFor();
  check(await page.locator('#change-title [data-stale=true]').count() === 0, 'the rebased request is still stale');
  check(await page.locator('#change-diffs [data-moved=true]').count() === 0, 'the rebased request still shows a moved key');
  await page.click('#change-actions button[data-action=schedule]');
  await page.fill('#cr-at', '2099-01-02T03:04');
  await page.click('dialog button[data-value=ok]');
  await page.locator('#change-publish-at').waitFor();
  await page.locator('#change-timeline li[data-event=scheduled]').first().waitFor();
  await page.click('#change-actions button[data-action=schedule]');
  await page.click('dialog button[data-value=clear]');
  await page.locator('#change-timeline li[data-event=scheduled]', { hasText: 'schedule cleared' }).waitFor();
  check(await page.locator('#change-publish-at').count() === 0, 'the cleared schedule is still shown');
  await page.click('#change-actions button[data-action=close]');
  await page.fill('dialog #cr-text', 'superseded');
  await page.click('dialog button[data-value=ok]');
  await page.locator('#change-title .tag[data-state=closed]').waitFor();
  check(await page.locator('#change-actions').count() === 0, 'a closed request offers actions');
  check(await configContent('limits.yaml') === V4, 'closing wrote the config');
  await page.goto(base + '/nacos/#/changes?ns=rev&state=closed');
  await page.locator(`a[data-change="${cr2}"]`).waitFor();
  check(await page.locator(`a[data-change="${crId}"]`).count() === 0, 'the state filter lists a published request');
  await signOut();
  ok();

  step('the audit page lists the events; verify says the chain is whole');
  await login(adminUser, adminPass);
  check(await page.locator('#nav-audit').isVisible(), 'the administrator has no audit link');
  // The trail is written a batch after the operations: look until the publish is there.
  let found = false;
  for (let i = 0; i < 50 && !found; i++) {
    const r = await must('GET', '/nacos/nacelle/v1/audit', { action: 'change-publish', pageNo: 1, pageSize: 10 });
    found = r.data.totalCount > 0;
    if (!found) await page.waitForTimeout(200);
  }
  check(found, 'the change-publish event never reached the trail');
  await page.click('#nav-audit');
  await page.locator('td .tag[data-action]').first().waitFor();
  await page.goto(base + '/nacos/#/audit?pageSize=100');
  await page.locator('#audit-pager-size').waitFor();
  await page.waitForFunction(() => document.querySelectorAll('td .tag[data-action]').length > 20);
  const shown = await page.locator('td .tag[data-action]').evaluateAll((els) => els.map((e) => e.dataset.action));
  for (const a of ['policy-change', 'emergency-write', 'change-create', 'change-event', 'change-publish', 'login']) {
    check(shown.includes(a), `the audit page does not list ${a}: ${shown.join(', ')}`);
  }
  await page.selectOption('#a-action', 'change-publish');
  await page.click('#audit-search');
  await page.waitForURL(/action=change-publish/);
  // The filtered page replaces the whole list: every row is a publish of the request.
  await page.waitForFunction(() => { const a = [...document.querySelectorAll('td .tag[data-action]')]; return a.length === 1 && a[0].dataset.action === 'change-publish'; });
  await page.locator(`td a[data-change="${crId}"]`).waitFor();
  await page.fill('#a-user', 'alice');
  await page.selectOption('#a-action', '');
  await page.click('#audit-search');
  await page.waitForURL(/user=alice/);
  await page.locator('td .tag[data-action=change-create]').first().waitFor();
  await page.waitForFunction(() => [...document.querySelectorAll('tbody tr td:nth-child(3)')].every((td) => td.textContent === 'alice'));
  await page.fill('#a-user', '');
  await page.fill('#a-key', 'rev/');
  await page.click('#audit-search');
  await page.waitForURL(/key=rev/);
  await page.locator('td .tag[data-action=publish]').first().waitFor();
  await page.waitForFunction(() => [...document.querySelectorAll('tbody tr td:nth-child(7)')].every((td) => td.textContent.startsWith('rev/')));
  await page.click('#verify-chain');
  await page.locator('#verify-result [data-ok=true]').waitFor();
  check((await page.textContent('#verify-result')).includes('whole'), await page.textContent('#verify-result'));
  await page.goto(base + '/nacos/#/audit');
  await page.locator('td .tag[data-action]').first().waitFor();
  await page.click('#verify-chain');
  await page.locator('#verify-result [data-ok=true]').waitFor();
  await shot('audit');
  ok();

  step('laptop (1024 px) and phone (390 px) widths');
  const hashes = [['changes?ns=*', 'td a'], [`change?id=${crId}`, '#change-timeline li'], ['policies', 'td code'], ['audit', 'td .tag']];
  for (const [w, h] of [[1024, 700], [390, 844]]) {
    await page.setViewportSize({ width: w, height: h });
    for (const [hash, ready] of hashes) {
      await page.goto(base + '/nacos/#/' + hash);
      await page.locator(ready).first().waitFor();
      const [overflow, header] = await page.evaluate(() => [document.documentElement.scrollWidth - document.documentElement.clientWidth, document.querySelector('header.top').offsetHeight]);
      check(overflow <= 0, `#/${hash} scrolls sideways by ${overflow}px at ${w}px`);
      if (w === 390) check(header <= 90, `the header is ${header}px high at 390px`);
    }
  }
  await page.goto(base + `/nacos/#/change?id=${crId}`);
  await page.locator('#change-timeline li').first().waitFor();
  await shot('change-request-phone');
  await page.setViewportSize({ width: 1280, height: 800 });
  ok();

  step('Chinese: the change pages, the policies and the audit page, no English left');
  await page.goto(base + '/nacos/#/changes?ns=*');
  await page.locator('td a').first().waitFor();
  await page.click('#lang');
  await page.locator('#nav a[data-section=changes]', { hasText: '变更请求' }).waitFor();
  for (const [hash, ready] of hashes) {
    await page.goto(base + '/nacos/#/' + hash);
    await page.locator(ready).first().waitFor();
    if (hash === 'audit') { await page.click('#verify-chain'); await page.locator('#verify-result [data-ok=true]').waitFor(); }
    const left = await leftovers();
    check(left.length === 0, `#/${hash} in Chinese still shows English: ${left.join(' | ')}`);
  }
  await page.goto(base + `/nacos/#/change?id=${crId}`);
  await page.locator('#change-timeline li').first().waitFor();
  await shot('zh-change-request');
  // The editor's proposal dialog, in Chinese.
  await page.goto(base + '/nacos/#/edit?namespace=rev&group=DEFAULT_GROUP&dataId=limits.yaml');
  await page.locator('#review-policy .notice').waitFor();
  await typeInEditor('max: 1\n');
  await page.click('#review');
  await page.locator('dialog #cr-title').waitFor();
  await page.click('dialog #emergency summary');
  check((await leftovers()).length === 0, `the proposal dialog in Chinese: ${(await leftovers()).join(' | ')}`);
  await page.click('dialog button[data-value=cancel]');
  await page.click('#nav a[data-section=changes]');
  await page.click('dialog button[data-value=discard]');
  await page.locator('td a').first().waitFor();
  const missing = await page.evaluate(() => window.__i18n.missing());
  check(missing.length === 0, `strings without Chinese: ${missing.join(' | ')}`);
  await page.click('#lang');
  await page.locator('#nav a[data-section=changes]', { hasText: 'Changes' }).waitFor();
  ok();

  step('no script errors');
  check(pageErrors.length === 0, pageErrors.join('\n'));
  ok();
} catch (e) {
  console.log(`FAIL ${current}: ${e.message} (screenshot: ${join(tmpdir(), 'nacelle-console-review-failure.png')})`);
  try { await page.screenshot({ path: join(tmpdir(), 'nacelle-console-review-failure.png') }); } catch { /* the page may be gone */ }
  await cleanup();
  process.exit(1);
}
await cleanup();
console.log('console review browser test: all steps passed');
