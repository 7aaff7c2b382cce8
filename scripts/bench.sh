#!/usr/bin/env bash
# The benchmark: our serve, the Python reference (with --reference), and the
# ceiling (our TLS and connection handling answering /healthz, no state work),
# under the same load, in one run. Prints one table; writes the numbers as JSON.
#
#   scripts/bench.sh [--quick] [--reference ../shared/reference/registration-server.py] [--out bench-results.json]
set -euo pipefail
cd "$(dirname "$0")/.."
# The dist profile (fat LTO), as the container image builds it.
cargo build --profile dist --locked --quiet -p janus-registration -p janus-bench
python3 scripts/bench.py --bin target/dist/janus-registration "$@"
reference=
while [ $# -gt 0 ]; do
  case $1 in
    --only) exit 0 ;;
    --reference) reference=$2; shift ;;
  esac
  shift
done
echo
echo "Measured the node's way (scripts/node-load.sh, Go's crypto/tls + net/http, 16 in flight):"
bash scripts/node-load.sh target/dist/janus-registration ${reference:+"$reference"}
