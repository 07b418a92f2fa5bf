"""The core paths of recio, run once, printing a digest of every output: for comparing a run
with Linux's facilities to one without them (tests/portable/test_portable.py runs it under each
``RECIO_TEST_REMOVE`` item and expects the same digests).

``python tests/portable/portable_workload.py WORKDIR IMAGES``: writes records (small, large and
multi-part), indexes them, reads them back every way (sequentially, by offset, by key, as
InputSplit parts), repairs a cut copy, and packs ``IMAGES`` with im2rec (``--list``, then a
pack by thread workers and one by process workers). Prints one JSON object.
"""
import hashlib
import json
import os
import pathlib
import random
import subprocess
import sys

import recio
from recio.image.tools.repair import repair
from recio.records.framing import MAGIC_BYTES


def digest(chunks) -> str:
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(len(chunk).to_bytes(8, "little"))
        h.update(bytes(chunk))
    return h.hexdigest()


def file_digest(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def payloads():
    rng = random.Random(33)
    out = []
    for i in range(60):
        size = rng.choice([0, 1, 7, 100, 5000, 70_000, 300_000])
        data = bytearray(rng.randbytes(size))
        if i % 7 == 3 and size >= 8:  # an aligned magic inside: a multi-part record
            data[4:8] = MAGIC_BYTES
        out.append(bytes(data))
    return out


def main(work: pathlib.Path, images: pathlib.Path) -> dict:
    found = {}
    records = payloads()
    rec, idx = work / "data.rec", work / "data.idx"
    with recio.IndexedRecordWriter(rec, idx) as writer:
        for key, data in enumerate(records):
            writer.write(key, data)
    found["written"] = [file_digest(rec), file_digest(idx)]
    with recio.RecordReader(rec) as reader:
        found["sequential"] = digest(reader)
    with recio.IndexedRecordReader(rec, idx) as reader:
        found["by_key"] = digest(reader[k] for k in reversed(range(len(records))))
    parts = []
    for part in range(3):
        with recio.InputSplit(str(rec), part_index=part, num_parts=3) as split:
            parts.append(digest(split))
    found["parts"] = parts
    cut = work / "cut.rec"
    cut.write_bytes(rec.read_bytes()[:-1000])
    result = repair(str(cut), str(work / "fixed.rec"))
    found["repaired"] = [file_digest(work / "fixed.rec"), result.records]
    prefix = work / "pack"
    command = [sys.executable, "-m", "recio.im2rec"]
    subprocess.run(command + [str(prefix), str(images), "--list", "--recursive",
                              "--no-shuffle"], check=True, capture_output=True)
    found["list"] = file_digest(prefix.with_suffix(".lst"))
    for executor in ("thread", "process"):
        subprocess.run(command + [str(prefix), str(images), "--resize", "32", "--num-thread",
                                  "2", "--executor", executor, "--force"],
                       check=True, capture_output=True)
        found[f"pack_{executor}"] = [file_digest(prefix.with_suffix(".rec")),
                                     file_digest(prefix.with_suffix(".idx"))]
    found["removed"] = sorted(getattr(os, "_recio_removed", ()))
    return found


if __name__ == "__main__":
    print(json.dumps(main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))))
