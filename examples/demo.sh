#!/usr/bin/env bash
# `make demo`: the main jobs on the bundled example data, from a fresh install.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf out && mkdir -p out

echo "== 1. write, index and read back a record file with the Python API"
python records_demo.py out/records

echo
echo "== 2. inspect and verify it with the recio command"
recio inspect out/records.rec --show 3
recio verify out/records.rec --images

echo
echo "== 3. im2rec: list the example photos, pack them resized, inspect the result"
im2rec out/photos images --list --recursive
im2rec out/photos images --resize 64 --quality 90 --num-thread 2
recio inspect out/photos.rec

echo
echo "== 4. sample-counted minibatches: train, get killed, restore, continue identically"
python minibatch_resume.py | tail -n 3
