#!/usr/bin/env bash
# shellcheck disable=SC2016 # mmdebstrap's hooks and the guest's script expand $1 and the rest later, not here
# Real hosts on this machine: small Debian 12 VMs under QEMU, in a network
# namespace of their own, for tests that need separate kernels (NFSv4
# between hosts, a host frozen past its lease, a link cut).
#
#   scripts/hosts-lab.sh image                 # build the VM image (cached)
#   scripts/hosts-lab.sh with nfs a b -- CMD   # boot VMs, run CMD, tear down on any exit
#   scripts/hosts-lab.sh up nfs a b            # boot VMs (10.77.0.10, .11, .12 in order)
#   scripts/hosts-lab.sh ssh a 'uname -r'      # run a command in a VM, as root
#   scripts/hosts-lab.sh copy FILE a:/opt/jr/  # copy a file into a VM
#   scripts/hosts-lab.sh freeze a | thaw a     # stop / resume a VM's CPUs (QEMU monitor)
#   scripts/hosts-lab.sh cut a | heal a        # take a VM's link down / up
#   scripts/hosts-lab.sh service a stop nfs-server   # systemctl in a VM
#   scripts/hosts-lab.sh ip a                  # a VM's address
#   scripts/hosts-lab.sh down                  # stop the VMs it started, delete the namespace
#
# Everything lives in JANUS_LAB_DIR (default /var/tmp/janus-hosts-lab): the
# image (kept between runs), the ssh key, each VM's overlay, console log
# and monitor socket. The VMs' network is the namespace JANUS_LAB_NETNS
# (default jrlab): a bridge 10.77.0.1/24 and one tap per VM, no route out,
# none in from the root namespace; clients run inside it with
# `ip netns exec jrlab ...` (`with` runs CMD there). Only the qemu
# processes it started (by their pid files, checked to be qemu) are
# stopped. KVM where the CPU virtualises, TCG otherwise (said on start).
# Needs root. Prints SKIPPED (and exits 0) where QEMU cannot run at all.
set -euo pipefail

lab="${JANUS_LAB_DIR:-/var/tmp/janus-hosts-lab}"
netns="${JANUS_LAB_NETNS:-jrlab}"
image="$lab/image"
run="$lab/run"
key="$lab/ssh/id_ed25519"
say() { echo "hosts-lab: $*" >&2; }
skip() { echo "hosts-lab: SKIPPED: $*"; exit 0; }

# The image's packages: the kernel NFS server and client, ssh, and what
# the tests run inside (python3, curl, jq, strace).
packages=linux-image-amd64,systemd-sysv,udev,nfs-kernel-server,nfs-common,openssh-server,iproute2,python3,openssl,jq,curl,procps,kmod,e2fsprogs,strace,util-linux

install_tools() {
  if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
    # The machine's qemu-utils come from bookworm-backports and break
    # bookworm's qemu-system: install from backports, with a private
    # sources list (the system's apt lists are left as they are).
    say "installing qemu-system-x86 from bookworm-backports"
    mkdir -p "$lab/apt/lists/partial"
    cat >"$lab/apt/sources.list" <<EOF
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main
EOF
    local apt=(-o DPkg::Lock::Timeout=300 -o "Dir::Etc::sourcelist=$lab/apt/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::lists=$lab/apt/lists")
    apt-get "${apt[@]}" update -qq >/dev/null || skip "cannot reach Debian's package registry"
    # Without recommends: qemu-block-extra would bring GlusterFS's libraries
    # from backports, under which bookworm's glusterd does not start.
    DEBIAN_FRONTEND=noninteractive apt-get "${apt[@]}" install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86 >/dev/null \
      || skip "cannot install qemu-system-x86"
  fi
  if ! command -v mmdebstrap >/dev/null 2>&1; then
    say "installing mmdebstrap"
    { apt-get -o DPkg::Lock::Timeout=300 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq mmdebstrap; } >/dev/null \
      || skip "cannot install mmdebstrap"
  fi
}

# The network unit: hostname and address from the kernel command line
# (jrlab.name=, jrlab.ip=), so each VM of the one image is its own host
# (NFSv4 client ids differ). It waits for the NIC itself: `udevadm settle`
# times out under TCG.
net_script='#!/bin/sh
for word in $(cat /proc/cmdline); do
  case "$word" in jrlab.ip=*) ip="${word#jrlab.ip=}";; jrlab.name=*) name="${word#jrlab.name=}";; esac
done
hostname "$name"; echo "$name" >/etc/hostname
echo "127.0.1.1 $name" >>/etc/hosts
for _ in $(seq 600); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
ip link set lo up; ip addr add "$ip/24" dev eth0; ip link set eth0 up'
net_unit='[Unit]
Description=jrlab address from the kernel command line
Before=network-online.target ssh.service nfs-server.service
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/jrlab-net
RemainAfterExit=yes
[Install]
WantedBy=multi-user.target'

build_image() {
  if [ -f "$image/disk.raw" ] && [ -f "$image/vmlinuz" ] && [ -f "$image/initrd.img" ] && [ -f "$key" ]; then
    return
  fi
  install_tools
  local started=$SECONDS
  rm -rf "$image" "$lab/ssh"
  mkdir -p "$image" "$lab/ssh"
  ssh-keygen -q -t ed25519 -N '' -f "$key"
  say "building the Debian 12 image (mmdebstrap, once; about 2 minutes)"
  printf '%s\n' "$net_script" >"$lab/jrlab-net"
  printf '%s\n' "$net_unit" >"$lab/jrlab-net.service"
  # The NFS server gets NFSv4.2 only; its lease and grace period are the
  # lab's (JANUS_LAB_NFS_LEASE, default 90 s as a stock server) so a test
  # can outlast the lease.
  mmdebstrap --variant=apt --include="$packages" \
    --customize-hook="install -m 0755 $lab/jrlab-net \"\$1/usr/local/sbin/jrlab-net\"" \
    --customize-hook="install -m 0644 $lab/jrlab-net.service \"\$1/etc/systemd/system/jrlab-net.service\"" \
    --customize-hook="install -D -m 0600 $key.pub \"\$1/root/.ssh/authorized_keys\"" \
    --customize-hook='chroot "$1" systemctl enable jrlab-net.service' \
    --customize-hook='chroot "$1" systemctl disable nfs-server.service rpcbind.service rpcbind.socket' \
    --customize-hook='chroot "$1" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer' \
    --customize-hook='chroot "$1" useradd --system --uid 990 --create-home janus' \
    --customize-hook='printf "[nfsd]\nvers3=n\nvers4.0=n\nvers4.1=n\nvers4.2=y\n" >"$1/etc/nfs.conf.d/jrlab.conf"' \
    --customize-hook='echo "/dev/vda / ext4 rw 0 1" >"$1/etc/fstab"; : >"$1/etc/machine-id"' \
    --customize-hook='echo MODULES=list >"$1/etc/initramfs-tools/conf.d/jrlab"; printf "virtio_pci\nvirtio_blk\nvirtio_net\next4\n" >>"$1/etc/initramfs-tools/modules"' \
    --customize-hook='chroot "$1" update-initramfs -u -k all' \
    bookworm "$image/root" >"$lab/mmdebstrap.log" 2>&1 || { tail -20 "$lab/mmdebstrap.log" >&2; say "mmdebstrap failed"; exit 1; }
  cp "$(readlink -f "$image/root/vmlinuz")" "$image/vmlinuz"
  cp "$(readlink -f "$image/root/initrd.img")" "$image/initrd.img"
  mkfs.ext4 -q -F -L jrroot -d "$image/root" "$image/disk.raw" 3G
  rm -rf "$image/root"
  say "image built in $((SECONDS - started)) s"
}

accelerator() {
  # /dev/kvm backed by kvm_pvm (no VMX/SVM) runs a stock kernel at about
  # 1/1000 speed (../shared/research/vms-nfs.md): TCG is faster there.
  if [ -w /dev/kvm ] && [ ! -e /sys/module/kvm_pvm ] && grep -qE 'vmx|svm' /proc/cpuinfo; then
    echo kvm
  else
    echo tcg
  fi
}

# name -> last octet of its address, as `up` assigned them.
octet() {
  local line
  line=$(grep -m1 "^$1 " "$run/hosts" 2>/dev/null) || { say "no VM named $1 (up first)"; exit 1; }
  echo "${line#* }"
}
ip_of() { echo "10.77.0.$(octet "$1")"; }
in_netns() { if [ "$(ip netns identify 2>/dev/null)" = "$netns" ]; then "$@"; else ip netns exec "$netns" "$@"; fi; }
ssh_opts() {
  echo -i "$key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
    -o ConnectTimeout=5 -o ServerAliveInterval=5 -o ServerAliveCountMax=3 \
    -o ControlMaster=auto -o "ControlPath=$run/%h.ctl" -o ControlPersist=600
}
vm_ssh() { # NAME CMD...
  local name=$1
  shift
  # shellcheck disable=SC2046 # the options are words without spaces
  in_netns ssh $(ssh_opts) "root@$(ip_of "$name")" "$@"
}
monitor() { # NAME COMMAND
  python3 - "$run/$1.mon" "$2" <<'EOF'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
time.sleep(0.1)
s.recv(65536)
s.sendall((sys.argv[2] + "\n").encode())
time.sleep(0.2)
s.close()
EOF
}

up() { # NAMES...
  [ $# -gt 0 ] || { say "up: name the VMs"; exit 1; }
  build_image
  [ -d "$run" ] && { say "a lab is up already ($run): down first"; exit 1; }
  mkdir -p "$run"
  local accel
  accel=$(accelerator)
  say "accelerator: $accel$([ "$accel" = tcg ] && echo ' (software emulation: no usable KVM here)')"
  ip netns add "$netns"
  ip -n "$netns" link set lo up
  ip -n "$netns" link add br0 type bridge
  ip -n "$netns" addr add 10.77.0.1/24 dev br0
  ip -n "$netns" link set br0 up
  local n=10 name
  for name in "$@"; do
    echo "$name $n" >>"$run/hosts"
    ip -n "$netns" tuntap add "tap-$name" mode tap
    ip -n "$netns" link set "tap-$name" master br0 up
    qemu-img create -q -f qcow2 -F raw -b "$image/disk.raw" "$run/$name.qcow2"
    in_netns qemu-system-x86_64 -name "$name" -accel "$accel" -m 768 -smp 1 \
      -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
      -append "root=/dev/vda rw console=ttyS0 quiet net.ifnames=0 jrlab.ip=10.77.0.$n jrlab.name=$name" \
      -drive "file=$run/$name.qcow2,if=virtio,format=qcow2,cache=unsafe" \
      -netdev "tap,id=n0,ifname=tap-$name,script=no,downscript=no" \
      -device "virtio-net-pci,netdev=n0,mac=52:54:00:77:00:$n" \
      -serial "file:$run/$name.console" -monitor "unix:$run/$name.mon,server,nowait" \
      -display none -daemonize -pidfile "$run/$name.pid"
    n=$((n + 1))
  done
  local started=$SECONDS
  for name in "$@"; do
    until vm_ssh "$name" true 2>/dev/null; do
      if [ $((SECONDS - started)) -gt "${JANUS_LAB_BOOT_SECS:-600}" ]; then
        say "$name did not answer ssh in ${JANUS_LAB_BOOT_SECS:-600} s; its console:"
        tail -20 "$run/$name.console" >&2 || true
        exit 1
      fi
      sleep 2
    done
    say "$name ($(ip_of "$name")) up after $((SECONDS - started)) s"
  done
}

down() {
  local pid
  if [ -d "$run" ]; then
    for ctl in "$run"/*.ctl; do
      if [ -e "$ctl" ]; then in_netns ssh -o "ControlPath=$ctl" -O exit dummy >/dev/null 2>&1 || true; fi
    done
    for pidfile in "$run"/*.pid; do
      [ -e "$pidfile" ] || continue
      pid=$(cat "$pidfile")
      if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = qemu-system-x86 ]; then
        kill -CONT "$pid" 2>/dev/null || true
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do [ -e "/proc/$pid" ] || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
    rm -rf "$run"
  fi
  ip netns del "$netns" 2>/dev/null || true
}

[ "$(id -u)" = 0 ] || skip "not root"
command -v ip >/dev/null 2>&1 || skip "no ip(8)"
mkdir -p "$lab"
case "${1:-}" in
  image) build_image ;;
  up) shift; up "$@" ;;
  down) down ;;
  with)
    shift
    names=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do names+=("$1"); shift; done
    [ "${1:-}" = -- ] || { say "with NAMES -- COMMAND"; exit 1; }
    shift
    trap down EXIT
    up "${names[@]}"
    JANUS_LAB="$(readlink -f "$0")" in_netns "$@"
    ;;
  ssh) shift; vm_ssh "$@" ;;
  copy)
    # shellcheck disable=SC2046
    in_netns scp -q $(ssh_opts) "$2" "root@$(ip_of "${3%%:*}"):${3#*:}" ;;
  freeze) monitor "$2" stop ;;
  thaw) monitor "$2" cont ;;
  cut) ip -n "$netns" link set "tap-$2" down ;;
  heal) ip -n "$netns" link set "tap-$2" up ;;
  service) vm_ssh "$2" systemctl "$3" "$4" ;;
  ip) ip_of "$2" ;;
  *) sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
