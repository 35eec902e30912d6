#!/usr/bin/env bash
# Builds the Debian package from a build folder and proves it on a clean Debian 12 system:
#   packaging/test-package.sh BUILD_DIR
# 1. cpack -G DEB, then lintian (no errors allowed; warnings are printed).
# 2. debootstrap a minimal bookworm root (cached as a tarball under BUILD_DIR/package-test), install
#    the package there with apt (which brings its Depends and Recommends: Debian's Qt 6, oneDNN,
#    QCustomPlot, dataset-fashion-mnist, ...), and inside that root run towers-cli --version,
#    towers --version, towers-cli devices, a 50-step training run on Debian's Fashion-MNIST,
#    towers-cli eval on its checkpoint, the GUI's startup on the offscreen platform, and check
#    that the man pages, the desktop entry, the icon, the metainfo and the completion are there.
# Exit status: 0 passed, 1 failed, 77 cannot run here (not root, no debootstrap, no chroot, no
# Debian mirror), with the reason on stderr. The mirror is $TOWERS_DEBIAN_MIRROR, default
# http://deb.debian.org/debian.
set -uo pipefail

build=${1:?usage: packaging/test-package.sh BUILD_DIR}
build=$(cd "$build" && pwd)
mirror=${TOWERS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$build/package-test
root=$work/root

skip() { echo "test-package: SKIPPED: $*" >&2; exit 77; }
fail() { echo "test-package: FAILED: $*" >&2; exit 1; }
step() { echo "== $*"; }

[[ $(id -u) -eq 0 ]] || skip "needs root for debootstrap and chroot (run as root, or sudo)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed (packaging/install-deps.sh --test installs it)"
command -v dpkg-shlibdeps >/dev/null || skip "dpkg-shlibdeps is not installed (package dpkg-dev), cpack needs it"
command -v lintian >/dev/null || skip "lintian is not installed (packaging/install-deps.sh --test installs it)"
[[ -f $build/CPackConfig.cmake ]] || fail "$build has no CPackConfig.cmake: configure and build it first"

cleanup() {
    if [[ -d $root/proc ]] && mountpoint -q "$root/proc"; then
        umount "$root/proc" || umount -l "$root/proc" || { echo "test-package: cannot unmount $root/proc; $root is left in place" >&2; return; }
    fi
    rm -rf --one-file-system "$root"
}
trap cleanup EXIT
mkdir -p "$work"
cleanup

step "cpack -G DEB"
rm -f "$work"/towers_*.deb
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work" >"$work/cpack.log" 2>&1) ||
    { cat "$work/cpack.log"; fail "cpack could not build the package"; }
deb=$(ls "$work"/towers_*_amd64.deb 2>/dev/null | head -n 1)
[[ -n $deb ]] || fail "cpack wrote no towers_<version>_amd64.deb into $work"
echo "package: $deb"
dpkg-deb -f "$deb" Package Version Depends Recommends

step "lintian"
lintian --allow-root --fail-on error "$deb" | tee "$work/lintian.log"
((${PIPESTATUS[0]} == 0)) || fail "lintian reports errors (above)"

step "a clean Debian 12 root"
base=$work/bookworm-minbase.tar
if [[ ! -f $base ]]; then
    mkdir -p "$root"
    if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
        tail -n 5 "$work/debootstrap.log" >&2
        grep -qiE "resolv|connect|download|release file" "$work/debootstrap.log" &&
            skip "debootstrap cannot reach the Debian mirror $mirror (set TOWERS_DEBIAN_MIRROR)"
        fail "debootstrap failed (log: $work/debootstrap.log)"
    fi
    tar -C "$root" -cf "$base.tmp" . && mv "$base.tmp" "$base"
    rm -rf "$root"
fi
mkdir -p "$root"
tar -C "$root" -xf "$base" || fail "cannot unpack $base"
chroot "$root" true 2>/dev/null || skip "chroot is not permitted here"
mount -t proc proc "$root/proc" 2>/dev/null || echo "note: /proc could not be mounted in the root"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# Downloaded .debs are kept between runs so a rerun needs no network for them.
mkdir -p "$work/apt-archives"
cp "$work"/apt-archives/*.deb "$root/var/cache/apt/archives/" 2>/dev/null || true
cp "$deb" "$root/tmp/"
in_root() { chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

step "apt-get install ./$(basename "$deb") (with its Recommends)"
in_root apt-get update -qq >"$work/apt.log" 2>&1 ||
    { tail -n 5 "$work/apt.log" >&2; skip "apt-get update cannot reach $mirror inside the root"; }
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "/tmp/$(basename "$deb")" >>"$work/apt.log" 2>&1 ||
    { tail -n 20 "$work/apt.log"; fail "the package does not install on a clean Debian 12"; }
cp "$root"/var/cache/apt/archives/*.deb "$work/apt-archives/" 2>/dev/null || true
grep -E "^(Setting up|The following NEW)" "$work/apt.log" | grep -E "towers|dataset-fashion-mnist|NEW" || true

step "installed files"
for f in /usr/bin/towers /usr/bin/towers-cli /usr/share/man/man1/towers-cli.1.gz /usr/share/man/man1/towers.1.gz \
    /usr/share/applications/io.github.towers.Towers.desktop /usr/share/metainfo/io.github.towers.Towers.metainfo.xml \
    /usr/share/icons/hicolor/scalable/apps/io.github.towers.Towers.svg \
    /usr/share/bash-completion/completions/towers-cli /usr/share/doc/towers/copyright; do
    [[ -f $root$f ]] || fail "$f is not installed"
done
echo "binaries, man pages, desktop entry, metainfo, icon, completion and copyright are in place"
if in_root ldd /usr/bin/towers-cli /usr/bin/towers | grep -q "not found"; then
    in_root ldd /usr/bin/towers-cli /usr/bin/towers | grep "not found"
    fail "a library the binaries need is not installed by the package's Depends"
fi

step "towers-cli --version; towers --version"
out=$(in_root towers-cli --version) || fail "towers-cli --version failed"
echo "$out"
grep -q "^towers-cli $(dpkg-deb -f "$deb" Version)" <<<"$out" || fail "towers-cli --version does not print the package version"
in_root towers --version || fail "towers --version failed without a display"

step "towers-cli devices"
in_root towers-cli devices || fail "towers-cli devices failed"

step "towers-cli train: 50 steps on Debian's Fashion-MNIST"
in_root towers-cli train --dataset fashion-mnist --steps 50 --log-every 10 --run-dir /root/run ||
    fail "training failed"
ckpt=$(in_root sh -c 'ls /root/run/checkpoints/*.safetensors' | tail -n 1)
[[ -n $ckpt ]] || fail "training wrote no checkpoint"

step "towers-cli eval --checkpoint $ckpt"
out=$(in_root towers-cli eval --checkpoint "$ckpt") || fail "evaluation failed"
echo "$out" | head -n 3
grep -q "precision @ 1" <<<"$out" || fail "eval printed no precision"

step "the desktop application starts (offscreen platform)"
install -d -m 700 "$root/tmp/xdg-runtime"
in_root env QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR=/tmp/xdg-runtime towers --measure-startup --settings /tmp/towers.ini ||
    fail "towers does not start in the clean root"

echo "test-package: PASSED ($(basename "$deb") on a clean Debian 12 root)"
