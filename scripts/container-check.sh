#!/usr/bin/env bash
# Builds the container image and runs it as an orchestrator does: read-only
# root, non-root, a named volume for the state, the fleet and certificate
# mounted read-only; then checks the HEALTHCHECK, admits a node by a token
# made inside the container, approves a tokenless node against its console,
# stops it with SIGTERM (status 0 within the grace) and restarts it on the
# same volume.
#
# Docker where an engine runs, else Podman (installed from Debian and
# configured where missing; scripts/lib/container-engine.sh). Says SKIPPED,
# with the reason, only where neither can run a container. Cleans up.
#
#   scripts/container-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT_NAME=container-check
# shellcheck source=lib/container-engine.sh
source scripts/lib/container-engine.sh

engine_pick
image=janus-registration:check
name=janus-registration-check-$$
volume=janus-registration-check-$$
work=$(mktemp -d)
cleanup() {
  $engine rm -f "$name" >/dev/null 2>&1 || true
  $engine volume rm -f "$volume" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# Built as docs/deploying.md says to, offline included: through the script.
started=$(date +%s)
build_log=$(bash scripts/container-build.sh "$image" | tee /dev/stderr)
case "$build_log" in *SKIPPED*) exit 0 ;; esac
image_build_seconds=$(($(date +%s) - started))
image_size=$($engine image inspect "$image" --format '{{.Size}}')

# The image says what it is: its label and the binary's --version agree.
label=$($engine image inspect "$image" --format '{{index .Config.Labels "org.opencontainers.image.version"}}')
version=$($engine run --rm --network=none "$image" --version)
[ "$version" = "janus-registration $label" ] ||
  { say "FAILED: the image's version label ($label) is not what the binary says ($version)"; exit 1; }
healthcheck=$($engine image inspect "$image" --format '{{json .Config.Healthcheck}}')
case "$healthcheck" in
  *healthcheck*) ;;
  *) say "FAILED: the image defines no HEALTHCHECK ($healthcheck)"; exit 1 ;;
esac
if $engine run --rm --network=none --entrypoint /bin/sh "$image" -c true >/dev/null 2>&1; then
  say "FAILED: the image has a shell"; exit 1
fi
say "image: $version, label org.opencontainers.image.version=$label, HEALTHCHECK defined, no shell"

# The host side, as docs/deploying.md says: a fleet and the endpoint's
# certificate, then only the public fleet files and the certificate, made
# readable to the container's user (65532): chown as root, through the
# user namespace with rootless Podman, else (a docker group member) mode
# 0444 inside this script's 0700 directory.
cargo build --locked -q
bin=$PWD/target/debug/janus-registration
"$bin" certs fleet --out "$work/fleet" --name "Container check" >/dev/null
"$bin" certs controller --fleet "$work/fleet" --out "$work/controller" --san 127.0.0.1 >/dev/null
# The admin API's CA (its certificate only in the container) and an
# orchestrator's credential, kept on the host.
"$bin" certs admin-ca --out "$work/admin-ca" >/dev/null
"$bin" certs admin --ca "$work/admin-ca" --name container-orchestrator --scope tokens --scope read \
  --scope approve --out "$work/orchestrator" >/dev/null
install -d -m 0755 "$work/deploy-files/fleet" "$work/deploy-files/tls" "$work/deploy-files/admin-ca"
install -m 0644 "$work/admin-ca/admin-ca.crt" "$work/deploy-files/admin-ca/"
install -m 0644 "$work/fleet/root.crt" "$work/fleet/bundle.json" "$work/deploy-files/fleet/"
install -m 0644 "$work/controller.crt" "$work/deploy-files/tls/controller.crt"
install -m 0400 "$work/controller.key" "$work/deploy-files/tls/controller.key"
if [ "$(id -u)" = 0 ]; then
  chown 65532:65532 "$work/deploy-files/tls/controller.key"
elif [ "$engine" = podman ]; then
  podman unshare chown 65532:65532 "$work/deploy-files/tls/controller.key"
else
  chmod 0444 "$work/deploy-files/tls/controller.key"
  say "not root: the key is readable to all, inside $work (mode 0700), for the container's user"
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
admin_port=$(free_port)
$engine volume create "$volume" >/dev/null
start() {
  # Podman without systemd cannot schedule the periodic health checks (it
  # says so on stderr, kept in engine.log); `podman healthcheck run` below
  # runs the image's HEALTHCHECK itself.
  $engine run -d --name "$name" --read-only -p "127.0.0.1:$port:8443" -p "127.0.0.1:$admin_port:9443" \
    -v "$volume:/var/lib/janus-registration" \
    -v "$work/deploy-files/fleet:/etc/janus-registration/fleet:ro" \
    -v "$work/deploy-files/tls:/etc/janus-registration/tls:ro" \
    -v "$work/deploy-files/admin-ca:/etc/janus-registration/admin-ca:ro" \
    -e JANUS_REGISTRATION_ADMIN_LISTEN=0.0.0.0:9443 \
    -e JANUS_REGISTRATION_ADMIN_CA=/etc/janus-registration/admin-ca/admin-ca.crt \
    -e JANUS_REGISTRATION_SHUTDOWN_GRACE=10s "$image" >/dev/null 2>>"$work/engine.log"
}
healthy() {
  if [ "$engine" = podman ]; then
    podman healthcheck run "$name" >/dev/null 2>&1
  else
    [ "$(docker inspect --format '{{.State.Health.Status}}' "$name")" = healthy ]
  fi
}
wait_healthy() {
  local deadline=$((SECONDS + 90))
  until healthy; do
    if [ $SECONDS -ge $deadline ] || [ "$($engine inspect --format '{{.State.Running}}' "$name")" != true ]; then
      say "FAILED: the container did not become healthy; its log, then the engine's:"
      $engine logs "$name" 2>&1 | tail -20
      tail -5 "$work/engine.log"
      exit 1
    fi
    sleep 1
  done
}
start
wait_healthy
"$bin" healthcheck --addr "127.0.0.1:$port" >/dev/null
say "running: --read-only, user $($engine inspect --format '{{.Config.User}}' "$name"), healthy (the image's HEALTHCHECK and /healthz through the published port)"

user_data() { # NODE-DIR HOSTNAME [TOKEN]
  python3 - "$work/fleet/root.crt" "127.0.0.1:$port" "$2" "${3:-}" >"$1.json" <<'PY'
import json, sys
root = open(sys.argv[1]).read()
data = {"controller_address": sys.argv[2], "controller_ca_cert": root,
        "controller_fleet_root_cert": root, "network": {"hostname": sys.argv[3]}}
if sys.argv[4]:
    data["registration_token"] = sys.argv[4]
print(json.dumps(data))
PY
}
agent_once() { # NODE-DIR [--user-data FILE]; echoes the exit code
  set +e
  "$bin" agent --dir "$@" --once >>"$1.console" 2>&1
  echo $?
  set -e
}

# A node with a token made inside the container, as an admin would.
token=$($engine exec "$name" janus-registration tokens add --description "container check")
user_data "$work/node-a" edge-a "$token"
code=$(agent_once "$work/node-a" --user-data "$work/node-a.json")
[ "$code" = 0 ] || { say "FAILED: the token did not admit node-a (agent exit $code)"; cat "$work/node-a.console"; exit 1; }
say "node-a admitted at once by a token made with '$engine exec … tokens add'"

# A tokenless node: pending, then approved against its console.
user_data "$work/node-b" edge-b
code=$(agent_once "$work/node-b" --user-data "$work/node-b.json")
[ "$code" = 2 ] || { say "FAILED: node-b is not pending (agent exit $code)"; cat "$work/node-b.console"; exit 1; }
id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$work/node-b/enrollment.json")
$engine exec -i "$name" janus-registration nodes approve "$id" --console /dev/stdin <"$work/node-b.console" >/dev/null
code=$(agent_once "$work/node-b")
[ "$code" = 0 ] || { say "FAILED: node-b's poll after approval (agent exit $code)"; cat "$work/node-b.console"; exit 1; }
say "node-b pending, approved with 'nodes approve $id --console' fed its console log, then polled 200"

# Without exec: a token through the admin API from the host, the node
# found by its label and approved-state through it.
api() { "$bin" "$@" --server "https://127.0.0.1:$admin_port" --server-ca "$work/fleet/root.crt" \
  --client-cert "$work/orchestrator.crt" --client-key "$work/orchestrator.key"; }
token=$(api tokens add --label vm=edge-c | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])') ||
  { say "FAILED: no token through the admin API"; $engine logs "$name" 2>&1 | tail -20; exit 1; }
user_data "$work/node-c" edge-c "$token"
code=$(agent_once "$work/node-c" --user-data "$work/node-c.json")
[ "$code" = 0 ] || { say "FAILED: the admin API's token did not admit node-c (agent exit $code)"; exit 1; }
listed=$(api nodes list --label vm=edge-c)
case $listed in
  *'"state":"admitted"'*) ;;
  *) say "FAILED: the admin API does not list node-c as admitted: $listed"; exit 1 ;;
esac
say "node-c admitted by a token made through the admin API on 127.0.0.1:$admin_port (no exec), listed by its label"

# SIGTERM: exit status 0 within the grace.
began=$SECONDS
$engine stop -t 20 "$name" >/dev/null 2>>"$work/engine.log"
took=$((SECONDS - began))
status=$($engine inspect --format '{{.State.ExitCode}}' "$name")
if [ "$status" != 0 ] || [ "$took" -ge 15 ]; then
  say "FAILED: stopped with status $status after ${took} s (want 0, within the 10 s grace)"
  exit 1
fi
say "SIGTERM: exit status 0 after ${took} s"

# A restart keeps the state.
$engine start "$name" >/dev/null 2>>"$work/engine.log"
wait_healthy
listed=$($engine exec "$name" janus-registration nodes list)
for node in edge-a edge-b edge-c; do
  printf '%s\n' "$listed" | grep -q "$node" || { say "FAILED: $node is gone after a restart"; printf '%s\n' "$listed"; exit 1; }
done
if [ "$(printf '%s\n' "$listed" | grep -c admitted)" -lt 3 ]; then
  say "FAILED: the three nodes should still be admitted after a restart"; printf '%s\n' "$listed"; exit 1
fi
$engine stop -t 20 "$name" >/dev/null 2>>"$work/engine.log"
say "OK ($engine: build ${image_build_seconds} s, $((image_size / 1000000)) MB; token admission, console approval, the admin API, SIGTERM, restart with the state kept)"
