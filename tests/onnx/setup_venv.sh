#!/usr/bin/env bash
# Makes, once, the virtual environment in which the ONNX export tests run the exported models:
# onnxruntime and numpy from PyPI (pip). Usage: setup_venv.sh DIR
# Safe to run from several tests at once (flock on DIR.lock) and again (a finished environment,
# marked by DIR/.towers-ready, is kept). Exit status 0: DIR/bin/python imports both.
set -euo pipefail
dir=${1:?usage: setup_venv.sh DIR}
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
probe() { "$dir/bin/python" -c 'import numpy, onnxruntime' 2>/dev/null; }
if [[ -f "$dir/.towers-ready" ]] && probe; then
    exit 0
fi
rm -rf "$dir"
python3 -m venv "$dir"
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check 'onnxruntime>=1.14' numpy
probe
touch "$dir/.towers-ready"
