"""redis-py's Sentinel client (Debian's python3-redis) as a long-lived
application for tests/integration/failover_test.go: it finds the master of
SENTINEL_MASTER through the Sentinels at SENTINEL_ADDRS (host:port,
comma-separated) with one redis.sentinel.Sentinel made at the start and
never reconfigured, then runs the commands it reads on standard input,
one JSON array of arguments per line, and writes each reply as one JSON
line: {"ok": reply} or {"err": text}.

A command that fails on the connection (the master was killed, or a
replica answered READONLY while the Sentinels promote it) is sent again
until it succeeds or RETRY_SECONDS (20) have passed, as an application
would retry; the reply says how many tries it took."""

import json
import os
import sys
import time

import redis
from redis.sentinel import Sentinel


def plain(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def main():
    addrs = []
    for a in os.environ["SENTINEL_ADDRS"].split(","):
        host, port = a.rsplit(":", 1)
        addrs.append((host, int(port)))
    password = os.environ.get("SENTINEL_PASSWORD") or None
    retry = float(os.environ.get("RETRY_SECONDS", "20"))
    sentinel = Sentinel(addrs, socket_timeout=1.0)
    master = sentinel.master_for(os.environ["SENTINEL_MASTER"], socket_timeout=1.0, password=password)
    print(json.dumps({"ready": redis.__version__}), flush=True)
    for line in sys.stdin:
        args = json.loads(line)
        deadline = time.monotonic() + retry
        tries = 0
        while True:
            tries += 1
            try:
                out = {"ok": plain(master.execute_command(*args)), "tries": tries}
                break
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError) as e:
                if time.monotonic() > deadline:
                    out = {"err": "%s: %s" % (type(e).__name__, e), "tries": tries}
                    break
                time.sleep(0.05)
            except redis.ResponseError as e:
                out = {"err": str(e), "tries": tries}
                break
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
