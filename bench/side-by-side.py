#!/usr/bin/env python3
"""Two builds of jqjail side by side: the benchmark's filters through each build's CLI and
daemon, the runs interleaved, medians of wall time per command.

    bench/side-by-side.py OLD_BIN_DIR NEW_BIN_DIR

Each BIN_DIR holds `jqjail` and `jqjaild` (a release build's target/release). The script
starts each daemon on a socket in a fresh private directory (output cap 32 MiB), writes
three inputs of issue-like objects (283 B, 0.6 MiB, 13 MiB) to it, and prints a Markdown
table with the ratio new / old. The answers of the two builds are compared too.
"""

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

FILTERS = [
    ".",
    ".[0]",
    "length",
    "map(.id)",
    '[.[] | select(.labels | map(.name) | index("bug"))] | length',
    "map({id,title}) | .[:50]",
]


def issue(rng, i):
    return {
        "id": i,
        "number": i + 1000,
        "title": "Issue number %d about things" % i,
        "state": rng.choice(["open", "closed"]),
        "labels": [{"name": rng.choice(["bug", "enhancement", "docs", "question"])}
                   for _ in range(rng.randint(0, 3))],
        "user": {"login": "user%d" % (i % 97), "id": i % 97},
        "body": "lorem ipsum " * rng.randint(5, 40),
        "comments": rng.randint(0, 30),
    }


def main(old_dir, new_dir):
    work = tempfile.mkdtemp(prefix="jqjail-side-")
    rng = random.Random(2)
    inputs = []
    for label, n, runs in [("283 B", 1, 15), ("0.6 MiB", 1400, 11), ("13 MiB", 28000, 7)]:
        path = os.path.join(work, "%d.json" % n)
        with open(path, "w") as f:
            json.dump([issue(rng, i) for i in range(n)], f)
        inputs.append((label, path, runs))
    builds, daemons = {}, []
    for name, d in [("old", old_dir), ("new", new_dir)]:
        home = os.path.join(work, name)
        os.mkdir(home, 0o700)
        sock = os.path.join(home, "s")
        daemons.append(subprocess.Popen(
            [os.path.join(d, "jqjaild"), "--socket", sock, "--store", os.path.join(home, "store"),
             "--max-output-bytes", str(32 << 20)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        builds[name] = [os.path.join(d, "jqjail"), "--socket", sock]
    try:
        time.sleep(1.5)
        print("| input | filter | old median ms | new median ms | new / old |")
        print("|---|---|---|---|---|")
        for label, path, runs in inputs:
            for f in FILTERS:
                times = {k: [] for k in builds}
                outs = {}
                for _ in range(runs):
                    for k, cmd in builds.items():
                        start = time.perf_counter()
                        p = subprocess.run(cmd + ["-c", f, path], capture_output=True)
                        times[k].append((time.perf_counter() - start) * 1000)
                        outs[k] = (p.returncode, p.stdout)
                        time.sleep(0.01)
                a, b = statistics.median(times["old"]), statistics.median(times["new"])
                same = "" if outs["old"] == outs["new"] else " (answers differ)"
                shown = f.replace("|", "\\|")
                print(f"| {label} | `{shown}` | {a:.2f} | {b:.2f} | {b / a:.2f}{same} |", flush=True)
    finally:
        for p in daemons:
            p.terminate()
            p.wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
