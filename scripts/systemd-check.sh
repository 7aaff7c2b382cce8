#!/usr/bin/env bash
# Checks deploy/systemd/ as CI does: `systemd-analyze verify` clean for the
# endpoint's unit and the renewal's service and timer (with the binary at
# the units' ExecStart path, in a private mount namespace that leaves the
# machine untouched), and `systemd-analyze security --offline=true`
# exposure at most 2.0 for the endpoint's unit.
#
#   scripts/systemd-check.sh [BINARY]   (default: target/debug/janus-registration)
set -euo pipefail
cd "$(dirname "$0")/.."
unit=deploy/systemd/janus-registration.service
bin=${1:-target/debug/janus-registration}
max=2.0
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "systemd-check: SKIPPED: no systemd-analyze here"
  exit 0
fi
[ -x "$bin" ] || cargo build --locked -q

exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
if unshare -m true 2>/dev/null; then
  renew="deploy/systemd/janus-registration-renew.service deploy/systemd/janus-registration-renew.timer"
  out=$(unshare -m sh -c "mount -t tmpfs tmpfs '$(dirname "$exe")' && cp '$bin' '$exe' && systemd-analyze verify '$unit' $renew" 2>&1) ||
    { echo "systemd-check: FAILED: systemd-analyze verify: $out"; exit 1; }
  [ -z "$out" ] || { echo "systemd-check: FAILED: systemd-analyze verify is not clean: $out"; exit 1; }
  echo "systemd-check: systemd-analyze verify: clean"
else
  echo "systemd-check: verify SKIPPED: no private mount namespace here to place $exe in (unshare -m refused)"
fi

score=$(systemd-analyze security --offline=true "$unit" 2>&1 | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
[ -n "$score" ] || { echo "systemd-check: FAILED: no exposure score"; exit 1; }
echo "systemd-check: systemd-analyze security --offline=true: exposure $score (at most $max)"
awk -v s="$score" -v m="$max" 'BEGIN { exit !(s <= m) }' ||
  { echo "systemd-check: FAILED: exposure $score above $max"; exit 1; }
echo "systemd-check: OK"
