"""MosaicML Streaming, the peer of ``bench_cache.py``, which runs this file with a Python that has
``mosaicml-streaming`` (its own virtualenv; recio never imports Streaming).

Writes MDS shards of the records ``bench_cache.py`` wrote (``PREFIX.blob``, the records one after
another, and ``PREFIX.offsets.npy``): ``MDSWriter`` with columns ``key: int`` and ``payload:
bytes``, no compression, shards of the same size as recio's. Uploads them to the bucket and
times ``StreamingDataset`` reading them, each run from an empty local folder: epoch 1 (the
download), epoch 2 (local disk) and, in epoch 2, keyed reads ``ds[i]`` in the order given, in
the main process and with a DataLoader of ``--workers`` workers. Prints one JSON line: the
medians in seconds and where the server's request log stood around each epoch 1.

Streaming's package imports its vision datasets (``torchvision``) when it is imported. PyPI's
torchvision wheels are built for the CUDA torch, which this project never installs (its
virtualenvs have the CPU ``torch==2.13.0``); this benchmark uses no vision dataset, so an empty
stand-in module takes torchvision's place.
"""
from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import statistics
import sys
import tempfile
import time
import types

import numpy as np


def _stand_in_for_torchvision() -> None:
    def module(name: str, **attrs):
        m = types.ModuleType(name)
        m.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        m.__path__ = []
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    class VisionDataset:  # what streaming.vision subclasses
        pass

    module("torchvision",
           datasets=module("torchvision.datasets", VisionDataset=VisionDataset),
           transforms=module("torchvision.transforms",
                             functional=module("torchvision.transforms.functional",
                                               to_tensor=None)))


def log_size(path: str) -> int:
    """Where the server's request log ends, once it stops growing (it logs after answering)."""
    size = -1
    while size != os.path.getsize(path):
        size = os.path.getsize(path)
        time.sleep(0.3)
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--blob", required=True)
    parser.add_argument("--offsets", required=True)
    parser.add_argument("--order", required=True)
    parser.add_argument("--shard-bytes", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--log", required=True, help="the S3 server's request log")
    parser.add_argument("--tmp", default=None)
    args = parser.parse_args()
    if "torchvision" not in sys.modules:
        try:
            import torchvision  # noqa: F401 - whether the real one imports here
        except Exception:
            _stand_in_for_torchvision()
    import boto3
    import streaming
    import torch
    from streaming import MDSWriter, StreamingDataset

    os.environ.setdefault("S3_ENDPOINT_URL", os.environ["AWS_ENDPOINT_URL"])
    offsets = np.load(args.offsets)
    out = tempfile.mkdtemp(prefix="mds-", dir=args.tmp)
    with open(args.blob, "rb") as blob, \
            MDSWriter(out=out, columns={"key": "int", "payload": "bytes"}, compression=None,
                      size_limit=args.shard_bytes) as writer:
        for key in range(len(offsets) - 1):
            writer.write({"key": key, "payload": blob.read(int(offsets[key + 1] - offsets[key]))})
    client = boto3.client("s3")
    names = sorted(os.listdir(out))
    for name in names:
        client.upload_file(os.path.join(out, name), args.bucket, f"mds/{name}")
    remote = f"s3://{args.bucket}/mds"
    order = np.load(args.order).tolist()
    nbytes = sum(os.path.getsize(os.path.join(out, n)) for n in names if n.endswith(".mds"))
    times: dict = {}
    marks = []

    def timed(name: str, work) -> None:
        start = time.perf_counter()
        work()
        times.setdefault(name, []).append(time.perf_counter() - start)

    def read_all(ds, workers: int) -> None:
        if workers == 0:
            for _ in ds:
                pass
        else:
            for _ in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers):
                pass

    class Lengths(StreamingDataset):
        """Each sample read, its payload's length handed on (as recio's readers in
        bench_cache.py do, with transform=len)."""

        def get_item(self, idx: int) -> int:
            return len(super().get_item(idx)["payload"])

    for _ in range(args.repeats):
        for workers in (0, args.workers):
            local = tempfile.mkdtemp(prefix="streaming-", dir=args.tmp)
            ds = Lengths(remote=remote, local=local, shuffle=False, batch_size=1)
            before = log_size(args.log)
            timed(f"e1 w{workers}", lambda: read_all(ds, workers))
            marks.append([before, log_size(args.log)])
            timed(f"e2 w{workers}", lambda: read_all(ds, workers))
            if workers == 0:
                timed("k2 w0", lambda: [ds[i] for i in order])
    print(json.dumps({"version": streaming.__version__, "shards": len(names) - 1,
                      "bytes": nbytes, "epoch1_log_ranges": marks,
                      **{k: statistics.median(v) for k, v in times.items()}}))


if __name__ == "__main__":
    main()
