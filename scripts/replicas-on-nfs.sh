#!/usr/bin/env bash
# Two replicas on real hosts sharing one NFSv4.2 state directory: three
# Debian VMs from scripts/hosts-lab.sh (nfs = the kernel NFS server, a and
# b = clients, a replica on each), every token presented twice at about the
# same time by two nodes (`agent swarm` to a, another to b), under faults:
#
#   plain        a burst, nothing else
#   sigkill      b's replica killed with SIGKILL mid-burst, restarted
#   cut          the NFS server's link down 20 s mid-burst (hard mount: waits)
#   nfs-restart  the NFS server restarted mid-burst (its grace period)
#
# After each: the state read on a and on b (scripts/lib/state-check.py, as
# the replicas' user): no token admits two nodes, no torn record or audit
# line, every consumed use ends in an admitted record, no replaced name
# with a second link, both hosts read the same; and `/healthz` of each
# replica sampled through the fault. Prints one line per run; fails on a
# broken invariant. SKIPPED where QEMU cannot run.
#
#   scripts/replicas-on-nfs.sh                    # every run, TOKENS=60
#   JANUS_NFS_RUNS="plain cut" JANUS_NFS_TOKENS=100 scripts/replicas-on-nfs.sh
#   JANUS_NFS_BIN=target/release/janus-registration scripts/replicas-on-nfs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
lab() { bash scripts/hosts-lab.sh "$@"; }
say() { echo "replicas-on-nfs: $*"; }
[ "$(id -u)" = 0 ] || { echo "replicas-on-nfs: SKIPPED: not root"; exit 0; }

runs="${JANUS_NFS_RUNS:-plain sigkill cut nfs-restart}"
tokens="${JANUS_NFS_TOKENS:-60}"
bin="${JANUS_NFS_BIN:-target/release/janus-registration}"
if [ ! -x "$bin" ]; then
  say "building $bin"
  cargo build --release --locked >/dev/null 2>&1
fi
work="$(mktemp -d /tmp/janus-nfs-XXXXXX)"
teardown() { lab down; rm -rf "$work"; }
trap teardown EXIT

"$bin" certs fleet --out "$work/fleet" --name "nfs lab" >/dev/null 2>&1
"$bin" certs controller --fleet "$work/fleet" --out "$work/controller" \
  --san 10.77.0.11 --san 10.77.0.12 >/dev/null 2>&1
started=$SECONDS
out=$(lab up nfs a b 2>&1) || { echo "$out"; exit 1; }
while IFS= read -r line; do say "$line"; done <<<"$out"
grep -q SKIPPED <<<"$out" && exit 0

# The server: root_squash (root on a client is nobody on the share), the
# replicas' user (uid 990 on every host) owns the share's directory.
lab ssh nfs 'mkdir -p /srv/share && install -d -o 990 -g 990 -m 0700 /srv/share/jr &&
  echo "/srv/share 10.77.0.0/24(rw,sync,root_squash,no_subtree_check)" >/etc/exports &&
  systemctl start nfs-server'
for host in a b; do
  lab ssh "$host" 'mkdir -p /mnt/share /opt/jr && mount -t nfs4 -o vers=4.2,hard 10.77.0.10:/srv/share /mnt/share'
  lab copy "$bin" "$host:/opt/jr/janus-registration"
  for file in "$work/controller.crt" "$work/controller.key" scripts/lib/state-check.py; do
    lab copy "$file" "$host:/opt/jr/"
  done
  lab ssh "$host" 'mkdir -p /opt/jr/fleet' && for file in "$work"/fleet/*; do lab copy "$file" "$host:/opt/jr/fleet/"; done
  lab ssh "$host" 'chown -R janus:janus /opt/jr'
done
say "lab ready in $((SECONDS - started)) s: NFSv4.2 (hard, root_squash) from nfs, mounted on a and b"

as_janus() { lab ssh "$1" "runuser -u janus -- $2"; }
serve() { # HOST STATE
  lab ssh "$1" "systemd-run --quiet --unit jr -p User=janus -p Group=janus \
    -E JANUS_REGISTRATION_MAX_PENDING=100000000 \
    /opt/jr/janus-registration serve --listen 0.0.0.0:8443 --state $2 \
    --fleet /opt/jr/fleet --cert /opt/jr/controller.crt --key /opt/jr/controller.key \
    --rate-burst 100000000 --max-connections-per-source 0 --max-connections-per-network 0 \
    --maintenance-every 1s --reconcile-every 2s"
}
healthz() { curl -sk -o /dev/null -w '%{http_code}' --max-time 2 "https://$1:8443/healthz" || true; }
wait_healthy() { # ADDR
  for _ in $(seq 120); do [ "$(healthz "$1")" = 200 ] && return; sleep 1; done
  say "$1 never healthy"; exit 1
}
uses() { as_janus a "sh -c 'ls $1/token-uses 2>/dev/null | grep -v -e \"^\\.\" -e \"\\.ca-\" | wc -l'"; }

failed=""
for run in $runs; do
  state="/mnt/share/jr/state-$run"
  as_janus a "mkdir -m 0700 $state"
  for i in $(seq "$tokens"); do echo "nfs-$run-$i-$RANDOM$RANDOM"; done >"$work/tokens"
  lab copy "$work/tokens" a:/opt/jr/tokens && lab ssh a 'chmod 0644 /opt/jr/tokens'
  as_janus a "cp /opt/jr/tokens $state/tokens"
  serve a "$state"
  serve b "$state"
  wait_healthy 10.77.0.11
  wait_healthy 10.77.0.12
  : >"$work/health"
  ( while :; do echo "$(date +%s) a=$(healthz 10.77.0.11) b=$(healthz 10.77.0.12)" >>"$work/health"; sleep 1; done ) &
  prober=$!
  t0=$SECONDS
  for host in a b; do
    "$bin" agent swarm --addr "$(lab ip "$host"):8443" --fleet-root "$work/fleet/root.crt" \
      --nodes "$tokens" --tokens "$work/tokens" --polls 0 --concurrency 8 \
      --json "$work/$host.json" >"$work/$host.log" 2>&1 &
    echo $! >"$work/$host.swarm"
  done
  # Mid-burst: a third of the uses claimed.
  if [ "$run" != plain ]; then
    for _ in $(seq 600); do [ "$(uses "$state")" -ge $((tokens / 3)) ] && break; sleep 0.5; done
    case "$run" in
      sigkill) lab ssh b 'systemctl kill -s KILL jr; sleep 1; systemctl reset-failed jr 2>/dev/null || true'
               serve b "$state" ;;
      cut) lab cut nfs; sleep 20; lab heal nfs ;;
      nfs-restart) lab service nfs restart nfs-server ;;
    esac
    say "$run: fault at $((SECONDS - t0)) s"
  fi
  for host in a b; do wait "$(cat "$work/$host.swarm")" || true; done
  elapsed=$((SECONDS - t0))
  # Admissions a fault cut short are finished 30 s after their announcement.
  for _ in $(seq 90); do
    check_a=$(as_janus a "python3 /opt/jr/state-check.py $state")
    [ "$(jq .uses_unadmitted <<<"$check_a")" = 0 ] && break
    sleep 1
  done
  check_b=$(as_janus b "python3 /opt/jr/state-check.py $state")
  kill "$prober" 2>/dev/null || true
  wait "$prober" 2>/dev/null || true
  lab ssh a 'systemctl stop jr' || true
  lab ssh b 'systemctl stop jr' || true
  answers=$(jq -s '[.[].announce.outcomes] | add // {} ' "$work/a.json" "$work/b.json" 2>/dev/null | jq -c . || echo '{}')
  five=$(jq '[to_entries[] | select(.key | test("^5")) | .value] | add // 0' <<<"$answers")
  health=$(awk '{print $2, $3}' "$work/health" | sort | uniq -c | tr -s ' ' | tr '\n' ';')
  say "$run: $((tokens * 2)) announcements ($tokens tokens each presented to a and to b) in ${elapsed} s; answers $answers; state on a $check_a; on b: $([ "$check_a" = "$check_b" ] && echo same || echo "$check_b"); /healthz each second:$health"
  bad=$(jq -r 'to_entries[] | select((.key | IN("double","unparsable","torn_audit","uses_unadmitted","shared_names","meta_unparsable")) and .value > 0) | .key' <<<"$check_a")
  [ "$check_a" = "$check_b" ] || bad="$bad hosts-disagree"
  [ "$run" = plain ] && [ "$five" != 0 ] && bad="$bad 5xx"
  [ "$(jq .uses <<<"$check_a")" -le "$tokens" ] || bad="$bad more-uses-than-tokens"
  [ -n "$bad" ] && { say "$run: FAILED: $bad"; failed="$failed $run"; }
done
[ -z "$failed" ] || { say "FAILED:$failed"; exit 1; }
say "every run held"
