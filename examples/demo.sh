#!/usr/bin/env bash
# `make demo`: the main jobs on the bundled example data, from a fresh install. Commands run as
# `$PYTHON -m recio` (the `recio` command) and `$PYTHON -m recio.im2rec` (`im2rec`), so the demo
# works whether or not the virtualenv's bin/ is on PATH. PYTHON defaults to python3.
set -euo pipefail
PYTHON="$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')"
cd "$(dirname "$0")"
rm -rf out && mkdir -p out

echo "== 1. write, index and read back a record file with the Python API"
"$PYTHON" records_demo.py out/records

echo
echo "== 2. inspect and verify it with the recio command"
"$PYTHON" -m recio inspect out/records.rec --show 3
"$PYTHON" -m recio verify out/records.rec --images

echo
echo "== 3. im2rec: list the example photos, pack them resized, inspect the result"
"$PYTHON" -m recio.im2rec out/photos images --list --recursive
"$PYTHON" -m recio.im2rec out/photos images --resize 64 --quality 90 --num-thread 2
"$PYTHON" -m recio inspect out/photos.rec

echo
echo "== 4. sample-counted minibatches: train, get killed, restore, continue identically"
"$PYTHON" minibatch_resume.py | tail -n 3
