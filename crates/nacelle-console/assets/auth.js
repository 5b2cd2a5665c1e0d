// Login and the administration of users, roles and permissions, through Nacos's v1 auth
// API (/nacos/v1/auth/…). Only administrators (globalAdmin) see the users page; the
// server refuses everyone else anyway (403).

import { api, auth, session, setSession, broadcastSignOut, ApiError } from './api.js';
import { h, field, table, modal, confirmDanger, errorBox, showError, toast, hashFor } from './ui.js';
import { t } from './i18n.js';

export async function loginPage(view, q, ctx) {
  const user = h('input', { id: 'login-user', autocomplete: 'username', required: true });
  const pass = h('input', { id: 'login-pass', type: 'password', autocomplete: 'current-password', required: true });
  const err = h('div', { id: 'login-error' });
  const submit = async (e) => {
    e.preventDefault();
    err.replaceChildren();
    try {
      const r = await auth.login(user.value, pass.value);
      setSession({ accessToken: r.accessToken, username: r.username || user.value, globalAdmin: !!r.globalAdmin,
        expiresAt: Date.now() + (Number(r.tokenTtl) || 18000) * 1000 });
      ctx.onSession();
      location.hash = q.next && q.next.startsWith('#/') && !q.next.startsWith('#/login') ? q.next : '#/configs';
    } catch (e2) {
      const msg = (e2.status === 404 || e2.status === 501) ? new ApiError(404, t('This server has no login: authentication is not enabled.'))
        : e2.denied ? new ApiError(e2.status, t('Wrong user name or password.')) : e2;
      err.replaceChildren(errorBox(msg.status === 403 ? { message: msg.message } : msg));
      pass.select();
    }
  };
  view.replaceChildren(h('form', { class: 'panel login', onsubmit: submit, 'aria-label': t('Sign in') },
    h('h1', {}, t('Sign in to Nacelle')),
    q.reason ? h('p', { class: 'notice' }, q.reason) : '',
    h('div', { class: 'form' }, h('div', { class: 'wide' }, field(t('User name'), user)), h('div', { class: 'wide' }, field(t('Password'), pass))),
    err,
    h('div', { class: 'bar' }, h('button', { type: 'submit', class: 'primary', id: 'login-submit' }, t('Sign in')))));
  user.dataset.autofocus = '1';
}

// A new password, typed twice; '' when both agree, else what is wrong.
function passwordProblem(a, b) {
  if (!a) return t('Type the new password.');
  if (a !== b) return t('The two passwords differ.');
  return '';
}

// The signed-in user's own page: change the password. The server refuses every token
// issued before the change, so the page signs in again with the new one.
export async function accountPage(view, q, ctx) {
  const s = session();
  if (!s) {
    view.replaceChildren(h('h1', {}, t('Account')), h('p', { class: 'notice', id: 'account-no-auth' }, t('No one is signed in: with authentication off there is no password to change.')));
    return;
  }
  const pass = h('input', { id: 'acct-pass', type: 'password', autocomplete: 'new-password', required: true });
  const again = h('input', { id: 'acct-pass2', type: 'password', autocomplete: 'new-password', required: true });
  const out = h('div', { id: 'account-out' });
  const submit = async (e) => {
    e.preventDefault();
    const problem = passwordProblem(pass.value, again.value);
    if (problem) { out.replaceChildren(errorBox({ message: problem })); return; }
    try {
      await auth.setPassword(s.username, pass.value);
      // The server refuses tokens issued up to the second of the change: sign in again
      // until the new token is accepted.
      for (let i = 0; ; i++) {
        const r = await auth.login(s.username, pass.value);
        setSession({ ...s, accessToken: r.accessToken, expiresAt: Date.now() + (Number(r.tokenTtl) || 18000) * 1000 });
        try { await api.get('/namespaces'); break; } catch (e2) { if (!e2.denied || i >= 8) throw e2; }
        await new Promise((res) => setTimeout(res, 400));
      }
      pass.value = again.value = '';
      out.replaceChildren(h('p', { class: 'okmsg', id: 'password-changed', role: 'status' }, t('Your password is changed. Other sessions of yours must sign in again.')));
    } catch (err) { out.replaceChildren(errorBox(err)); }
  };
  view.replaceChildren(h('h1', {}, t('Account'), h('span', { class: 'sub' }, s.username + (s.globalAdmin ? t(' (administrator)') : ''))),
    h('form', { class: 'panel login', onsubmit: submit, 'aria-label': t('Change password') },
      h('h2', {}, t('Change your password')),
      h('div', { class: 'form' }, h('div', { class: 'wide' }, field(t('New password'), pass)), h('div', { class: 'wide' }, field(t('Repeat it'), again))),
      out,
      h('div', { class: 'bar' }, h('button', { type: 'submit', class: 'primary', id: 'acct-submit' }, t('Change password')))));
  pass.dataset.autofocus = '1';
}

// An administrator sets another user's password.
async function resetPassword(username, errSlot) {
  const pass = h('input', { id: 'reset-pass', type: 'password', autocomplete: 'new-password' });
  const again = h('input', { id: 'reset-pass2', type: 'password', autocomplete: 'new-password' });
  const err = h('div');
  const v = await modal(t('Reset the password of {username}', { username }), h('div', { class: 'form' },
    h('p', { class: 'wide muted' }, t('Their sessions end: they sign in with the new password.')),
    h('div', { class: 'wide' }, field(t('New password'), pass)), h('div', { class: 'wide' }, field(t('Repeat it'), again)), h('div', { class: 'wide' }, err)), [
    { label: t('Cancel'), value: 'cancel' },
    { label: t('Set password'), value: 'ok', class: 'primary', action: async () => {
      const problem = passwordProblem(pass.value, again.value);
      if (problem) { err.replaceChildren(errorBox({ message: problem })); return false; }
      try { await auth.setPassword(username, pass.value); return true; } catch (e) { err.replaceChildren(errorBox(e)); return false; }
    } },
  ], { small: true });
  if (v === 'ok') { showError(errSlot, null); toast(t('Password of {username} set', { username })); }
}

export function signOut(ctx) {
  const s = session();
  setSession(null);
  if (s) broadcastSignOut(s.username);
  ctx.onSession();
  location.hash = '#/login';
}

function tabs(current) {
  const tab = (id, label) => h('a', { href: hashFor('users', { tab: id }), 'aria-current': current === id ? 'page' : null }, label);
  return h('nav', { class: 'tabs', 'aria-label': t('Users, roles, permissions') }, tab('users', t('Users')), tab('roles', t('Roles')), tab('permissions', t('Permissions')));
}

export async function usersPage(view, q, ctx) {
  const s = session();
  if (s && !s.globalAdmin) {
    view.replaceChildren(h('h1', {}, t('Users')), errorBox({ status: 403, message: t('only administrators manage users, roles and permissions.') }));
    return;
  }
  const tab = q.tab || 'users';
  const errSlot = h('div', { id: 'users-error' });
  let content;
  try {
    if (tab === 'users') content = await usersTab(errSlot, ctx);
    else if (tab === 'roles') content = await rolesTab(errSlot, ctx);
    else content = await permissionsTab(errSlot, ctx);
  } catch (e) {
    if (e.status === 404 || e.status === 501) e = new ApiError(404, t('Authentication is not enabled on this server: there are no users to manage.'));
    content = errorBox(e);
  }
  // Nacos's server state says whether authentication is on; with it off, users exist but
  // are not asked for.
  let off = null;
  try {
    const state = await fetch('/nacos/v1/console/server/state').then((r) => r.json());
    if (String(state.auth_enabled) === 'false') {
      off = h('p', { class: 'notice', id: 'auth-off' }, t('Authentication is off on this server: these users, roles and permissions take effect once it is turned on.'));
    }
  } catch { /* the notice is only a hint */ }
  view.replaceChildren(h('h1', {}, t('Users, roles and permissions')), ...(off ? [off] : []), tabs(tab), errSlot, content);
}

const items = (page) => (page && (page.pageItems || page.items)) || [];

async function usersTab(errSlot, ctx) {
  const page = await auth.users({});
  const name = h('input', { id: 'u-name', autocomplete: 'off' });
  const pass = h('input', { id: 'u-pass', type: 'password', autocomplete: 'new-password' });
  const add = async (e) => {
    e.preventDefault();
    try { await auth.createUser(name.value.trim(), pass.value); toast(t('User created')); ctx.rerender(); } catch (err) { showError(errSlot, err); }
  };
  return h('div', {},
    h('form', { class: 'bar panel', onsubmit: add }, field(t('User name'), name), field(t('Password'), pass), h('button', { type: 'submit', class: 'primary' }, t('Create user'))),
    table([
      { label: t('User'), cell: (u) => u.username },
      { label: '', class: 'actions', cell: (u) => h('div', { class: 'rowacts' },
        h('button', { type: 'button', class: 'link', 'data-reset': u.username, onclick: () => resetPassword(u.username, errSlot) }, t('Reset password')),
        h('button', { type: 'button', class: 'link danger', onclick: async () => {
          if (!(await confirmDanger(t('Delete user'), t('Delete user “{username}”?', { username: u.username })))) return;
          try { await auth.deleteUser(u.username); ctx.rerender(); } catch (err) { showError(errSlot, err); }
        } }, t('Delete'))) },
    ], items(page)));
}

async function rolesTab(errSlot, ctx) {
  const page = await auth.roles({});
  const role = h('input', { id: 'r-role', autocomplete: 'off' });
  const user = h('input', { id: 'r-user', autocomplete: 'off' });
  const add = async (e) => {
    e.preventDefault();
    try { await auth.addRole(role.value.trim(), user.value.trim()); toast(t('Role granted')); ctx.rerender(); } catch (err) { showError(errSlot, err); }
  };
  return h('div', {},
    h('form', { class: 'bar panel', onsubmit: add }, field(t('Role'), role), field(t('User'), user), h('button', { type: 'submit', class: 'primary' }, t('Grant role'))),
    table([
      { label: t('Role'), cell: (r) => r.role },
      { label: t('User'), cell: (r) => r.username },
      { label: '', class: 'actions', cell: (r) => h('button', { type: 'button', class: 'link danger', onclick: async () => {
        if (!(await confirmDanger(t('Remove role'), t('Remove role “{role}” from “{username}”?', { role: r.role, username: r.username }), t('Remove')))) return;
        try { await auth.deleteRole(r.role, r.username); ctx.rerender(); } catch (err) { showError(errSlot, err); }
      } }, t('Remove')) },
    ], items(page)));
}

async function permissionsTab(errSlot, ctx) {
  const page = await auth.permissions({});
  const role = h('input', { id: 'p-role', autocomplete: 'off' });
  const resource = h('input', { id: 'p-resource', placeholder: 'namespace:*:*', autocomplete: 'off' });
  const action = h('select', { id: 'p-action' }, ['r', 'w', 'rw', 'a', 'ra', 'wa', 'rwa'].map((a) => h('option', { value: a }, a)));
  const add = async (e) => {
    e.preventDefault();
    try { await auth.addPermission(role.value.trim(), resource.value.trim(), action.value); toast(t('Permission added')); ctx.rerender(); } catch (err) { showError(errSlot, err); }
  };
  return h('div', {},
    h('form', { class: 'bar panel', onsubmit: add }, field(t('Role'), role), field(t('Resource'), resource), field(t('Action'), action), h('button', { type: 'submit', class: 'primary' }, t('Add permission'))),
    table([
      { label: t('Role'), cell: (p) => p.role },
      { label: t('Resource'), cell: (p) => h('code', {}, p.resource) },
      { label: t('Action'), cell: (p) => p.action },
      { label: '', class: 'actions', cell: (p) => h('button', { type: 'button', class: 'link danger', onclick: async () => {
        if (!(await confirmDanger(t('Remove permission'), t('Remove {action} on {resource} from “{role}”?', { action: p.action, resource: p.resource, role: p.role }), t('Remove')))) return;
        try { await auth.deletePermission(p.role, p.resource, p.action); ctx.rerender(); } catch (err) { showError(errSlot, err); }
      } }, t('Remove')) },
    ], items(page)));
}
