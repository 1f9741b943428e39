#!/usr/bin/env bash
# Where the CPU of a request goes: the real daemon (release build, default settings but the
# zygote's code in file pages, below) under a closed-loop load, profiled with perf across the
# whole machine, then the samples sorted by process and, in the workers, by start-up phase
# (bench/profile-phases.py). Two loads:
#   small  4 clients on their own connections, each running `.a` over {"a":1}
#          (bench/examples/client_latency);
#   big    one client running `.[0]` over a 20 MB array of issue-like objects, through the
#          `jqjail` CLI.
# Writes target/profile/{small,big}.{folded,svg,txt} and, with strace installed, the system
# calls of 200 small requests' workers (target/profile/strace.txt).
#
#   bench/profile.sh [SECONDS]
#
# Needs perf (Debian's linux-perf) and inferno (cargo install inferno, installed here into
# target/tools from crates.io when missing). Run it as root, or with kernel.perf_event_paranoid
# at most 0: it records every process on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-4}
out=target/profile
mkdir -p "$out"

command -v perf >/dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }
if ! [ -x target/tools/bin/inferno-flamegraph ]; then
    cargo install inferno --locked --root target/tools
fi

cargo build --release --workspace --examples
bin=target/release
dir=$(mktemp -d)
trap 'kill $(cat "$dir/pid" 2>/dev/null) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$dir"' EXIT
# --code-pages file: perf cannot name code in anonymous memory, where a default zygote moves
# most of its code (huge pages that its forks share). So the workers here fault in the code
# they run and tear it down at exit, as a default daemon's do not: page faults and exit weigh
# more here than they do in the service.
JQJAIL_LOG=warn "$bin/jqjaild" --socket "$dir/s.sock" --store "$dir/store" \
    --max-output-bytes 33554432 --code-pages file >"$dir/daemon.log" 2>&1 &
echo $! >"$dir/pid"
for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done

# A worker lives in its zygote's empty root and is gone when perf resolves its samples, so
# perf cannot open the binary by its path there: without the build-id cache, every frame of
# jqjaild's own code in a worker is unnamed and the phase table is all "other".
for binary in "$bin/jqjaild" "$bin/jqjail"; do perf buildid-cache -a "$binary"; done

# perf record over the whole machine while LOAD runs; then folded stacks, an SVG and the table.
profile() {
    local name=$1
    shift
    # In its own process group (job control on), so that the load and all it started stop
    # together before the next profile.
    set -m
    "$@" &
    local load=$!
    set +m
    sleep 1
    perf record -a --buildid-mmap --call-graph dwarf,16384 -F 1000 -o "$dir/$name.data" -- sleep "$seconds" \
        2>"$dir/perf.log"
    kill -- "-$load" 2>/dev/null || true
    wait "$load" 2>/dev/null || true
    perf script -i "$dir/$name.data" 2>/dev/null |
        target/tools/bin/inferno-collapse-perf --all >"$out/$name.folded"
    target/tools/bin/inferno-flamegraph --minwidth 0.2 --title "jqjail, $name requests ($seconds s, both cores)" \
        <"$out/$name.folded" >"$out/$name.svg"
    python3 bench/profile-phases.py "$out/$name.folded" | tee "$out/$name.txt"
}

small_load() {
    for _ in 1 2 3 4; do "$bin/examples/client_latency" "$dir/s.sock" 1000000 >/dev/null & done
    wait
}
echo "== small requests"
profile small small_load

python3 - "$dir/big.json" <<'EOF'
import json, sys
issue = lambda i: {"id": i, "title": f"Issue {i}: the worker's start is slow", "state": "open",
    "labels": [{"name": n} for n in ("bug", "perf")[: i % 3]], "body": "x" * 300,
    "user": {"login": f"user{i % 97}", "id": i * 7}}
items, size, i = [], 2, 0
while size < (20 << 20) - (64 << 10):  # under the daemon's 20 MiB input limit
    text = json.dumps(issue(i))
    items.append(text); size += len(text) + 1; i += 1
open(sys.argv[1], "w").write("[" + ",".join(items) + "]")
EOF
big_load() {
    while :; do "$bin/jqjail" --socket "$dir/s.sock" '.[0]' "$dir/big.json" >/dev/null; done
}
echo "== 20 MiB requests"
profile big big_load

if command -v strace >/dev/null; then
    # The zygote forks every worker: -f follows each from its fork to its exit.
    zygote=$(pgrep -P "$(cat "$dir/pid")" -x jqjail-zygote | head -1 || true)
    if [ -n "$zygote" ]; then
        strace -q -c -f -p "$zygote" -o "$out/strace.txt" &
        tracer=$!
        sleep 0.5
        "$bin/examples/client_latency" "$dir/s.sock" 200 >/dev/null
        kill -INT "$tracer"
        wait "$tracer" 2>/dev/null || true
        echo "== system calls of the zygote and 200 requests' workers: $out/strace.txt"
        head -30 "$out/strace.txt"
    fi
fi
