#!/usr/bin/env bash
# Screenshots of the desktop application for the README: starts the real `towers` under Xvfb
# (a 1280x800 screen), walks it through every page with `--screenshot-tour` (a short real training
# run on two CPU towers on Fashion-MNIST, which Debian's dataset-fashion-mnist installs, then
# Runs and Classify with the checkpoint it wrote), once in the default palette and once with
# `--dark`, and writes the PNGs to docs/screenshots/ (or the folder given).
#   tools/screenshots.sh [OUT_DIR]      (TOWERS_BUILD=build/ci to use another build folder)
# Needs xvfb and xauth (packaging/install-deps.sh --test installs them); with optipng installed
# the PNGs are recompressed losslessly (about a fifth smaller: the repository and every copy of the
# working tree carry them).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TOWERS_BUILD:-build/cpu}
out=${1:-docs/screenshots}
app="$build/ui/towers"
[[ -x "$app" ]] || { echo "screenshots: $app is not built (cmake --build --preset cpu)" >&2; exit 1; }
command -v xvfb-run >/dev/null || { echo "screenshots: xvfb-run is missing (apt-get install xvfb xauth)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Nothing of the user's: own settings, runs and data folders (Fashion-MNIST comes from
# /usr/share/datasets, which the search path always includes).
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data"
unset TOWERS_DATA TOWERS_RUNS
tour() { # tour <settings name> <out dir> [app options]
    local name=$1 dir=$2
    shift 2
    cat >"$work/$name.ini" <<INI
[data]
dataset=fashion-mnist
[paths]
runsDir=$work/runs-$name
INI
    xvfb-run -a -s "-screen 0 1280x800x24" "$app" --settings "$work/$name.ini" --screenshot-tour "$dir" "$@"
}

mkdir -p "$out"
rm -f "$out"/*.png
tour light "$out"
tour dark "$work/dark" --dark
for page in train classify-test-set; do
    cp "$work"/dark/*-"$page".png "$out/dark-$page.png"
done
if command -v optipng >/dev/null; then
    optipng -quiet -o2 "$out"/*.png
else
    echo "screenshots: optipng is not installed: the PNGs stay as Qt wrote them" >&2
fi
ls -1 "$out"
