// The Node client in a namespace of its own. A file of its own: every NacosConfigClient
// of one process shares the worker of the first one created (the `nacos` package's
// cluster-client), namespace included, so a process holds clients of one namespace only.
'use strict';

const assert = require('node:assert/strict');
const { test } = require('node:test');

const { until, api } = require('../lib/harness');
const { GROUP, client, server } = require('../lib/support');

test('a namespace of its own is isolated from the default one', async t => {
  const s = await server(t);
  const ns = 'node-ns';
  const created = await api(s, 'POST', '/nacos/v1/console/namespaces', {
    customNamespaceId: ns, namespaceName: 'Node', namespaceDesc: 'node client test',
  });
  assert.equal(created.body, 'true');
  const inNs = client(t, s, { namespace: ns });
  const seen = [];
  inNs.subscribe({ dataId: 'node-ns.yaml', group: GROUP }, content => seen.push(content));
  assert.equal(await inNs.publishSingle('node-ns.yaml', GROUP, 'where: ns'), true);
  assert.equal(await inNs.getConfig('node-ns.yaml', GROUP), 'where: ns');
  // Not in the default namespace.
  const inDefault = await api(s, 'GET', '/nacos/v1/cs/configs', { dataId: 'node-ns.yaml', group: GROUP });
  assert.equal(inDefault.status, 404, inDefault.body);
  const direct = await api(s, 'GET', '/nacos/v1/cs/configs', { dataId: 'node-ns.yaml', group: GROUP, tenant: ns });
  assert.equal(direct.body, 'where: ns');
  await until(() => seen.includes('where: ns'), 'the namespace listener');
  await api(s, 'POST', '/nacos/v1/cs/configs', { dataId: 'node-ns.yaml', group: GROUP, tenant: ns, content: 'where: ns 2' });
  await until(() => seen.includes('where: ns 2'), 'the change in the namespace');
  assert.deepEqual(inNs.errors, []);
});

