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
