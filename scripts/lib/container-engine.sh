# shellcheck shell=bash
# Sourced by scripts/container-check.sh and scripts/kube-check.sh: picks a
# container engine, and builds the project's image with it.
#
#   engine_pick        sets $engine to docker or podman (installing Podman
#                      from Debian where neither runs, and configuring it
#                      through a containers.conf of its own: /etc is never
#                      edited), or prints SKIPPED with the reason and exits 0
#   image_build TAG    builds the Dockerfile as TAG (and its version tag),
#                      making local stand-ins for the FROM images where
#                      they cannot be pulled
#
# Stand-ins (shared/research/containers.md): the registries FROM names are
# not reachable on every machine (ours reach only package registries). The
# build stage then gets a Debian bookworm with gcc and this machine's Rust
# toolchain and CA bundle; the runtime stage a distroless-like tree
# (glibc, libgcc, libstdc++, libssl, CA certificates, nonroot 65532, no
# shell). Both are tagged with the names FROM uses, and the output says so.

say() { echo "${SCRIPT_NAME:-container}: $*"; }

engine_pick() {
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    engine=docker
    return
  fi
  if ! command -v podman >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "no Docker engine; installing Podman from Debian (podman runc mmdebstrap)"
      if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap uidmap >/dev/null; }; then
        say "SKIPPED: no Docker engine and Podman could not be installed"
        exit 0
      fi
    else
      say "SKIPPED: no Docker engine and no Podman (needs root and apt-get to install it)"
      exit 0
    fi
  fi
  engine_configure_podman
  engine=podman
}

# Whether containers run at all here: `true` in the build image.
engine_probe() {
  local err
  if ! err=$($engine run --rm --network=none "$build_from" true 2>&1); then
    say "SKIPPED: $engine cannot run a container here: $(printf '%s' "$err" | tail -1)"
    exit 0
  fi
}

# crun refuses these machines' cgroup layout, and Podman's default rlimits
# exceed what the sandbox lets a process set: runc, and named limits, in a
# containers.conf of the script's own (CONTAINERS_CONF: Podman then reads
# it instead of /etc's, which is left as it was; appending to /etc's breaks
# every podman command on a host whose file has these tables already).
engine_configure_podman() {
  [ -z "${CONTAINERS_CONF:-}" ] || return 0
  local conf="$PWD/target/containers.conf"
  mkdir -p "$PWD/target"
  cat >"$conf" <<'CONF'
# janus-registration's container checks (shared/research/containers.md)
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=8192:8192"]
[engine]
runtime = "runc"
CONF
  export CONTAINERS_CONF="$conf"
  say "configured Podman through CONTAINERS_CONF=$conf (runc, named rlimits); /etc/containers untouched"
}

dockerfile_from() { grep -E '^FROM ' Dockerfile | sed -n "${1}p" | awk '{print $2}'; }

base_runtime_image() {
  runtime_from=$(dockerfile_from 2)
  $engine image exists "$runtime_from" 2>/dev/null && return 0
  $engine pull -q "$runtime_from" >/dev/null 2>&1 && { say "pulled $runtime_from"; return 0; }
  say "cannot pull $runtime_from; building a local stand-in under that name from Debian packages (glibc, libgcc, libstdc++, libssl, CA certificates, nonroot 65532, no shell)"
  local dir
  dir=$(mktemp -d)
  mmdebstrap --quiet --variant=extract \
    --include=base-files,netbase,tzdata,ca-certificates,libc6,libgcc-s1,libstdc++6,libgomp1,libssl3 \
    bookworm "$dir/rootfs.tar" >/dev/null
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$dir/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$dir/group"
  cat >"$dir/Containerfile" <<'CF'
FROM scratch
ADD rootfs.tar /
COPY passwd group /etc/
USER 65532:65532
WORKDIR /home/nonroot
CF
  $engine build -q --pull=never --format docker -t "$runtime_from" "$dir" >/dev/null
  rm -rf "$dir"
}

base_build_image() {
  build_from=$(dockerfile_from 1)
  $engine image exists "$build_from" 2>/dev/null && return 0
  $engine pull -q "$build_from" >/dev/null 2>&1 && { say "pulled $build_from"; return 0; }
  local toolchain
  toolchain=$(rustc --print sysroot)
  say "cannot pull $build_from; building a local stand-in under that name: Debian bookworm, gcc, this machine's Rust toolchain ($(basename "$toolchain")) and CA bundle"
  local dir
  dir=$(mktemp -d)
  mmdebstrap --quiet --variant=minbase --include=gcc,libc6-dev,make,pkg-config,ca-certificates \
    bookworm "$dir/rootfs" >/dev/null
  mkdir -p "$dir/rootfs/usr/local/rust" "$dir/rootfs/usr/local/cargo"
  cp -a "$toolchain/bin" "$toolchain/lib" "$dir/rootfs/usr/local/rust/"
  cp /etc/ssl/certs/ca-certificates.crt "$dir/rootfs/etc/ssl/certs/ca-certificates.crt"
  tar -C "$dir/rootfs" -c . | $engine import -q \
    --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV CARGO_HOME=/usr/local/cargo' \
    - "$build_from" >/dev/null
  rm -rf "$dir"
}

# The version the image is labelled with: the crate's, as `--version` says it.
crate_version() { sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1; }

image_build() {
  local tag=$1 started
  base_build_image
  engine_probe
  base_runtime_image
  started=$(date +%s)
  say "building the image ($engine build --format docker; the dist profile)"
  local format=()
  [ "$engine" = podman ] && format=(--format docker --pull=never)
  $engine build -q "${format[@]}" --network=host \
    --build-arg "VERSION=$(crate_version)" -t "$tag" -t "janus-registration:$(crate_version)" . >/dev/null
  image_build_seconds=$(($(date +%s) - started))
  # On a CI machine, drop the build stage's intermediate image (1.6 GB).
  [ -z "${CI:-}" ] || $engine image prune -f >/dev/null 2>&1 || true
  image_size=$($engine image inspect "$tag" --format '{{.Size}}')
  say "image built in ${image_build_seconds} s, $((image_size / 1000000)) MB"
}
