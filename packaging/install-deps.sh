#!/usr/bin/env bash
# Installs what Towers needs on Debian 12 (bookworm) from Debian's own packages.
#   packaging/install-deps.sh          build and run (compiler, CMake, oneDNN, Qt 6, ...)
#   packaging/install-deps.sh --test   also what the test suite and benchmarks use (PyTorch)
# Runs apt-get through sudo when not root. Installs only what is missing.
set -euo pipefail

# ca-certificates: towers-cli download verifies the HTTPS servers it fetches datasets from.
# qt6-qpa-plugins, libqt6svg6: Qt's platform plugins (xcb, wayland) and the SVG icon engine are
# loaded at run time, so no library dependency brings them.
# ocl-icd-opencl-dev: Debian's oneDNN is built with the OpenCL GPU runtime, so its CMake config
# (find_package(dnnl)) requires the OpenCL headers and library even for CPU-only use.
packages=(
    g++ cmake ninja-build pkgconf
    libdnnl-dev libhwy-dev ocl-icd-opencl-dev nlohmann-json3-dev zlib1g-dev libarchive-dev
    qt6-base-dev qt6-qpa-plugins libqt6svg6 libqcustomplot-dev ca-certificates
    qt6-tools-dev qt6-l10n-tools # lrelease: the plural forms of the desktop's messages (ui/i18n)
    libprotobuf-dev protobuf-compiler
    libonnx-dev libprotobuf-dev # towers-cli export: ONNX's messages, checker and shape inference
    libopenmpi-dev openmpi-bin # towers-cli train across processes and machines (mpirun, srun)
    dataset-fashion-mnist
)
if [[ "${1:-}" == "--test" ]]; then
    # PyTorch is the test oracle (tests/torch_crosscheck.py) and the benchmark reference;
    # OpenBLAS with pthreads is what Debian's torch uses for its BLAS calls. Xvfb and xauth run the
    # desktop application without a display for tools/screenshots.sh (the UI tests themselves use
    # Qt's offscreen platform and need neither).
    # The packaging tests build the .deb (dpkg-dev for its Depends), check it with lintian,
    # install it into a clean root (debootstrap) and validate the desktop integration.
    packages+=(python3 python3-torch python3-numpy libopenblas0-pthread xvfb xauth
        dpkg-dev lintian debootstrap desktop-file-utils appstream bash-completion groff-base)
    packages+=(python3-venv) # the TensorBoard test's virtual environment (pip install tensorboard)
    packages+=(clang-format-14) # tools/check-format.sh (CTest: source_format) pins this version
elif [[ -n "${1:-}" ]]; then
    echo "usage: $0 [--test]" >&2
    exit 2
fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    echo "install-deps: everything is installed"
    exit 0
fi

sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
