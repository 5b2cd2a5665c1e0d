// Nacelle's review policies and change requests (docs/http-api.md) with the real Node.js
// client: a policy on a group refuses the client's direct writes with the server's 403 and
// message; a change request opened by alice, approved by bob (who holds the review action
// `a`) and published by alice reaches alice's subscriber. A file of its own: the client
// runs as alice, and every NacosConfigClient of a process shares the first one's settings.
'use strict';

const assert = require('node:assert/strict');
const { test } = require('node:test');

const { until, api, login, callAs } = require('../lib/harness');
const { client, server } = require('../lib/support');

const REVIEWED = 'REVIEWED';

test('a review policy refuses direct writes; a reviewed change reaches the subscriber', async t => {
  // The client re-sends a refused write without pause until its request timeout (hundreds
  // of requests a second). A refused write does not use the address's write budget (the
  // server checks the rate only for writes that would go ahead), so with the default write
  // rate limit on, the status the client finally reports is still the policy's 403.
  const s = await server(t, { auth: true });
  for (const [name, password, role, action] of [
    ['alice', 'Alice-Pass-123', 'authors', 'rw'],
    ['bob', 'Bob-Pass-456', 'reviewers', 'rwa'],
  ]) {
    for (const [p, params] of [
      ['/nacos/v1/auth/users', { username: name, password }],
      ['/nacos/v1/auth/roles', { role, username: name }],
      ['/nacos/v1/auth/permissions', { role, resource: '*:*:*', action }],
    ]) {
      const r = await api(s, 'POST', p, params);
      assert.equal(r.status, 200, `${p}: ${r.body}`);
    }
  }
  const id = 'node-reviewed.yaml';
  // The key exists before the policy.
  let r = await api(s, 'POST', '/nacos/v1/cs/configs', { dataId: id, group: REVIEWED, content: 'limit: 1' });
  assert.equal(r.body, 'true');
  r = await api(s, 'POST', '/nacos/nacelle/v1/review-policies', { groupPattern: REVIEWED, requiredApprovals: '1' });
  assert.equal(r.status, 200, r.body);

  // A refused write fails only when the client's request timeout is over: a short one.
  const c = client(t, s, { username: 'alice', password: 'Alice-Pass-123', requestTimeout: 2000 });
  const seen = [];
  c.subscribe({ dataId: id, group: REVIEWED }, content => seen.push(content));
  await until(() => seen.includes('limit: 1'), 'the current value');

  // Direct writes: the client throws `Server Error Status: 403` with the server's body.
  const refused = e => {
    assert.match(e.message, /Server Error Status: 403/);
    assert.match(String(e.body), /review policy 'REVIEWED'.*change request/);
    return true;
  };
  await assert.rejects(c.publishSingle(id, REVIEWED, 'limit: 9'), refused);
  await assert.rejects(c.remove(id, REVIEWED), refused);
  await assert.rejects(c.publishSingle(`${id}.new`, REVIEWED, 'new: 1'), refused, 'a new key of the group too');
  r = await api(s, 'GET', '/nacos/v1/cs/configs', { dataId: id, group: REVIEWED });
  assert.equal(r.body, 'limit: 1', 'nothing was written');
  r = await api(s, 'GET', '/nacos/v1/cs/configs', { dataId: `${id}.new`, group: REVIEWED });
  assert.equal(r.status, 404, 'nothing was created');
  // How often the client asked before giving up (the server's own count of the refusals).
  const metrics = await (await fetch(s.url('/metrics'))).text();
  const count = method => metrics.split('\n')
    .filter(l => l.startsWith('nacelle_http_requests_total{') && l.includes('route="/nacos/v1/cs/configs"') &&
      l.includes(`method="${method}"`) && l.includes('status="403"'))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
  console.log(`node client: refused writes sent ${count('POST')} POSTs and ${count('DELETE')} DELETEs within its 2 s request timeouts`);
  assert.ok(count('POST') >= 2 && count('DELETE') >= 1, metrics);
  assert.equal(await c.publishSingle(id, 'OPEN', 'free: 1'), true, 'a group without a policy');

  // The change request: alice opens it, bob approves, alice publishes.
  const alice = await login(s, 'alice', 'Alice-Pass-123');
  const bob = await login(s, 'bob', 'Bob-Pass-456');
  r = await callAs(s, alice, 'POST', '/nacos/nacelle/v1/changes', {}, {
    title: 'raise the limit',
    items: [{ group: REVIEWED, dataId: id, content: 'limit: 2' }],
  });
  assert.equal(r.status, 200, r.body);
  const cr = { id: String(JSON.parse(r.body).data.id) };
  r = await callAs(s, alice, 'POST', '/nacos/nacelle/v1/change/publish', cr);
  assert.equal(r.status, 409, `not before its approval: ${r.body}`);
  r = await callAs(s, alice, 'POST', '/nacos/nacelle/v1/change/approve', cr);
  assert.equal(r.status, 403, `never by its author: ${r.body}`);
  r = await callAs(s, bob, 'POST', '/nacos/nacelle/v1/change/approve', cr);
  assert.equal(r.status, 200, r.body);
  assert.equal(JSON.parse(r.body).data.state, 'approved');
  r = await callAs(s, alice, 'POST', '/nacos/nacelle/v1/change/publish', cr);
  assert.equal(r.status, 200, r.body);
  assert.equal(JSON.parse(r.body).data.state, 'published');

  await until(() => seen.includes('limit: 2'), 'the reviewed change');
  assert.equal(await c.getConfig(id, REVIEWED), 'limit: 2');
  // The subscription itself never failed.
  assert.deepEqual(c.errors, []);
});
