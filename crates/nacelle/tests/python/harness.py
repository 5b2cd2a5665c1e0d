"""What every client script shares with the driving Rust test (`tests/common/python.rs`):
the `STEP` / `REQUEST` / `FAIL` / `PASS` lines, the common arguments, and leaving the
process without waiting for the client's own threads."""

import argparse
import json
import os
import sys
import traceback

_AT_EXIT = []


def at_exit(fn):
    """Registers a best-effort cleanup run before the process exits, on success or failure."""
    _AT_EXIT.append(fn)


def _cleanup():
    for fn in _AT_EXIT:
        try:
            fn()
        except Exception:  # noqa: BLE001 - best effort at exit
            traceback.print_exc()


def step(msg):
    print("STEP " + msg, flush=True)


def fail(msg):
    print("FAIL " + msg, flush=True)
    _cleanup()
    os._exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def request(obj):
    """Prints `REQUEST {json}` and waits for the driving test's `ok` on stdin."""
    print("REQUEST " + json.dumps(obj), flush=True)
    answer = sys.stdin.readline().strip()
    check(answer == "ok", "the driving test answered %r to %r" % (answer, obj))


def arg_parser():
    """The arguments the driving test passes to every script."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--namespace", default="")
    ap.add_argument("--data-id", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--workdir", required=True)
    # Credentials, for a server with authentication on.
    ap.add_argument("--username", default=None)
    ap.add_argument("--password", default=None)
    return ap


def run_main(main):
    """Runs `main`, turns an exception into a `FAIL` line, and leaves without joining the
    client's threads (a held long poll, grpcio's pollers)."""
    try:
        main()
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        fail("exception")
    _cleanup()
    sys.stdout.flush()
    os._exit(0)
