"""The Nacos 3 operator SDK for Python, `nacos-maintainer-sdk-python` 0.5.3, against a server with
authentication on.

    python maintainer_sdk.py --server 127.0.0.1:8848 --data-id D --group G --workdir DIR \
        --username U --password P --mode admin|wrong-password|no-permission

What the SDK has. Its only service is `NacosAIMaintainerService` (MCP servers, A2A agents): 0.5.3
(and its repository) has no config, history, listener or namespace call. What every call of it
goes through is its transport: `ClientHttpProxy` built by the SDK's own factory, which logs in
with username/password (`POST /nacos/v1/auth/users/login`, both as query parameters), sends the
token in the `accessToken` header, sends `params` in the query and `data` as the body (a dict as
a form), retries three times, and raises `NacosException(HTTP status, body)` for a non-200.
This script drives the v3 admin config API through that transport, with exactly the paths,
methods and parameters of the Java `nacos-maintainer-client` (3.2.1-2026.03.30,
`NacosConfigMaintainerServiceImpl` and `AbstractCoreMaintainerService`): GET and DELETE in the
query, POST and PUT as a form, clone as a JSON body. A listener is held open by the
`nacos-sdk-python` 3.x client the SDK depends on (`v2.nacos`, gRPC, server port + 1000).

Modes:
  admin           namespaces, config (publish, get, list/search, metadata, beta, batch delete,
                  clone), history (list, detail, previous, configs of a namespace), listeners
                  (by config, by IP), and the SDK's own MCP call (Nacelle has no AI registry:
                  Spring's 404);
  wrong-password  every call fails with the login's 403, nothing is written;
  no-permission   a user without permissions: logged in, every call 403, nothing written.

Lines starting with `STEP` report progress; the last line of a success is `PASS`.
"""

import asyncio
import hashlib
import json
import logging
import os

from harness import arg_parser, check, fail, run_main, step

CALLBACK_TIMEOUT_S = 30.0

NAMESPACE = "/nacos/v3/admin/core/namespace"
CONFIG = "/nacos/v3/admin/cs/config"
HISTORY = "/nacos/v3/admin/cs/history"
LISTENER = "/nacos/v3/admin/cs/listener"


def md5(s):
    return hashlib.md5(s.encode("utf-8")).hexdigest()


class Admin:
    """The SDK's transport, called as the Java maintainer client calls each endpoint."""

    def __init__(self, proxy):
        self.proxy = proxy

    async def raw(self, method, path, params=None, data=None, headers=None, ns="", group="",
                  data_id=None):
        from maintainer.common.auth import RequestResource
        from maintainer.transport.client_http_proxy import HttpRequest
        # Like the Java client (and HttpUtils.encodingParams), blank values are not sent.
        params = {k: v for k, v in (params or {}).items() if v not in (None, "")}
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if v not in (None, "")}
        req = HttpRequest(path=path, method=method,
                          request_resource=RequestResource("config", ns, group, data_id),
                          headers=dict(headers or {}), params=params, data=data)
        return await self.proxy.request(req)

    async def call(self, method, path, **kw):
        r = await self.raw(method, path, **kw)
        check(set(r) == {"code", "message", "data"}, "not a Result envelope: %r" % (r,))
        check(r["code"] == 0 and r["message"] == "success", "%s %s: %r" % (method, path, r))
        return r["data"]

    async def refused(self, status, part, method, path, **kw):
        from v2.nacos import NacosException
        try:
            r = await self.raw(method, path, **kw)
        except NacosException as e:
            check(e.error_code == status, "%s %s: status %r, expected %d: %s"
                  % (method, path, e.error_code, status, e.message))
            check(part in str(e.message), "%s %s: %r not in %s" % (method, path, part, e.message))
            return str(e.message)
        fail("%s %s answered %r, expected HTTP %d" % (method, path, r, status))

    # ---- namespaces (AbstractCoreMaintainerService)
    async def create_namespace(self, ns_id, name, desc):
        return await self.call("POST", NAMESPACE, data={
            "namespaceId": ns_id, "namespaceName": name, "namespaceDesc": desc})

    async def get_namespace(self, ns_id):
        return await self.call("GET", NAMESPACE, params={"namespaceId": ns_id})

    # ---- config (NacosConfigMaintainerServiceImpl)
    async def publish(self, data_id, group, ns, content, app=None, tags=None, desc=None,
                      typ=None, beta_ips=None):
        headers = {"betaIps": beta_ips} if beta_ips else None
        return await self.call("POST", CONFIG, data={
            "dataId": data_id, "groupName": group, "namespaceId": ns, "content": content,
            "appName": app, "configTags": tags, "desc": desc, "type": typ},
            headers=headers, ns=ns, group=group, data_id=data_id)

    async def get(self, data_id, group, ns):
        return await self.call("GET", CONFIG, params={
            "dataId": data_id, "groupName": group, "namespaceId": ns})

    async def delete(self, data_id, group, ns):
        return await self.call("DELETE", CONFIG, params={
            "dataId": data_id, "groupName": group, "namespaceId": ns})

    async def search(self, ns, search, data_id="", group="", detail=None, typ=None,
                     page_no=1, page_size=100):
        return await self.call("GET", CONFIG + "/list", params={
            "dataId": data_id, "groupName": group, "namespaceId": ns, "search": search,
            "configDetail": detail, "type": typ, "pageNo": str(page_no),
            "pageSize": str(page_size)})

    async def history(self, data_id, group, ns, page_no=1, page_size=10):
        return await self.call("GET", HISTORY + "/list", params={
            "dataId": data_id, "groupName": group, "namespaceId": ns,
            "pageNo": str(page_no), "pageSize": str(page_size)})


async def admin_mode(args, svc):
    a = Admin(svc.http_proxy)
    g = args.group

    # ---- namespaces: create, get, list, check, update, delete
    check(await a.create_namespace("py-ops", "Ops", "the ops team") is True, "create")
    ns = await a.get_namespace("py-ops")
    check(ns == {"namespace": "py-ops", "namespaceShowName": "Ops",
                 "namespaceDesc": "the ops team", "quota": 200, "configCount": 0, "type": 1},
          "namespace: %r" % (ns,))
    listed = await a.call("GET", NAMESPACE + "/list")
    check([n["namespace"] for n in listed] == ["public", "py-ops"], "list: %r" % (listed,))
    check(listed[0]["type"] == 0 and listed[0]["namespaceShowName"] == "public",
          "public: %r" % (listed[0],))
    check(await a.call("GET", NAMESPACE + "/check", params={"namespaceId": "py-ops"}) == 1,
          "check of py-ops")
    check(await a.call("GET", NAMESPACE + "/check", params={"namespaceId": "py-none"}) == 0,
          "check of an absent namespace")
    check(await a.call("PUT", NAMESPACE, data={"namespaceId": "py-ops",
                                               "namespaceName": "Operations",
                                               "namespaceDesc": "renamed"}) is True, "update")
    ns = await a.get_namespace("py-ops")
    check((ns["namespaceShowName"], ns["namespaceDesc"]) == ("Operations", "renamed"),
          "updated: %r" % (ns,))
    await a.refused(400, "namespace already exist", "POST", NAMESPACE,
                    data={"namespaceId": "py-ops", "namespaceName": "again"})
    await a.refused(404, "namespace not exist", "GET", NAMESPACE,
                    params={"namespaceId": "py-none"})
    step("namespaces: create, get, list, check, update, refusals")

    # ---- config: publish, get, metadata, list/search, delete, batch delete
    content = "server:\n  port: 8080\n"
    check(await a.publish(args.data_id, g, "py-ops", content, app="billing", tags="blue,green",
                          desc="the app", typ="yaml") is True, "publish")
    c = await a.get(args.data_id, g, "py-ops")
    expected = {"dataId": args.data_id, "groupName": g, "namespaceId": "py-ops",
                "content": content, "md5": md5(content), "type": "yaml", "appName": "billing",
                "desc": "the app", "configTags": "blue,green", "createUser": args.username,
                "createIp": "127.0.0.1"}
    for k, v in expected.items():
        check(c.get(k) == v, "config %s: %r, expected %r (%r)" % (k, c.get(k), v, c))
    # ConfigBasicInfo.id is a Long written by Jackson's ToStringSerializer: a string.
    check(isinstance(c["id"], str) and int(c["id"]) > 0, "id: %r" % (c,))
    check(c["modifyTime"] >= c["createTime"] > 0, "times: %r" % (c,))
    config_id = int(c["id"])
    check(await a.call("PUT", CONFIG + "/metadata", data={
        "dataId": args.data_id, "groupName": g, "namespaceId": "py-ops",
        "desc": "described again", "configTags": "red"}) is True, "metadata")
    c = await a.get(args.data_id, g, "py-ops")
    check((c["desc"], c["configTags"], c["content"]) == ("described again", "red", content),
          "after metadata: %r" % (c,))
    check(await a.publish("svc-b.json", g, "py-ops", '{"level":"gold"}', typ="json") is True,
          "publish b")
    check(await a.publish("other.properties", "OTHER", "py-ops", "level=gold",
                          typ="properties") is True, "publish other")
    page = await a.search("py-ops", "accurate")
    check(page["totalCount"] == 3 and sorted(i["dataId"] for i in page["pageItems"])
          == sorted([args.data_id, "svc-b.json", "other.properties"]), "list: %r" % (page,))
    page = await a.search("py-ops", "accurate", data_id="svc-b.json", group=g)
    check([i["dataId"] for i in page["pageItems"]] == ["svc-b.json"], "accurate: %r" % (page,))
    page = await a.search("py-ops", "blur", data_id="*svc*")
    check([i["dataId"] for i in page["pageItems"]] == ["svc-b.json"], "blur: %r" % (page,))
    page = await a.search("py-ops", "blur", detail="*gold*")
    check(sorted(i["dataId"] for i in page["pageItems"]) == ["other.properties", "svc-b.json"],
          "configDetail: %r" % (page,))
    page = await a.search("py-ops", "blur", typ="json")
    check([i["dataId"] for i in page["pageItems"]] == ["svc-b.json"], "type: %r" % (page,))
    page = await a.search("py-ops", "blur", page_no=2, page_size=2)
    check((page["totalCount"], page["pageNumber"], page["pagesAvailable"],
           len(page["pageItems"])) == (3, 2, 2, 1), "paging: %r" % (page,))
    await a.refused(404, "Config not exist", "GET", CONFIG,
                    params={"dataId": "absent.txt", "groupName": g, "namespaceId": "py-ops"})
    await a.refused(400, "groupName", "GET", CONFIG,
                    params={"dataId": "absent.txt", "namespaceId": "py-ops"})
    step("config: publish, get, metadata, list accurate/blur/detail/type/paging, refusals")

    # ---- beta: publish with the betaIps header, query, stop
    check(await a.publish("svc-b.json", g, "py-ops", '{"level":"beta"}', typ="json",
                          beta_ips="127.0.0.2") is True, "beta publish")
    beta = await a.call("GET", CONFIG + "/beta", params={
        "dataId": "svc-b.json", "groupName": g, "namespaceId": "py-ops"})
    check(beta["content"] == '{"level":"beta"}' and beta["grayName"] == "beta",
          "beta: %r" % (beta,))
    rule = json.loads(beta["grayRule"])
    check(rule == {"type": "beta", "version": "1.0.0", "expr": "127.0.0.2",
                   "priority": 2147483647}, "grayRule: %r" % (rule,))
    check((await a.get("svc-b.json", g, "py-ops"))["content"] == '{"level":"gold"}',
          "the formal config unchanged")
    check(await a.call("DELETE", CONFIG + "/beta", params={
        "dataId": "svc-b.json", "groupName": g, "namespaceId": "py-ops"}) is True, "stop beta")
    await a.refused(404, "not in beta", "GET", CONFIG + "/beta", params={
        "dataId": "svc-b.json", "groupName": g, "namespaceId": "py-ops"})
    step("beta: publish (betaIps header), query (grayRule), stop")

    # ---- clone into the default namespace (a JSON body, as the Java client's postJson)
    r = await a.call("POST", CONFIG + "/clone",
                     params={"namespaceId": "public", "policy": "ABORT"},
                     data=json.dumps([{"configId": config_id, "targetGroupName": "CLONED",
                                       "targetDataId": "copy.yaml"}]),
                     headers={"Content-Type": "application/json"})
    check(r.get("succCount") == 1 and r.get("skipCount") == 0, "clone: %r" % (r,))
    copy = await a.get("copy.yaml", "CLONED", "public")
    check((copy["content"], copy["type"], copy["namespaceId"]) == (content, "yaml", "public"),
          "the copy: %r" % (copy,))
    check(await a.delete("copy.yaml", "CLONED", "public") is True, "delete copy")
    step("clone: ABORT into public, the copy read back")

    # ---- history: list, detail, previous, configs of a namespace
    check(await a.publish("hist.properties", g, "py-ops", "v=1", typ="properties") is True, "v1")
    check(await a.publish("hist.properties", g, "py-ops", "v=2", typ="properties") is True, "v2")
    hist_id = int((await a.get("hist.properties", g, "py-ops"))["id"])
    h = await a.history("hist.properties", g, "py-ops")
    items = h["pageItems"]
    check(h["totalCount"] == 2 and [i["opType"].strip() for i in items] == ["U", "I"],
          "history: %r" % (h,))
    for i in items:
        check((i["dataId"], i["groupName"], i["namespaceId"], i["srcUser"], i["srcIp"],
               i["publishType"]) == ("hist.properties", g, "py-ops", args.username,
                                     "127.0.0.1", "formal"), "history item: %r" % (i,))
    check(int(items[0]["id"]) > int(items[1]["id"]), "newest first: %r" % (items,))
    nid = items[0]["id"]
    d = await a.call("GET", HISTORY, params={"dataId": "hist.properties", "groupName": g,
                                             "namespaceId": "py-ops", "nid": str(nid)})
    check((d["content"], d["md5"], str(d["id"]), d["opType"].strip())
          == ("v=1", md5("v=1"), str(nid), "U"),
          "an update's entry holds the replaced version: %r" % (d,))
    await a.refused(403, "Please check dataId, group or namespaceId.", "GET", HISTORY,
                    params={"dataId": "other.properties", "groupName": g,
                            "namespaceId": "py-ops", "nid": str(nid)})
    prev = await a.call("GET", HISTORY + "/previous", params={
        "dataId": "hist.properties", "groupName": g, "namespaceId": "py-ops",
        "id": str(hist_id)})
    check(str(prev["id"]) == str(nid) and prev["content"] == "v=1", "previous: %r" % (prev,))
    configs = await a.call("GET", HISTORY + "/configs", params={"namespaceId": "py-ops"})
    check(sorted((x["groupName"], x["dataId"]) for x in configs)
          == sorted([(g, args.data_id), (g, "svc-b.json"), ("OTHER", "other.properties"),
                     (g, "hist.properties")]),
          "configs of py-ops: %r" % (configs,))
    step("history: list (U, I; srcUser %s), detail, 403 for another key, previous, configs"
         % args.username)

    # ---- listeners: a real gRPC listener of the 3.x client, seen by config and by IP
    await listeners(args, a)

    # ---- delete, batch delete, namespace delete
    check(await a.delete(args.data_id, g, "py-ops") is True, "delete")
    await a.refused(404, "Config not exist", "GET", CONFIG,
                    params={"dataId": args.data_id, "groupName": g, "namespaceId": "py-ops"})
    page = await a.search("py-ops", "accurate")
    ids = ",".join(str(i["id"]) for i in page["pageItems"]) + ",999999"
    check(await a.call("DELETE", CONFIG + "/batch", params={"ids": ids}) is True, "batch")
    check((await a.search("py-ops", "accurate"))["totalCount"] == 0, "all deleted")
    check(await a.call("DELETE", NAMESPACE, params={"namespaceId": "py-ops"}) is True,
          "delete namespace")
    check(await a.call("GET", NAMESPACE + "/check", params={"namespaceId": "py-ops"}) == 0,
          "namespace gone")
    step("delete, batch delete (an unknown id skipped), namespace delete")

    # ---- the SDK's own call: Nacelle is a config center, with no AI registry
    from v2.nacos import NacosException
    try:
        r = await svc.list_mcp_servers("", "any", 1, 10)
        fail("list_mcp_servers answered %r" % (r,))
    except NacosException as e:
        check(e.error_code == 404, "list_mcp_servers: %r %s" % (e.error_code, e.message))
        step("the SDK's list_mcp_servers: 404 (no AI registry in Nacelle)")


async def listeners(args, a):
    """The 3.x Python client listens with the md5 of what its cache holds and, once in sync,
    sends no further listen request until a push (it then re-listens with the md5 it had,
    learns of the change and fetches). So each client reads the config first: it listens
    with that md5, and the server shows it (as Nacos shows the md5 of the last listen)."""
    from v2.nacos import ClientConfigBuilder, ConfigParam, NacosConfigService
    g = args.group
    for ns, content in (("", "w=1"), ("py-ops", "w=ns")):
        check(await a.publish("watched.properties", g, ns or "public", content) is True, "watched")
    empty = await a.call("GET", CONFIG + "/listener", params={
        "dataId": "watched.properties", "groupName": g, "namespaceId": "public",
        "aggregation": "true"})
    check(empty == {"queryType": "config", "listenersStatus": {}}, "no listener: %r" % (empty,))

    received = []
    clients = []

    async def on_change(*change):
        received.append(change[-1])

    for ns, content in (("", "w=1"), ("py-ops", "w=ns")):
        config = (ClientConfigBuilder().username(args.username).password(args.password)
                  .server_address(args.server).namespace_id(ns)
                  .log_dir(os.path.join(args.workdir, "client-logs"))
                  .cache_dir(os.path.join(args.workdir, "cache-" + (ns or "public")))
                  .log_level(logging.INFO).build())
        client = await NacosConfigService.create_config_service(config)
        clients.append(client)
        got = await client.get_config(ConfigParam(data_id="watched.properties", group=g))
        check(got == content, "the client read %r" % (got,))
        await client.add_listener("watched.properties", g, on_change)

    async def until(what, cond):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CALLBACK_TIMEOUT_S
        while True:
            value = await cond()
            if value:
                return value
            if loop.time() > deadline:
                fail("timed out after %.0f s waiting for %s" % (CALLBACK_TIMEOUT_S, what))
            await asyncio.sleep(0.05)

    async def by_config(ns):
        return await a.call("GET", CONFIG + "/listener", params={
            "dataId": "watched.properties", "groupName": g, "namespaceId": ns,
            "aggregation": "true"})

    async def by_ip(all_namespaces):
        return await a.call("GET", LISTENER, params={
            "ip": "127.0.0.1", "all": "true" if all_namespaces else "false",
            "aggregation": "true"})

    try:
        async def listening(ns, content):
            info = await by_config(ns)
            check(info["queryType"] == "config", "by config: %r" % (info,))
            return info["listenersStatus"] == {"127.0.0.1": md5(content)}
        await until("the listener on watched.properties with the md5 of w=1",
                    lambda: listening("public", "w=1"))
        await until("the listener in py-ops with the md5 of w=ns",
                    lambda: listening("py-ops", "w=ns"))

        info = await by_ip(True)
        check(info == {"queryType": "ip", "listenersStatus": {
            "watched.properties+" + g: md5("w=1"),
            "watched.properties+" + g + "+py-ops": md5("w=ns")}}, "by IP, all: %r" % (info,))
        info = await by_ip(False)
        check(info["listenersStatus"] == {"watched.properties+" + g: md5("w=1")},
              "by IP, default namespace: %r" % (info,))

        # A publish reaches the listener (a push, then the client's fetch).
        check(await a.publish("watched.properties", g, "public", "w=2") is True, "change")

        async def got_change():
            return "w=2" in received
        await until("the change reaching the listener", got_change)

        await clients[0].remove_listener("watched.properties", g, on_change)
        await clients[0].shutdown()

        async def gone():
            return (await by_config("public"))["listenersStatus"] == {}
        await until("the listener gone", gone)
        info = await by_ip(True)
        check(info["listenersStatus"] == {"watched.properties+" + g + "+py-ops": md5("w=ns")},
              "by IP after the default namespace's client left: %r" % (info,))
        step("listeners: by config (127.0.0.1 -> md5), by IP (all / default namespace), "
             "a change pushed to the listener, gone when its client leaves")
    finally:
        for client in clients[1:]:
            await client.shutdown()
    for ns in ("public", "py-ops"):
        check(await a.delete("watched.properties", g, ns) is True, "delete watched")


async def refused_mode(args, svc):
    """A wrong password or a user without permissions: every call is refused with 403. With a
    wrong password every call is the SDK's login failing again (Nacelle throttles a burst of
    failed logins with 429), so that mode makes one read and one write."""
    from v2.nacos import NacosException
    a = Admin(svc.http_proxy)
    calls = [
        ("GET", NAMESPACE + "/list", {}, None),
        ("POST", CONFIG, {}, {"dataId": args.data_id, "groupName": args.group,
                              "content": "written"}),
    ]
    if args.mode == "no-permission":
        calls += [
            ("GET", NAMESPACE, {"namespaceId": "public"}, None),
            ("GET", NAMESPACE + "/check", {"namespaceId": "public"}, None),
            ("POST", NAMESPACE, {}, {"namespaceId": "py-intruders", "namespaceName": "In"}),
            ("GET", CONFIG, {"dataId": "guarded.txt", "groupName": args.group}, None),
            ("GET", CONFIG + "/list", {"search": "blur", "dataId": "*"}, None),
            ("DELETE", CONFIG, {"dataId": "guarded.txt", "groupName": args.group}, None),
            ("GET", HISTORY + "/list", {"dataId": "guarded.txt", "groupName": args.group},
             None),
            ("GET", HISTORY + "/configs", {"namespaceId": "public"}, None),
            ("GET", CONFIG + "/listener", {"dataId": "guarded.txt", "groupName": args.group},
             None),
            ("GET", LISTENER, {"ip": "127.0.0.1", "all": "true"}, None),
        ]
    answered = []
    for method, path, params, data in calls:
        try:
            r = await a.raw(method, path, params=params, data=data)
        except NacosException as e:
            if e.error_code == 403:
                step("refused: %s %s: 403 %s" % (method, path, str(e.message)[:160]))
            else:
                answered.append("%s %s: %r %s" % (method, path, e.error_code, e.message))
            continue
        answered.append("%s %s answered %r" % (method, path, r))
    check(not answered, "not refused with 403: " + " | ".join(answered))


async def run(args):
    from maintainer.ai.nacos_ai_maintainer_service import NacosAIMaintainerService
    from v2.nacos import ClientConfigBuilder
    os.makedirs(args.workdir, exist_ok=True)
    os.chdir(args.workdir)
    config = (ClientConfigBuilder().username(args.username).password(args.password)
              .server_address(args.server)
              .log_dir(os.path.join(args.workdir, "logs"))
              .log_level(logging.DEBUG).build())
    svc = await NacosAIMaintainerService.create_ai_service(config)
    if args.mode == "admin":
        await admin_mode(args, svc)
    else:
        await refused_mode(args, svc)
    print("PASS", flush=True)


def main():
    ap = arg_parser()
    ap.add_argument("--mode", choices=["admin", "wrong-password", "no-permission"],
                    required=True)
    args = ap.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    run_main(main)
