"""redis-py (Debian's python3-redis) with its defaults runs the scenario of
tests/clients/node/scenario.js against cellserver: the four limiter
commands, a pipeline and a MULTI, each reply asserted exactly."""

import os
import sys

import redis

T0 = "1700000040000000000"


def main():
    r = redis.Redis(host="127.0.0.1", port=int(os.environ["CELLSERVER_PORT"]))
    assert r.execute_command("DEBUG", "CLOCK", "SET", T0) in (b"OK", True, "OK")
    checks = [
        (("CL.THROTTLE", "user", 15, 30, 60), [0, 16, 15, -1, 2]),
        (("TB.TAKE", "tb", 10, 1, 1), [0, 10, 9, -1, 1]),
        (("SW.HIT", "sw", 10, 60), [0, 10, 9, -1, 120]),
        (("FW.INCR", "fw", 10, 60), [0, 10, 9, -1, 60]),
    ]
    for args, want in checks:
        got = r.execute_command(*args)
        assert got == want, (args, got, want)
    p = r.pipeline(transaction=False)
    p.execute_command("CL.THROTTLE", "p", 0, 1, 60)
    p.execute_command("CL.THROTTLE", "p", 0, 1, 60)
    got = p.execute()
    assert got == [[0, 1, 0, -1, 60], [1, 1, 0, 60, 60]], got
    m = r.pipeline(transaction=True)
    for _ in range(3):
        m.execute_command("FW.INCR", "m", 2, 60)
    got = m.execute()
    assert got == [[0, 2, 1, -1, 60], [0, 2, 0, -1, 60], [1, 2, 0, 60, 60]], got
    print("redis-py ok", redis.__version__)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("assertion failed:", e, file=sys.stderr)
        sys.exit(1)
