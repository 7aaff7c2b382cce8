# shellcheck shell=bash
# What both GlusterFS harnesses need before they start, sourced: root,
# /dev/fuse and the GlusterFS packages (installed when missing). Calls the
# sourcing script's `skip REASON` (which says SKIPPED and exits 0) where
# any of them cannot be had.
[ "$(id -u)" = 0 ] || skip "not root"
[ -e /dev/fuse ] || skip "no /dev/fuse"
if ! command -v glusterd >/dev/null 2>&1 || ! command -v mount.glusterfs >/dev/null 2>&1; then
  echo "${0##*/}: installing glusterfs-server glusterfs-client"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq glusterfs-server glusterfs-client; } \
    >/dev/null 2>&1 || skip "cannot install GlusterFS"
fi
