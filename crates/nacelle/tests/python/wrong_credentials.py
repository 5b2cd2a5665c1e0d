"""The real Nacos Python clients with a wrong password: their calls must fail clearly (a
403 / `user not found!`), never hang or answer as if the config were missing.

    python wrong_credentials.py --api v1|v2 --server 127.0.0.1:8848 --data-id D --group G \
        --workdir DIR --username U --password WRONG

Prints `STEP refused: …` with the client's error and `PASS`, or a `FAIL` line.
"""

import asyncio
import logging
import os

from harness import arg_parser, check, fail, run_main, step


def refused(e):
    # 1.0.0 surfaces the login's HTTP 403; 2.0.9 its own "get access token failed" after
    # the server answered its login 403 (its log says so).
    text = str(e)
    check(any(s in text for s in ("403", "user not found", "get access token failed")),
          "not an auth refusal: %r" % text)
    step("refused: %s" % text.replace("\n", " ")[:300])


def v1(args):
    import nacos
    try:
        # 1.0.0 logs in when it is created: the refusal may come here already.
        client = nacos.NacosClient(args.server, namespace=args.namespace,
                                   username=args.username, password=args.password,
                                   logDir=os.path.join(args.workdir, "logs"))
        client.set_options(snapshot_base=os.path.join(args.workdir, "snapshot"))
        got = client.get_config(args.data_id, args.group, no_snapshot=True)
    except Exception as e:  # the client's own exception types vary by version
        refused(e)
        return
    fail("get_config with a wrong password answered %r" % (got,))


async def v2(args):
    from v2.nacos import ClientConfigBuilder, ConfigParam, NacosConfigService
    config = (ClientConfigBuilder()
              .username(args.username).password(args.password)
              .server_address(args.server)
              .namespace_id(args.namespace)
              .log_dir(os.path.join(args.workdir, "logs"))
              .cache_dir(os.path.join(args.workdir, "cache"))
              .build())
    try:
        client = await NacosConfigService.create_config_service(config)
        got = await client.get_config(ConfigParam(data_id=args.data_id, group=args.group))
    except Exception as e:
        refused(e)
        return
    fail("get_config with a wrong password answered %r" % (got,))


def main():
    ap = arg_parser()
    ap.add_argument("--api", choices=["v1", "v2"], required=True)
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
