// The console's login and non-admin steps, for a server with authentication on (issue 11):
//
//   node console-auth.mjs <base-url> <screenshot-dir> <admin-user> <admin-password>
//
// An administrator signs in, creates namespace `ro`, a user `reader` with role
// `ro-reader` holding `r` on `ro:*:*`; then `reader` signs in: the users page is not in
// the navigation and shows "not allowed" when opened, editing the namespace and
// publishing into it are refused with the server's 403 shown where the action was taken.
// Run by crates/nacelle/tests/console_browser.rs (`console_auth_in_chromium`).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { launch } from './browser.mjs';

const [base, shots, adminUser, adminPass] = process.argv.slice(2);
if (!base || !shots || !adminUser || !adminPass) {
  console.error('usage: node console-auth.mjs <base-url> <screenshot-dir> <admin-user> <admin-password>');
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
async function shot(name) {
  await page.evaluate(() => document.getElementById('toasts')?.replaceChildren());
  // Nothing on the page may read like a leaked value of the code.
  const leaked = await page.evaluate(() => (document.body.innerText.match(/\bnull\b|\bundefined\b|\[object \w+\]|NaN/) || [])[0]);
  check(!leaked, `the ${name} page shows "${leaked}"`);
  await page.screenshot({ path: join(shots, name + '.png') });
}

async function login(user, pass) {
  await page.goto(base + '/nacos/#/login');
  await page.fill('#login-user', user);
  await page.fill('#login-pass', pass);
  await page.click('#login-submit');
  await page.locator('#sign-out').waitFor();
}

try {
  step('unauthenticated: sent to the login page');
  await page.goto(base + '/nacos/#/configs');
  await page.waitForURL(/#\/login/);
  await page.locator('#login-user').waitFor();
  ok();

  step('wrong password refused');
  await page.fill('#login-user', adminUser);
  await page.fill('#login-pass', adminPass + '-wrong');
  await page.click('#login-submit');
  await page.locator('#login-error .error').waitFor();
  await shot('login');
  ok();

  step('admin signs in; the token is not in the URL');
  await login(adminUser, adminPass);
  check(!page.url().includes('accessToken'), page.url());
  const stored = await page.evaluate(() => sessionStorage.getItem('nacelle.session'));
  check(stored && stored.includes('accessToken'), 'no session token kept');
  ok();

  step('the sign-in reaches a new tab without touching localStorage; signing out there signs every tab out');
  const tab2 = await context.newPage();
  await tab2.goto(base + '/nacos/#/namespaces');
  await tab2.locator('#sign-out').waitFor();
  check(await tab2.locator('#account-link').textContent() === `${adminUser} (admin)`, 'the new tab is not signed in as the administrator');
  const disk = await tab2.evaluate(() => JSON.stringify(localStorage));
  check(!disk.includes('accessToken'), `the token is in localStorage: ${disk}`);
  await tab2.click('#sign-out');
  await page.locator('#login-user').waitFor();
  await page.locator('.notice', { hasText: 'signed out in another tab' }).waitFor();
  check(await page.evaluate(() => sessionStorage.getItem('nacelle.session')) === null, 'the first tab kept the session');
  await tab2.close();
  await login(adminUser, adminPass);
  ok();

  step('admin creates namespace ro, user reader, role and r permission');
  await page.goto(base + '/nacos/#/namespaces');
  await page.click('#ns-create');
  await page.fill('#ns-id', 'ro');
  await page.fill('#ns-name', 'Read only');
  await page.click('dialog button[data-value=ok]');
  await page.locator('td code', { hasText: /^ro$/ }).waitFor();
  await page.goto(base + '/nacos/#/users?tab=users');
  await page.fill('#u-name', 'reader');
  await page.fill('#u-pass', 'reader-pass-123');
  await page.click('form button[type=submit]');
  await page.locator('td', { hasText: /^reader$/ }).waitFor();
  await page.goto(base + '/nacos/#/users?tab=roles');
  await page.fill('#r-role', 'ro-reader');
  await page.fill('#r-user', 'reader');
  await page.click('form button[type=submit]');
  await page.locator('td', { hasText: 'ro-reader' }).first().waitFor();
  await page.goto(base + '/nacos/#/users?tab=permissions');
  await page.fill('#p-role', 'ro-reader');
  await page.fill('#p-resource', 'ro:*:*');
  await page.selectOption('#p-action', 'r');
  await page.click('form button[type=submit]');
  await page.locator('td code', { hasText: 'ro:*:*' }).waitFor();
  check(await page.locator('#auth-off').count() === 0, 'the users page says authentication is off');
  await shot('users-permissions');
  // A config to read.
  await page.selectOption('#ns-select', 'ro');
  await page.locator('h1 .sub', { hasText: 'Read only' }).waitFor();
  await page.goto(base + '/nacos/#/edit?namespace=ro');
  await page.fill('#f-dataId', 'ro.yaml');
  await page.locator('#content .cm-content').click();
  await page.keyboard.press('Control+a');
  await page.keyboard.insertText('a: 1\n');
  await page.click('#review');
  await page.click('dialog button[data-value=publish]');
  await page.waitForURL(/dataId=ro.yaml/);
  await page.click('#sign-out');
  ok();

  step('a reader of ro only lands on ro, not on an empty public');
  await page.evaluate(() => sessionStorage.removeItem('nacelle.namespace'));
  await login('reader', 'reader-pass-123');
  await page.goto(base + '/nacos/#/configs');
  await page.locator('h1 .sub', { hasText: 'Read only' }).waitFor();
  check(await page.locator('#ns-select').inputValue() === 'ro', 'the namespace picker is not on ro');
  await page.locator('td', { hasText: 'ro.yaml' }).first().waitFor();
  ok();

  step('reader: no users page');
  check(await page.locator('#nav-users').isHidden(), 'the users link is shown to a non-admin');
  check(await page.locator('#nav-cluster').isHidden(), 'the cluster link is shown to a non-admin');
  await page.goto(base + '/nacos/#/users');
  await page.locator('.error', { hasText: 'Not allowed' }).waitFor();
  await shot('users-not-allowed');
  ok();

  step('reader cannot edit a namespace it has only r on');
  await page.goto(base + '/nacos/#/namespaces');
  await page.click('button[data-edit=ro]');
  await page.fill('#ns-name', 'renamed');
  await page.click('dialog button[data-value=ok]');
  await page.locator('dialog .error', { hasText: 'Not allowed' }).waitFor();
  await page.click('dialog button[data-value=cancel]');
  ok();

  step('reader reads ro.yaml but cannot publish it');
  await page.goto(base + '/nacos/#/edit?namespace=ro&group=DEFAULT_GROUP&dataId=ro.yaml');
  await page.locator('h1', { hasText: 'ro.yaml' }).waitFor();
  await page.locator('#content .cm-content').click();
  await page.keyboard.press('Control+a');
  await page.keyboard.insertText('a: 2\n');
  await page.click('#review');
  await page.click('dialog button[data-value=publish]');
  await page.locator('dialog .error', { hasText: 'Not allowed' }).waitFor();
  await shot('editor-not-allowed');
  ok();

  step('a user changes their own password; an administrator resets it');
  await page.click('dialog button[data-value=cancel]');
  await page.click('#account-link');
  // The refused edit is still unsaved: leaving asks; discard it.
  await page.click('dialog button[data-value=discard]');
  await page.waitForURL(/#\/account/);
  await page.fill('#acct-pass', 'reader-new-pass-1');
  await page.fill('#acct-pass2', 'reader-new-pass-2');
  await page.click('#acct-submit');
  await page.locator('#account-out .error', { hasText: 'differ' }).waitFor();
  await page.fill('#acct-pass2', 'reader-new-pass-1');
  await page.click('#acct-submit');
  await page.locator('#password-changed').waitFor();
  await shot('account');
  // Still signed in (the page signed in again with the new password).
  await page.goto(base + '/nacos/#/configs');
  await page.locator('td', { hasText: 'ro.yaml' }).first().waitFor();
  await page.click('#sign-out');
  await page.fill('#login-user', 'reader');
  await page.fill('#login-pass', 'reader-pass-123');
  await page.click('#login-submit');
  await page.locator('#login-error .error').waitFor();
  await login('reader', 'reader-new-pass-1');
  await page.click('#sign-out');
  await login(adminUser, adminPass);
  await page.goto(base + '/nacos/#/users?tab=users');
  await page.click('button[data-reset=reader]');
  await page.fill('#reset-pass', 'reset-by-admin-1');
  await page.fill('#reset-pass2', 'reset-by-admin-1');
  await page.click('dialog button[data-value=ok]');
  await page.locator('dialog').waitFor({ state: 'detached' });
  await page.click('#sign-out');
  // Tokens issued in the second of the change are refused: sign in after it.
  await page.waitForTimeout(1100);
  await login('reader', 'reset-by-admin-1');
  await page.goto(base + '/nacos/#/configs');
  await page.locator('td', { hasText: 'ro.yaml' }).first().waitFor();
  await page.goto(base + '/nacos/#/namespaces');
  await page.locator('td code', { hasText: /^ro$/ }).waitFor();
  ok();

  step('a session the server no longer accepts leads back to the login page');
  await page.evaluate(() => sessionStorage.setItem('nacelle.session', JSON.stringify({ accessToken: 'x.y.z', username: 'reader', globalAdmin: false })));
  await page.goto(base + '/nacos/#/configs');
  await page.waitForURL(/#\/login/);
  await page.locator('.notice', { hasText: 'Your session ended' }).waitFor();
  check(await page.evaluate(() => sessionStorage.getItem('nacelle.session')) === null, 'the refused session was kept');
  ok();
} catch (e) {
  console.log(`FAIL ${current}: ${e.message}`);
  try { await page.screenshot({ path: join(tmpdir(), 'nacelle-console-auth-failure.png') }); } catch { /* the page may be gone */ }
  await cleanup();
  process.exit(1);
}
await cleanup();
console.log('console auth browser test: all steps passed');
