"""One small run (.a over {"a":1}) through the Python client on one connection, timed: the
Python line of bench/clients/run.sh. Usage: python latency.py SOCKET [N]"""

import json
import sys
import time

import jqjail

socket_path = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
with jqjail.Client(socket_path) as c:
    for _ in range(200):
        c.run(".a", '{"a":1}')
    us = []
    for _ in range(n):
        start = time.perf_counter()
        assert c.run(".a", '{"a":1}').output == "1"
        us.append((time.perf_counter() - start) * 1e6)
us.sort()
print(json.dumps({"client": "python", "n": n, "p50_us": round(us[n // 2]), "p90_us": round(us[n * 9 // 10])}))
