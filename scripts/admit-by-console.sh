#!/usr/bin/env bash
# Admission command for `serve --admission-command`: admits a node when a
# serial-console log shows its CA - the seed's "checked against its console",
# automated.
#
#   JANUS_CONSOLE_DIR=/var/log/libvirt/qemu \
#     janus-registration serve ... --admission-command scripts/admit-by-console.sh
#
# stdin: the node record as JSON (serve's compact form, with ca_sha256).
# Looks at every file in $JANUS_CONSOLE_DIR (libvirt's <serial type='file'>
# logs, one per VM): a node is admitted when the LAST line
# `pki: this node's CA: SHA-256 <hex>` of some log equals its ca_sha256 (the
# last line wins: a node prints it at every boot, after a CA rotation the
# new one).
# Exit 0: admit. Exit 1: leave pending. Exit 2: cannot decide (logged by serve).
set -uo pipefail
dir=${JANUS_CONSOLE_DIR:-/var/log/libvirt/qemu}
record=$(cat)
want=$(printf '%s' "$record" | sed -n 's/.*"ca_sha256":"\([0-9a-f]\{64\}\)".*/\1/p')
[ -n "$want" ] || { echo "admit-by-console: the record has no ca_sha256" >&2; exit 2; }
[ -d "$dir" ] || { echo "admit-by-console: no console directory $dir" >&2; exit 2; }
for log in "$dir"/*; do
  [ -f "$log" ] || continue
  got=$(grep -ao "pki: this node's CA: SHA-256 [0-9a-f]\{64\}" "$log" | tail -1 | awk '{print $NF}')
  if [ -n "$got" ] && [ "$got" = "$want" ]; then
    echo "admit-by-console: $log shows CA $want" >&2
    exit 0
  fi
done
exit 1
