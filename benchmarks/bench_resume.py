"""Benchmark: restoring recio.torch's readers mid-epoch costs the same wherever the epoch stopped.

Writes (once, then reuses) a ``.rec`` + ``.idx`` of 10 million tiny image records (a 24-byte
IRHeader and no image: 32 bytes a record with its framing, 320 MB) and measures the time from a
reader's ``state_dict()`` to the first record out of a new reader that loaded it
(``state_dict -> new reader -> load_state_dict -> first record decoded``), at the start, the
middle and the end (the last record) of the epoch:

* ``RecordSampler`` over a ``RecordDataset`` of the file, in order and shuffled (the shuffled
  order of 10 million indices is rebuilt on restore: that is the constant the figure shows),
  and a merge of two ranks' states (ranks not in lockstep) resumed as rank 0 of 3;
* ``RecordIterableDataset`` of the file, without and with a 1,000-record shuffle buffer (the
  buffer's records are read again by offset), and a merge of two readers' states resumed as
  reader 0 of 3 (which finds its byte range's record heads).

Median of 5 runs each, after one warm-up run (page cache warm). The target: restore time
independent of the position (no replay); printed as the ratio end / start, which should stay
near 1 (<= 1.5; figures under a millisecond may differ by up to 0.5 ms of noise), beside the
absolute milliseconds and, for comparison, the first record of a new reader given no state
("no state": the same work a fresh epoch does).

    python benchmarks/bench_resume.py [--records 10000000] [--dir benchmarks/out] [--runs 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = 32  # bytes a record: 8 of framing, a 24-byte IRHeader, no image


def make_file(prefix: str, n: int) -> str:
    """``prefix.rec`` / ``.idx`` of ``n`` records (reused when already there)."""
    rec, idx = prefix + ".rec", prefix + ".idx"
    if os.path.exists(rec) and os.path.getsize(rec) == n * RECORD and os.path.exists(idx):
        return rec
    from recio.records import framing
    print(f"writing {n:,} records to {rec} ({n * RECORD / 1e6:.0f} MB) ...", flush=True)
    chunk = 1_000_000
    with open(rec + ".part", "wb") as f, open(idx + ".part", "w") as g:
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            ids = np.arange(lo, hi, dtype=np.uint64)
            arr = np.zeros(hi - lo, dtype=[("magic", "<u4"), ("lrec", "<u4"), ("flag", "<u4"),
                                           ("label", "<f4"), ("id", "<u8"), ("id2", "<u8")])
            arr["magic"], arr["lrec"] = framing.MAGIC, 24
            arr["label"], arr["id"] = (ids % 1000).astype(np.float32), ids
            f.write(arr.tobytes())
            g.write("".join(f"{i}\t{i * RECORD}\n" for i in range(lo, hi)))
    os.replace(idx + ".part", idx)
    os.replace(rec + ".part", rec)
    return rec


def timed(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def sampler_cases(rec: str, n: int):
    from recio.torch import RecordDataset, RecordSampler, resume_state
    ds = RecordDataset(rec, decode="raw")
    assert len(ds) == n

    def at(position: int, shuffle: bool, replicas: int = 1, rank: int = 0):
        """A sampler (rank ``rank`` of ``replicas``) that has handed out ``position`` indices
        and is about to hand out the next."""
        s = RecordSampler(ds, replicas, rank, shuffle=shuffle, seed=1)
        if position:
            state = s.state_dict()
            state["yielded"] = position - 1
            s.load_state_dict(state)
            next(iter(s))
        return s

    def restore(live, shuffle: bool):
        def run():
            state = live.state_dict()
            s = RecordSampler(ds, shuffle=shuffle, seed=1)
            s.load_state_dict(state)
            _, label = ds[next(iter(s))]
            assert label is not None
        return run

    def reshard(position: int):
        # two ranks, rank 1 ahead of rank 0 by 64 indices; resumed as rank 0 of 3
        lives = [at(max(0, position // 2 - 1), True, 2, 0),
                 at(min(n // 2 - 1, position // 2 + 63), True, 2, 1)]

        def run():
            merged = resume_state([s.state_dict() for s in lives])
            s = RecordSampler(ds, 3, 0, shuffle=True, seed=1)
            s.load_state_dict(merged)
            ds[next(iter(s))]
        return run

    def fresh(shuffle: bool, replicas: int = 1):
        def run():  # no state: a new sampler's first record
            ds[next(iter(RecordSampler(ds, replicas, 0, shuffle=shuffle, seed=1)))]
        return run

    for name, shuffle in (("RecordSampler, in order", False), ("RecordSampler, shuffled", True)):
        yield name, lambda p, sh=shuffle: restore(at(p, sh), sh), fresh(shuffle)
    yield "RecordSampler, 2 ranks -> 3", reshard, fresh(True, 3)


def iterable_cases(rec: str, n: int):
    from recio.torch import RecordIterableDataset, resume_state

    def at(position: int, buffer: int, part: int = 0, parts: int = 1):
        """A reader of part ``part`` of ``parts`` that has handed out ``position`` records of
        its part (and read ``buffer`` more into its shuffle buffer)."""
        ds = RecordIterableDataset(rec, decode="raw", shuffle_buffer=buffer, part_index=part,
                                   num_parts=parts)
        if position:
            state = ds.state_dict()  # the state of a reader that has read `position - 1`
            begin, end = state["intervals"][0]
            state["intervals"] = [[begin + (position - 1) * RECORD, end]]
            state["base_delivered"] = position - 1
            ds.load_state_dict(state)
            it = iter(ds)
            next(it)
            ds._bench_iter = it  # keep the pass alive
        return ds

    def restore(live, buffer: int):
        def run():
            state = live.state_dict()
            ds = RecordIterableDataset(rec, decode="raw", shuffle_buffer=buffer)
            ds.load_state_dict(state)
            _, label = next(iter(ds))
            assert label is not None
        return run

    def reshard(position: int):
        half = n // 2
        lives = [at(min(half - 2, position // 2), 0, 0, 2),
                 at(min(half - 2, position // 2 + 64), 0, 1, 2)]

        def run():
            merged = resume_state([ds.state_dict() for ds in lives])
            ds = RecordIterableDataset(rec, decode="raw", part_index=0, num_parts=3)
            ds.load_state_dict(merged)
            next(iter(ds))
        return run

    def fresh(buffer: int, parts: int = 1):
        def run():  # no state: a new reader's first record
            next(iter(RecordIterableDataset(rec, decode="raw", shuffle_buffer=buffer,
                                            part_index=0, num_parts=parts)))
        return run

    for name, buffer in (("RecordIterableDataset", 0),
                         ("RecordIterableDataset, shuffle_buffer=1000", 1000)):
        # a buffered reader has read `buffer` records past what it handed out
        yield name, lambda p, b=buffer: restore(at(min(p, n - 1 - b), b), b), fresh(buffer)
    yield "RecordIterableDataset, 2 readers -> 3", reshard, fresh(0, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--dir", default=os.path.join(HERE, "out"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    try:
        import torch  # noqa: F401 - whether it imports
    except ImportError:
        print("bench_resume: needs torch (pip install 'recio[torch]'); skipped")
        return 0
    warnings.filterwarnings("ignore", category=UserWarning)
    os.makedirs(args.dir, exist_ok=True)
    n = args.records
    rec = make_file(os.path.join(args.dir, f"resume_{n}"), n)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {n:,} records; "
          f"median of {args.runs} runs; restore = state_dict -> load_state_dict -> first record")
    positions = {"start": 0, "middle": n // 2, "end": n - 1}
    print(f"{'case':44} {'start':>9} {'middle':>9} {'end':>9} {'end/start':>10}   target"
          f"{'':37}no state")
    missed = 0
    for cases in (sampler_cases(rec, n), iterable_cases(rec, n)):
        for name, make, fresh in cases:
            ms = {where: timed(make(p), args.runs) for where, p in positions.items()}
            ratio = ms["end"] / ms["start"]
            met = ratio <= 1.5 or ms["end"] - ms["start"] < 0.5  # sub-ms figures: noise
            missed += not met
            print(f"{name:44} {ms['start']:7.2f}ms {ms['middle']:7.2f}ms {ms['end']:7.2f}ms "
                  f"{ratio:9.2f}x   end/start <= 1.5 (or < 0.5 ms apart) "
                  f"{'OK' if met else 'MISSED':6}  {timed(fresh, args.runs):7.2f}ms", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
