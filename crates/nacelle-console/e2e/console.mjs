// Browser test of the Nacelle console in Debian's headless Chromium, driven by
// playwright-core (no browser download). Started by crates/nacelle/tests/console_browser.rs
// against a real server:
//
//   node console.mjs <base-url> <screenshot-dir> [<admin-user> <admin-password>]
//
// Each step prints `ok <step>`; the first failure prints `FAIL <step>: <why>` and exits 1.
// Screenshots of every page go to <screenshot-dir>. With admin credentials the login
// steps run too (a server with authentication on); see console-auth.mjs for the
// non-admin steps.

import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { launch } from './browser.mjs';
import { zipOf } from './zip.mjs';

const [base, shots, adminUser, adminPass] = process.argv.slice(2);
if (!base || !shots) {
  console.error('usage: node console.mjs <base-url> <screenshot-dir> [<admin-user> <admin-password>]');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });

let current = 'start';
function step(name) { current = name; }
function ok() { console.log(`ok ${current}`); if (process.env.E2E_DEBUG && pageErrors.length) console.log(`  (${pageErrors.length} errors so far)`); }
function check(cond, why) { if (!cond) throw new Error(why); }

const { context, cleanup } = await launch();
const page = context.pages()[0] || await context.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e)));
// Refused requests (409, 403, 404) are expected and shown by the pages: the browser logs
// each as "Failed to load resource"; anything else logged as an error is a fault.
// Chrome's own contenteditable editing adds `style` attributes when typing over a
// selection that spans lines; the page's policy refuses inline styles and logs each refusal,
// and CodeMirror redraws the lines from its own state: such a refusal is no fault (a refused
// <style> element would be: it names no 'style attribute' and still counts).
page.on('console', (m) => {
  const t = m.text();
  if (m.type() !== 'error' || t.startsWith('Failed to load resource')) return;
  if (t.startsWith('Applying inline style violates') && t.includes('style attributes')) return;
  pageErrors.push(t);
});
page.setDefaultTimeout(10000);

// The API as the page itself calls it (same session header), to check what the server holds.
async function apiGet(path, params) {
  return page.evaluate(async ([p, q]) => {
    const s = JSON.parse(sessionStorage.getItem('nacelle.session') || 'null');
    const h = s ? { Authorization: 'Bearer ' + s.accessToken } : {};
    const r = await fetch('/nacos/console/api' + p + '?' + new URLSearchParams(q), { headers: h });
    return { status: r.status, body: await r.json() };
  }, [path, params]);
}
async function apiPost(path, params) {
  return page.evaluate(async ([p, q]) => {
    const s = JSON.parse(sessionStorage.getItem('nacelle.session') || 'null');
    const h = { 'Content-Type': 'application/x-www-form-urlencoded' };
    if (s) h.Authorization = 'Bearer ' + s.accessToken;
    const r = await fetch('/nacos/console/api' + p, { method: 'POST', headers: h, body: new URLSearchParams(q) });
    return { status: r.status, body: await r.json() };
  }, [path, params]);
}
// Screenshots for the docs, without the passing notices of earlier steps.
async function shot(name) {
  await page.evaluate(() => document.getElementById('toasts')?.replaceChildren());
  // Nothing on the page may read like a leaked value of the code.
  const leaked = await page.evaluate(() => (document.body.innerText.match(/\bnull\b|\bundefined\b|\[object \w+\]|NaN/) || [])[0]);
  check(!leaked, `the ${name} page shows "${leaked}"`);
  await page.screenshot({ path: join(shots, name + '.png') });
}
const KEY = { namespace: 'e2e', group: 'DEFAULT_GROUP', dataId: 'shop.yaml' };
// E2E_NO_LISTENER=1: against a bare server (no client listening), the listener checks are
// skipped; crates/nacelle/tests/console_browser.rs always runs them.
const LISTENER = !process.env.E2E_NO_LISTENER;
const Q = 'namespace=e2e&group=DEFAULT_GROUP&dataId=shop.yaml';
// The main pages, for the screenshots in both languages at 1280 px and 390 px.
const MAIN_PAGES = [['configs', 'configs', 'td a'], ['editor', `edit?${Q}`, '.status .tag'], ['history', `history?${Q}&type=yaml`, 'input[data-nid]'],
  ['gray', `gray?${Q}`, '#gray-create'], ['namespaces', 'namespaces', 'td code']];
const V1 = 'server:\n  port: 8080\nfeature:\n  checkout: false\n';
const BAD = 'server:\n  port: 8080\nfeature:\n  checkout: [true\n';
const V2 = 'server:\n  port: 8080\nfeature:\n  checkout: true\n';
const BETA = 'server:\n  port: 8080\nfeature:\n  checkout: true\n  beta: on\n';
const BETA2 = BETA + 'edited: 1\n';

// Replaces the editor's text as a user would: select all, type (insertText, one input).
async function typeInEditor(text, id = 'content') {
  await page.locator(`#${id} .cm-content`).click();
  await page.keyboard.press('Control+a');
  await page.keyboard.insertText(text);
}
// The editor's text (the page keeps its API on the editor's box).
const editorText = (id = 'content') => page.evaluate((i) => document.getElementById(i).editor.value, id);
// The two sides of the merge view in `scope`: [before, after].
async function mergeSides(scope) {
  await page.locator(`${scope} .cm-mergeView`).waitFor();
  return page.evaluate((s) => [...document.querySelectorAll(`${s} .cm-mergeView .cm-content`)].map((c) =>
    [...c.querySelectorAll('.cm-line')].map((l) => l.textContent).join('\n')), scope);
}

try {
  step('/ redirects to the console');
  await page.goto(base + '/');
  check(new URL(page.url()).pathname === '/nacos/', `landed on ${page.url()}`);
  ok();

  if (adminUser) {
    step('log in');
    await page.goto(base + '/nacos/#/login');
    await page.fill('#login-user', adminUser);
    await page.fill('#login-pass', 'wrong-' + adminPass);
    await page.click('#login-submit');
    await page.locator('#login-error .error').waitFor();
    await page.fill('#login-pass', adminPass);
    await page.click('#login-submit');
    await page.locator('#sign-out').waitFor();
    check(!page.url().includes('accessToken'), 'the token is in the URL');
    ok();
  }

  step('create a namespace');
  await page.goto(base + '/nacos/#/namespaces');
  await page.click('#ns-create');
  await page.fill('#ns-id', 'e2e');
  await page.fill('#ns-name', 'E2E');
  await page.fill('#ns-desc', 'created by the browser test');
  await page.click('dialog button[data-value=ok]');
  await page.locator('td code', { hasText: /^e2e$/ }).waitFor();
  await shot('namespaces');
  ok();

  step('create a YAML config');
  await page.selectOption('#ns-select', 'e2e');
  await page.waitForURL(/#\/configs/);
  await page.click('#new-config');
  await page.fill('#f-dataId', KEY.dataId);
  check(await page.inputValue('#f-type') === 'yaml', 'type not guessed from the name');
  await typeInEditor(V1);
  await page.click('#review');
  await page.locator('dialog .merge').waitFor();
  await page.click('dialog button[data-value=publish]');
  await page.waitForURL(/#\/edit\?.*dataId=shop.yaml/);
  await page.locator('h1', { hasText: 'shop.yaml' }).waitFor();
  const created = await apiGet('/config', KEY);
  check(created.status === 200 && created.body.content === V1, `stored ${JSON.stringify(created.body)}`);
  ok();

  step('a syntax error is shown; in a warn namespace publishing asks, and nothing is published without it');
  await typeInEditor(BAD);
  await page.click('#review');
  const err = page.locator('#validation-error');
  await err.waitFor();
  const errText = await err.textContent();
  check(/line 4/.test(errText), `validation message without its line: ${errText}`);
  check(await page.locator('#content .cm-lineNumbers .cm-gutterElement.bad').count() === 1, 'the error line is not marked');
  // The server's mode here is warn (its default): the review says so and asks.
  await page.locator('dialog #invalid-warning').waitFor();
  check(await page.locator('dialog button[data-value=publish]').textContent() === 'Publish anyway', 'no confirmation asked');
  await page.click('dialog button[data-value=cancel]');
  await page.locator('dialog').waitFor({ state: 'detached' });
  await shot('editor-error');
  const after = await apiGet('/config', KEY);
  check(after.body.content === V1, 'invalid content was published');
  ok();

  step('fix it, see the diff, publish');
  await typeInEditor(V2);
  await page.keyboard.press('Control+s');
  const [before, mine] = await mergeSides('dialog');
  check(before.includes('  checkout: false') && mine.includes('  checkout: true'), `diff: ${before} → ${mine}`);
  await page.locator('dialog .cm-merge-b .cm-changedLine').first().waitFor();
  await shot('editor-diff');
  await page.click('dialog button[data-value=publish]');
  await page.locator('dialog').waitFor({ state: 'detached' });
  await page.locator('.tag.ok', { hasText: 'valid yaml' }).waitFor();
  const published = await apiGet('/config', KEY);
  check(published.body.content === V2, 'the fix was not published');
  await shot('editor');
  ok();

  step('someone else publishes: compare-and-set warns');
  await typeInEditor(V2 + 'mine: 1\n');
  const other = await apiPost('/config', { ...KEY, content: V2 + 'theirs: 1\n', type: 'yaml' });
  check(other.status === 200, 'the concurrent publish failed');
  await page.click('#review');
  await page.click('dialog button[data-value=publish]');
  await page.locator('#conflict').waitFor();
  await shot('editor-conflict');
  await page.click('dialog button[data-value=cancel]');
  const kept = await apiGet('/config', KEY);
  check(kept.body.content === V2 + 'theirs: 1\n', 'the conflicting publish overwrote the other one');
  // Put the config back to V2 for the next steps (review again: the diff is against theirs now).
  await typeInEditor(V2);
  await page.click('#review');
  const [theirs] = await mergeSides('dialog');
  check(theirs.includes('theirs: 1'), `second review not against their version: ${theirs}`);
  await page.click('dialog button[data-value=publish]');
  await page.locator('dialog').waitFor({ state: 'detached' });
  ok();

  step('a namespace in reject mode blocks invalid content before the review');
  check((await apiPost('/namespaces', { id: 'strict', name: 'Strict' })).status === 200, 'could not create namespace strict');
  check((await apiPost('/config', { namespace: 'strict', group: 'DEFAULT_GROUP', dataId: 'app.yaml', content: V1, type: 'yaml' })).status === 200, 'could not create strict/app.yaml');
  await page.goto(base + '/nacos/#/edit?namespace=strict&group=DEFAULT_GROUP&dataId=app.yaml');
  await page.locator('.tag.ok', { hasText: 'valid yaml' }).waitFor();
  await typeInEditor(BAD);
  await page.click('#review');
  await page.locator('#validation-mode', { hasText: 'reject' }).waitFor();
  check(await page.locator('dialog').count() === 0, 'a publish dialog opened in a reject namespace');
  await typeInEditor(V1);
  await page.locator('.tag.ok', { hasText: 'valid yaml' }).waitFor();
  ok();

  step('Tab and Shift+Tab indent a selection; Ctrl+Z restores it; Ctrl+A, Tab keeps the text');
  await page.goto(base + `/nacos/#/edit?namespace=e2e&group=DEFAULT_GROUP&dataId=shop.yaml`);
  await page.locator('h1', { hasText: 'shop.yaml' }).waitFor();
  await page.locator('.tag.ok', { hasText: 'valid yaml' }).waitFor();
  check(await editorText() === V2, 'the editor does not hold V2');
  await page.locator('#content .cm-content').click();
  await page.keyboard.press('Control+Home');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Shift+ArrowDown');
  await page.keyboard.press('Shift+End');
  await page.keyboard.press('Tab');
  const indented = 'server:\n  port: 8080\n  feature:\n    checkout: true\n';
  check(await editorText() === indented, `Tab on lines 3-4 gave ${JSON.stringify(await editorText())}`);
  const selected = await page.evaluate(() => { const v = document.getElementById('content').editor.view; const r = v.state.selection.main; return v.state.sliceDoc(r.from, r.to); });
  check(selected.endsWith('feature:\n    checkout: true'), `the selection after Tab is ${JSON.stringify(selected)}`);
  await page.keyboard.press('Shift+Tab');
  check(await editorText() === V2, `Shift+Tab gave ${JSON.stringify(await editorText())}`);
  await page.keyboard.press('Tab');
  check(await editorText() === indented, 'Tab again did not indent');
  await page.keyboard.press('Control+z');
  check(await editorText() === V2, `Ctrl+Z left ${JSON.stringify(await editorText())}`);
  await page.keyboard.press('Control+a');
  await page.keyboard.press('Tab');
  const all = await editorText();
  check(all === V2.split('\n').map((l) => (l ? '  ' + l : l)).join('\n'), `Ctrl+A, Tab gave ${JSON.stringify(all)}`);
  await page.keyboard.press('Control+z');
  check(await editorText() === V2, 'Ctrl+Z did not restore the whole text');
  ok();

  step('selected text stays readable (pixels of the text over the selection colour)');
  await page.keyboard.press('Control+a');
  const line = await page.locator('#content .cm-line').first().boundingBox();
  const clip = await page.screenshot({ clip: { x: line.x, y: line.y, width: Math.min(line.width, 90), height: line.height } });
  const pixels = await page.evaluate(async (b64) => {
    const img = new Image();
    img.src = 'data:image/png;base64,' + b64;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.width; c.height = img.height;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data;
    const count = new Map();
    for (let i = 0; i < d.length; i += 4) { const k = `${d[i]},${d[i + 1]},${d[i + 2]}`; count.set(k, (count.get(k) || 0) + 1); }
    const [bg] = [...count.entries()].sort((a, b) => b[1] - a[1])[0];
    const [r, gg, b] = bg.split(',').map(Number);
    let text = 0;
    for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - r) + Math.abs(d[i + 1] - gg) + Math.abs(d[i + 2] - b) > 150) text++;
    return { bg, text, total: d.length / 4 };
  }, clip.toString('base64'));
  // The background is the selection's colour (#c4d8ff), and the glyphs are drawn on it.
  const [br, bgc, bb] = pixels.bg.split(',').map(Number);
  check(Math.abs(br - 0xc4) + Math.abs(bgc - 0xd8) + Math.abs(bb - 0xff) < 40, `the selected line's background is ${pixels.bg}, not the selection colour`);
  check(pixels.text > 30, `only ${pixels.text} of ${pixels.total} pixels of the selected line differ from its background: the text is hidden`);
  console.log(`selected line: background ${pixels.bg}, ${pixels.text} of ${pixels.total} pixels are text`);
  ok();

  step('a 1 MB YAML takes 50 keystrokes (measured, reported)');
  const big = Array.from({ length: 21000 }, (_, i) => `service${i}:\n  name: service-${i}\n  ports: [80, 443]\n`).join('');
  check(big.length >= 1024 * 1024, `the big YAML is only ${big.length} bytes`);
  check((await apiPost('/config', { namespace: 'e2e', group: 'DEFAULT_GROUP', dataId: 'big.yaml', content: big, type: 'yaml' })).status === 200, 'could not publish big.yaml');
  const opening = Date.now();
  await page.goto(base + `/nacos/#/edit?namespace=e2e&group=DEFAULT_GROUP&dataId=big.yaml`);
  await page.locator('h1', { hasText: 'big.yaml' }).waitFor({ timeout: 60000 });
  await page.locator('.tag.ok', { hasText: 'valid yaml' }).waitFor({ timeout: 60000 });
  const openMs = Date.now() - opening;
  await page.locator('#content .cm-content').click();
  await page.keyboard.press('Control+Home');
  await page.keyboard.press('End');
  const frame = () => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0))));
  const each = [];
  const typing = Date.now();
  for (let i = 0; i < 50; i++) {
    const t = Date.now();
    await page.keyboard.press('x');
    await frame();
    each.push(Date.now() - t);
  }
  const total = Date.now() - typing;
  const length = await page.evaluate(() => document.getElementById('content').editor.length);
  check(length === big.length + 50, `after 50 keystrokes the text is ${length} characters, not ${big.length + 50}`);
  each.sort((a, b) => a - b);
  console.log(`BENCH 1 MB YAML (${big.length} bytes, ${big.split('\n').length - 1} lines): opened and validated in ${openMs} ms; 50 keystrokes, each to its next frame, in ${total} ms (median ${each[25]} ms, max ${each[49]} ms)`);
  ok();

  step('leaving with unsaved edits asks; the draft survives a reload; discard drops it');
  await page.click('#nav a[data-section=configs]');
  await page.locator('dialog[aria-label="Unsaved edits"]').waitFor();
  await page.click('dialog button[data-value=stay]');
  check(/dataId=big.yaml/.test(page.url()), `left the editor: ${page.url()}`);
  check(await page.evaluate(() => document.getElementById('content').editor.length) === big.length + 50, 'the edits are gone after Stay');
  let asked = '';
  page.once('dialog', (d) => { asked = d.type(); d.accept(); });
  await page.reload();
  check(asked === 'beforeunload', `the browser did not ask before unloading (${asked || 'no dialog'})`);
  await page.locator('#draft .notice').waitFor();
  check(await page.evaluate(() => document.getElementById('content').editor.length) === big.length + 50, 'the draft was not restored');
  check(await page.evaluate(() => document.getElementById('content').editor.value.split('\n')[0]) === 'service0:' + 'x'.repeat(50), 'the draft restored other text');
  await shot('editor-draft');
  await page.click('#discard-draft');
  await page.locator('#draft .notice').waitFor({ state: 'detached' });
  check(await page.evaluate(() => document.getElementById('content').editor.length) === big.length, 'discarding kept the edits');
  check(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('nacelle.draft:')).length) === 0, 'a draft is left in localStorage');
  check((await apiGet('/config', { namespace: 'e2e', group: 'DEFAULT_GROUP', dataId: 'big.yaml' })).body.content === big, 'big.yaml changed on the server');
  await page.click('#nav a[data-section=configs]');
  await page.waitForURL(/#\/configs/);
  check(await page.locator('dialog').count() === 0, 'asked again with nothing unsaved');
  ok();

  step('a new config: id and group rules as the user types; an existing id is said before the review');
  await page.goto(base + '/nacos/#/edit?namespace=e2e');
  await page.fill('#f-dataId', 'bad id/x');
  await page.locator('#f-dataId-error', { hasText: 'cannot contain a space' }).waitFor();
  check(await page.getAttribute('#f-dataId', 'aria-invalid') === 'true', 'the bad id is not marked');
  await page.fill('#f-dataId', 'shop.yaml');
  check((await page.textContent('#f-dataId-error')) === '', 'a good id still shows an error');
  await page.fill('#f-group', 'A'.repeat(129));
  await page.locator('#f-group-error', { hasText: 'at most 128' }).waitFor();
  await page.fill('#f-group', 'DEFAULT_GROUP');
  await typeInEditor(V1);
  await page.click('#review');
  await page.locator('#exists a', { hasText: 'Open it' }).waitFor();
  check(await page.locator('dialog').count() === 0, 'the review opened for an existing id');
  // Leaving asks; discarding drops the new config's draft.
  await page.click('#nav a[data-section=configs]');
  await page.click('dialog button[data-value=discard]');
  await page.waitForURL(/#\/configs/);
  check(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('nacelle.draft:')).length) === 0, 'the discarded draft is kept');
  ok();

  step('history: versions, diff two, roll back');
  await page.goto(base + `/nacos/#/history?namespace=e2e&group=DEFAULT_GROUP&dataId=shop.yaml`);
  const rows = page.locator('input[data-nid]');
  await rows.first().waitFor();
  check(await rows.count() >= 3, `only ${await rows.count()} history rows`);
  const nids = await rows.evaluateAll((els) => els.map((e) => e.dataset.nid));
  await rows.nth(0).check();
  await rows.nth(1).check();
  await page.click('#diff-selected');
  await page.locator('#history-out .cm-mergeView').waitFor();
  await shot('history');
  // The oldest version is the first content (V1): roll back to it.
  const oldest = nids[nids.length - 1];
  await page.click(`button[data-rollback="${oldest}"]`);
  await page.locator('dialog .cm-mergeView').waitFor();
  await shot('history-rollback');
  await page.click('dialog button[data-value=ok]');
  await page.locator('dialog').waitFor({ state: 'detached' });
  const rolled = await apiGet('/config', KEY);
  check(rolled.body.content === V1, `rollback left ${JSON.stringify(rolled.body.content)}`);
  ok();

  step('configs list: search, type and last modified');
  await page.goto(base + '/nacos/#/configs?dataId=shop');
  await page.locator('td a', { hasText: 'shop.yaml' }).waitFor();
  check(await page.locator('td .tag', { hasText: 'yaml' }).count() === 1, 'no type column');
  await shot('configs');
  ok();

  step('configs: case-insensitive search, page numbers in range, page sizes, delete and clone from a row');
  check((await apiPost('/namespaces', { id: 'pg', name: 'Paging' })).status === 200, 'could not create namespace pg');
  await page.evaluate(async () => {
    const s = JSON.parse(sessionStorage.getItem('nacelle.session') || 'null');
    const hd = { 'Content-Type': 'application/x-www-form-urlencoded' };
    if (s) hd.Authorization = 'Bearer ' + s.accessToken;
    for (let i = 1; i <= 23; i++) {
      await fetch('/nacos/console/api/config', { method: 'POST', headers: hd,
        body: new URLSearchParams({ namespace: 'pg', group: i % 2 ? 'Odd_Group' : 'even_group', dataId: `Item-${String(i).padStart(2, '0')}.properties`, content: `n=${i}\n`, type: 'properties' }) });
    }
  });
  // The namespace list is read once per session: load the page again to see pg.
  await page.goto(base + '/nacos/#/configs?pageSize=10');
  await page.reload();
  await page.selectOption('#ns-select', 'pg');
  await page.waitForURL(/#\/configs/);
  await page.goto(base + '/nacos/#/configs?pageSize=10');
  await page.locator('#configs-pager .count', { hasText: '23 configs · page 1 of 3' }).waitFor();
  check(await page.locator('#configs-pager a.num').count() === 3, 'not three page numbers');
  await page.goto(base + '/nacos/#/configs?pageSize=10&pageNo=99');
  await page.locator('#configs-pager .count', { hasText: 'page 3 of 3' }).waitFor();
  check(/pageNo=3/.test(page.url()), `a page past the end stays in the URL: ${page.url()}`);
  check(await page.locator('tbody tr').count() === 3, 'the last page does not hold the last 3 configs');
  await page.selectOption('#configs-pager-size', '50');
  await page.locator('#configs-pager .count', { hasText: 'page 1 of 1' }).waitFor();
  check(await page.locator('tbody tr').count() === 23, '50 per page does not show all 23');
  await page.fill('#q-dataId', 'ITEM-0');
  await page.fill('#q-group', 'ODD');
  await page.click('form[role=search] button[type=submit]');
  await page.locator('#configs-pager .count', { hasText: '5 configs' }).waitFor();
  await shot('configs-paged');
  await page.click('button[data-delete-config="Item-01.properties"]');
  await page.click('dialog button[data-value=ok]');
  await page.locator('td a', { hasText: 'Item-01.properties' }).waitFor({ state: 'detached' });
  await page.locator('#configs-pager .count', { hasText: '4 configs' }).waitFor();
  await page.click('button[data-clone="Item-03.properties"]');
  await page.selectOption('#clone-ns', 'e2e');
  await page.click('dialog button[data-value=ok]');
  await page.locator('dialog #transfer-result', { hasText: '1 imported' }).waitFor();
  await page.click('dialog button[data-value=ok]');
  const cloned = await apiGet('/config', { namespace: 'e2e', group: 'Odd_Group', dataId: 'Item-03.properties' });
  check(cloned.status === 200 && cloned.body.content === 'n=3\n', `clone: ${JSON.stringify(cloned.body)}`);
  // Cloning again with the default policy (abort) reports the conflict; nothing changes.
  await page.click('button[data-clone="Item-03.properties"]');
  await page.selectOption('#clone-ns', 'e2e');
  await page.click('dialog button[data-value=ok]');
  await page.locator('dialog #clone-out .error').waitFor();
  await page.click('dialog button[data-value=cancel]');
  await page.selectOption('#ns-select', 'e2e');
  await page.waitForURL(/#\/configs/);
  await page.goto(base + '/nacos/#/configs?pageSize=20');
  ok();

  step('export and delete a selection');
  const extra = await apiPost('/config', { namespace: 'e2e', group: 'DEFAULT_GROUP', dataId: 'tmp.properties', content: 'a=1\n', type: 'properties' });
  check(extra.status === 200, 'could not create tmp.properties');
  await page.goto(base + '/nacos/#/configs');
  await page.locator('td a', { hasText: 'tmp.properties' }).waitFor();
  await page.locator('input[type=checkbox][aria-label="Select tmp.properties"]').check();
  await page.locator('input[type=checkbox][aria-label="Select shop.yaml"]').check();
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-selected')]);
  check(download.suggestedFilename().endsWith('.zip'), `export named ${download.suggestedFilename()}`);
  const zipPath = await download.path();
  check(zipPath && statSync(zipPath).size > 100, 'empty export');
  await page.locator('input[type=checkbox][aria-label="Select shop.yaml"]').uncheck();
  await page.click('#delete-selected');
  await page.click('dialog button[data-value=ok]');
  await page.locator('td a', { hasText: 'tmp.properties' }).waitFor({ state: 'detached' });
  check(await page.locator('td a', { hasText: 'shop.yaml' }).count() === 1, 'shop.yaml was deleted too');
  ok();

  step('a beta for one IP reaches the matching listener');
  // A beta matches the address a client reports about itself, as Nacos matches it (the
  // listening nacos-sdk reports its host's address; the socket's is 127.0.0.1), shown as
  // the listener's grayIp.
  let betaIp = '127.0.0.1';
  if (LISTENER) {
    const listeners = await apiGet('/listeners', KEY);
    const l = (Array.isArray(listeners.body) ? listeners.body : []).find((x) => x.app === 'e2e-listener');
    check(l, `the listener is not listed: ${JSON.stringify(listeners.body)}`);
    betaIp = l.grayIp || l.ip;
  }
  await page.goto(base + `/nacos/#/gray?namespace=e2e&group=DEFAULT_GROUP&dataId=shop.yaml`);
  await page.locator('#gray-create').waitFor();
  await page.fill('#g-ips', betaIp);
  await typeInEditor(BETA, 'gray-content');
  await page.click('#gray-create');
  await page.click('dialog button[data-value=ok]');
  const card = page.locator('section[data-gray=beta]');
  await card.waitFor();
  if (LISTENER) {
    await card.locator('td code', { hasText: '127.0.0.1' }).waitFor();
    const cardText = await card.textContent();
    check(cardText.includes('e2e-listener'), `the listener's app is not shown: ${cardText}`);
  }
  await shot('gray');
  ok();

  step('a published gray: its content and its diff with the formal config');
  await page.click('button[data-view=beta]');
  await page.locator('#gray-view-beta .cm-content').waitFor();
  check(await editorText('gray-view-beta') === BETA, 'the gray content shown is not the beta');
  await page.click('button[data-diff=beta]');
  const [formalSide, graySide] = await mergeSides('section[data-gray=beta]');
  check(!formalSide.includes('beta: on') && graySide.includes('beta: on'), `gray diff: ${formalSide} → ${graySide}`);
  await shot('gray-diff');
  ok();

  step('edit a published gray: its rule and content in the form, published again under the same rule');
  await page.click('button[data-edit-gray=beta]');
  await page.locator('#gray-form-title', { hasText: 'Edit gray' }).waitFor();
  check(await page.inputValue('#g-ips') === betaIp, 'the beta\'s IPs are not in the form');
  check(await editorText('gray-content') === BETA, 'the beta\'s content is not in the form');
  await typeInEditor(BETA2, 'gray-content');
  await page.click('#gray-create');
  await page.click('dialog button[data-value=ok]');
  await page.locator('dialog').waitFor({ state: 'detached' });
  await page.locator('section[data-gray=beta]').waitFor();
  check(await page.locator('section[data-gray]').count() === 1, 'editing the beta made a second gray');
  const grays = await apiGet('/grays', KEY);
  check(grays.body.grays[0].content === BETA2, `the beta holds ${JSON.stringify(grays.body.grays[0].content)}`);
  ok();

  if (LISTENER) {
  step('listeners of the config and of the IP');
  await page.goto(base + `/nacos/#/listeners?namespace=e2e&group=DEFAULT_GROUP&dataId=shop.yaml`);
  await page.locator('td', { hasText: 'e2e-listener' }).waitFor();
  check(await page.locator('.tag.warn', { hasText: 'gray beta' }).count() >= 1, 'the listener is not shown on the beta');
  // The live view: the cluster's counts (this node alone) name the clients on the beta.
  const liveTotal = await page.locator('#live-total').innerText();
  check(/gray beta [1-9]/.test(liveTotal), `the live view's counts: ${liveTotal}`);
  check(await page.locator('#live-incomplete').count() === 0, 'a lone node shown as an incomplete view');
  await shot('listeners');
  await page.goto(base + `/nacos/#/listeners?ip=127.0.0.1`);
  await page.locator('td a', { hasText: 'shop.yaml' }).waitFor();
  ok();
  }

  step('promote the beta');
  await page.goto(base + `/nacos/#/gray?namespace=e2e&group=DEFAULT_GROUP&dataId=shop.yaml`);
  await page.click('button[data-promote=beta]');
  await page.click('dialog button[data-value=ok]');
  await page.locator('p#grays').waitFor();
  const promoted = await apiGet('/config', KEY);
  check(promoted.body.content === BETA2, 'promotion did not make the beta formal');
  ok();

  step('history beyond 50 versions: paged to the first, with the operator; gray operations listed');
  await page.evaluate(async () => {
    const s = JSON.parse(sessionStorage.getItem('nacelle.session') || 'null');
    const hd = { 'Content-Type': 'application/x-www-form-urlencoded' };
    if (s) hd.Authorization = 'Bearer ' + s.accessToken;
    for (let i = 1; i <= 61; i++) {
      await fetch('/nacos/console/api/config', { method: 'POST', headers: hd,
        body: new URLSearchParams({ namespace: 'e2e', group: 'DEFAULT_GROUP', dataId: 'many.yaml', content: `v: ${i}\n`, type: 'yaml' }) });
    }
  });
  await page.goto(base + '/nacos/#/history?namespace=e2e&group=DEFAULT_GROUP&dataId=many.yaml&type=yaml&pageSize=20');
  await page.locator('#history-pager .count', { hasText: '61 versions · page 1 of 4' }).waitFor();
  await page.click('#history-pager a[data-page="4"]');
  await page.locator('#history-pager .count', { hasText: 'page 4 of 4' }).waitFor();
  const lastRow = page.locator('tbody tr').filter({ has: page.locator('.tag', { hasText: 'created' }) });
  await lastRow.waitFor();
  if (adminUser) check((await lastRow.textContent()).includes(adminUser), `the first version does not name its operator: ${await lastRow.textContent()}`);
  await lastRow.locator('button.link').first().click();
  check(await (async () => { await page.locator('#version-content .cm-content').waitFor(); return editorText('version-content'); })() === 'v: 1\n', 'the first version is not v: 1');
  await shot('history-paged');
  await page.goto(base + '/nacos/#/history?namespace=e2e&group=DEFAULT_GROUP&dataId=shop.yaml&type=yaml');
  const grayRows = page.locator('td .tag.warn', { hasText: 'beta' });
  await grayRows.first().waitFor();
  check(await grayRows.count() >= 2, 'the beta publish and its promotion are not in the gray operations');
  ok();

  step('import a Nacos zip: each policy, with the server\'s result');
  const zip = zipOf([
    ['DEFAULT_GROUP/shop.yaml', 'imported: true\n'],
    ['DEFAULT_GROUP/fresh.properties', 'fresh=1\n'],
    ['stray.txt', 'not a config'],
  ]);
  const importWith = async (policy) => {
    await page.goto(base + '/nacos/#/configs');
    await page.locator('#import').click();
    await page.setInputFiles('#import-file', { name: 'nacos-export.zip', mimeType: 'application/zip', buffer: zip });
    await page.check(`input[name=import-policy][value=${policy}]`);
    await page.click('dialog button[data-value=ok]');
    await page.locator('dialog #transfer-result').waitFor();
    const text = await page.locator('dialog #import-out').textContent();
    check(await page.locator('#import-progress').evaluate((p) => p.value) === 100, 'the progress bar did not finish');
    return text;
  };
  const aborted = await importWith('ABORT');
  check(/0 imported/.test(aborted), `ABORT: ${aborted}`);
  await shot('configs-import');
  await page.click('dialog button[data-value=cancel]');
  check((await apiGet('/config', { namespace: 'e2e', group: 'DEFAULT_GROUP', dataId: 'fresh.properties' })).status === 404, 'ABORT imported fresh.properties');
  const skipped = await importWith('SKIP');
  check(/1 imported · 1 skipped · 1 not recognized/.test(skipped) && skipped.includes('shop.yaml') && skipped.includes('stray.txt'), `SKIP: ${skipped}`);
  await page.click('dialog button[data-value=ok]');
  check((await apiGet('/config', KEY)).body.content === BETA2, 'SKIP overwrote shop.yaml');
  const over = await importWith('OVERWRITE');
  check(/2 imported · 0 skipped/.test(over), `OVERWRITE: ${over}`);
  await page.click('dialog button[data-value=ok]');
  check((await apiGet('/config', KEY)).body.content === 'imported: true\n', 'OVERWRITE did not overwrite shop.yaml');
  await page.locator('td a', { hasText: 'fresh.properties' }).waitFor();
  ok();

  step('cluster page');
  await page.goto(base + '/nacos/#/cluster');
  await page.locator('td .tag.ok', { hasText: 'UP' }).waitFor();
  await shot('cluster');
  ok();

  step('users page');
  await page.goto(base + '/nacos/#/users');
  if (adminUser) {
    await page.locator('td', { hasText: adminUser }).first().waitFor();
    check(await page.locator('#auth-off').count() === 0, 'the page says authentication is off');
    await shot('users');
  } else {
    // Authentication is off here: the page says so (console-auth.mjs covers the rest).
    await page.locator('#auth-off').waitFor();
    await page.locator('#u-name').waitFor();
  }
  ok();

  step('a namespace holding configs is deleted only after confirmation');
  await page.goto(base + '/nacos/#/namespaces');
  await page.click('button[data-delete=e2e]');
  const confirmText = await page.locator('dialog p').textContent();
  check(/holds \d+ config/.test(confirmText), `no warning: ${confirmText}`);
  await page.click('dialog button[data-value=cancel]');
  const refused = await page.evaluate(async () => (await fetch('/nacos/console/api/namespaces?id=e2e', { method: 'DELETE' })).status);
  check(refused === 409 || refused === 403, `unconfirmed delete answered ${refused}`);
  ok();

  step('dark theme');
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.goto(base + `/nacos/#/edit?namespace=e2e&group=DEFAULT_GROUP&dataId=shop.yaml`);
  await page.locator('.tag.ok', { hasText: 'valid yaml' }).waitFor();
  await shot('editor-dark');
  await page.emulateMedia({ colorScheme: 'light' });
  ok();

  step('laptop width');
  await page.setViewportSize({ width: 1024, height: 700 });
  const q = 'namespace=e2e&group=DEFAULT_GROUP&dataId=shop.yaml';
  for (const [hash, ready] of [['configs', 'td a'], [`edit?${q}`, '.status .tag'], [`history?${q}`, 'input[data-nid]'],
    [`gray?${q}`, '#gray-create'], [`listeners?${q}`, 'td'], ['namespaces', 'td code'], ['cluster', 'td .tag']]) {
    await page.goto(base + '/nacos/#/' + hash);
    await page.locator(ready).first().waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    check(overflow <= 0, `#/${hash} scrolls sideways by ${overflow}px at 1024px`);
  }
  await page.goto(base + '/nacos/#/configs');
  await page.locator('td a').first().waitFor();
  await shot('configs-laptop');
  ok();

  step('phone width (390 px): a compact header, no sideways scrolling, row actions on screen');
  await page.setViewportSize({ width: 390, height: 844 });
  for (const [hash, ready] of [['configs', 'td a'], [`edit?${q}`, '.status .tag'], [`history?${q}`, 'input[data-nid]'],
    [`gray?${q}`, '#gray-create'], ['namespaces', 'td code'], ['cluster', 'td .tag']]) {
    await page.goto(base + '/nacos/#/' + hash);
    await page.locator(ready).first().waitFor();
    const [overflow, header] = await page.evaluate(() => [document.documentElement.scrollWidth - document.documentElement.clientWidth, document.querySelector('header.top').offsetHeight]);
    check(overflow <= 0, `#/${hash} scrolls sideways by ${overflow}px at 390px`);
    check(header <= 90, `the header is ${header}px high at 390px`);
  }
  await page.goto(base + '/nacos/#/configs');
  const rowDelete = page.locator('button[data-delete-config="shop.yaml"]');
  await rowDelete.waitFor();
  const box = await rowDelete.boundingBox();
  check(box && box.x >= 0 && box.x + box.width <= 390, `the row's Delete is off screen: ${JSON.stringify(box)}`);
  await rowDelete.click();
  await page.locator('dialog').waitFor();
  await page.click('dialog button[data-value=cancel]');
  await shot('configs-phone');
  for (const [name, hash, ready] of MAIN_PAGES) {
    if (name === 'configs') continue;
    await page.goto(base + '/nacos/#/' + hash);
    await page.locator(ready).first().waitFor();
    await shot(`${name}-phone`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  ok();

  step('Chinese: the switch in the header; every page from the catalogue, no English left; remembered');
  await page.goto(base + '/nacos/#/configs');
  await page.locator('td a').first().waitFor();
  await page.click('#lang');
  await page.locator('#nav a[data-section=configs]', { hasText: '配置列表' }).waitFor();
  check(await page.evaluate(() => document.documentElement.lang) === 'zh-CN', 'the page language is not zh-CN');
  // What a Chinese page may not show: any English text of the catalogue (the keys whose
  // Chinese differs), cut at its placeholders, as whole words.
  const leftovers = () => page.evaluate(() => {
    // The page's own words: its text outside the editors (their content is data).
    const parts = [];
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, { acceptNode: (n) =>
      (n.parentElement.closest('.cm-editor, script, style, [hidden]') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT) });
    // Data shown as stored is not the page's words: the server's description of the
    // public namespace and the one this test gave e2e.
    const DATA = ['Public Namespace', 'created by the browser test'];
    while (walk.nextNode()) { const v = walk.currentNode.nodeValue; if (!DATA.includes(v.trim())) parts.push(v); }
    const text = parts.join(' ') + ' ' + [...document.querySelectorAll('[placeholder],[aria-label],[title]')]
      .map((e) => [e.getAttribute('placeholder'), e.getAttribute('title')].filter(Boolean).join(' ')).join(' ');
    const found = [];
    for (const k of window.__i18n.keys()) {
      for (const frag of k.split(/\{\w+\}/).map((f) => f.trim().replace(/^[·(（:]+|[.:)）]+$/g, '').trim())) {
        // `public` is also the name of the default namespace (data, shown as is).
        if (frag.length < 4 || !/[a-z]{3}/i.test(frag) || frag === 'public') continue;
        const re = new RegExp(`(^|[^\\w-])${frag.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[^\\w-])`);
        if (re.test(text)) found.push(frag);
      }
    }
    return found;
  });
  const pagesZh = [...MAIN_PAGES, ['listeners', `listeners?${Q}`, 'h2'], ['listeners-ip', 'listeners?ip=127.0.0.1', 'h2'], ['cluster', 'cluster', 'td .tag'],
    ['new-config', 'edit?namespace=e2e', '#f-dataId'], ['account', 'account', 'h1'],
    ...(adminUser ? [['users', 'users', 'td'], ['roles', 'users?tab=roles', 'form'], ['permissions', 'users?tab=permissions', 'form']] : [])];
  for (const [name, hash, ready] of pagesZh) {
    await page.goto(base + '/nacos/#/' + hash);
    await page.locator(ready).first().waitFor();
    const left = await leftovers();
    check(left.length === 0, `#/${hash} in Chinese still shows English: ${left.join(' | ')}`);
    if (MAIN_PAGES.some(([n]) => n === name)) await shot(`zh-${name}`);
  }
  // Dialogs too: import, clone, the review before a publish.
  await page.goto(base + '/nacos/#/configs');
  await page.click('#import');
  check((await leftovers()).length === 0, `the import dialog in Chinese: ${(await leftovers()).join(' | ')}`);
  await page.click('dialog button[data-value=cancel]');
  await page.click('button[data-clone="shop.yaml"]');
  check((await leftovers()).length === 0, `the clone dialog in Chinese: ${(await leftovers()).join(' | ')}`);
  await page.click('dialog button[data-value=cancel]');
  await page.goto(base + `/nacos/#/edit?${Q}`);
  await page.locator('.status .tag').waitFor();
  await typeInEditor('zh: 1\n');
  await page.click('#review');
  await page.locator('dialog .merge').waitFor();
  check((await leftovers()).length === 0, `the review in Chinese: ${(await leftovers()).join(' | ')}`);
  await page.click('dialog button[data-value=cancel]');
  await page.click('#nav a[data-section=configs]');
  await page.locator('dialog[aria-label="有未保存的修改"]').waitFor();
  check((await leftovers()).length === 0, `the leave dialog in Chinese: ${(await leftovers()).join(' | ')}`);
  await page.click('dialog button[data-value=discard]');
  await page.locator('td a').first().waitFor();
  // Remembered: a reload stays in Chinese; 390 px screenshots.
  await page.reload();
  await page.locator('#nav a[data-section=configs]', { hasText: '配置列表' }).waitFor();
  await page.setViewportSize({ width: 390, height: 844 });
  for (const [name, hash, ready] of MAIN_PAGES) {
    await page.goto(base + '/nacos/#/' + hash);
    await page.locator(ready).first().waitFor();
    await shot(`zh-${name}-phone`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  const missing = await page.evaluate(() => window.__i18n.missing());
  check(missing.length === 0, `strings without Chinese: ${missing.join(' | ')}`);
  await page.click('#lang');
  await page.locator('#nav a[data-section=configs]', { hasText: 'Configs' }).waitFor();
  ok();

  step('no script errors');
  check(pageErrors.length === 0, pageErrors.join('\n'));
  ok();
} catch (e) {
  console.log(`FAIL ${current}: ${e.message} (screenshot: ${join(tmpdir(), 'nacelle-console-failure.png')})`);
  try { await page.screenshot({ path: join(tmpdir(), 'nacelle-console-failure.png') }); } catch { /* the page may be gone */ }
  await cleanup();
  process.exit(1);
}
await cleanup();
console.log('console browser test: all steps passed');
