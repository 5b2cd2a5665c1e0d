"""The real Nacos Python clients under a review policy (Nacelle's change requests): direct
writes of a covered key are refused, and a reviewed change reaches the client's listener.

    python review_policy.py --api v1|v2 --server 127.0.0.1:8848 --data-id D --group G \
        --workdir DIR --username U --password P

The key exists, holding `--initial`, and a review policy covers its group; the user may
write it. Steps: a listener is added (2.x: it gets the current content); publish, remove and the publish of a
new key of the group are refused (`STEP refused: …` with the client's error); the driving
test checks over HTTP that nothing changed (`REQUEST {"expect": …}`) and then publishes a
change request (`REQUEST {"change": CONTENT}`: opened by this user, approved by another,
published); the listener gets CONTENT and a get returns it. The last line of a success is
`PASS`.
"""

import asyncio
import logging
import os
import queue
import time

from harness import arg_parser, at_exit, check, fail, request, run_main, step

CALLBACK_TIMEOUT_S = 30.0
CHANGED = "limit: 2\n"


def refused(what, e, needs):
    """Checks that the client's error `e` holds every text of `needs`."""
    text = str(e).replace("\n", " ")
    check(all(n in text for n in needs), "%s: not the refusal expected (%r): %r" % (what, needs, text))
    step("refused: %s: %s: %s" % (what, type(e).__name__, text[:300]))


# ---- nacos-sdk-python 1.x: HTTP v1 -----------------------------------------------------

CLIENT = None


def shutdown_client():
    """Stops the 1.x client's multiprocessing manager (a forked process that would outlive
    this one, holding our stdout open)."""
    mgr = getattr(CLIENT, "process_mgr", None)
    if mgr is not None:
        mgr.shutdown()


at_exit(shutdown_client)


def v1(args):
    import nacos
    from nacos.exception import NacosException
    global CLIENT
    d, g = args.data_id, args.group
    client = CLIENT = nacos.NacosClient(args.server, namespace=args.namespace,
                                        username=args.username, password=args.password,
                                        logDir=os.path.join(args.workdir, "logs"))
    client.set_options(snapshot_base=os.path.join(args.workdir, "snapshot"),
                       failover_base=os.path.join(args.workdir, "failover"))
    step("client %s at %s as %s, key %s/%s" % (nacos.client.VERSION, args.server,
                                              args.username, g, d))
    events = queue.Queue()
    client.add_config_watcher(d, g, lambda params: events.put(params.get("content")))

    def await_content(expected, what):
        deadline = time.monotonic() + CALLBACK_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                fail("no callback with %r (%s) within %.0f s" % (expected, what, CALLBACK_TIMEOUT_S))
            try:
                content = events.get(timeout=left)
            except queue.Empty:
                continue
            if content == expected:
                step("callback: %s" % what)
                return
            step("callback with other content (ignored): %r" % (content,))

    # 1.0.0 reads the current content when a watcher is added and calls it only on a change.
    got = client.get_config(d, g, no_snapshot=True)
    check(got == args.initial, "get_config of the current content: %r" % (got,))

    # 1.0.0 turns any 403 into NacosException("Insufficient privilege."): the server's
    # message does not reach the application (the client logs only the status).
    for what, write in (
            ("publish", lambda: client.publish_config(d, g, "limit: 9\n")),
            ("remove", lambda: client.remove_config(d, g)),
            ("publish of a new key", lambda: client.publish_config(d + ".new", g, "new: 1\n"))):
        try:
            answer = write()
        except NacosException as e:
            refused(what, e, ["Insufficient privilege"])
            continue
        fail("%s under a review policy answered %r" % (what, answer))
    request({"expect": args.initial})

    request({"change": CHANGED})
    await_content(CHANGED, "the published change request")
    got = client.get_config(d, g, no_snapshot=True)
    check(got == CHANGED, "get_config after the change request: %r" % (got,))
    step("get_config: the reviewed content")


# ---- nacos-sdk-python 2.x: gRPC ---------------------------------------------------------

async def v2(args):
    from v2.nacos import ClientConfigBuilder, ConfigParam, NacosConfigService, NacosException
    from v2.nacos.common.constants import Constants
    from v2.nacos.utils.net_util import NetUtils
    d, g = args.data_id, args.group
    # The client puts a non-loopback IPv4 address in every payload and raises when there is
    # none (v2_grpc_roundtrip.py): 127.0.0.1 there.
    try:
        NetUtils.get_local_ip()
    except NacosException:
        NetUtils.get_local_ip = staticmethod(lambda: "127.0.0.1")
    config = (ClientConfigBuilder()
              .username(args.username).password(args.password)
              .server_address(args.server)
              .namespace_id(args.namespace)
              .log_dir(os.path.join(args.workdir, "logs"))
              .cache_dir(os.path.join(args.workdir, "cache"))
              .build())
    client = await NacosConfigService.create_config_service(config)
    step("client %s at %s as %s, key %s/%s" % (Constants.CLIENT_VERSION, args.server,
                                              args.username, g, d))
    events = asyncio.Queue()

    async def on_change(tenant, group, data_id, content):
        events.put_nowait((group, data_id, content))

    await client.add_listener(d, g, on_change)

    async def await_content(expected, what):
        deadline = time.monotonic() + CALLBACK_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                fail("no callback with %r (%s) within %.0f s" % (expected, what, CALLBACK_TIMEOUT_S))
            try:
                group, data_id, content = await asyncio.wait_for(events.get(), left)
            except asyncio.TimeoutError:
                continue
            if (group, data_id, content) == (g, d, expected):
                step("callback: %s" % what)
                return
            step("callback with other content (ignored): %r" % (content,))

    await await_content(args.initial, "the current content")

    # 2.0.9 raises NacosException with the server's errorCode (403) and message.
    for what, write in (
            ("publish", lambda: client.publish_config(
                ConfigParam(data_id=d, group=g, content="limit: 9\n"))),
            ("remove", lambda: client.remove_config(ConfigParam(data_id=d, group=g))),
            ("publish of a new key", lambda: client.publish_config(
                ConfigParam(data_id=d + ".new", group=g, content="new: 1\n")))):
        try:
            answer = await write()
        except NacosException as e:
            check(e.error_code == 403, "%s: errorCode %r" % (what, e.error_code))
            refused(what, e, ["review policy", "change request"])
            continue
        fail("%s under a review policy answered %r" % (what, answer))
    await asyncio.get_running_loop().run_in_executor(None, request, {"expect": args.initial})

    await asyncio.get_running_loop().run_in_executor(None, request, {"change": CHANGED})
    await await_content(CHANGED, "the published change request")
    got = await client.get_config(ConfigParam(data_id=d, group=g))
    check(got == CHANGED, "get_config after the change request: %r" % (got,))
    step("get_config: the reviewed content")
    await client.shutdown()


def main():
    ap = arg_parser()
    ap.add_argument("--api", choices=["v1", "v2"], required=True)
    ap.add_argument("--initial", default="limit: 1\n")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    os.chdir(args.workdir)
    logging.basicConfig(level=logging.WARNING)
    if args.api == "v1":
        v1(args)
    else:
        asyncio.run(v2(args))
    print("PASS", flush=True)


if __name__ == "__main__":
    run_main(main)
