#!/usr/bin/env bash
# The benchmark: our serve, the Python reference (with --reference), and the
# ceiling (our TLS and connection handling answering /healthz, no state work),
# under the same load, in one run. Prints one table; writes the numbers as JSON.
#
#   scripts/bench.sh [--quick] [--reference ../shared/reference/registration-server.py] [--out bench-results.json]
set -euo pipefail
cd "$(dirname "$0")/.."
# The dist profile (fat LTO), as the container image builds it.
cargo build --profile dist --locked --quiet
exec python3 scripts/bench.py --bin target/dist/janus-registration "$@"
