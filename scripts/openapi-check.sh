#!/usr/bin/env bash
# Validates the admin API's OpenAPI document (`janus-registration openapi`,
# the document GET /v1/openapi.json serves) with openapi-spec-validator
# from PyPI, in a venv of its own under target/ (made when missing). Says
# SKIPPED where the validator cannot be installed.
#
#   scripts/openapi-check.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/janus-registration}
venv=target/openapi-venv
if [ ! -x "$venv/bin/openapi-spec-validator" ]; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    # Debian's python3 has its venv module in a package of its own.
    apt-get install -y -qq python3-venv >/dev/null 2>&1 || true
    python3 -m venv "$venv" || { echo "openapi-check: SKIPPED: no python3 venv"; exit 0; }
  fi
  if ! "$venv/bin/pip" install -q openapi-spec-validator; then
    echo "openapi-check: SKIPPED: openapi-spec-validator could not be installed from PyPI"
    exit 0
  fi
fi
doc=$(mktemp --suffix=.json)
trap 'rm -f "$doc"' EXIT
"$bin" openapi >"$doc"
"$venv/bin/openapi-spec-validator" "$doc" | sed 's/^/openapi-check: /'
paths=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(len(v) for v in d["paths"].values()))' "$doc")
echo "openapi-check: $paths operations, OpenAPI $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["openapi"])' "$doc")"
