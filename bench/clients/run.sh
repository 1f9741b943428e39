#!/usr/bin/env bash
# Times one small run through each client (Rust, Go, Python, TypeScript) against one release
# daemon, side by side, in rounds that alternate the clients. Needs go, node (with
# clients/typescript built: npm ci && npx tsc) and a python3 with the package installed
# (PYTHON=…). Prints one JSON line per client and round.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-3}
n=${N:-2000}
python=${PYTHON:-python3}
cargo build -q --release --bin jqjaild
cargo build -q --release -p jqjail-bench --example client_latency
(cd clients/go && go build -o ../../target/release/go-latency ./internal/latency)
dir=$(mktemp -d)
target/release/jqjaild --socket "$dir/s" --store "$dir/store" 2>/dev/null &
daemon=$!
trap 'kill $daemon; rm -rf "$dir"' EXIT
while [ ! -S "$dir/s" ]; do sleep 0.05; done
for _ in $(seq "$rounds"); do
    target/release/examples/client_latency "$dir/s" "$n"
    target/release/go-latency "$dir/s" "$n"
    "$python" bench/clients/latency.py "$dir/s" "$n"
    node bench/clients/latency.mjs "$dir/s" "$n"
done
