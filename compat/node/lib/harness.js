// Runs the real `nacelle` binary (NACELLE_BIN) for a test: a temp data directory, HTTP and
// gRPC on ports the server picks itself (port 0, read back from its log — nothing to
// collide with), authentication on or off. The Node client speaks HTTP v1 only, so the
// chosen HTTP port is all it needs.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

const ADMIN_PASSWORD = 'Node-Compat-Pw-0123';

/** Starts nacelle; resolves once it listens and is ready. `auth`: turn authentication on;
 * `args`: further arguments of `nacelle serve`. */
async function startServer({ auth = false, args: extra = [] } = {}) {
  const bin = process.env.NACELLE_BIN;
  if (!bin) {
    throw new Error('NACELLE_BIN is not set: point it at the nacelle binary (target/debug/nacelle)');
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'nacelle-node-'));
  const args = ['serve', '--data-dir', dataDir, '--bind', '127.0.0.1', '--port', '0',
    '--grpc-port', '0', '--log-format', 'json'];
  if (auth) {
    args.push('--auth', 'on', '--admin-password', ADMIN_PASSWORD);
  } else {
    args.push('--auth', 'off');
  }
  args.push(...extra);
  const child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const log = [];
  const addr = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`nacelle did not listen within 30 s:\n${log.join('\n')}`)), 30000);
    const lines = readline.createInterface({ input: child.stderr });
    let found = false;
    lines.on('line', line => {
      log.push(line);
      if (log.length > 200) log.shift();
      const m = !found && /http listening on ([0-9.]+:[0-9]+)/.exec(line);
      if (m) {
        found = true;
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on('exit', code => {
      clearTimeout(timer);
      if (!found) reject(new Error(`nacelle exited (${code}) before listening:\n${log.join('\n')}`));
    });
  });
  const server = {
    addr,
    dataDir,
    username: auth ? 'nacos' : undefined,
    password: auth ? ADMIN_PASSWORD : undefined,
    url: p => `http://${addr}${p}`,
    log: () => log.join('\n'),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise(r => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  await until(async () => {
    const r = await fetch(server.url('/nacos/v1/console/health/readiness'));
    return r.status === 200;
  }, 'the server to be ready');
  if (auth) {
    // The test's own calls carry a token: a client with a wrong password gets its address
    // throttled for this user (docs/security.md), and a token is never throttled.
    const r = await fetch(server.url('/nacos/v1/auth/login'), {
      method: 'POST',
      body: new URLSearchParams({ username: 'nacos', password: ADMIN_PASSWORD }),
    });
    if (r.status !== 200) throw new Error(`login: ${r.status} ${await r.text()}`);
    server.token = (await r.json()).accessToken;
  }
  return server;
}

/** Polls `check` (sync or async) until it returns a truthy value; fails after `ms`. */
async function until(check, what, ms = 30000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${last}` : ''}`);
    }
    await new Promise(r => setTimeout(r, 50));
  }
}

/** A test-side call of the v1 API (form body), with the admin's credentials when set. */
async function api(server, method, p, params = {}) {
  const form = new URLSearchParams(params);
  if (server.token) {
    form.set('accessToken', server.token);
  }
  const init = { method };
  let url = server.url(p);
  if (method === 'GET' || method === 'DELETE') {
    url += `?${form}`;
  } else {
    init.body = form;
  }
  const r = await fetch(url, init);
  return { status: r.status, body: await r.text() };
}

/** Logs in as `username` (POST /nacos/v1/auth/login); its access token. */
async function login(server, username, password) {
  const r = await fetch(server.url('/nacos/v1/auth/login'), {
    method: 'POST',
    body: new URLSearchParams({ username, password }),
  });
  if (r.status !== 200) throw new Error(`login of ${username}: ${r.status} ${await r.text()}`);
  return (await r.json()).accessToken;
}

/** A test-side call as the user of `token`: `query` in the URL, `json` (if any) as the body. */
async function callAs(server, token, method, p, query = {}, json) {
  const url = `${server.url(p)}?${new URLSearchParams({ ...query, accessToken: token })}`;
  const init = { method };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    init.headers = { 'Content-Type': 'application/json' };
  }
  const r = await fetch(url, init);
  return { status: r.status, body: await r.text() };
}

module.exports = { startServer, until, api, login, callAs, ADMIN_PASSWORD };
