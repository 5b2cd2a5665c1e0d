// The real Node.js Nacos client (npm `nacos` 2.6.x: `NacosConfigClient`, HTTP v1 with long
// polling) against the nacelle binary, as an application uses it. Each test has a server of
// its own. Run: NACELLE_BIN=…/target/debug/nacelle npm test (in compat/node).
'use strict';

const assert = require('node:assert/strict');
const { test } = require('node:test');

const { until, api } = require('../lib/harness');

const { GROUP, client, server, publish } = require('../lib/support');

test('publish, get and remove through the client', async t => {
  const s = await server(t);
  const c = client(t, s);
  await c.ready();
  assert.equal(await c.getConfig('node-crud.yaml', GROUP), null, 'a missing config reads as null');
  assert.equal(await c.publishSingle('node-crud.yaml', GROUP, 'greeting: hello'), true);
  assert.equal(await c.getConfig('node-crud.yaml', GROUP), 'greeting: hello');
  // What the client published is what every other reader sees.
  const seen = await api(s, 'GET', '/nacos/v1/cs/configs', { dataId: 'node-crud.yaml', group: GROUP });
  assert.equal(seen.body, 'greeting: hello');
  assert.equal(await c.publishSingle('node-crud.yaml', GROUP, 'greeting: again'), true);
  assert.equal(await c.getConfig('node-crud.yaml', GROUP), 'greeting: again');
  assert.equal(await c.remove('node-crud.yaml', GROUP), true);
  assert.equal(await c.getConfig('node-crud.yaml', GROUP), null);
  assert.deepEqual(c.errors, []);
});

test('a subscriber hears of every change, and of the removal', async t => {
  const s = await server(t);
  await publish(s, 'node-listen.yaml', 'v: 1');
  const c = client(t, s);
  const seen = [];
  c.subscribe({ dataId: 'node-listen.yaml', group: GROUP }, content => seen.push(content));
  await until(() => seen.includes('v: 1'), 'the first value');
  const delays = [];
  for (const v of ['v: 2', 'v: 3', 'v: 4']) {
    const start = Date.now();
    await publish(s, 'node-listen.yaml', v);
    await until(() => seen.includes(v), `the change to ${v}`);
    delays.push(Date.now() - start);
  }
  console.log(`node client: publish -> callback (long poll) ms: ${delays.join(', ')}`);
  const r = await api(s, 'DELETE', '/nacos/v1/cs/configs', { dataId: 'node-listen.yaml', group: GROUP });
  assert.equal(r.body, 'true');
  // The client reads a removed config as null (or empty from its snapshot), and says so.
  await until(() => seen.length > 4 && !seen[seen.length - 1], 'the removal');
  assert.deepEqual(c.errors, []);
});

test('a subscriber registered before the key exists gets its first value', async t => {
  const s = await server(t);
  const c = client(t, s);
  const seen = [];
  c.subscribe({ dataId: 'node-later.yaml', group: GROUP }, content => seen.push(content));
  // Let the client's first long poll reach the server before the key appears.
  await until(async () => {
    const r = await api(s, 'GET', '/nacos/v1/cs/configs/listener', { dataId: 'node-later.yaml', group: GROUP });
    return r.status === 200 && JSON.parse(r.body).lisentersGroupkeyStatus &&
      Object.keys(JSON.parse(r.body).lisentersGroupkeyStatus).length > 0;
  }, 'the client to listen');
  await publish(s, 'node-later.yaml', 'born: now');
  await until(() => seen.includes('born: now'), 'the first value');
  assert.deepEqual(c.errors, []);
});

test('twenty keys on one client each hear their own change', async t => {
  const s = await server(t);
  const c = client(t, s);
  const seen = new Map();
  for (let i = 0; i < 20; i++) {
    const id = `node-many-${i}.properties`;
    await publish(s, id, `k=${i}`);
    seen.set(id, []);
    c.subscribe({ dataId: id, group: GROUP }, content => seen.get(id).push(content));
  }
  await until(() => [...seen.values()].every((v, i) => v.includes(`k=${i}`)), 'every first value');
  for (let i = 0; i < 20; i++) {
    await publish(s, `node-many-${i}.properties`, `k=${i}-changed`);
  }
  await until(() => [...seen.values()].every((v, i) => v.includes(`k=${i}-changed`)), 'every change');
  // Nobody heard a value of another key.
  for (const [id, values] of seen) {
    const i = id.match(/\d+/)[0];
    for (const v of values) assert.ok(v.startsWith(`k=${i}`), `${id} heard ${v}`);
  }
  assert.deepEqual(c.errors, []);
});

test('64 KiB and Unicode content round-trip exactly', async t => {
  const s = await server(t);
  const c = client(t, s);
  const unicode = 'greeting: 你好，世界 🌍 — ñ, ü, Ω\nemoji: "🚀🔥"\n';
  let big = '';
  for (let i = 0; big.length < 64 * 1024; i++) big += `line${i}: ${'x'.repeat(50)} 配置\n`;
  for (const [id, content] of [['node-unicode.yaml', unicode], ['node-big.yaml', big]]) {
    assert.equal(await c.publishSingle(id, GROUP, content), true);
    assert.equal(await c.getConfig(id, GROUP), content);
    const seen = [];
    c.subscribe({ dataId: id, group: GROUP }, v => seen.push(v));
    await until(() => seen.includes(content), `the listener of ${id}`);
  }
  assert.deepEqual(c.errors, []);
});

test('with authentication on, username and password on every request work', async t => {
  const s = await server(t, { auth: true });
  const c = client(t, s);
  assert.equal(await c.publishSingle('node-auth.yaml', GROUP, 'secured: yes'), true);
  assert.equal(await c.getConfig('node-auth.yaml', GROUP), 'secured: yes');
  const seen = [];
  c.subscribe({ dataId: 'node-auth.yaml', group: GROUP }, v => seen.push(v));
  await until(() => seen.includes('secured: yes'), 'the first value');
  await publish(s, 'node-auth.yaml', 'secured: still');
  await until(() => seen.includes('secured: still'), 'the change');
  assert.equal(await c.remove('node-auth.yaml', GROUP), true);
  assert.deepEqual(c.errors, []);
});

test('a wrong password fails clearly and reads nothing', async t => {
  const s = await server(t, { auth: true });
  await publish(s, 'node-denied.yaml', 'secret: 1');
  // The client never logs in: it sends username and password on every request, and retries
  // any answer but 200/404 until its request timeout. The server answers 403; after 5
  // failures of the pair from one address it answers 429 (login throttling) until the wait
  // is over. Either is the last status the client reports.
  const c = client(t, s, { password: 'not-the-password', requestTimeout: 2000 });
  const denied = /Server Error Status: (403|429)/;
  await assert.rejects(c.publishSingle('node-denied.yaml', GROUP, 'x'), denied);
  await assert.rejects(c.getConfig('node-denied.yaml', GROUP), denied);
  const still = await api(s, 'GET', '/nacos/v1/cs/configs', { dataId: 'node-denied.yaml', group: GROUP });
  assert.equal(still.body, 'secret: 1', 'nothing was written');
});
