#!/usr/bin/env bash
# Builds the container image and runs the whole flow in it - start, announce
# with the agent, approve, poll, stop - when a Docker engine is present;
# otherwise says plainly that it skipped.
#
#   scripts/container-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "container-check: SKIPPED: no Docker engine here (docker info failed); nothing was built or run"
  exit 0
fi
image=janus-registration:check
work=$(mktemp -d)
name=janus-registration-check-$$
trap 'docker rm -f "$name" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

docker build -t "$image" .
cargo build --release --locked
bin=target/release/janus-registration
"$bin" certs fleet --out "$work/fleet" --name "Container check"
mkdir -p "$work/tls" "$work/state"
"$bin" certs controller --fleet "$work/fleet" --out "$work/tls/controller" --san 127.0.0.1
chmod 0644 "$work/tls/controller.key"   # readable by the container's user; a throwaway key
chmod 0777 "$work/state"

docker run -d --name "$name" --read-only -p 127.0.0.1:18443:8443 \
  -v "$work/state:/var/lib/janus-registration" \
  -v "$work/fleet:/etc/janus-registration/fleet:ro" \
  -v "$work/tls:/etc/janus-registration/tls:ro" "$image"
for _ in $(seq 50); do
  "$bin" healthcheck --addr 127.0.0.1:18443 >/dev/null 2>&1 && break
  sleep 0.2
done
"$bin" healthcheck --addr 127.0.0.1:18443

root=$(cat "$work/fleet/root.crt")
printf '{"controller_address":"127.0.0.1:18443","controller_ca_cert":%s,"controller_fleet_root_cert":%s,"network":{"hostname":"container-check"}}' \
  "$(printf '%s' "$root" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" \
  "$(printf '%s' "$root" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" > "$work/user-data.json"
set +e
"$bin" agent --user-data "$work/user-data.json" --dir "$work/node" --once
[ $? -eq 2 ] || { echo "container-check: the announcement did not wait for approval"; exit 1; }
set -e
id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$work/node/enrollment.json")
"$bin" nodes approve "$id" --state "$work/state"
"$bin" agent --dir "$work/node" --once
docker stop -t 10 "$name"
echo "container-check: OK (start, announce, approve, poll, stop)"
