#!/usr/bin/env bash
# The admin API against its own contract, by tools that know nothing of it
# but its OpenAPI document (GET /v1/openapi.json):
#   1. schemathesis (PyPI) runs every check, every phase (examples,
#      coverage, fuzzing, stateful: the document's links from a listing to
#      a node's routes) with a fixed seed and a bounded number of examples,
#      on a live server whose credential holds every scope. It must find
#      nothing.
#   2. a client generated from the document by openapi-python-client
#      (scripts/generated-client.py) mints a token, lists the pending nodes
#      and approves one, as an orchestrator's program would.
# Both in a venv of their own under target/ (made when missing); SKIPPED
# where PyPI cannot be reached. The server's name (controller.fleet.janus)
# resolves to 127.0.0.1 through an /etc/hosts bound in a mount namespace
# of the run's own: the machine's is not touched.
#
#   scripts/schemathesis-check.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/debug/janus-registration}")
root=$PWD
venv=$root/target/schemathesis-venv
seed=${JANUS_SCHEMATHESIS_SEED:-20261207}
examples=${JANUS_SCHEMATHESIS_EXAMPLES:-40}
if [ ! -x "$venv/bin/schemathesis" ] || [ ! -x "$venv/bin/openapi-python-client" ]; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    apt-get install -y -qq python3-venv >/dev/null 2>&1 || true
    python3 -m venv "$venv" || { echo "schemathesis-check: SKIPPED: no python3 venv"; exit 0; }
  fi
  if ! "$venv/bin/pip" install -q 'schemathesis==4.32.5' 'openapi-python-client==0.29.1'; then
    echo "schemathesis-check: SKIPPED: schemathesis or openapi-python-client could not be installed from PyPI"
    exit 0
  fi
fi
if ! unshare -m true 2>/dev/null; then
  echo "schemathesis-check: SKIPPED: no mount namespace here (unshare -m refused) to name the server"
  exit 0
fi

work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$bin" certs fleet --out fleet >/dev/null
"$bin" certs controller --fleet fleet --out controller >/dev/null
"$bin" certs admin-ca --out admin-ca >/dev/null
"$bin" certs admin --ca admin-ca --name schemathesis --scope read --scope approve --scope reject \
  --scope tokens --out tester >/dev/null
mkdir state
port=$(free_port)
admin_port=$(free_port)
"$bin" serve --listen "127.0.0.1:$port" --fleet fleet --cert controller.crt --key controller.key --state state \
  --admin-listen "127.0.0.1:$admin_port" --admin-ca admin-ca/admin-ca.crt 2>serve.log &
server_pid=$!
until "$bin" healthcheck --addr "127.0.0.1:$port" 2>/dev/null; do
  kill -0 "$server_pid" 2>/dev/null || { cat serve.log; exit 1; }
  sleep 0.1
done
# Pending nodes for the stateful phase to find, approve and reject.
for name in web-1 web-2 web-3; do
  "$bin" user-data announce --fleet fleet --hostname "$name" --address "127.0.0.1:$port" >"$name.json"
  "$bin" agent --user-data "$name.json" --dir "$name-node" --once >/dev/null 2>&1 || [ $? = 2 ]
done
printf '127.0.0.1 localhost\n127.0.0.1 controller.fleet.janus\n' >hosts
origin="https://controller.fleet.janus:$admin_port"
named() { # COMMAND...: run with controller.fleet.janus naming this machine
  # shellcheck disable=SC2016 # expanded by the inner shell: $0 the hosts file, $@ the command
  unshare -m --propagation private sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$work/hosts" "$@"
}
named curl -sS --fail --cacert fleet/root.crt --cert tester.crt --key tester.key \
  "$origin/v1/openapi.json" >openapi.json

# Every check, every phase. 422 is this API's "the state refuses it"
# (what other APIs answer 409 with; a schema cannot foretell which node is
# rejected or which fingerprint is whose), so a schema-valid request may
# get it; it never answers 409 (docs/orchestrating.md's code table). The
# event stream never ends, so it is left to the suite (tests/suite/admin_api.rs).
# An answer's time is bounded by the server's own deadline (30 s, then
# 503 deadline_exceeded), not by schemathesis' default of 10 s: minting
# 100,000 tokens at once (the schema's maximum, which the coverage phase
# sends) into a file that holds many such takes seconds.
cat >schemathesis.toml <<'EOF'
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "403", "404", "422"]
EOF
echo "schemathesis-check: schemathesis $("$venv/bin/schemathesis" --version | awk '{print $NF}'), seed $seed, $examples examples per operation"
if ! named "$venv/bin/schemathesis" --config-file schemathesis.toml run openapi.json --url "$origin" \
  --checks all --phases examples,coverage,fuzzing,stateful --seed "$seed" --max-examples "$examples" \
  --exclude-path /v1/events --workers 1 --request-timeout 35 --max-response-time 30 \
  --tls-verify fleet/root.crt --request-cert tester.crt --request-cert-key tester.key \
  --suppress-health-check all --no-color >schemathesis.log 2>&1; then
  cat schemathesis.log
  echo "schemathesis-check: schemathesis found failures (above)"
  exit 1
fi
grep -E '^(API Operations|Test Phases|Test cases|No issues found)|passed|✅' schemathesis.log | sed 's/^/schemathesis-check: /' | head -20

# A client generated from the document, used as a program would, on nodes
# schemathesis did not decide.
for name in web-4 web-5; do
  "$bin" user-data announce --fleet fleet --hostname "$name" --address "127.0.0.1:$port" >"$name.json"
  "$bin" agent --user-data "$name.json" --dir "$name-node" --once >/dev/null 2>&1 || [ $? = 2 ]
done
printf 'post_hooks: []\n' >generate.yaml # (no formatter: ruff is not needed to use it)
"$venv/bin/openapi-python-client" generate --path openapi.json --output-path admin_api_client --overwrite \
  --meta none --config generate.yaml >generate.log 2>&1 || { cat generate.log; echo "schemathesis-check: the client did not generate"; exit 1; }
named env PYTHONPATH="$work" "$venv/bin/python" "$root/scripts/generated-client.py" "$origin" fleet/root.crt \
  tester.crt tester.key
grep -h '"event":"admitted"' state/audit/*.jsonl | grep -q '"user":"api (schemathesis)"' ||
  { echo "schemathesis-check: the generated client's approval is not audited as api (schemathesis)"; exit 1; }
echo "schemathesis-check: the generated client minted a token, listed the pending nodes and approved one"
