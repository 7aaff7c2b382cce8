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
# glusterd and its libraries at one version: qemu-block-extra from
# bookworm-backports (which scripts/hosts-lab.sh pulled in before it
# installed QEMU without recommends) upgrades libglusterfs0 and its kin to
# 11.x, and bookworm's glusterd 10.3 then does not start ("undefined
# symbol: _gf_timestuff"): CI skipped both GlusterFS harnesses for it.
gluster_version=$(dpkg-query -W -f='${Version}' glusterfs-server 2>/dev/null || true)
gluster_libs=()
for lib in libglusterfs0 libgfapi0 libgfrpc0 libgfxdr0 libglusterd0 libgfchangelog0; do
  version=$(dpkg-query -W -f='${Version}' "$lib" 2>/dev/null || true)
  if [ -n "$gluster_version" ] && [ -n "$version" ] && [ "$version" != "$gluster_version" ]; then
    gluster_libs+=("$lib=$gluster_version")
  fi
done
if [ ${#gluster_libs[@]} -gt 0 ]; then
  echo "${0##*/}: installing ${gluster_libs[*]} (glusterd's version)"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --allow-downgrades "${gluster_libs[@]}" \
    >/dev/null 2>&1 || skip "cannot install GlusterFS's libraries at glusterd's version ($gluster_version)"
fi
