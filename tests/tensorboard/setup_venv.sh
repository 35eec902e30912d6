#!/usr/bin/env bash
# Makes the TensorBoard test's virtual environment, once: python3 -m venv VENV, then TensorBoard from
# PyPI into it. Reused while `VENV/bin/python` imports TensorBoard's event reader; several tests
# starting at once wait for one another (flock).
#   tests/tensorboard/setup_venv.sh VENV
# Exit status 0 when the environment is ready, 1 (with the reason on stderr) when it cannot be made
# (no python3 venv module, no network to PyPI, ...).
set -euo pipefail

venv=${1:?usage: $0 VENV}
python=${PYTHON3:-python3}
ready() { [[ -x $venv/bin/python ]] && "$venv/bin/python" -c \
    "import tensorboard.backend.event_processing.event_accumulator" >/dev/null 2>&1; }

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
ready && exit 0

echo "setup_venv: making $venv with TensorBoard from PyPI (once)" >&2
rm -rf "$venv" # an environment that does not import TensorBoard: half made, remade
if ! "$python" -m venv "$venv" >&2; then
    echo "setup_venv: '$python -m venv' failed (on Debian: apt-get install python3-venv)" >&2
    exit 1
fi
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "tensorboard>=2.12,<3" >&2; then
    echo "setup_venv: pip could not install tensorboard from PyPI (no network?)" >&2
    rm -rf "$venv"
    exit 1
fi
ready || { echo "setup_venv: TensorBoard was installed but does not import" >&2; exit 1; }
