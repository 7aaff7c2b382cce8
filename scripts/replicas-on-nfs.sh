#!/usr/bin/env bash
# Two replicas on real hosts sharing one NFSv4.2 state directory: three
# Debian VMs from scripts/hosts-lab.sh (nfs = the kernel NFS server, a and
# b = clients, a replica on each), every token presented twice at about the
# same time by two nodes (`janus-swarm` to a, another to b), under faults:
#
#   plain        a burst, nothing else
#   sigkill      b's replica killed with SIGKILL mid-burst, restarted
#   cut          the NFS server's link down 20 s mid-burst (hard mount: waits)
#   nfs-restart  the NFS server restarted mid-burst (its grace period)
#   lease        a's admin stalled mid-edit (`tokens add`, holding the
#                tokens lock, its metadata read), VM a frozen past the NFS
#                lease while b's admin adds a token and revokes another:
#                b's edits must survive a's resuming (a's add refuses)
#   revoke-seen  a token of 5 uses admits a node at a; b's admin revokes
#                it; a node presents it at a at once: it must not be
#                admitted (a's NFS client cached the `.revoked` mark's
#                absence, and hid b's for about 20 s before the fix)
#   record-seen  a's admission of a node stalls right after it claimed its
#                token's use (a debug build's hook); a node of another CA
#                presents the token at b, which looks for the use's holder
#                (its record not yet written); a's admission is let go and
#                its node polls at b at once: it must be handed the trust,
#                not 404 (b's NFS client cached the record's absence)
#
# The server's lease and grace time are JANUS_NFS_LEASE (default 15 s, the
# kernel's floor is 10; a stock server says 90) so a run outlasts it fast.
#
# After each: the state read on a and on b (scripts/lib/state-check.py, as
# the replicas' user): no token admits two nodes, no torn record or audit
# line, every consumed use ends in an admitted record, no replaced name
# with a second link, both hosts read the same; every node polls once at
# the other host's replica, and each admitted in its answer must be given
# the same trust there (polls retried through an outage for 120 s, as
# janusd keeps polling); and `/healthz` of each replica sampled through
# the fault: 503 on both replicas while the NFS server is cut off, 200 on
# both again within 120 s of every run's end. Prints one line per run;
# fails on a broken invariant.
# SKIPPED where QEMU cannot run.
#
#   scripts/replicas-on-nfs.sh                    # every run, TOKENS=60
#   JANUS_NFS_RUNS="plain cut" JANUS_NFS_TOKENS=100 scripts/replicas-on-nfs.sh
#   JANUS_NFS_BIN=target/release/janus-registration scripts/replicas-on-nfs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
lab() { bash scripts/hosts-lab.sh "$@"; }
# The VMs are reachable only inside the lab's network namespace.
inns() { ip netns exec "${JANUS_LAB_NETNS:-jrlab}" "$@"; }
say() { echo "replicas-on-nfs: $*"; }
[ "$(id -u)" = 0 ] || { echo "replicas-on-nfs: SKIPPED: not root"; exit 0; }

runs="${JANUS_NFS_RUNS:-plain sigkill cut nfs-restart lease revoke-seen record-seen}"
lease="${JANUS_NFS_LEASE:-15}"
tokens="${JANUS_NFS_TOKENS:-60}"
bin="${JANUS_NFS_BIN:-target/release/janus-registration}"
if [ ! -x "$bin" ]; then
  say "building $bin"
  cargo build --release --locked >/dev/null 2>&1
fi
# The load generator, built beside the binary (crates/bench: not in the product).
swarm="${JANUS_NFS_SWARM:-$(dirname "$bin")/janus-swarm}"
if [ ! -x "$swarm" ]; then
  say "building janus-swarm"
  cargo build --release --locked -p janus-bench >/dev/null 2>&1
  swarm=target/release/janus-swarm
fi
# The lease run's stalled admin and the record-seen run's stalled replica:
# a debug build (its test hooks), stripped.
debug_bin="${JANUS_NFS_DEBUG_BIN:-target/debug/janus-registration}"
needs_debug=""
[[ " $runs " = *" lease "* || " $runs " = *" record-seen "* ]] && needs_debug=1
if [ -n "$needs_debug" ] && [ ! -x "$debug_bin" ]; then
  say "building $debug_bin"
  cargo build --locked >/dev/null 2>&1
fi
work="$(mktemp -d /tmp/janus-nfs-XXXXXX)"
prober=""
teardown() {
  if [ -n "$prober" ]; then kill "$prober" 2>/dev/null || true; fi
  lab down
  rm -rf "$work"
}
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
  printf "[nfsd]\nlease-time='"$lease"'\ngrace-time='"$lease"'\n" >/etc/nfs.conf.d/lease.conf &&
  systemctl start nfs-server'
say "NFS server: lease $(lab ssh nfs cat /proc/fs/nfsd/nfsv4leasetime) s, grace $(lab ssh nfs cat /proc/fs/nfsd/nfsv4gracetime) s"
for host in a b; do
  lab ssh "$host" 'mkdir -p /mnt/share /opt/jr && mount -t nfs4 -o vers=4.2,hard 10.77.0.10:/srv/share /mnt/share'
  lab copy "$bin" "$host:/opt/jr/janus-registration"
  for file in "$work/controller.crt" "$work/controller.key" scripts/lib/state-check.py; do
    lab copy "$file" "$host:/opt/jr/"
  done
  lab ssh "$host" 'mkdir -p /opt/jr/fleet' && for file in "$work"/fleet/*; do lab copy "$file" "$host:/opt/jr/fleet/"; done
  lab ssh "$host" 'chown -R janus:janus /opt/jr'
done
if [ -n "$needs_debug" ]; then
  strip -o "$work/janus-registration-debug" "$debug_bin"
  lab copy "$work/janus-registration-debug" a:/opt/jr/janus-registration-debug
fi
say "lab ready in $((SECONDS - started)) s: NFSv4.2 (hard, root_squash) from nfs, mounted on a and b"

as_janus() { lab ssh "$1" "runuser -u janus -- $2"; }
serve() { # HOST STATE [BINARY [NAME=VALUE]]: the replica, as a unit
  lab ssh "$1" "systemd-run --quiet --unit jr -p User=janus -p Group=janus \
    -E JANUS_REGISTRATION_MAX_PENDING=100000000 ${4:+-E $4} \
    ${3:-/opt/jr/janus-registration} serve --listen 0.0.0.0:8443 --state $2 \
    --fleet /opt/jr/fleet --cert /opt/jr/controller.crt --key /opt/jr/controller.key \
    --rate-burst 100000000 --max-connections-per-source 0 --max-connections-per-network 0 \
    ${serve_flags:---maintenance-every 1s --reconcile-every 2s}"
}
healthz() { inns curl -sk -o /dev/null -w '%{http_code}' --max-time 2 "https://$1:8443/healthz" || true; }
wait_healthy() { # ADDR
  for _ in $(seq 120); do [ "$(healthz "$1")" = 200 ] && return; sleep 1; done
  say "$1 never healthy"; exit 1
}
# The lease run's fault: a's admin stalls inside `tokens add` (the debug
# build's hook: metadata read under the lock, not yet written), VM a is
# frozen, b's admin adds a token of 3 uses and revokes a listed one (they
# wait for the server to expire a's lease and its lock), a is thawed and
# its edit let go: it must refuse, and b's edits stay.
lease_fault() { # STATE
  local state=$1 held=0 waited only_the_lock=""
  # JANUS_NFS_ONLY_THE_LOCK=1: the stalled edit skips its metadata identity
  # check (a debug hook), so the lock's proof at the server must refuse alone.
  [ -n "${JANUS_NFS_ONLY_THE_LOCK:-}" ] && only_the_lock="JANUS_REGISTRATION_TEST_ONLY_THE_LOCK_IS_CHECKED=1"
  token_a="nfs-lease-a-$RANDOM$RANDOM$RANDOM" token_b="nfs-lease-b-$RANDOM$RANDOM$RANDOM"
  lab ssh a "touch /tmp/stall && rm -f /tmp/edit.rc /tmp/stall.reached && setsid -f sh -c 'runuser -u janus -- env \
    JANUS_REGISTRATION_TEST_STALL_IN_TOKENS_EDIT=/tmp/stall $only_the_lock /opt/jr/janus-registration-debug tokens add \
    --state $state --token $token_a --uses 2 >/tmp/edit.out 2>&1; echo \$? >/tmp/edit.rc' </dev/null >/dev/null 2>&1"
  # Held by a's admin: its edit says it reached the stall (under the lock;
  # a replica's own short edit may hold the lock too, so that alone is not
  # proof), then b cannot take the lock, three looks in a row.
  for _ in $(seq 120); do lab ssh a 'test -e /tmp/stall.reached' && break; sleep 1; done
  lab ssh a 'test -e /tmp/stall.reached' || { say "lease: a's admin never reached its stall"; return 1; }
  for _ in $(seq 120); do
    if as_janus b "flock -n $state/tokens.lock true" 2>/dev/null; then held=0; else held=$((held + 1)); fi
    [ "$held" -ge 3 ] && break
    sleep 1
  done
  [ "$held" -ge 3 ] || { say "lease: a's admin never held the tokens lock"; return 1; }
  lab freeze a
  local frozen=$SECONDS
  as_janus b "/opt/jr/janus-registration tokens add --state $state --token $token_b --uses 3 --expires-in 1h" >/dev/null
  waited=$((SECONDS - frozen))
  as_janus b "/opt/jr/janus-registration tokens revoke --state $state $token_r" >/dev/null
  say "lease: a frozen; b's tokens add got the lock after ${waited} s, then revoked a token"
  # Frozen past the lease by 5 s at least (b's edits waited for it), then let go.
  while [ $((SECONDS - frozen)) -lt $((lease + 5)) ]; do sleep 1; done
  lab thaw a
  lab ssh a 'rm -f /tmp/stall'
  for _ in $(seq 120); do lab ssh a 'test -e /tmp/edit.rc' && break; sleep 1; done
  lease_edit="rc $(lab ssh a 'cat /tmp/edit.rc'): $(lab ssh a 'tail -1 /tmp/edit.out')"
  say "lease: a thawed after $((SECONDS - frozen)) s; its stalled tokens add: $lease_edit"
}
# Whether b's edits of the lease run held: its token's metadata (3 uses,
# an expiry), the revoked token revoked, a's stalled add refused; then a's
# admin runs the add again, and it lands.
lease_check() { # STATE
  local state=$1 hash_b bad=""
  hash_b=$(printf %s "$token_b" | sha256sum | cut -c1-64)
  [ "$(as_janus b "jq -r --arg h $hash_b '.[\$h].uses' $state/tokens.meta.json")" = 3 ] || bad="$bad b-meta-lost"
  [ "$(as_janus b "jq -r --arg h $hash_b '.[\$h].expires_at != null' $state/tokens.meta.json")" = true ] || bad="$bad b-expiry-lost"
  [ "$(as_janus b "sh -c 'ls $state/token-uses | grep -c revoked\$'")" = 1 ] || bad="$bad revoke-lost"
  as_janus b "/opt/jr/janus-registration tokens list --state $state --json" | grep -q "$(printf %s "$token_r" | sha256sum | cut -c1-12)" \
    && bad="$bad revoked-listed"
  [[ "$lease_edit" = "rc 0"* ]] && bad="$bad stalled-add-not-refused"
  as_janus a "/opt/jr/janus-registration tokens add --state $state --token $token_a --uses 2" >/dev/null || bad="$bad retry-failed"
  echo "$bad"
}
# The revoke-seen run: one node admitted at a with a token of 5 uses (a
# looked for its `.revoked` mark and found none), the token revoked at b,
# then one more node at a, at once. What went wrong, if anything, goes to
# $work/revoke.bad.
revoke_seen() { # STATE
  local state=$1 token="nfs-revoke-seen-$RANDOM$RANDOM$RANDOM" n bad=""
  as_janus a "mkdir -m 0700 $state"
  echo "$token" >"$work/tokens"
  serve a "$state"
  wait_healthy 10.77.0.11
  as_janus b "/opt/jr/janus-registration tokens add --state $state --token $token --uses 5" >/dev/null
  announce() { # N: one node with the token at a; how many were admitted in their answer
    inns "$swarm" --addr 10.77.0.11:8443 --fleet-root "$work/fleet/root.crt" --nodes 1 \
      --tokens "$work/tokens" --polls 0 --json "$work/revoke-$1.json" >/dev/null 2>&1 || true
    jq -r '.admitted_in_answer // "none"' "$work/revoke-$1.json" 2>/dev/null || echo none
  }
  # a may not see the new tokens file at once (its client cached the
  # name's absence): nodes announce until one is admitted.
  local added=$SECONDS
  for i in $(seq 60); do
    n=$(announce "first-$i")
    [ "$n" = 1 ] && break
    sleep 1
  done
  say "revoke-seen: a admitted a node with the token $((SECONDS - added)) s after b added it"
  [ "$n" = 1 ] || bad="$bad first-not-admitted($n)"
  # An admin on a lists the tokens: a's client looks the `.revoked` mark
  # up after a's own last change of token-uses/ (which would have dropped
  # a cached absence), as any replica's later announcement or sweep does.
  as_janus a "/opt/jr/janus-registration tokens list --state $state" >/dev/null
  local revoked=$SECONDS
  as_janus b "/opt/jr/janus-registration tokens revoke --state $state $token" >/dev/null
  n=$(announce 2)
  say "revoke-seen: the node announced at a $((SECONDS - revoked)) s after b's revoke: admitted in its answer: $n"
  [ "$n" = 0 ] || bad="$bad admitted-after-revoke($n)"
  lab ssh a 'systemctl stop jr' || true
  echo "$bad" >"$work/revoke.bad"
}
# The record-seen run (see the top): what went wrong, if anything, goes to
# $work/record.bad.
record_seen() { # STATE
  local state=$1 token="nfs-record-seen-$RANDOM$RANDOM$RANDOM" first bad="" report
  as_janus a "mkdir -m 0700 $state"
  echo "$token" >"$work/tokens"
  lab copy "$work/tokens" a:/opt/jr/tokens && lab ssh a 'chmod 0644 /opt/jr/tokens'
  as_janus a "cp /opt/jr/tokens $state/tokens"
  lab ssh a 'touch /tmp/stall-claim && chmod 0644 /tmp/stall-claim'
  serve a "$state" /opt/jr/janus-registration-debug JANUS_REGISTRATION_TEST_STALL_AFTER_CLAIM=/tmp/stall-claim
  # b's maintenance, which lists nodes/ and so refreshes the client's view
  # of it, at its default pace: whether a cached absence survives until
  # the poll is then not a race with it.
  serve_flags="--maintenance-every 60s --reconcile-every 60s" serve b "$state"
  wait_healthy 10.77.0.11
  wait_healthy 10.77.0.12
  # One node at a, polled once at b: its admission stalls after the claim
  # (the agent gives up after 10 s, as janusd: the rest must fit in that).
  inns "$swarm" --addr 10.77.0.11:8443 --poll-addr 10.77.0.12:8443 --fleet-root "$work/fleet/root.crt" \
    --nodes 1 --tokens "$work/tokens" --polls 1 --json "$work/record-1.json" >/dev/null 2>&1 &
  first=$!
  local id=""
  for _ in $(seq 40); do
    id=$(as_janus a "sh -c 'ls -a $state/nodes | sed -n \"s/^\.claim-\(.*\)\.json\$/\1/p\"'")
    [ -n "$id" ] && break
    sleep 0.2
  done
  [ -n "$id" ] || bad="$bad no-claim-seen-at-a"
  # Another CA presents the token at b: b looks for the holder of its use.
  inns "$swarm" --addr 10.77.0.12:8443 --fleet-root "$work/fleet/root.crt" \
    --nodes 1 --tokens "$work/tokens" --polls 0 --json "$work/record-2.json" >/dev/null 2>&1 || true
  # And b looks the record's name up once more, now (any process on b
  # shares its client's cache): its absence is cached however the server's
  # own lookup was timed.
  as_janus b "stat $state/nodes/$id.json" >/dev/null 2>&1 && bad="$bad record-written-before-the-release"
  lab ssh a 'rm -f /tmp/stall-claim'
  wait "$first" || true
  report=$(jq -c '{admitted_in_answer, admitted_untrusted_in_poll, untrusted_poll_outcomes, polls: .poll.outcomes}' \
    "$work/record-1.json" 2>/dev/null || echo "no report")
  say "record-seen: the node admitted at a, polled at b: $report; the other CA's node at b: $(jq -c '.announce.outcomes' "$work/record-2.json" 2>/dev/null || echo "no report")"
  [ "$(jq .admitted_in_answer "$work/record-1.json" 2>/dev/null)" = 1 ] || bad="$bad not-admitted-at-a"
  [ "$(jq .admitted_untrusted_in_poll "$work/record-1.json" 2>/dev/null)" = 0 ] || bad="$bad not-given-the-trust-at-b"
  lab ssh a 'systemctl stop jr' || true
  lab ssh b 'systemctl stop jr' || true
  echo "$bad" >"$work/record.bad"
}
uses() { as_janus a "sh -c 'ls $1/token-uses 2>/dev/null | grep -cE \"^[0-9a-f]{64}-[0-9]+\\\$\" || true'"; }

failed=""
for run in $runs; do
  state="/mnt/share/jr/state-$run"
  if [ "$run" = revoke-seen ] || [ "$run" = record-seen ]; then
    "${run/-/_}" "$state"
    bad=$(xargs <"$work/${run%-seen}.bad")
    [ -n "$bad" ] && { say "$run: FAILED: $bad"; failed="$failed $run"; }
    continue
  fi
  as_janus a "mkdir -m 0700 $state"
  for i in $(seq "$tokens"); do echo "nfs-$run-$i-$RANDOM$RANDOM"; done >"$work/tokens"
  # One more listed, presented by no node: the lease run revokes it.
  token_r="nfs-$run-revoked-$RANDOM$RANDOM$RANDOM"
  { cat "$work/tokens"; echo "$token_r"; } >"$work/tokens-listed"
  lab copy "$work/tokens-listed" a:/opt/jr/tokens && lab ssh a 'chmod 0644 /opt/jr/tokens'
  as_janus a "cp /opt/jr/tokens $state/tokens"
  serve a "$state"
  serve b "$state"
  wait_healthy 10.77.0.11
  wait_healthy 10.77.0.12
  : >"$work/health"
  ( while :; do echo "$(date +%s) a=$(healthz 10.77.0.11) b=$(healthz 10.77.0.12)" >>"$work/health"; sleep 1; done ) &
  prober=$!
  t0=$SECONDS
  # Each node polls once, at the other host's replica: its trust from either.
  for host in a b; do
    other=$([ "$host" = a ] && echo b || echo a)
    inns "$swarm" --addr "$(lab ip "$host"):8443" --poll-addr "$(lab ip "$other"):8443" \
      --poll-retry-for 120s --fleet-root "$work/fleet/root.crt" --nodes "$tokens" --tokens "$work/tokens" --polls 1 --concurrency 8 \
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
      lease) lease_fault "$state" || failed="$failed lease" ;;
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
  # /healthz says 200 again on both once the fault is over (a replica
  # that can write again says so): within 120 s, else the run fails.
  recovered=""
  for ip in 10.77.0.11 10.77.0.12; do
    for _ in $(seq 120); do [ "$(healthz "$ip")" = 200 ] && break; sleep 1; done
    [ "$(healthz "$ip")" = 200 ] || recovered="$recovered $ip"
  done
  kill "$prober" 2>/dev/null || true
  wait "$prober" 2>/dev/null || true
  prober=""
  # A replica saying 503 at the end: where its threads wait, for the log.
  for host in a b; do
    if tail -1 "$work/health" | grep -q "$host=503"; then
      say "$run: $host still 503 after the burst; its threads' kernel stacks:"
      # shellcheck disable=SC2016 # expanded in the VM
      lab ssh "$host" 'pid=$(systemctl show -p MainPID --value jr); for t in /proc/$pid/task/*; do
        echo "$(cat $t/comm) $(cat $t/wchan): $(head -6 $t/stack | awk "{print \$2}" | tr "\n" " ")"; done | sort | uniq -c | sort -rn | head -8' || true
      lab ssh "$host" "journalctl -u jr --no-pager | grep -v 'status=20[01]' | tail -5" || true
    fi
  done
  lab ssh a 'systemctl stop jr' || true
  lab ssh b 'systemctl stop jr' || true
  # Read with no writer left, on both hosts.
  check_a=$(as_janus a "python3 /opt/jr/state-check.py $state")
  check_b=$(as_janus b "python3 /opt/jr/state-check.py $state")
  answers=$(jq -sc 'reduce (.[].announce.outcomes // {} | to_entries[]) as $e ({}; .[$e.key] += $e.value)' \
    "$work/a.json" "$work/b.json" 2>/dev/null || echo '{}')
  five=$(jq '[to_entries[] | select(.key | test("^5")) | .value] | add // 0' <<<"$answers")
  trust=$(jq -sr '"\(map(.admitted_in_answer) | add) admitted in their answer, \(map(.admitted_untrusted_in_poll) | add) of them not given it\(
      [.[] | .untrusted_poll_outcomes // {} | to_entries[] | "\(.key)=\(.value)"] | if length > 0 then " (their last poll: \(join(" ")))" else "" end)"' \
    "$work/a.json" "$work/b.json" 2>/dev/null || echo "no report")
  # The samples in order, runs of the same answer counted: "a=200 b=200 x5; ...".
  health=$(awk '{ s = $2 " " $3; if (s != last && n) { printf "%s x%d; ", last, n; n = 0 } last = s; n++ }
    END { if (n) printf "%s x%d", last, n }' "$work/health")
  say "$run: $((tokens * 2)) announcements ($tokens tokens each presented to a and to b) in ${elapsed} s; answers $answers; trust polled at the other replica: $trust; state on a $check_a; on b: $([ "$check_a" = "$check_b" ] && echo same || echo "$check_b"); /healthz each second: $health"
  bad=$(jq -r 'to_entries[] | select((.key | IN("double","unparsable","torn_audit","uses_unadmitted","shared_names","meta_unparsable")) and .value > 0) | .key' <<<"$check_a")
  [ "$check_a" = "$check_b" ] || bad="$bad hosts-disagree"
  [ "$run" = plain ] && [ "$five" != 0 ] && bad="$bad 5xx"
  [ -n "$recovered" ] && bad="$bad not-200-after-the-fault:${recovered// /,}"
  # A hung mount is said: while the NFS server's link is down, each
  # replica's /healthz says 503 (a sample or more), not 200 throughout.
  if [ "$run" = cut ]; then
    grep -q 'a=503' "$work/health" || bad="$bad a-never-503-while-cut"
    grep -q 'b=503' "$work/health" || bad="$bad b-never-503-while-cut"
  fi
  # Every node admitted in its answer is given the same trust by the other
  # replica, polling through its outage (killed, frozen, cut off) as janusd does.
  if [[ "$trust" != *" 0 of them not given it" ]]; then
    bad="$bad untrusted-at-the-other-replica"
    # Where each went missing: its record, decisions and ledger on both hosts, and the logs.
    for id in $(jq -r '.untrusted_ids // [] | .[]' "$work/a.json" "$work/b.json" 2>/dev/null); do
      for host in a b; do
        say "$run: untrusted $id on $host: $(as_janus "$host" "sh -c 'cd $state && ls -l --time-style=+%T.%N nodes/$id.json approved/$id rejected/$id delivered/$id 2>&1 | tr \"\\n\" \" \"'")"
        lab ssh "$host" "journalctl -u jr --no-pager -o short-precise | grep $id | tail -5" || true
      done
    done
  fi
  [ "$(jq .uses <<<"$check_a")" -le "$tokens" ] || bad="$bad more-uses-than-tokens"
  [ "$run" = lease ] && bad="$bad $(lease_check "$state")"
  bad=$(xargs <<<"$bad")
  [ -n "$bad" ] && { say "$run: FAILED: $bad"; failed="$failed $run"; }
done
[ -z "$failed" ] || { say "FAILED:$failed"; exit 1; }
say "every run held; the whole pass took $((SECONDS - started)) s (the lab's boot included)"
