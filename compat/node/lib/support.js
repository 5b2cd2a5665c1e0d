// What every test file shares: a server per test and clients of it, closed in order.
//
// The `nacos` package runs every NacosConfigClient through `cluster-client`: the clients of
// one machine that name no `endpoint` share one leader (TCP port 7777, or
// NODE_CLUSTER_CLIENT_PORT) and so the first client's settings — its namespace and server
// included. `npm test` therefore runs the files one at a time, and a file holds clients of
// one namespace.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { NacosConfigClient } = require('nacos');

const { startServer, api } = require('./harness');

const GROUP = 'DEFAULT_GROUP';

/** A client of `server` with its snapshot cache in a temp dir; errors are collected. It is
 * closed before the server stops (the server answers its held long poll as it stops). */
function client(t, server, extra = {}) {
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'nacos-node-cache-'));
  const c = new NacosConfigClient({
    serverAddr: server.addr,
    cacheDir,
    requestTimeout: 10000,
    username: server.username,
    password: server.password,
    ...extra,
  });
  c.errors = [];
  c.on('error', e => c.errors.push(e));
  server.clients.push(() => {
    c.close();
    fs.rmSync(cacheDir, { recursive: true, force: true });
  });
  return c;
}

/** A server for one test, stopped after it (its log printed when the test failed). */
async function server(t, opts) {
  const s = await startServer(opts);
  s.clients = [];
  t.after(async () => {
    if (t.passed === false) console.error(s.log());
    for (const close of s.clients) close();
    await s.stop();
  });
  return s;
}

/** Publishes over the HTTP API, as an operator or another application would. */
async function publish(s, dataId, content, extra = {}) {
  const r = await api(s, 'POST', '/nacos/v1/cs/configs', { dataId, group: GROUP, content, ...extra });
  assert.equal(r.status, 200, r.body);
  assert.equal(r.body, 'true');
}

module.exports = { GROUP, client, server, publish };
