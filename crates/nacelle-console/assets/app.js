// The console's entry point: a hash router (#/page?params), the namespace picker, the
// session shown in the header, and the one place where a refused request (401/403)
// sends the user to the login page or shows "not allowed".

import { api, session, setSession, adoptSession, whenSignedOutElsewhere } from './api.js';
import { h, errorBox, modal } from './ui.js';
import { t, lang, setLang } from './i18n.js';
import { editorPage } from './editor.js';
import { namespacesPage, configsPage, historyPage, grayPage, listenersPage, clusterPage } from './pages.js';
import { loginPage, usersPage, accountPage, signOut } from './auth.js';
import { changesPage, changePage, policiesPage } from './changes.js';
import { auditPage } from './audit.js';

const PAGES = {
  login: loginPage, namespaces: namespacesPage, configs: configsPage, edit: editorPage,
  history: historyPage, gray: grayPage, listeners: listenersPage, cluster: clusterPage, users: usersPage, account: accountPage,
  changes: changesPage, change: changePage, policies: policiesPage, audit: auditPage,
};
const SECTION = { edit: 'configs', history: 'configs', gray: 'configs', change: 'changes', policies: 'changes' };
const TITLES = { login: 'Sign in', namespaces: 'Namespaces', configs: 'Configs', edit: 'Editor', history: 'History', gray: 'Gray release',
  listeners: 'Listeners', cluster: 'Cluster', users: 'Users', account: 'Account',
  changes: 'Changes', change: 'Change request', policies: 'Review policies', audit: 'Audit' };
const NS_KEY = 'nacelle.namespace';

const view = document.getElementById('view');
const nsSelect = document.getElementById('ns-select');
let namespaces = [];
let leaveGuard = null;
// The hash of the page shown: leaving is undone (without an event) while the user decides.
let shownHash = location.hash;

const ctx = {
  get namespace() { return sessionStorage.getItem(NS_KEY) || ''; },
  setNamespace(id) { sessionStorage.setItem(NS_KEY, id); nsSelect.value = id; },
  namespaces: () => namespaces,
  namespaceName() { const n = namespaces.find((x) => x.id === ctx.namespace); return n ? n.name : ctx.namespace || 'public'; },
  async reloadNamespaces() {
    try { namespaces = await api.get('/namespaces'); } catch (e) {
      namespaces = [];
      nsSelect.closest('label').hidden = true;
      throw e;
    }
    nsSelect.replaceChildren(...namespaces.map((n) => h('option', { value: n.id }, `${n.name}${n.id ? '' : ''}`)));
    // A namespace the user cannot see is replaced by the first one they can (a reader of
    // `prod` only lands on `prod`, not on an empty `public`).
    if (!namespaces.some((n) => n.id === ctx.namespace)) ctx.setNamespace(namespaces.length ? namespaces[0].id : '');
    nsSelect.value = ctx.namespace;
    nsSelect.closest('label').hidden = namespaces.length === 0;
  },
  rerender: () => render(),
  // The page's unsaved edits, if it has any: `{dirty(), what(), discard()}` (the editor).
  setLeaveGuard(g) { leaveGuard = g; },
  // Another user sees other namespaces: reload them on the next page.
  onSession: () => { namespaces = []; paintSession(); },
};

function paintSession() {
  const s = session();
  const who = document.getElementById('who');
  document.getElementById('nav-users').hidden = !!(s && !s.globalAdmin);
  document.getElementById('nav-audit').hidden = !!(s && !s.globalAdmin);
  document.getElementById('nav-cluster').hidden = !!(s && !s.globalAdmin);
  if (s) {
    who.replaceChildren(h('a', { href: '#/account', id: 'account-link', title: t('Account: change your password') }, s.username + (s.globalAdmin ? t(' (admin)') : '')),
      h('button', { type: 'button', class: 'link', id: 'sign-out', onclick: () => signOut(ctx) }, t('Sign out')));
  } else {
    who.replaceChildren(h('a', { href: '#/login' }, t('Sign in')));
  }
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [page, query] = raw.split('?');
  return { page: page || 'configs', q: Object.fromEntries(new URLSearchParams(query || '')) };
}

let rendering = 0;
async function render() {
  const { page, q } = parseHash();
  const fn = PAGES[page];
  const mine = ++rendering;
  shownHash = location.hash;
  leaveGuard = null;
  document.querySelectorAll('#nav a').forEach((a) => a.setAttribute('aria-current', a.dataset.section === (SECTION[page] || page) ? 'page' : 'false'));
  document.title = `${t(TITLES[page] || 'Not found')} · Nacelle`;
  if (!fn) { view.replaceChildren(h('h1', {}, t('Not found')), h('p', {}, h('a', { href: '#/configs' }, t('Go to configs')))); return; }
  try {
    if (page !== 'login' && !namespaces.length) await ctx.reloadNamespaces();
    // Each render builds its page apart and shows it only if no newer render started
    // meanwhile (a slow answer never overwrites the page the user went on to).
    const built = h('div', { class: 'page' });
    await fn(built, q, ctx);
    if (mine !== rendering) return;
    view.replaceChildren(built);
    const first = built.querySelector('[data-autofocus]');
    if (first) first.focus();
    else if (!view.contains(document.activeElement)) view.focus({ preventScroll: true });
  } catch (e) {
    if (mine !== rendering) return;
    let s = session();
    let dropped = '';
    // A session the server no longer accepts (expired, the user deleted, its password
    // changed) is dropped: sign in again.
    if (s && e.status === 403 && /token expired|token invalid|user not found/i.test(e.message)) {
      setSession(null);
      paintSession();
      s = null;
      dropped = e.message;
    }
    if (e.status === 401 || (e.status === 403 && !s)) {
      location.hash = '#/login?' + new URLSearchParams({ next: location.hash, reason: dropped ? t('Your session ended ({reason}): please sign in again.', { reason: dropped }) : t('Please sign in.') });
      return;
    }
    view.replaceChildren(h('h1', {}, t('Could not load this page')), errorBox(e));
  }
}

// Leaving a page with unsaved edits asks first: stay, leave keeping the draft (the editor
// restores it next time), or discard the edits. True when the page may be left.
async function mayLeave() {
  if (!leaveGuard || !leaveGuard.dirty()) return true;
  const g = leaveGuard;
  const v = await modal(t('Unsaved edits'), h('p', {},
    t('Your edits to {what} are not published. They stay as a draft in this browser until you publish or discard them.', { what: g.what() })), [
    { label: t('Stay'), value: 'stay' },
    { label: t('Discard edits'), value: 'discard', class: 'danger' },
    { label: t('Leave, keep the draft'), value: 'keep', class: 'primary' },
  ], { small: true });
  if (v === 'discard') g.discard();
  if (v === 'discard' || v === 'keep') { leaveGuard = null; return true; }
  return false;
}

nsSelect.addEventListener('change', async () => {
  const to = nsSelect.value;
  nsSelect.value = ctx.namespace;
  if (!(await mayLeave())) return;
  leaveGuard = null;
  ctx.setNamespace(to);
  if (location.hash === '#/configs') render(); else location.hash = '#/configs';
});
// Until the first page is shown (after a new tab asked the others for their sign-in), a
// change of the hash waits for it: that render shows the hash as it is then. Rendering
// earlier as well would build the page twice, the second over whatever was typed into
// the first.
let started = false;
window.addEventListener('hashchange', async () => {
  if (!started) return;
  if (leaveGuard && location.hash !== shownHash) {
    const target = location.hash;
    history.replaceState(null, '', shownHash || location.pathname);
    if (!(await mayLeave())) return;
    leaveGuard = null;
    location.hash = target;
    return;
  }
  render();
});
// Closing the tab or going to another site with unsaved edits: the browser's own question.
window.addEventListener('beforeunload', (e) => {
  if (leaveGuard && leaveGuard.dirty()) { e.preventDefault(); e.returnValue = ''; }
});
document.addEventListener('keydown', (e) => {
  // "/" focuses the first search field of the page.
  if (e.key === '/' && !/^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName)) {
    const f = view.querySelector('form[role=search] input');
    if (f) { e.preventDefault(); f.focus(); }
  }
});
// Signed out in another tab: this one is too.
whenSignedOutElsewhere(() => {
  namespaces = [];
  paintSession();
  leaveGuard = null;
  location.hash = '#/login?' + new URLSearchParams({ reason: t('You signed out in another tab.') });
});
// The header in the current language, and the switch between English and Chinese.
function paintChrome() {
  document.querySelectorAll('#nav a').forEach((a) => { a.textContent = t(TITLES[a.dataset.section]); });
  document.querySelector('.skip').textContent = t('Skip to content');
  document.querySelector('.ns-pick .lbl').textContent = t('Namespace');
  nsSelect.setAttribute('aria-label', t('Namespace'));
  document.getElementById('nav').setAttribute('aria-label', t('Sections'));
  const sw = document.getElementById('lang');
  sw.textContent = lang() === 'zh' ? 'EN' : '中文';
  sw.setAttribute('aria-label', lang() === 'zh' ? 'Switch to English' : '切换到中文');
  sw.title = sw.getAttribute('aria-label');
}
document.getElementById('lang').addEventListener('click', () => {
  // Unsaved edits are kept as a draft (dirty() saves it); the page comes back with them.
  if (leaveGuard) leaveGuard.dirty();
  setLang(lang() === 'zh' ? 'en' : 'zh');
  paintChrome();
  paintSession();
  render();
});
// A new tab takes the sign-in of an open one before its first page.
await adoptSession();
paintChrome();
paintSession();
started = true;
render();
