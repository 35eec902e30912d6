#!/usr/bin/env bash
# Fails when a C++ or CUDA source differs from .clang-format, naming each file and line.
#   tools/check-format.sh          check (what CI runs, as the CTest test source_format)
#   tools/check-format.sh --fix    format the sources in place
# The formatter is Debian 12's clang-format-14 (installed by packaging/install-deps.sh --test):
# another version formats some constructs differently, so the check pins it.
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$formatter" >/dev/null; then
    echo "check-format: $formatter is not installed (packaging/install-deps.sh --test installs it)" >&2
    exit 2
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
else # an unpacked source tree without git
    mapfile -t files < <(find app engine ui tests bench tools -name build -prune -o \
        \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print | sort)
fi
if [[ "${1:-}" == "--fix" ]]; then
    "$formatter" -i "${files[@]}"
    exit 0
elif [[ -n "${1:-}" ]]; then
    echo "usage: $0 [--fix]" >&2
    exit 2
fi
if ! "$formatter" --dry-run --Werror "${files[@]}"; then
    echo "check-format: the files above differ from .clang-format; run tools/check-format.sh --fix" >&2
    exit 1
fi
echo "check-format: ${#files[@]} files match .clang-format ($("$formatter" --version))"
