"""Round trip of the real Nacos Python client 1.0.0 (HTTP v1, long polling) against a server.

    python v1_client_roundtrip.py --server 127.0.0.1:8848 --namespace NS --data-id D \
        --group G --workdir DIR

Publishes, gets, lists, listens (a callback after a publish from this client and one after
a publish by the driving test), removes. Lines starting with `STEP` report progress. When it
prints `REQUEST {"publish": CONTENT}`, the driving test publishes CONTENT to the same key
and answers `ok` on stdin. Exits non-zero with a `FAIL` line on any failure; the last line
of a success is `PASS`.
"""

import logging
import os
import queue
import time

import nacos
from harness import arg_parser, at_exit, check, fail, request, run_main, step

CALLBACK_TIMEOUT_S = 30.0


CLIENT = None


def shutdown_client():
    """Stops the client's multiprocessing manager: a forked process that would otherwise
    outlive this one (holding our stdout open)."""
    mgr = getattr(CLIENT, "process_mgr", None)
    if mgr is not None:
        mgr.shutdown()


at_exit(shutdown_client)


def main():
    args = arg_parser().parse_args()

    # The client writes snapshots under the working directory and logs under logDir.
    os.makedirs(args.workdir, exist_ok=True)
    os.chdir(args.workdir)
    logging.basicConfig(level=logging.WARNING)
    global CLIENT
    client = CLIENT = nacos.NacosClient(
        args.server,
        namespace=args.namespace,
        username=args.username,
        password=args.password,
        logDir=os.path.join(args.workdir, "logs"),
        log_level=logging.INFO,
    )
    client.set_options(
        snapshot_base=os.path.join(args.workdir, "snapshot"),
        failover_base=os.path.join(args.workdir, "failover"),
    )
    d, g, ns = args.data_id, args.group, args.namespace
    step("client %s at %s namespace=%r key=%s/%s" % (nacos.client.VERSION, args.server, ns, g, d))

    # ---- get of a missing config
    check(client.get_config(d, g, no_snapshot=True) is None, "a fresh key must not exist")
    step("get of a missing config: None")

    # ---- publish (everything in the query string) and get
    v1 = "greeting: 你好, Nacelle\nlist:\n  - a & b = c\n  - '%2B+?'\n"
    check(client.publish_config(d, g, v1, app_name="py-app", config_type="yaml") is True,
          "publish_config did not answer true")
    got = client.get_config(d, g, no_snapshot=True)
    check(got == v1, "get_config after publish: %r" % (got,))
    step("publish + get: ok (%d bytes)" % len(v1.encode("utf-8")))

    # ---- list the namespace's configs (search=accurate, pageSize=1000 by default)
    page = client.get_configs(no_snapshot=True)
    items = [i for i in page.get("pageItems", []) if i.get("dataId") == d and i.get("group") == g]
    check(len(items) == 1, "get_configs lacks the config: %r" % (page,))
    check(items[0].get("content") == v1, "get_configs content: %r" % (items[0],))
    # `public` names the default namespace, whose id is "".
    tenants = {ns, ""} if ns == "public" else {ns}
    check(items[0].get("tenant", "") in tenants, "get_configs tenant: %r" % (items[0],))
    step("get_configs: ok (%d items)" % page.get("totalCount", -1))

    # ---- listen
    events = queue.Queue()

    def on_change(params):
        events.put((time.monotonic(), params))

    client.add_config_watcher(d, g, on_change)
    step("watcher added")

    def await_content(expected, what, since):
        deadline = time.monotonic() + CALLBACK_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                fail("no callback with %r (%s) within %.0f s" % (expected, what, CALLBACK_TIMEOUT_S))
            try:
                at, params = events.get(timeout=left)
            except queue.Empty:
                continue
            if params.get("content") == expected:
                check(params.get("data_id") == d and params.get("group") == g,
                      "callback for another key: %r" % (params,))
                check(params.get("namespace") == ns, "callback namespace: %r" % (params,))
                step("callback after %s in %.0f ms" % (what, (at - since) * 1000))
                return
            step("callback with other content (ignored): %r" % (params.get("content"),))

    # A change published by this client.
    v2 = "greeting: changed by python\n"
    t0 = time.monotonic()
    check(client.publish_config(d, g, v2) is True, "second publish did not answer true")
    await_content(v2, "a python publish", t0)

    # A change published by the driving test.
    v3 = "greeting: changed by the test\n"
    t0 = time.monotonic()
    request({"publish": v3})
    await_content(v3, "a publish by the test", t0)
    check(client.get_config(d, g, no_snapshot=True) == v3, "get_config after the test's publish")

    # ---- remove: the watcher hears of it too (content None)
    t0 = time.monotonic()
    check(client.remove_config(d, g) is True, "remove_config did not answer true")
    await_content(None, "remove", t0)
    check(client.get_config(d, g, no_snapshot=True) is None, "config still there after remove")
    step("remove: ok")

    client.remove_config_watcher(d, g, on_change)
    print("PASS", flush=True)


if __name__ == "__main__":
    # The client's pulling thread may be inside a held long poll: leave without joining it.
    run_main(main)
