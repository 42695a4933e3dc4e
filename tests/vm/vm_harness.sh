#!/usr/bin/env bash
# Two Soft-RoCE (rdma_rxe) guests on host loopback, for tests of the real verbs path.
# See docs/soft-roce-vm.md for what this relies on.
#
# Usage:
#   vm_harness.sh prepare
#       Installs qemu-system-x86, busybox-static and cpio when missing, downloads a Debian
#       6.1 kernel package, and builds the initramfs. Cached under $ROCETUNE_VM_CACHE
#       (default /var/cache/rocetune-vm).
#   vm_harness.sh run OUTDIR SCRIPT_A SCRIPT_B
#       Boots two guests (a: 10.77.0.1, b: 10.77.0.2), each loads rdma_rxe, brings up eth0,
#       creates rxe0 on it and runs its script (bash) chrooted into the host's root (read-only).
#       OUTDIR is shared writable by both guests at /run/vmout; the scripts are copied there.
#       In a guest: $VM_ID (a|b), $VM_PEER_IP, $VM_SELF_IP, $VM_OUT (=/run/vmout).
#       A script's stdout/stderr go to OUTDIR/<id>.log, its exit code to OUTDIR/<id>.rc;
#       serial consoles to OUTDIR/console_<id>.log. Exits 0 when both scripts exited 0.
# Exit code 77 (SKIP) only when qemu or the kernel package cannot be had.
set -euo pipefail

CACHE="${ROCETUNE_VM_CACHE:-/var/cache/rocetune-vm}"
SKIP=77
VM_TIMEOUT="${ROCETUNE_VM_TIMEOUT:-240}"
# The checkout shared into the guests at its own path (default: this script's repository).
PROJECT_DIR="${ROCETUNE_VM_PROJECT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"

log() { echo "vm_harness: $*" >&2; }
skip() { echo "SKIP: $*" >&2; exit "$SKIP"; }

# Modules in load order (plain .ko in Debian's 6.1 package).
MODULES=(
  drivers/virtio/virtio_ring.ko drivers/virtio/virtio.ko
  drivers/virtio/virtio_pci_modern_dev.ko drivers/virtio/virtio_pci_legacy_dev.ko
  drivers/virtio/virtio_pci.ko
  fs/netfs/netfs.ko fs/fscache/fscache.ko
  net/9p/9pnet.ko net/9p/9pnet_virtio.ko fs/9p/9p.ko
  net/core/failover.ko drivers/net/net_failover.ko drivers/net/virtio_net.ko
  crypto/crc32_generic.ko
  drivers/infiniband/core/ib_core.ko drivers/infiniband/core/ib_uverbs.ko
  net/ipv4/udp_tunnel.ko net/ipv6/ip6_udp_tunnel.ko
  drivers/infiniband/sw/rxe/rdma_rxe.ko
)

install_tools() {
  local need=()
  command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
  dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "install ok installed" ||
    need+=(busybox-static)
  command -v cpio >/dev/null || need+=(cpio)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
      apt-get update -qq >/dev/null 2>&1 || true
      apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || true
    fi
  fi
  command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86 cannot be installed"
  command -v cpio >/dev/null || skip "cpio cannot be installed"
  [ -x /bin/busybox ] || skip "busybox-static cannot be installed"
}

# Newest linux-image-6.1.0-N-amd64-unsigned with an install candidate.
pick_kernel_package() {
  local p
  for p in $(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' 2>/dev/null |
             awk '{print $1}' | sort -t- -k4,4nr); do
    local pol
    pol="$(apt-cache policy "$p" 2>/dev/null || true)"
    if [[ "$pol" == *"Candidate: "[0-9]* ]]; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

prepare_kernel() {
  if [ -f "$CACHE/kernel/READY" ]; then return 0; fi
  mkdir -p "$CACHE"
  local pkg
  pkg="$(pick_kernel_package)" || {
    apt-get update -qq >/dev/null 2>&1 || true
    pkg="$(pick_kernel_package)" || skip "no linux-image-6.1.0-*-amd64-unsigned package available"
  }
  log "downloading $pkg"
  local dl="$CACHE/download"
  rm -rf "$dl" "$CACHE/kernel"
  mkdir -p "$dl"
  (cd "$dl" && apt-get download "$pkg" >/dev/null 2>&1) || skip "apt-get download $pkg failed"
  mkdir -p "$CACHE/kernel/root"
  dpkg -x "$dl"/*.deb "$CACHE/kernel/root"
  local vmlinuz
  vmlinuz="$(ls "$CACHE"/kernel/root/boot/vmlinuz-* | head -1)"
  [ -f "$vmlinuz" ] || skip "kernel package $pkg has no vmlinuz"
  cp "$vmlinuz" "$CACHE/kernel/vmlinuz"
  basename "$(dirname "$(ls -d "$CACHE"/kernel/root/lib/modules/*/kernel)")" >"$CACHE/kernel/release"
  echo "$pkg" >"$CACHE/kernel/package"
  rm -rf "$dl"
  touch "$CACHE/kernel/READY"
}

write_init() {
  cat >"$1" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
arg() { sed -n "s/.*rocetune\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
ID="$(arg id)"; SELF="$(arg self)"; PEER="$(arg peer)"
# Load order follows the list; modules whose dependencies were not loaded yet are retried.
pending="$(cat /modules.list)"
for pass in 1 2 3 4; do
  left=""
  for m in $pending; do
    insmod "/modules/$(basename "$m")" 2>/dev/null || left="$left $m"
  done
  pending="$left"
  [ -z "$pending" ] && break
done
[ -n "$pending" ] && echo "init: modules not loaded:$pending"
mkdir -p /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /newroot || echo "init: hostroot mount failed"
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mount -t tmpfs tmpfs /newroot/tmp
mount -t tmpfs tmpfs /newroot/run
# The project checkout (sources and build) at its host path, also when that path
# lies under /tmp or /run, which the tmpfs mounts above hide.
PROJECT="$(arg project)"
if [ -n "$PROJECT" ]; then
  mkdir -p "/newroot$PROJECT" 2>/dev/null
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 project "/newroot$PROJECT" \
    || echo "init: project mount failed"
fi
mkdir -p /newroot/run/vmout
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none vmout /newroot/run/vmout || echo "init: vmout mount failed"
ip link set lo up
ip addr add "$SELF/24" dev eth0
ip link set eth0 up
chroot /newroot /bin/bash -c "export VM_ID=$ID VM_SELF_IP=$SELF VM_PEER_IP=$PEER VM_OUT=/run/vmout HOME=/tmp PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; \
  rdma link add rxe0 type rxe netdev eth0 || echo 'guest: rdma link add failed'; \
  bash /run/vmout/script_$ID.sh >/run/vmout/$ID.log 2>&1; echo \$? >/run/vmout/$ID.rc; sync"
sync
echo "init: guest $ID done"
poweroff -f
INIT
  chmod +x "$1"
}

prepare_initramfs() {
  local rel initrd="$CACHE/initramfs.cpio.gz"
  if [ -f "$initrd" ] && [ "$initrd" -nt "$0" ]; then return 0; fi
  rel="$(cat "$CACHE/kernel/release")"
  local moddir="$CACHE/kernel/root/lib/modules/$rel/kernel"
  local stage
  stage="$(mktemp -d)"
  mkdir -p "$stage"/{bin,proc,sys,dev,modules,newroot}
  cp /bin/busybox "$stage/bin/busybox"
  local m
  : >"$stage/modules.list"
  for m in "${MODULES[@]}"; do
    if [ -f "$moddir/$m" ]; then
      cp "$moddir/$m" "$stage/modules/"
      echo "$m" >>"$stage/modules.list"
    elif [ -f "$moddir/$m.xz" ]; then
      xz -dc "$moddir/$m.xz" >"$stage/modules/$(basename "$m")"
      echo "$m" >>"$stage/modules.list"
    else
      log "module $m not in the kernel package (assumed built in)"
    fi
  done
  write_init "$stage/init"
  (cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1 >"$initrd.tmp")
  mv "$initrd.tmp" "$initrd"
  rm -rf "$stage"
}

prepare() {
  install_tools
  prepare_kernel
  prepare_initramfs
}

free_udp_port() {
  python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

run() {
  local out="$1" script_a="$2" script_b="$3"
  prepare
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  cp "$script_a" "$out/script_a.sh"
  cp "$script_b" "$out/script_b.sh"
  rm -f "$out"/a.rc "$out"/b.rc "$out"/a.log "$out"/b.log
  local pa pb
  pa="$(free_udp_port)"
  pb="$(free_udp_port)"
  while [ "$pb" = "$pa" ]; do pb="$(free_udp_port)"; done
  local pids=()
  boot_guest a 10.77.0.1 10.77.0.2 "$pa" "$pb" 52:54:00:77:00:01 "$out" &
  pids+=($!)
  boot_guest b 10.77.0.2 10.77.0.1 "$pb" "$pa" 52:54:00:77:00:02 "$out" &
  pids+=($!)
  local rc=0 p
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  local id
  for id in a b; do
    if [ ! -f "$out/$id.rc" ]; then
      log "guest $id did not finish its script; console tail:"
      tail -n 30 "$out/console_$id.log" >&2 || true
      rc=1
    elif [ "$(cat "$out/$id.rc")" != 0 ]; then
      log "guest $id script exited $(cat "$out/$id.rc"); log tail:"
      tail -n 40 "$out/$id.log" >&2 || true
      rc=1
    fi
  done
  return "$rc"
}

boot_guest() {
  local id="$1" self="$2" peer="$3" port_self="$4" port_peer="$5" mac="$6" out="$7"
  timeout --kill-after=10 "$VM_TIMEOUT" qemu-system-x86_64 \
    -accel tcg -m 768 -smp 1 -nographic -no-reboot -display none -monitor none \
    -serial "file:$out/console_$id.log" \
    -kernel "$CACHE/kernel/vmlinuz" -initrd "$CACHE/initramfs.cpio.gz" \
    -append "console=ttyS0 quiet panic=-1 rocetune.id=$id rocetune.self=$self rocetune.peer=$peer rocetune.project=$PROJECT_DIR" \
    -nic none \
    -netdev "socket,id=n0,udp=127.0.0.1:$port_peer,localaddr=127.0.0.1:$port_self" \
    -device "virtio-net-pci,netdev=n0,mac=$mac" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$out,mount_tag=vmout,security_model=none" \
    -virtfs "local,path=$PROJECT_DIR,mount_tag=project,security_model=none,readonly=on,multidevs=remap" \
    </dev/null >"$out/qemu_$id.log" 2>&1
}

case "${1:-}" in
  prepare) prepare ;;
  run)
    [ $# -eq 4 ] || { echo "usage: $0 run OUTDIR SCRIPT_A SCRIPT_B" >&2; exit 2; }
    run "$2" "$3" "$4"
    ;;
  *)
    echo "usage: $0 prepare | run OUTDIR SCRIPT_A SCRIPT_B" >&2
    exit 2
    ;;
esac
