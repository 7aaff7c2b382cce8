#!/usr/bin/env bash
# Three replicas on a real network filesystem, on this one machine: a
# one-brick GlusterFS volume with its default options, mounted twice through
# FUSE (two "hosts"), then tests/suite/replicas_gluster.rs (a token burst split
# across the mounts, each token presented twice, one replica killed with
# SIGKILL and restarted). Prints tokens consumed, token-admitted records,
# double admissions, torn audit lines, 5xx answers and the rate. Tears
# everything down. Needs root and /dev/fuse; says SKIPPED where either, the
# packages or the mounts are refused.
#
#   scripts/replicas-on-gluster.sh            # default volume options (CI)
#   scripts/replicas-on-gluster.sh --tuned    # every client cache off, to compare
#   scripts/replicas-on-gluster.sh polls_and_health   # only the tests whose names contain this
#   JANUS_GLUSTER_SERVER_BIN=/path/to/janus-registration scripts/replicas-on-gluster.sh polls_and_health
#                                             # the latency test against another build (A/B)
# The tests run one at a time: the latency test's figures are its own.
set -euo pipefail
tuned=""
[ "${1:-}" = --tuned ] && { tuned=1; shift; }
filter="${1:-}"
cd "$(dirname "$0")/.."

skip() { echo "replicas-on-gluster: SKIPPED: $*"; exit 0; }
# shellcheck source=scripts/lib/gluster.sh
. scripts/lib/gluster.sh
# 'volume create' refuses 127.0.0.1 as the brick host: this machine's
# name where it resolves, else its first address that is not a loopback
# one. Nothing under /etc is touched.
host="$(hostname)"
if ! getent hosts "$host" >/dev/null 2>&1; then
  host="$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -m1 -E '^[0-9.]+$' || true)"
  [ -n "$host" ] || skip "this machine's name does not resolve and it has no address but loopback"
fi

root="$(mktemp -d /tmp/janus-gluster-XXXXXX)"
volume="janus$$"
started_glusterd=""
teardown() {
  umount -l "$root/m1" "$root/m2" 2>/dev/null || true
  gluster --mode=script volume stop "$volume" force >/dev/null 2>&1 || true
  gluster --mode=script volume delete "$volume" >/dev/null 2>&1 || true
  if [ -n "$started_glusterd" ] && [ -f "$root/glusterd.pid" ]; then
    kill "$(cat "$root/glusterd.pid")" 2>/dev/null || true
  fi
  rm -rf "$root"
}
trap teardown EXIT
mkdir -p "$root/brick" "$root/m1" "$root/m2"
if ! gluster --mode=script volume list >/dev/null 2>&1; then
  glusterd -p "$root/glusterd.pid" || skip "glusterd does not start"
  started_glusterd=1
  for _ in $(seq 50); do gluster --mode=script volume list >/dev/null 2>&1 && break; sleep 0.2; done
fi
gluster --mode=script volume create "$volume" "$host:$root/brick" force >/dev/null || skip "volume create refused"
mount_options=()
options="default options"
if [ -n "$tuned" ]; then
  # What the issue found necessary before the ledger: no client-side cache at all.
  for option in performance.quick-read performance.io-cache performance.stat-prefetch \
      performance.write-behind performance.read-ahead performance.open-behind \
      performance.readdir-ahead performance.nl-cache; do
    gluster --mode=script volume set "$volume" "$option" off >/dev/null || skip "volume set $option refused"
  done
  mount_options=(-o "attribute-timeout=0,entry-timeout=0,negative-timeout=0")
  options="client caches off: performance translators off, FUSE timeouts 0"
fi
gluster --mode=script volume start "$volume" >/dev/null || skip "volume start refused"
mount -t glusterfs "${mount_options[@]}" "127.0.0.1:/$volume" "$root/m1" || skip "mount refused"
mount -t glusterfs "${mount_options[@]}" "127.0.0.1:/$volume" "$root/m2" || skip "second mount refused"
echo "replicas-on-gluster: volume $volume ($options) mounted at $root/m1 and $root/m2"
JANUS_GLUSTER_MOUNTS="$root/m1:$root/m2" JANUS_GLUSTER_BRICK="$root/brick" JANUS_GLUSTER_VOLUME="$volume" cargo test --locked --test suite "replicas_gluster::$filter" -- --ignored --nocapture --test-threads=1 2>&1 \
  | grep -E -A2 "^gluster:|^gluster latency:|^unfinished:|^test |test result|panicked|assert" || { echo "replicas-on-gluster: FAILED"; exit 1; }
