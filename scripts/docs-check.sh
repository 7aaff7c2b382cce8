#!/usr/bin/env bash
# Runs every shell block the documentation marks runnable (a fence opened
# with ```sh runnable) in README.md and docs/*.md, against a fresh build:
# each file's blocks in order, in a new empty directory of their own, with
# `janus-registration` on the PATH, under `set -euo pipefail`. A block
# fenced ```sh runnable-container runs the image too (Podman, as
# scripts/container-check.sh configured it, `$IMAGE` the image it built):
# it says SKIPPED, with the reason, where there is no Podman or no image.
# Blocks that need a cluster or systemd (kubectl, systemctl) are not
# marked: scripts/kube-check.sh and systemd-check.sh run what they show.
#
#   scripts/docs-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked -q
bin_dir=$(mktemp -d)
work=""
blocks=""
# Servers a block started and left (their working directory is the
# block's), and every directory made here: gone however this ends.
stop_servers() {
  local pid
  [ -n "$work" ] || return 0
  for pid in $(pgrep -f janus-registration 2>/dev/null || true); do
    if [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$work" ]; then
      kill "$pid" 2>/dev/null || true
    fi
  done
}
# shellcheck disable=SC2317 # run by the trap
cleanup() {
  stop_servers
  rm -rf "$bin_dir" "$work" "$blocks"
}
trap cleanup EXIT
ln -s "$PWD/target/debug/janus-registration" "$bin_dir/janus-registration"
# The image container-check.sh built, through the configuration it made.
image=janus-registration:$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "${CONTAINERS_CONF:-}" ] || [ ! -f target/containers.conf ] || export CONTAINERS_CONF=$PWD/target/containers.conf
status=0
checked=0
for doc in README.md docs/*.md; do
  blocks=$(mktemp -d)
  python3 - "$doc" "$blocks" <<'PY'
import sys
doc, out = sys.argv[1], sys.argv[2]
n, block = 0, None
for line in open(doc):
    if block is None and line.strip() in ("```sh runnable", "```sh runnable-container"):
        block, kind = [], ".container" if line.strip().endswith("-container") else ""
    elif block is not None and line.strip() == "```":
        n += 1
        with open(f"{out}/{n:03d}{kind}.sh", "w") as f:
            f.write("".join(block))
        block = None
    elif block is not None:
        block.append(line)
if block is not None:
    sys.exit(f"{doc}: a runnable block is not closed")
PY
  work=$(mktemp -d)
  for block in "$blocks"/*.sh; do
    [ -e "$block" ] || continue
    case $block in
      *.container.sh)
        if ! command -v podman >/dev/null 2>&1 || ! podman image exists "$image" 2>/dev/null; then
          echo "docs-check: SKIPPED $doc block $(basename "$block" .sh): no Podman or no image $image (scripts/container-check.sh builds it)"
          continue
        fi ;;
    esac
    checked=$((checked + 1))
    if (cd "$work" && PATH="$bin_dir:$PATH" IMAGE=$image bash -euo pipefail "$block") >"$work/.out" 2>&1; then
      echo "docs-check: ok   $doc block $(basename "$block" .sh)"
    else
      echo "docs-check: FAIL $doc block $(basename "$block" .sh):"
      sed 's/^/    /' "$block"
      echo "  output:"
      tail -20 "$work/.out" | sed 's/^/    /'
      status=1
    fi
  done
  # A block that started a server and failed before stopping it.
  stop_servers
  rm -rf "$work" "$blocks"
  work=""
  blocks=""
done
[ "$checked" -gt 0 ] || { echo "docs-check: FAILED: no runnable block found"; exit 1; }
[ "$status" = 0 ] && echo "docs-check: OK ($checked runnable blocks)"
exit "$status"
