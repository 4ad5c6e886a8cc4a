#!/usr/bin/env bash
# avx512-emu.sh - run a static linux/amd64 binary on an emulated AVX-512 CPU.
#
# Usage:  scripts/avx512-emu.sh BINARY [ARGS...]
#
# What: boots a small Linux guest under the Bochs emulator (Debian package
# `bochs` 2.7) with `cpu: model=tigerlake` (AVX-512F/BW/DQ/VL/...), runs
# BINARY with ARGS as the only program of the guest, copies everything it
# writes to stdout+stderr (merged, via the serial console) to our stdout, and
# exits with its exit status (128+N if it died from signal N, e.g. 132=SIGILL).
#
# Why: lets AVX-512 assembly be checked for correctness on a host without
# AVX-512 (e.g. AMD Zen 3).  Bochs is a pure interpreter (~40-50 MIPS here),
# so it is slow but exact enough for unit tests of SIMD kernels.
#
# How:
#  * Guest = kernel + initramfs (busybox-static as /init helper + BINARY) on an
#    ISOLINUX CD image; no disks, no network, console on COM1 (a file that we
#    poll).  /init mounts proc/sys/dev/tmpfs, prints the guest's avx512 CPU
#    flags (to our stderr), runs BINARY with HOME=/ TMPDIR=/tmp GOMAXPROCS=1,
#    then prints the sentinel line "AVX512EMU-EXIT <code>" and powers off.
#    We kill Bochs as soon as the sentinel appears.
#  * Kernel (AVX512_EMU_KERNEL):
#      minimal (default) - a tiny 6.1 kernel built ONCE from Debian's
#                linux-source-6.1 (tinyconfig + serial/initrd/tmpfs/futex/
#                epoll, LZ4-compressed, no SMP/PCI/ACPI).  First build takes a
#                few minutes; boot then takes seconds.
#      debian  - Debian's generic linux-image-6.1.*-amd64 (apt-get download +
#                dpkg-deb -x, not installed).  Needs no compiler, but its
#                XZ-compressed 8 MB image takes ~4.5e9 emulated instructions
#                (~100 s) just to decompress, on every boot.
#  * Kernel command line has `clearcpuid=515,321,323,580` to dodge these
#    Bochs 2.7 bugs (found by booting with loglevel=7 and the Bochs debugger):
#      515 PKU:   the CPU models advertise PKRU in CPUID.(EAX=0Dh,ECX=0).EAX
#                 but report size/offset 0 for it in subleaf 9, so Linux finds
#                 an inconsistent XSAVE layout and disables XSAVE (hence
#                 AVX/AVX-512) completely.
#      321/323 XSAVEC/XSAVES: Bochs's compacted-format size (CPUID 0Dh.1 EBX)
#                 disagrees with Linux's computation -> same fallback.  With
#                 these cleared Linux uses the standard XSAVE format:
#                 "Enabled xstate features 0xe7, context size is 2688 bytes".
#      580 FSRM:  with FSRM the kernel's memmove uses short `rep movsb`; on the
#                 tigerlake model the boot then dies in a runaway memmove in
#                 printk (nested page faults, silent hang right after
#                 "Mountpoint-cache hash table entries").
#    mitigations=off nokaslr: less work at boot.
#  * Bochs quirks handled: Debian's bochs has no `nogui` display library, so we
#    use `rfb` with timeout=0 (a VNC server nobody connects to; it does not
#    wait); it is built with the internal debugger, so we pass `-rc` with `c`
#    (continue) and stdin=/dev/null.  `clock: sync=none` (guest time follows
#    emulated instructions, deterministic, HLT skips ahead) and a modest
#    `ips` so that guest-time busy waits cost few real instructions.
#  * Cache (AVX512_EMU_CACHE): kernel(s), Bochs/ISOLINUX bits.  Each run only
#    rebuilds the initramfs and the ISO (well under a second).
#
# Environment:
#   AVX512_EMU_TIMEOUT_S  wall-clock limit for the whole run (default 1200);
#                         on expiry: message on stderr, exit 124.
#   AVX512_EMU_CACHE      cache dir (default ~/.cache/agentrl-avx512-emu)
#   AVX512_EMU_KERNEL     minimal | debian (default minimal)
#   AVX512_EMU_CPU        Bochs CPU model (default tigerlake: F CD BW DQ VL
#                         IFMA VBMI VBMI2 VNNI BITALG VPOPCNTDQ VP2INTERSECT;
#                         corei7_skylake_x: F CD BW DQ VL only)
#   AVX512_EMU_CLEARCPUID extra clearcpuid= numbers for the guest kernel
#   AVX512_EMU_KERNEL_ARGS extra guest kernel command line
#   AVX512_EMU_MEGS       guest RAM in MB (default 1024)
#   AVX512_EMU_IPS        Bochs `cpu: ips=` (default 50000000)
#   AVX512_EMU_ENV        extra guest environment, "K=V K2=V2" (no spaces in V)
#   AVX512_EMU_FILES      files or folders to put in the guest, "HOST=/GUEST ..." (no spaces);
#                         the program runs in /prog, so a test's ../../testdata is /testdata
#   AVX512_EMU_VERBOSE=1  show kernel messages, timings and paths on stderr
#   AVX512_EMU_KEEP=1     keep the per-run work dir (bochsrc, serial log, ...)
#
# Exit status: BINARY's status; 124 on timeout; 125 on harness failure.
set -euo pipefail

die() { echo "avx512-emu: $*" >&2; exit 125; }
log() { [ "${AVX512_EMU_VERBOSE:-0}" = 1 ] && echo "avx512-emu: $*" >&2 || true; }

[ $# -ge 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 125; }
BIN=$1; shift
[ -f "$BIN" ] && [ -x "$BIN" ] || die "not an executable file: $BIN"
case "$(od -An -c -N4 "$BIN" | tr -d ' ')" in *ELF*) ;; *) die "not an ELF binary: $BIN";; esac

TIMEOUT_S=${AVX512_EMU_TIMEOUT_S:-1200}
CACHE=${AVX512_EMU_CACHE:-$HOME/.cache/agentrl-avx512-emu}
KERNEL_KIND=${AVX512_EMU_KERNEL:-minimal}
CPU_MODEL=${AVX512_EMU_CPU:-tigerlake}
MEGS=${AVX512_EMU_MEGS:-1024}
IPS=${AVX512_EMU_IPS:-50000000}
T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
apt_install() {   # apt_install PKG... : install Debian packages if missing
  local missing=() p
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "avx512-emu: installing ${missing[*]} (apt-get)" >&2
  $SUDO apt-get install -y -q "${missing[@]}" >&2 || { $SUDO apt-get update -q >&2 && $SUDO apt-get install -y -q "${missing[@]}" >&2; }
}

mkdir -p "$CACHE"
# Serialise cache building between concurrent runs; runs themselves are independent.
exec 9>"$CACHE/.lock"

apt_install bochs bochsbios vgabios isolinux syslinux-common xorriso busybox-static cpio
BOCHS_BIOS=/usr/share/bochs/BIOS-bochs-latest
VGA_BIOS=/usr/share/vgabios/vgabios.bin
ISOLINUX_BIN=/usr/lib/ISOLINUX/isolinux.bin
LDLINUX=/usr/lib/syslinux/modules/bios/ldlinux.c32
for f in $BOCHS_BIOS $VGA_BIOS $ISOLINUX_BIN $LDLINUX /bin/busybox; do [ -f "$f" ] || die "missing $f"; done

# ---------------------------------------------------------------- kernel ---
# Minimal kernel: tinyconfig + this fragment.  Go binaries need futex, epoll,
# eventfd, signals, timers, tmpfs; nothing else (no block, net, PCI, ACPI).
MINIMAL_FRAGMENT='
CONFIG_64BIT=y
CONFIG_KERNEL_LZ4=y
CONFIG_PRINTK=y
CONFIG_PRINTK_TIME=y
CONFIG_EARLY_PRINTK=y
CONFIG_TTY=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
CONFIG_SERIAL_8250_NR_UARTS=1
CONFIG_SERIAL_8250_RUNTIME_UARTS=1
CONFIG_BLK_DEV_INITRD=y
CONFIG_BINFMT_ELF=y
CONFIG_BINFMT_SCRIPT=y
CONFIG_PROC_FS=y
CONFIG_SYSFS=y
CONFIG_DEVTMPFS=y
CONFIG_SHMEM=y
CONFIG_TMPFS=y
CONFIG_FUTEX=y
CONFIG_EPOLL=y
CONFIG_SIGNALFD=y
CONFIG_TIMERFD=y
CONFIG_EVENTFD=y
CONFIG_POSIX_TIMERS=y
CONFIG_MULTIUSER=y
CONFIG_FILE_LOCKING=y
CONFIG_ADVISE_SYSCALLS=y
CONFIG_MEMBARRIER=y
CONFIG_RSEQ=y
CONFIG_CPU_SUP_INTEL=y
CONFIG_HZ_100=y
CONFIG_NO_HZ_IDLE=y
CONFIG_HIGH_RES_TIMERS=y
CONFIG_X86_MPPARSE=y
CONFIG_UNWINDER_GUESS=y
CONFIG_SMP=n
CONFIG_MODULES=n
CONFIG_PCI=n
CONFIG_ACPI=n
CONFIG_RANDOMIZE_BASE=n
CONFIG_SPECULATION_MITIGATIONS=n
CONFIG_RETPOLINE=n
CONFIG_X86_X32_ABI=n
CONFIG_IA32_EMULATION=n
CONFIG_DEBUG_KERNEL=n
'

build_minimal_kernel() {   # -> $CACHE/kernel-minimal/bzImage
  local d=$CACHE/kernel-minimal
  [ -f "$d/bzImage" ] && return 0
  flock 9
  [ -f "$d/bzImage" ] && { flock -u 9; return 0; }
  echo "avx512-emu: building the minimal guest kernel once (a few minutes)..." >&2
  apt_install linux-source-6.1 build-essential flex bison bc libelf-dev libssl-dev lz4
  local tarball; tarball=$(ls /usr/src/linux-source-6.1.tar.xz 2>/dev/null) || die "linux-source-6.1 tarball not found"
  rm -rf "$d.tmp"; mkdir -p "$d.tmp"
  tar -xJf "$tarball" -C "$d.tmp"
  local src=$d.tmp/linux-source-6.1
  printf '%s\n' "$MINIMAL_FRAGMENT" > "$d.tmp/avx512emu.config"
  ( cd "$src" && make -s tinyconfig \
      && scripts/kconfig/merge_config.sh -m .config ../avx512emu.config >/dev/null \
      && make -s olddefconfig && make -s -j"$(nproc)" bzImage ) > "$d.tmp/build.log" 2>&1 \
    || { tail -30 "$d.tmp/build.log" >&2; die "kernel build failed (log: $d.tmp/build.log)"; }
  mkdir -p "$d"
  cp "$src/.config" "$d/config"
  cp "$src/arch/x86/boot/bzImage" "$d/bzImage.new" && mv "$d/bzImage.new" "$d/bzImage"
  rm -rf "$d.tmp"
  flock -u 9
}

fetch_debian_kernel() {   # -> $CACHE/kernel-debian/vmlinuz
  local d=$CACHE/kernel-debian
  [ -f "$d/vmlinuz" ] && return 0
  flock 9
  [ -f "$d/vmlinuz" ] && { flock -u 9; return 0; }
  local pkg; pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$pkg" ] || die "cannot resolve linux-image-amd64's kernel package"
  echo "avx512-emu: fetching $pkg ..." >&2
  rm -rf "$d.tmp"; mkdir -p "$d.tmp"
  ( cd "$d.tmp" && apt-get download -q "$pkg" >&2 2>/dev/null ) || ( cd "$d.tmp" && chmod 777 . && apt-get download -q "$pkg" >&2 )
  dpkg-deb -x "$d.tmp"/"$pkg"_*.deb "$d.tmp/x"
  mkdir -p "$d"
  cp "$d.tmp"/x/boot/vmlinuz-* "$d/vmlinuz.new" && mv "$d/vmlinuz.new" "$d/vmlinuz"
  echo "$pkg" > "$d/package"
  rm -rf "$d.tmp"
  flock -u 9
}

CMDLINE="console=ttyS0,115200 rdinit=/init clearcpuid=515,321,323,580${AVX512_EMU_CLEARCPUID:+,$AVX512_EMU_CLEARCPUID} mitigations=off nokaslr ${AVX512_EMU_KERNEL_ARGS:-}"
case "$KERNEL_KIND" in
  minimal) build_minimal_kernel; KERNEL=$CACHE/kernel-minimal/bzImage ;;
  debian)  fetch_debian_kernel;  KERNEL=$CACHE/kernel-debian/vmlinuz ;;
  *) die "AVX512_EMU_KERNEL must be minimal or debian" ;;
esac
if [ "${AVX512_EMU_VERBOSE:-0}" = 1 ]; then CMDLINE="$CMDLINE loglevel=7"; else CMDLINE="$CMDLINE quiet loglevel=1"; fi
log "kernel ready ($KERNEL) after $(elapsed)s"

# ------------------------------------------------------ per-run guest image ---
WORK=$(mktemp -d "${TMPDIR:-/tmp}/avx512-emu.XXXXXX")
BOCHS_PID=
cleanup() {
  [ -n "$BOCHS_PID" ] && kill "$BOCHS_PID" 2>/dev/null || true
  if [ "${AVX512_EMU_KEEP:-0}" = 1 ]; then echo "avx512-emu: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

squote() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }   # POSIX-sh single quoting
ARGV="set --"; for a in "$@"; do ARGV="$ARGV $(squote "$a")"; done
EXTRA_ENV=; for kv in ${AVX512_EMU_ENV:-}; do EXTRA_ENV="$EXTRA_ENV export $(squote "$kv");"; done
BASE=$(basename "$BIN")

R=$WORK/root
mkdir -p "$R/bin" "$R/proc" "$R/sys" "$R/dev" "$R/tmp" "$R/prog" "$WORK/iso/isolinux"
cp /bin/busybox "$R/bin/busybox"
cp "$BIN" "$R/prog/$BASE"
chmod 755 "$R/prog/$BASE"
for spec in ${AVX512_EMU_FILES:-}; do   # HOST=GUEST: files or folders the program reads
  src=${spec%%=*}; dst=${spec#*=}
  case "$spec" in *=/*) ;; *) die "AVX512_EMU_FILES: '$spec' is not HOST_PATH=/GUEST_PATH";; esac
  [ -e "$src" ] || die "AVX512_EMU_FILES: $src not found"
  mkdir -p "$R$(dirname "$dst")" && cp -r "$src" "$R$dst"
done
cat > "$R/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
stty -F /dev/console -opost 2>/dev/null  # no \n -> \r\n translation
export HOME=/ TMPDIR=/tmp GOMAXPROCS=1 PATH=/bin:/prog
$EXTRA_ENV
echo "AVX512EMU-CPU \$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^avx512' | tr '\n' ' ')"
cd /prog
$ARGV
echo AVX512EMU-BEGIN
/prog/$BASE "\$@" </dev/null
rc=\$?
echo
echo "AVX512EMU-EXIT \$rc"
poweroff -f
EOF
chmod 755 "$R/init"
( cd "$R" && find . | cpio -o -H newc --quiet ) > "$WORK/iso/initrd.cpio"
cp "$KERNEL" "$WORK/iso/kernel"
cp "$ISOLINUX_BIN" "$LDLINUX" "$WORK/iso/isolinux/"
cat > "$WORK/iso/isolinux/isolinux.cfg" <<EOF
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL /kernel
  INITRD /initrd.cpio
  APPEND $CMDLINE
EOF
xorriso -as mkisofs -quiet -o "$WORK/boot.iso" -b isolinux/isolinux.bin -c isolinux/boot.cat \
  -no-emul-boot -boot-load-size 4 -boot-info-table "$WORK/iso" 2>"$WORK/xorriso.log" \
  || { cat "$WORK/xorriso.log" >&2; die "xorriso failed"; }

cat > "$WORK/bochsrc" <<EOF
megs: $MEGS
romimage: file=$BOCHS_BIOS
vgaromimage: file=$VGA_BIOS
cpu: model=$CPU_MODEL, count=1, ips=$IPS, reset_on_triple_fault=0
clock: sync=none, time0=local
# Debian's bochs has no 'nogui'; rfb with timeout=0 never waits for a viewer.
display_library: rfb, options="timeout=0, hideIPS"
ata0-master: type=cdrom, path=$WORK/boot.iso, status=inserted
ata1: enabled=0
boot: cdrom
com1: enabled=1, mode=file, dev=$WORK/serial.out
speaker: enabled=0
sound: waveoutdrv=dummy, waveindrv=dummy, midioutdrv=dummy
log: $WORK/bochs.log
panic: action=fatal
error: action=report
info: action=ignore
debug: action=ignore
EOF
printf 'c\n' > "$WORK/debugger.rc"   # Debian's bochs has the debugger: just continue
: > "$WORK/serial.out"
log "image ready after $(elapsed)s; starting bochs ($CPU_MODEL, ${MEGS}MB, ips=$IPS) in $WORK"

# ---------------------------------------------------------------- run it ---
( cd "$WORK" && exec bochs -q -f "$WORK/bochsrc" -rc "$WORK/debugger.rc" ) </dev/null >"$WORK/bochs.stdout" 2>&1 &
BOCHS_PID=$!

deadline=$(( $(date +%s) + TIMEOUT_S ))
status=
shown_cpu=0
while :; do
  if grep -aq '^AVX512EMU-EXIT [0-9]' "$WORK/serial.out"; then status=done; break; fi
  if [ $shown_cpu = 0 ] && grep -aq '^AVX512EMU-BEGIN' "$WORK/serial.out"; then
    shown_cpu=1; log "guest booted, program started after $(elapsed)s"
  fi
  if grep -aqE 'Kernel panic|Attempted to kill init' "$WORK/serial.out"; then sleep 1; status=panic; break; fi
  if ! kill -0 "$BOCHS_PID" 2>/dev/null; then sleep 0.2; grep -aq '^AVX512EMU-EXIT [0-9]' "$WORK/serial.out" && status=done || status=bochsdied; break; fi
  if [ "$(date +%s)" -ge "$deadline" ]; then status=timeout; break; fi
  sleep 0.25
done
kill "$BOCHS_PID" 2>/dev/null || true; wait "$BOCHS_PID" 2>/dev/null || true; BOCHS_PID=

cpu_line=$(grep -a -m1 '^AVX512EMU-CPU' "$WORK/serial.out" | tr -d '\r' || true)
if [ "${AVX512_EMU_VERBOSE:-0}" = 1 ]; then
  echo "---- guest console up to program start ----" >&2
  sed -n '1,/^AVX512EMU-BEGIN/p' "$WORK/serial.out" | tr -d '\r' >&2
  echo "-------------------------------------------" >&2
fi
case $status in
  timeout)
    echo "avx512-emu: TIMEOUT after ${TIMEOUT_S}s (AVX512_EMU_TIMEOUT_S); guest console tail:" >&2
    tail -c 3000 "$WORK/serial.out" | tr -d '\r' >&2; echo >&2
    exit 124 ;;
  panic|bochsdied)
    echo "avx512-emu: guest failed ($status); console tail:" >&2
    tail -c 3000 "$WORK/serial.out" | tr -d '\r' >&2
    echo "avx512-emu: bochs log tail:" >&2; grep -avE 'RDMSR|WRMSR' "$WORK/bochs.log" 2>/dev/null | tail -15 >&2
    tail -5 "$WORK/bochs.stdout" >&2
    exit 125 ;;
esac
case "$cpu_line" in
  *avx512f*) log "guest CPU: ${cpu_line#AVX512EMU-CPU }" ;;
  *) die "the guest's /proc/cpuinfo has no avx512f (got: '$cpu_line'): its kernel turned AVX-512 off, so the program did not test AVX-512 code" ;;
esac

# Program output = bytes between the "AVX512EMU-BEGIN\n" line and the
# "\nAVX512EMU-EXIT <rc>\n" line (the "\n" before it was added by /init).
rc=$(perl -0777 -ne '
  /^AVX512EMU-BEGIN\n(.*)\nAVX512EMU-EXIT (\d+)\n/ms or exit 1;
  print STDOUT $1; print STDERR $2;' "$WORK/serial.out" 2>&1 >"$WORK/program.out") \
  || die "could not parse guest output"
cat "$WORK/program.out"
log "done in $(elapsed)s, exit code $rc"
exit "$rc"
