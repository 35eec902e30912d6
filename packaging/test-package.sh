#!/usr/bin/env bash
# Builds the Debian packages from a build folder and proves them on a clean Debian 12 system:
#   packaging/test-package.sh BUILD_DIR
# 1. cpack -G DEB: towers_<version>_amd64.deb and, in a build with the CUDA backend,
#    towers-cuda_<version>_amd64.deb (the GPU backend plugin); lintian on both (no errors allowed;
#    warnings are printed).
# 2. debootstrap a minimal bookworm root (cached as a tarball under BUILD_DIR/package-test); there,
#    towers-cuda alone must be refused (it depends on towers of exactly its version), then apt
#    installs both packages (which brings their Depends and Recommends: Debian's Qt 6, oneDNN,
#    QCustomPlot, dataset-fashion-mnist, ...; NVIDIA's libraries are not Debian packages, so the
#    root has none, nor a GPU), and inside that root runs towers-cli --version (whose GPUs line
#    must name the NVIDIA libraries the plugin lacks and how to get them), towers --version,
#    towers-cli devices, a 50-step training run on Debian's Fashion-MNIST, towers-cli eval on its
#    checkpoint, the GUI's startup on the offscreen platform, and checks that the man pages, the
#    desktop entry, the icon, the metainfo, the completion and the plugin (where the programs look
#    for it) are there.
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

# The build has the CUDA backend when its plugin is one of CPack's components.
has_cuda=0
grep -q '^set(CPACK_COMPONENTS_ALL ".*cuda' "$build/CPackConfig.cmake" && has_cuda=1

step "cpack -G DEB"
rm -f "$work"/towers_*.deb "$work"/towers-cuda_*.deb
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work" >"$work/cpack.log" 2>&1) ||
    { cat "$work/cpack.log"; fail "cpack could not build the packages"; }
deb=$(ls "$work"/towers_*_amd64.deb 2>/dev/null | head -n 1)
[[ -n $deb ]] || fail "cpack wrote no towers_<version>_amd64.deb into $work"
version=$(dpkg-deb -f "$deb" Version)
echo "package: $deb"
dpkg-deb -f "$deb" Package Version Depends Recommends
cuda_deb=""
if ((has_cuda)); then
    cuda_deb=$work/towers-cuda_${version}_amd64.deb
    [[ -f $cuda_deb ]] || fail "cpack wrote no $(basename "$cuda_deb") into $work"
    echo "package: $cuda_deb"
    dpkg-deb -f "$cuda_deb" Package Version Depends
    # Exactly this version of towers: the plugin shares the programs' classes by layout.
    depends=$(dpkg-deb -f "$cuda_deb" Depends)
    [[ $depends == "towers (= $version)"* ]] ||
        fail "towers-cuda must depend on towers (= $version) first, not: $depends"
    dpkg-deb -c "$cuda_deb" | grep '\./usr/lib/towers/libtowers-cuda\.so$' >/dev/null ||
        fail "towers-cuda does not hold /usr/lib/towers/libtowers-cuda.so, where the programs look"
    # NVIDIA's libraries the plugin links, which the clean root cannot have.
    mkdir -p "$work/cuda-deb" && dpkg-deb -x "$cuda_deb" "$work/cuda-deb"
    nvidia_libs=$(readelf -d "$work/cuda-deb/usr/lib/towers/libtowers-cuda.so" 2>/dev/null |
        sed -n 's/.*Shared library: \[\(lib\(cudart\|cublas\|cudnn\|nccl\)\.so\.[0-9]*\)\]/\1/p')
    rm -rf "$work/cuda-deb"
    echo "the plugin links NVIDIA's" $nvidia_libs
else
    echo "this build has no CUDA backend: no towers-cuda package, its checks are skipped"
fi

step "lintian"
lintian --allow-root --fail-on error "$deb" $cuda_deb | tee "$work/lintian.log"
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
cp "$deb" $cuda_deb "$root/tmp/"
in_root() { chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
packages=("/tmp/$(basename "$deb")")
[[ -n $cuda_deb ]] && packages+=("/tmp/$(basename "$cuda_deb")")

in_root apt-get update -qq >"$work/apt.log" 2>&1 ||
    { tail -n 5 "$work/apt.log" >&2; skip "apt-get update cannot reach $mirror inside the root"; }
if [[ -n $cuda_deb ]]; then
    step "towers-cuda alone is refused: it needs towers $version"
    if out=$(in_root apt-get install -s "/tmp/$(basename "$cuda_deb")" 2>&1); then
        echo "$out" | tail -n 5
        fail "apt would install towers-cuda without towers $version"
    fi
    grep -F "towers (= $version)" <<<"$out" ||
        { echo "$out" | tail -n 5; fail "apt refused towers-cuda, but not for want of towers (= $version)"; }
fi

step "apt-get install ${packages[*]##*/} (with their Recommends)"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}" >>"$work/apt.log" 2>&1 ||
    { tail -n 20 "$work/apt.log"; fail "the packages do not install on a clean Debian 12"; }
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
plugin=/usr/lib/towers/libtowers-cuda.so
if [[ -n $cuda_deb ]]; then
    in_root dpkg -L towers-cuda | grep -x "$plugin" >/dev/null || fail "dpkg -L towers-cuda does not list $plugin"
    [[ -f $root$plugin ]] || fail "$plugin is not installed"
    # Only NVIDIA's libraries may be missing for the plugin: its Depends bring the others.
    lacking=$(in_root ldd "$plugin" | awk '/not found/ {print $1}' | grep -vE '^lib(cudart|cublas|cublasLt|cudnn|nccl)\.so' || true)
    [[ -z $lacking ]] || fail "the plugin needs libraries that towers-cuda's Depends do not bring: $lacking"
    echo "towers-cuda installed $plugin; it lacks only NVIDIA's libraries here"
fi

step "towers-cli --version; towers --version"
out=$(in_root towers-cli --version) || fail "towers-cli --version failed"
echo "$out"
grep -q "^towers-cli $version" <<<"$out" || fail "towers-cli --version does not print the package version"
gpus=$(grep "^GPUs: " <<<"$out") || fail "towers-cli --version says nothing of GPUs"
if [[ -n $cuda_deb ]]; then
    # No NVIDIA library in the root: the plugin is found where installed, and the reason names
    # each library it lacks and how to get it.
    for want in "the CUDA backend $plugin cannot load" "not found" "apt install" "pip install" \
        "Only the CPU can run towers here" $nvidia_libs; do
        grep -qF -- "$want" <<<"$gpus" || fail "the GPUs line does not say \"$want\""
    done
    echo "the GPUs line names what the plugin lacks and how to get it"
fi
in_root towers --version || fail "towers --version failed without a display"

step "towers-cli devices"
out=$(in_root towers-cli devices) || fail "towers-cli devices failed"
echo "$out"
if [[ -n $cuda_deb ]]; then
    grep -qF "the CUDA backend $plugin cannot load" <<<"$out" || fail "towers-cli devices does not say why the GPU backend cannot load"
fi

step "towers-cli train: 50 steps on Debian's Fashion-MNIST"
in_root towers-cli train --dataset fashion-mnist --steps 50 --log-every 10 --run-dir /root/run ||
    fail "training failed"
ckpt=$(in_root sh -c 'ls /root/run/checkpoints/*.safetensors' | tail -n 1)
[[ -n $ckpt ]] || fail "training wrote no checkpoint"

step "towers-cli eval --checkpoint $ckpt"
out=$(in_root towers-cli eval --checkpoint "$ckpt") || fail "evaluation failed"
echo "$out" | head -n 3
grep -q "precision @ 1" <<<"$out" || fail "eval printed no precision"

step "towers-cli models on the example model file"
example=/usr/share/doc/towers/examples/fashion-resnet.json
out=$(in_root towers-cli models "$example") || fail "towers-cli models $example failed"
echo "$out" | head -n 1
grep -q "^fashion-resnet: input 28x28x1" <<<"$out" || fail "the example model file's network is not described"

step "the desktop application starts (offscreen platform)"
install -d -m 700 "$root/tmp/xdg-runtime"
in_root env QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR=/tmp/xdg-runtime towers --measure-startup --settings /tmp/towers.ini ||
    fail "towers does not start in the clean root"

echo "test-package: PASSED (${packages[*]##*/} on a clean Debian 12 root)"
