#!/usr/bin/env bash
# `make demo`: the main jobs on the bundled example data, from a fresh install. Commands run as
# `$PYTHON -m recio` (the `recio` command) and `$PYTHON -m recio.im2rec` (`im2rec`), so the demo
# works whether or not the virtualenv's bin/ is on PATH. PYTHON defaults to python3.
set -euo pipefail
# Outputs go to examples/out/ (replaced on every run), or to DEMO_OUT, a folder that must be new
# or empty (the demo never deletes a folder it was given).
PYTHON="$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')"
out=
if [ -n "${DEMO_OUT:-}" ]; then
    if [ -e "$DEMO_OUT" ] && [ -n "$(ls -A "$DEMO_OUT")" ]; then
        echo "demo: DEMO_OUT=$DEMO_OUT is not empty; give a new or empty folder" >&2
        exit 2
    fi
    mkdir -p "$DEMO_OUT"
    out="$(cd "$DEMO_OUT" && pwd)"
fi
cd "$(dirname "$0")"
if [ -z "$out" ]; then
    rm -rf out && mkdir -p out
    out=out
fi
where="$(cd "$out" && pwd)"
echo "The demo writes its files to $where/"
echo

echo "== 1. write, index and read back a record file with the Python API"
"$PYTHON" records_demo.py "$out/records"

echo
echo "== 2. inspect and verify it with the recio command"
"$PYTHON" -m recio inspect "$out/records.rec" --show 3
"$PYTHON" -m recio verify "$out/records.rec" --images

echo
echo "== 3. im2rec: list the example photos, pack them resized, inspect the result"
"$PYTHON" -m recio.im2rec "$out/photos" images --list --recursive
"$PYTHON" -m recio.im2rec "$out/photos" images --resize 64 --quality 90 --num-thread 2
"$PYTHON" -m recio inspect "$out/photos.rec"

echo
echo "== 4. sample-counted minibatches: train, get killed, restore, continue identically"
"$PYTHON" minibatch_resume.py --out "$out" --brief

echo
echo "== the demo's files, in $where/"
echo "records.rec/.idx (1-2); photos.lst, photos.classes.tsv, photos.rec/.idx (3);"
echo "minibatch_seq.rec/.idx/.len and minibatch_ckpt.json (4):"
ls -l "$where"
