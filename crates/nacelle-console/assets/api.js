// Calls to the server: the console API (/nacos/console/api) and Nacos's v1 auth API.
// The session token lives in sessionStorage (never in a URL, never on disk), is handed to
// new tabs over a BroadcastChannel, and goes in `Authorization: Bearer`; an answer of
// 401/403 becomes an ApiError the pages show.

import { t } from './i18n.js';

const TOKEN = 'nacelle.session';

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body || {};
  }
  get denied() { return this.status === 401 || this.status === 403; }
  get conflict() { return this.status === 409; }
}

export function session() {
  try { return JSON.parse(sessionStorage.getItem(TOKEN) || 'null'); } catch { return null; }
}
export function setSession(s) {
  if (s) sessionStorage.setItem(TOKEN, JSON.stringify(s)); else sessionStorage.removeItem(TOKEN);
}

// A sign-in reaches the user's other tabs of this console without being written to disk
// (Nacos keeps its token in localStorage, where it outlives the browser and any script of
// the origin can read it at any time): each tab keeps it in its sessionStorage, a new tab
// asks the open ones over a BroadcastChannel (same origin only) and takes the answer; a
// sign-out in one tab signs every tab out. Closing the last tab ends the sign-in.
const channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel('nacelle.session') : null;
let onSignedOut = () => {};
if (channel) {
  channel.onmessage = (e) => {
    const m = e.data || {};
    if (m.type === 'ask' && session()) channel.postMessage({ type: 'session', session: session() });
    else if (m.type === 'signout' && session() && session().username === m.username) { setSession(null); onSignedOut(); }
  };
}
/** Takes the sign-in of another open tab, if there is one (waits at most `ms`). */
export function adoptSession(ms = 250) {
  if (!channel || session()) return Promise.resolve(session());
  return new Promise((resolve) => {
    const ask = new BroadcastChannel('nacelle.session');
    const done = (s) => { clearTimeout(timer); ask.close(); resolve(s); };
    const timer = setTimeout(() => done(null), ms);
    ask.onmessage = (e) => {
      const m = e.data || {};
      if (m.type === 'session' && m.session && m.session.accessToken && !(m.session.expiresAt < Date.now())) {
        setSession(m.session);
        done(m.session);
      }
    };
    ask.postMessage({ type: 'ask' });
  });
}
/** Signs every tab of this user out; `then` runs in the other tabs when they are. */
export function broadcastSignOut(username) { if (channel) channel.postMessage({ type: 'signout', username }); }
export function whenSignedOutElsewhere(fn) { onSignedOut = fn; }

function headers() {
  const h = { 'Accept': 'application/json' };
  const s = session();
  if (s && s.accessToken) h['Authorization'] = 'Bearer ' + s.accessToken;
  return h;
}

function clean(params) {
  const out = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null) out.append(k, String(v));
  }
  return out;
}

// One request. GET/DELETE send parameters in the query, POST/PUT as a form body (or
// `opts.json` as a JSON body, the parameters then in the query); `opts.headers` are added.
export async function request(method, path, params, opts = {}) {
  const p = clean(params);
  let url = path;
  const init = { method, headers: { ...headers(), ...(opts.headers || {}) }, credentials: 'same-origin' };
  if (method === 'GET' || method === 'DELETE' || opts.json !== undefined) {
    const q = p.toString();
    if (q) url += '?' + q;
    if (opts.json !== undefined) {
      init.body = JSON.stringify(opts.json);
      init.headers['Content-Type'] = 'application/json';
    }
  } else {
    init.body = p;
    init.headers['Content-Type'] = 'application/x-www-form-urlencoded;charset=UTF-8';
  }
  let resp;
  try {
    resp = await fetch(url, init);
  } catch (e) {
    throw new ApiError(0, t('The server cannot be reached: {reason}', { reason: e.message }));
  }
  const text = await resp.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = null; }
  if (!resp.ok) {
    // The console API answers {error, status}; Nacos's auth failures {status, error:
    // "Forbidden", message: <reason>}: the reason is the message when there is one.
    // Nacelle's own API answers the v3 envelope {code, message: <the code's words>, data:
    // <the reason>}: the reason is the data.
    const v3 = body && typeof body === 'object' && typeof body.code === 'number' && typeof body.data === 'string';
    let msg = v3 ? body.data : (body && (body.message || body.error)) || text || resp.statusText;
    if (typeof msg !== 'string') msg = JSON.stringify(msg);
    msg = msg.replace(/^caused: /, '').replace(/;\s*$/, '');
    throw new ApiError(resp.status, msg, body);
  }
  return body !== null ? body : text;
}

const C = '/nacos/console/api';
export const api = {
  get: (p, params) => request('GET', C + p, params),
  post: (p, params, opts) => request('POST', C + p, params, opts),
  put: (p, params) => request('PUT', C + p, params),
  del: (p, params) => request('DELETE', C + p, params),
};

// Nacelle's own API (/nacos/nacelle/v1): change requests, review policies, the audit
// trail. Answers are the v3 envelope {code: 0, message, data}: these resolve with `data`.
const N = '/nacos/nacelle/v1';
const unwrap = (b) => (b && typeof b === 'object' && 'data' in b ? b.data : b);
export const nacelle = {
  get: async (p, params) => unwrap(await request('GET', N + p, params)),
  post: async (p, params, opts) => unwrap(await request('POST', N + p, params, opts)),
  put: async (p, params, opts) => unwrap(await request('PUT', N + p, params, opts)),
  del: async (p, params) => unwrap(await request('DELETE', N + p, params)),
};

const A = '/nacos/v1/auth';
export const auth = {
  login: (username, password) => request('POST', A + '/login', { username, password }),
  users: (params) => request('GET', A + '/users', { search: 'blur', username: '', pageNo: 1, pageSize: 100, ...params }),
  createUser: (username, password) => request('POST', A + '/users', { username, password }),
  deleteUser: (username) => request('DELETE', A + '/users', { username }),
  // Nacos's password update: the user themself, or an administrator for anyone.
  setPassword: (username, newPassword) => request('PUT', A + '/users', { username, newPassword }),
  roles: (params) => request('GET', A + '/roles', { search: 'blur', username: '', role: '', pageNo: 1, pageSize: 100, ...params }),
  addRole: (role, username) => request('POST', A + '/roles', { role, username }),
  deleteRole: (role, username) => request('DELETE', A + '/roles', { role, username }),
  permissions: (params) => request('GET', A + '/permissions', { search: 'blur', role: '', pageNo: 1, pageSize: 100, ...params }),
  addPermission: (role, resource, action) => request('POST', A + '/permissions', { role, resource, action }),
  deletePermission: (role, resource, action) => request('DELETE', A + '/permissions', { role, resource, action }),
};

// Export of selected configs: Nacos's export (a zip), fetched with the session header
// and handed to the browser as a download.
export async function exportConfigs(ids) {
  const url = '/nacos/v1/cs/configs?exportV2=true&ids=' + encodeURIComponent(ids.join(','));
  const resp = await fetch(url, { headers: headers() });
  if (!resp.ok) throw new ApiError(resp.status, (await resp.text()).replace(/^caused: /, ''));
  const blob = await resp.blob();
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = 'nacelle-export-' + new Date().toISOString().slice(0, 19).replace(/[:T]/g, '') + '.zip';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  return blob.size;
}

// Import of a Nacos zip (`POST /nacos/v1/cs/configs?import=true`, multipart `file`) with a
// policy for configs that exist; `onProgress(percent)` follows the upload. Resolves with
// Nacos's answer `{code, message, data: {succCount, skipCount, failData, skipData,
// unrecognizedCount, unrecognizedData}}`, also when it reports a failure.
export function importZip(file, namespace, policy, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    const q = new URLSearchParams({ import: 'true', namespace: namespace || '', policy });
    xhr.open('POST', '/nacos/v1/cs/configs?' + q);
    for (const [k, v] of Object.entries(headers())) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => { if (e.lengthComputable && onProgress) onProgress(Math.round((e.loaded / e.total) * 100)); };
    xhr.onerror = () => reject(new ApiError(0, t('The server cannot be reached.')));
    xhr.onload = () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch { body = null; }
      if (body && typeof body === 'object' && 'code' in body) return resolve(body);
      reject(new ApiError(xhr.status, (body && (body.message || body.error)) || xhr.responseText.replace(/^caused: /, '') || xhr.statusText, body));
    };
    const form = new FormData();
    form.append('file', file);
    xhr.send(form);
  });
}

// Nacos's clone (`POST /nacos/v1/cs/configs?clone=true&tenant=…&policy=…`, a JSON list
// of `{cfgId, dataId, group}`): the same answer as an import.
export async function cloneConfigs(namespace, policy, items) {
  const q = new URLSearchParams({ clone: 'true', tenant: namespace || '', policy });
  let resp;
  try {
    resp = await fetch('/nacos/v1/cs/configs?' + q, { method: 'POST', headers: { ...headers(), 'Content-Type': 'application/json' }, body: JSON.stringify(items) });
  } catch (e) { throw new ApiError(0, t('The server cannot be reached: {reason}', { reason: e.message })); }
  const text = await resp.text();
  let body = null;
  try { body = JSON.parse(text); } catch { body = null; }
  if (body && typeof body === 'object' && 'code' in body) return body;
  throw new ApiError(resp.status, (body && (body.message || body.error)) || text.replace(/^caused: /, '') || resp.statusText, body);
}
