"""Round trip of the real Nacos Python client 2.0.9 (`v2.nacos`, gRPC through grpcio) against a
server.

    python v2_grpc_roundtrip.py --server 127.0.0.1:8848 --namespace NS --data-id D \
        --group G --workdir DIR [--keepalive-ms MS]

The client has no gRPC port setting: it connects to the port of `--server` + 1000, so the
server's gRPC port must be its HTTP port + 1000. It makes no HTTP call at all (no auth).

Steps: get of a missing config, publish + get, compare-and-set publishes, a 1 MiB config
(larger than any HTTP/2 window, so flow control runs both ways), a listener called after a
publish by this client, an idle spell until the client's keepalive `HealthCheckRequest`, a
callback after a publish by the driving test (which must arrive as a server push on the
bi-stream), remove (the listener hears of it), get after remove. The HTTP/2 keepalive is
short (grpcio PINGs the server every 2 s).

Lines starting with `STEP` report progress. `REQUEST {json}` asks the driving test for
something, which it answers with `ok` on stdin:
  {"publish": CONTENT}   publish CONTENT to the same key (over HTTP);
  {"expect": CONTENT}    check over HTTP that the key holds CONTENT (null: that it is absent).
Exits non-zero with a `FAIL` line on any failure; the last line of a success is `PASS`.
"""

import asyncio
import hashlib
import logging
import os
import time

from harness import arg_parser, check, fail, request, run_main, step
from v2.nacos import (ClientConfigBuilder, ConfigParam, GRPCConfig, NacosConfigService,
                      NacosException)
from v2.nacos.common.constants import Constants
from v2.nacos.utils.net_util import NetUtils

CALLBACK_TIMEOUT_S = 30.0
HEALTH_CHECK_TIMEOUT_S = 30.0
# The client re-sends a batch listen every 5 s only for keys it has not yet synced; once a
# key is in sync it learns of changes only from a server push (or its 5-minute full sync).


def md5(s):
    return hashlib.md5(s.encode("utf-8")).hexdigest()


def allow_loopback_only_hosts():
    """The client puts a non-loopback IPv4 address of the host in every payload's
    `metadata.clientIp` and raises when there is none; fall back to 127.0.0.1 there."""
    original = NetUtils.get_local_ip
    try:
        original()
    except NacosException:
        step("no non-loopback IPv4 interface: clientIp 127.0.0.1")
        NetUtils.get_local_ip = staticmethod(lambda: "127.0.0.1")


async def ask(obj):
    await asyncio.get_running_loop().run_in_executor(None, request, obj)


async def run(args):
    d, g, ns = args.data_id, args.group, args.namespace
    os.makedirs(args.workdir, exist_ok=True)
    os.chdir(args.workdir)
    log_dir = os.path.join(args.workdir, "logs")
    allow_loopback_only_hosts()

    builder = ClientConfigBuilder()
    if args.username:
        builder = builder.username(args.username).password(args.password)
    config = (builder
              .server_address(args.server)
              .namespace_id(ns)
              .log_dir(log_dir)
              .cache_dir(os.path.join(args.workdir, "cache"))
              .log_level(logging.INFO)
              # Short HTTP/2 keepalive: grpcio PINGs the server while the stream is open.
              .grpc_config(GRPCConfig(max_keep_alive_ms=args.keepalive_ms, grpc_timeout=10000))
              .build())
    t0 = time.monotonic()
    client = await NacosConfigService.create_config_service(config)
    conn = client.grpc_client_proxy.rpc_client_manager.get_all_client_entries()
    (rpc,) = conn.values()
    server = rpc.current_connection.server_info
    step("client %s connected to %s:%s (gRPC, from --server %s) in %.0f ms, connection id %s"
         % (Constants.CLIENT_VERSION, server.server_ip, server.server_port, args.server,
            (time.monotonic() - t0) * 1000, rpc.current_connection.get_connection_id()))
    check(await client.server_health(), "server_health is false after connecting")
    # The client's keepalive: a unary HealthCheckRequest once it was idle for 5 s (checked
    # every 5 s). Counted here, since the client leaves no other trace of it.
    health_checks = []
    send_health_check = rpc.send_health_check

    async def counted_health_check():
        ok = await send_health_check()
        health_checks.append(ok)
        return ok

    rpc.send_health_check = counted_health_check
    step("namespace=%r key=%s/%s" % (ns, g, d))

    # ---- get of a missing config: the client turns "config data not exist" into ""
    got = await client.get_config(ConfigParam(data_id=d, group=g))
    check(got == "", "a fresh key must not exist, got %r" % (got,))
    step("get of a missing config: ''")

    # ---- publish and get
    v1 = "greeting: 你好, Nacelle\nlist:\n  - a & b = c\n  - '%2B+?'\n"
    ok = await client.publish_config(ConfigParam(data_id=d, group=g, content=v1, type="yaml",
                                                 app_name="py2-app"))
    check(ok is True, "publish_config answered %r" % (ok,))
    got = await client.get_config(ConfigParam(data_id=d, group=g))
    check(got == v1, "get_config after publish: %r" % (got,))
    await ask({"expect": v1})
    step("publish + get: ok (%d bytes), seen over HTTP too" % len(v1.encode("utf-8")))

    # ---- compare-and-set
    try:
        await client.publish_config(ConfigParam(data_id=d, group=g, content="lost: true\n",
                                                cas_md5=md5("something else")))
        fail("a publish with a wrong casMd5 succeeded")
    except NacosException as e:
        check("Cas publish fail" in str(e), "CAS failure message: %s" % (e,))
        step("publish with a wrong casMd5 refused: %s" % (e,))
    v1b = v1 + "cas: true\n"
    ok = await client.publish_config(ConfigParam(data_id=d, group=g, content=v1b,
                                                 cas_md5=md5(v1)))
    check(ok is True, "publish with the right casMd5 answered %r" % (ok,))
    got = await client.get_config(ConfigParam(data_id=d, group=g))
    check(got == v1b, "get_config after the CAS publish: %r" % (got,))
    step("publish with the right casMd5: ok")

    # ---- a config larger than the HTTP/2 windows (64 KiB default), both ways
    big_id = d + ".large"
    line = "0123456789abcdef" * 4 + "\n"
    big = "# large config\n" + line * ((1 << 20) // len(line))
    t0 = time.monotonic()
    check(await client.publish_config(ConfigParam(data_id=big_id, group=g, content=big)) is True,
          "publish of the large config")
    got = await client.get_config(ConfigParam(data_id=big_id, group=g))
    check(got == big, "large config read back differs (%d of %d chars)"
          % (len(got or ""), len(big)))
    check(await client.remove_config(ConfigParam(data_id=big_id, group=g)) is True,
          "remove of the large config")
    step("1 MiB config: publish + get + remove in %.0f ms" % ((time.monotonic() - t0) * 1000))

    # ---- listen
    events = asyncio.Queue()

    async def on_change(tenant, group, data_id, content):
        events.put_nowait((time.monotonic(), tenant, group, data_id, content))

    await client.add_listener(d, g, on_change)
    step("listener added")

    async def await_content(expected, what, since):
        deadline = time.monotonic() + CALLBACK_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                fail("no callback with %r (%s) within %.0f s" % (expected, what, CALLBACK_TIMEOUT_S))
            try:
                at, tenant, group, data_id, content = await asyncio.wait_for(events.get(), left)
            except asyncio.TimeoutError:
                continue
            if content == expected:
                check(data_id == d and group == g,
                      "callback for another key: %r" % ((tenant, group, data_id),))
                check(tenant == ns, "callback namespace: %r" % (tenant,))
                step("callback after %s in %.0f ms" % (what, (at - since) * 1000))
                return
            step("callback with other content (ignored): %r" % (content,))

    def pushes_received():
        """`ConfigChangeNotifyRequest`s for our key that the client logged (it has no other
        trace of them): (dataId, group, tenant) as the server sent them."""
        path = os.path.join(log_dir, Constants.CONFIG_MODULE + ".log")
        found = []
        with open(path, encoding="utf-8") as f:
            for entry in f:
                if "received config change push," not in entry:
                    continue
                fields = dict(p.split(":", 1) for p in entry.strip().split("push,", 1)[1].split(",")
                              if ":" in p)
                if fields.get("dataId") == d and fields.get("group") == g:
                    found.append(fields.get("tenant"))
        return found

    # A change published by this client (the listen may or may not be registered yet: the
    # callback comes from a push or from the client's next batch listen).
    v2 = "greeting: changed by python\n"
    t0 = time.monotonic()
    check(await client.publish_config(ConfigParam(data_id=d, group=g, content=v2)) is True,
          "second publish")
    await await_content(v2, "a python publish", t0)

    # Idle until the client's keepalive HealthCheckRequest went out (at most ~10 s).
    t0 = time.monotonic()
    seen = len(health_checks)
    while len(health_checks) == seen:
        check(time.monotonic() - t0 < HEALTH_CHECK_TIMEOUT_S,
              "no HealthCheckRequest within %.0f s of idling" % HEALTH_CHECK_TIMEOUT_S)
        await asyncio.sleep(0.1)
    check(all(health_checks), "a HealthCheckRequest failed: %r" % (health_checks,))
    step("idle: %d HealthCheckRequest(s) answered, after %.1f s"
         % (len(health_checks), time.monotonic() - t0))

    # A change published by the driving test over HTTP. The client is in sync with the
    # server now, so only a push on the bi-stream can tell it.
    pushes_before = len(pushes_received())
    v3 = "greeting: changed by the test\n"
    t0 = time.monotonic()
    await ask({"publish": v3})
    await await_content(v3, "a publish by the test (server push)", t0)
    pushes = pushes_received()
    check(len(pushes) > pushes_before,
          "the callback came without a logged ConfigChangeNotifyRequest")
    check(all(t == ns for t in pushes), "pushes carried tenants %r, expected %r" % (pushes, ns))
    step("pushes received for the key: %d, tenant echoed as %r" % (len(pushes), ns))
    got = await client.get_config(ConfigParam(data_id=d, group=g))
    check(got == v3, "get_config after the test's publish: %r" % (got,))

    # ---- remove: the listener hears of it (content "")
    t0 = time.monotonic()
    check(await client.remove_config(ConfigParam(data_id=d, group=g)) is True,
          "remove_config did not answer true")
    await await_content("", "remove", t0)
    got = await client.get_config(ConfigParam(data_id=d, group=g))
    check(got == "", "config still there after remove: %r" % (got,))
    await ask({"expect": None})
    step("remove: ok, gone over HTTP too")

    await client.remove_listener(d, g, on_change)
    check(await client.server_health(), "server_health is false at the end")
    await client.shutdown()
    step("client shut down")


def main():
    ap = arg_parser()
    ap.add_argument("--keepalive-ms", type=int, default=2000)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run(args))
    print("PASS", flush=True)


if __name__ == "__main__":
    # grpcio's threads must not keep the process alive.
    run_main(main)
