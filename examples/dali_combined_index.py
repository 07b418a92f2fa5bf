"""Check that NVIDIA DALI reads a recio shard set through its combined index, record for record.

DALI's ``fn.readers.mxnet`` takes several ``.rec`` paths but one index whose offsets run
across them (``recio index --combined``). This writes a shard set of image records (random
bytes behind real IRHeaders), its combined index, reads everything back with DALI's reader on
the CPU (no GPU needed) and compares every payload and label with what was written.

With ``--manifest PATH`` it checks an existing set instead, e.g. one packed by
``im2rec PREFIX ROOT --num-shards N [--engine ray]``: DALI reads the shards through
``PREFIX.combined.idx`` and every image and label must equal what recio's ShardReader reads.

Needs DALI (``pip install nvidia-dali-cuda120``; a large wheel, not a recio dependency).
Usage: ``python examples/dali_combined_index.py [FOLDER]`` (default: a temporary folder), or
``python examples/dali_combined_index.py --manifest train.manifest.json``.
"""
from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

import recio
from recio.image.header import IRHeader, pack


def dali_read(recs: list, index: str, count: int) -> list:
    """``(payload, labels)`` of the first ``count`` records DALI's CPU reader gives."""
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=10, num_threads=1, device_id=None)  # CPU only
    def pipe():
        data, labels = fn.readers.mxnet(path=recs, index_path=[index], random_shuffle=False,
                                        name="reader")
        return data, labels

    pipeline = pipe()
    pipeline.build()
    read: list = []
    while len(read) < count:
        data, labels = pipeline.run()
        read += [(bytes(np.array(data.at(i))), np.array(labels.at(i)).reshape(-1).tolist())
                 for i in range(len(data))]
    return read[:count]


def check_manifest(manifest_path: str) -> int:
    """DALI through ``PREFIX.combined.idx`` against recio's ShardReader, record for record."""
    from recio.image.header import unpack

    manifest = recio.load_manifest(manifest_path)
    index = manifest_path[:-len(".manifest.json")] + ".combined.idx"
    expected = []
    with recio.ShardReader(manifest) as reader:
        for record in reader:
            header, payload = unpack(record)
            expected.append((payload, np.atleast_1d(np.asarray(header.label, np.float32))
                             .tolist()))
    same = dali_read(manifest.rec_paths(), index, len(expected)) == expected
    print(f"DALI read {len(expected)} records from {len(manifest.shards)} shards through "
          f"{index}: {'identical' if same else 'DIFFERENT'}")
    return 0 if same else 1


def main(folder: str) -> int:
    rng = np.random.default_rng(0)
    prefix = os.path.join(folder, "set")
    written = []
    with recio.ShardWriter(prefix, max_records=37) as writer:
        for key in range(100):
            body = rng.bytes(int(rng.integers(1, 3000)))
            label = float(key % 7)
            written.append((body, label))
            writer.write(key, pack(IRHeader(0, label, key, 0), body))
    index = os.path.join(folder, "set-all.idx")
    recio.records.combined_index(writer.manifest, index)
    recs = writer.manifest.rec_paths()
    read = [(body, labels[0]) for body, labels in dali_read(recs, index, len(written))]
    same = read[:len(written)] == written
    print(f"DALI read {len(written)} records from {len(recs)} shards through {index}: "
          f"{'identical' if same else 'DIFFERENT'}")
    return 0 if same else 1


if __name__ == "__main__":
    try:
        import nvidia.dali  # noqa: F401 - whether it imports
    except ImportError:
        print("this check needs NVIDIA DALI: pip install nvidia-dali-cuda120", file=sys.stderr)
        sys.exit(2)
    if len(sys.argv) == 3 and sys.argv[1] == "--manifest":
        sys.exit(check_manifest(sys.argv[2]))
    if len(sys.argv) > 1:
        sys.exit(main(sys.argv[1]))
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(main(tmp))
