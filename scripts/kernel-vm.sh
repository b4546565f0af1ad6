#!/usr/bin/env bash
# Boots one of Debian's packaged LTS kernels (6.1, 6.12) in a throw-away
# QEMU guest and runs a command of the host's in it, so that the kernel
# conformance suite can use that kernel's GRO as its oracle.
#
#   scripts/kernel-vm.sh fetch 6.1|6.12|all      download + unpack, once (cached)
#   scripts/kernel-vm.sh run 6.1|6.12 CMD ARGS…  boot, run CMD, power off
#   scripts/kernel-vm.sh release 6.1|6.12        print the cached kernel release
#
# The guest's root file system is the host's own `/`, read-only over
# virtio-9p; the current directory's `target/` is shared writable at the
# same path, so a host-built test binary runs unchanged and can write its
# results. The package's modules are mounted at /lib/modules/<release>
# inside the guest (busybox modprobe loads tun, vxlan, geneve, ipip, …).
# Nothing is installed on the host: the packages are fetched with
# `apt-get download` and unpacked with `dpkg-deb -x` under
# target/kernels/<line>/ (docs/decisions/0072-vm-kernel-oracle.md).
#
# Timing (the trap decision 0072 describes): the guest runs under TCG with
# `-icount shift=0,sleep=off`: its clocks advance with the instructions it
# executes (1 ns each) and jump over idle time, so a jiffy (4 ms at HZ=250)
# always holds the same amount of guest work and the host's load cannot
# split a train across a tick. CMD's exit code is this script's exit code.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${OFFLOAD_KERNEL_CACHE:-$ROOT/target/kernels}"
# Guest memory and the icount shift can be overridden for experiments.
MEM="${OFFLOAD_VM_MEM:-2048}"
ICOUNT="${OFFLOAD_VM_ICOUNT:-shift=0,sleep=off}"

die() { echo "kernel-vm: $*" >&2; exit 2; }

# The Debian 12 package name pattern of a kernel line.
package_pattern() {
  case "$1" in
    6.1) echo '^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' ;;
    6.12) echo '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' ;;
    *) die "unknown kernel line '$1' (6.1 or 6.12)" ;;
  esac
}

# The newest package of a line that apt knows; empty (not a failure, which
# pipefail would make of grep's "no match") when apt's lists lack it, so that
# fetch can refresh them and ask again.
newest_package() {
  { apt-cache pkgnames linux-image- 2>/dev/null || true; } | { grep -E "$(package_pattern "$1")" || true; } | sort -V | tail -1
}

# Modules loaded in every guest: the TAP, the tunnels GRO looks into, VLAN.
GUEST_MODULES="tun,veth,vxlan,geneve,ipip,sit,ip6_tunnel,ip_gre,ip6_gre,fou,fou6,8021q"
# Modules the initramfs loads to mount the 9p shares, in load order.
BOOT_MODULES="virtio_pci 9pnet_virtio 9p"

# Prints the .ko paths (relative to the module dir) that `mod` needs, deps
# first, each once. Uses the modules.dep written by busybox depmod.
resolve() {
  local dir="$1"; shift
  awk -v want="$*" '
    { sub(":", "", $1); path=$1; n=split(path, a, "/"); name=a[n]; sub(/\.ko$/, "", name);
      gsub("-", "_", name); byname[name]=path; deps[path]="";
      for (i = 2; i <= NF; i++) deps[path] = deps[path] " " $i }
    function load(p,   d, k, i) { if (p in done) return; done[p]=1;
      k = split(deps[p], d, " "); for (i = 1; i <= k; i++) load(d[i]); print p }
    END { n = split(want, w, " "); for (i = 1; i <= n; i++) { m = w[i]; gsub("-", "_", m);
      if (m in byname) load(byname[m]) } }
  ' "$dir/modules.dep"
}

fetch() {
  local line="$1" dir="$CACHE/$1"
  if [ -f "$dir/ready" ]; then return 0; fi
  local pkg
  pkg="$(newest_package "$line")"
  if [ -z "$pkg" ]; then
    apt-get update -qq
    pkg="$(newest_package "$line")"
  fi
  [ -n "$pkg" ] || die "no package matches $(package_pattern "$line")"
  rm -rf "$dir" && mkdir -p "$dir/dl" "$dir/root"
  (cd "$dir/dl" && apt-get download -q "$pkg" >/dev/null 2>&1) || die "apt-get download $pkg failed"
  dpkg-deb -x "$dir"/dl/*.deb "$dir/root"
  rm -rf "$dir/dl"
  local rel
  rel="$(ls "$dir/root/lib/modules")"
  # busybox insmod/modprobe take plain .ko files only.
  find "$dir/root/lib/modules/$rel" -name '*.ko.xz' -exec xz -d {} +
  /bin/busybox depmod -b "$dir/root" "$rel"
  echo "$rel" >"$dir/release"
  make_initramfs "$dir" "$rel"
  touch "$dir/ready"
}

make_initramfs() {
  local dir="$1" rel="$2" tree
  tree="$(mktemp -d)"
  mkdir -p "$tree"/{bin,dev,proc,sys,newroot,mods}
  cp /bin/busybox "$tree/bin/busybox"
  local mods="$dir/root/lib/modules/$rel"
  resolve "$mods" $BOOT_MODULES | while read -r m; do
    cp "$mods/$m" "$tree/mods/"
    basename "$m" >>"$tree/mods/order"
  done
  cat >"$tree/init" <<'EOF'
#!/bin/busybox sh
# Mount the host's root and the shares, then run /guest.sh's command.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /mods/order); do insmod /mods/$m; done
o=trans=virtio,version=9p2000.L,msize=1048576
mount -t 9p -o $o,ro,cache=loose host /newroot
rel=$(uname -r)
eval "$(tr ' ' '\n' </proc/cmdline | grep '^offload_' | tr , ' ' | sed 's/=\(.*\)/="\1"/')"
# The package's modules, loaded here (the host root has no /lib/modules
# of this release, and is read-only).
mkdir -p /lib/modules/$rel
mount -t 9p -o $o,ro,cache=loose mods /lib/modules/$rel
for m in $offload_modules; do modprobe $m; done
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mount -t tmpfs tmp /newroot/tmp
mount -t tmpfs run /newroot/run
# The repository and its target/ after the tmpfs mounts: a checkout under
# /tmp (a CI clone, say) would otherwise be hidden by them.
mkdir -p /newroot$offload_root 2>/dev/null
mount -t 9p -o $o,ro,cache=loose repo /newroot$offload_root
mount -t 9p -o $o,cache=mmap out /newroot$offload_out
chroot /newroot /bin/sh $offload_out/$offload_job/run.sh
echo "offload-vm-exit=$?" >/newroot$offload_out/$offload_job/rc
sync
poweroff -f
EOF
  chmod +x "$tree/init"
  (cd "$tree" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir/initramfs.gz"
  rm -rf "$tree"
}

run() {
  local line="$1"; shift
  [ $# -gt 0 ] || die "run: no command"
  fetch "$line"
  local dir="$CACHE/$line" rel
  rel="$(cat "$dir/release")"
  # The init script lives in this file: rebuild the initramfs when it changed.
  [ "${BASH_SOURCE[0]}" -nt "$dir/initramfs.gz" ] && make_initramfs "$dir" "$rel"
  out="$ROOT/target"
  job="vm-job.$$"
  mkdir -p "$out/$job"
  trap 'rm -rf "${out:?}/$job"' EXIT
  {
    echo "cd $(printf %q "$PWD")"
    echo "export PATH=$(printf %q "$PATH") HOME=/tmp OFFLOAD_IN_VM=$line"
    # Variables the suite reads (often none: grep's "no match" must not
    # end the script under pipefail).
    env | { grep -E '^(OFFLOAD_[A-Z_]+|RUST_BACKTRACE|RUST_TEST_THREADS)=' || true; } | while IFS= read -r kv; do
      echo "export $(printf %q "$kv")"
    done
    printf '%q ' "$@"
    echo
  } >"$out/$job/run.sh"
  local modroot="$dir/root/lib/modules/$rel"
  # The guest ends with this script, even when it is SIGKILLed (a caller
  # that starts the script under `setpriv --pdeathsig KILL` gets the
  # whole chain ended with it).
  local qemu=(qemu-system-x86_64)
  command -v setpriv >/dev/null && qemu=(setpriv --pdeathsig KILL qemu-system-x86_64)
  "${qemu[@]}" -accel tcg -cpu max -smp 1 -m "$MEM" \
    -icount "$ICOUNT" -display none -no-reboot -nodefaults -serial "file:$out/$job/console" \
    -kernel "$dir/root/boot/vmlinuz-$rel" -initrd "$dir/initramfs.gz" \
    -append "console=ttyS0 quiet loglevel=1 panic=-1 nokaslr mitigations=off offload_root=$ROOT offload_out=$out offload_job=$job offload_modules=$GUEST_MODULES" \
    -fsdev "local,id=h,path=/,security_model=none,readonly=on,multidevs=remap" \
    -device virtio-9p-pci,fsdev=h,mount_tag=host \
    -fsdev "local,id=r,path=$ROOT,security_model=none,readonly=on,multidevs=remap" \
    -device virtio-9p-pci,fsdev=r,mount_tag=repo \
    -fsdev "local,id=o,path=$out,security_model=none" \
    -device virtio-9p-pci,fsdev=o,mount_tag=out \
    -fsdev "local,id=m,path=$modroot,security_model=none,readonly=on" \
    -device virtio-9p-pci,fsdev=m,mount_tag=mods </dev/null
  # The guest's console (the command's output), without the firmware's
  # terminal escapes.
  sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' "$out/$job/console" | tr -d '\r'
  [ -f "$out/$job/rc" ] || die "the guest died before the command finished"
  local rc
  rc="$(sed -n 's/^offload-vm-exit=//p' "$out/$job/rc")"
  return "${rc:-2}"
}

case "${1:-}" in
  fetch)
    shift
    lines="${1:-all}"
    [ "$lines" = all ] && lines="6.1 6.12"
    for l in $lines; do fetch "$l"; done
    ;;
  run) shift; [ $# -ge 1 ] || die "run: which kernel?"; run "$@" ;;
  release) fetch "$2"; cat "$CACHE/$2/release" ;;
  *) die "usage: $0 fetch [6.1|6.12|all] | run 6.1|6.12 CMD ARGS… | release 6.1|6.12" ;;
esac
