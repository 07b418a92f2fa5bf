"""Benchmark: what an interruption costs a pack in parts, and what resumability costs when
nothing goes wrong.

Corpus: ``benchmarks/corpus.py`` (photo-like images, 10 class folders). Every pack is
``im2rec PREFIX ROOT --resize 256 --num-thread 2`` run as a user runs it (the installed console
script), with ``--num-shards S`` unless said otherwise:

* **clean**: an uninterrupted pack into S shards, and **plain**: the same list as one unsharded
  ``.rec`` (``pack_list``, resumable from its journal): the cost of packing in parts (done
  records, CRC-32s, the commit) when nothing goes wrong.
* **killed + resumed**: the pack killed (SIGKILL) once half of its parts are done, then the same
  command with ``--resume``: the resume's time, the items it packed (the parts not done), and
  the time the kill cost: both runs together minus the clean pack (the work of the part in
  flight at the kill, a second start-up, the check of the kept parts). The resumed set is
  compared with the clean one byte for byte, every run.
* **verify**: how fast a resume checks the parts it keeps (the CRC-32 of every file a done
  record names), on a staging folder whose parts are all done (page cache warm).

Targets: parts cost at most 5% over plain; the kill costs at most one part's share of the
clean pack plus 3 s (a start-up of the command and the check); verification at least
500 MB/s. Medians of ``--repeats`` runs.

    python benchmarks/bench_pack_resume.py [--n 1000] [--shards 8] [--repeats 3]
"""
from __future__ import annotations

import argparse
import filecmp
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from corpus import make_corpus  # noqa: E402 - after the sys.path line

OPTIONS = ["--resize", "256", "--num-thread", "2"]


def _im2rec() -> str:
    found = shutil.which("im2rec") or os.path.join(os.path.dirname(sys.executable), "im2rec")
    if not os.path.exists(found):
        sys.exit("im2rec is not installed in this environment (make install)")
    return found


def _list_for(root: str, folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    lst = os.path.join(folder, "job.lst")
    names = sorted(os.path.relpath(os.path.join(d, f), root)
                   for d, _, files in os.walk(root) for f in files
                   if f.lower().endswith((".jpg", ".jpeg", ".png")))
    with open(lst, "w") as out:
        for i, name in enumerate(names):
            out.write(f"{i}\t{name.split(os.sep)[0].split('_')[-1]}.000000\t{name}\n")
    return lst


def _run(args: list, folder: str) -> tuple:
    started = time.perf_counter()
    proc = subprocess.run([_im2rec(), os.path.join(folder, "job"), *args, "--json", "-q"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"im2rec failed: {proc.stderr}")
    return time.perf_counter() - started, json.loads(proc.stdout)["lists"][0]


def _fresh(base: str, name: str, lst: str) -> str:
    folder = os.path.join(base, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    shutil.copy(lst, os.path.join(folder, "job.lst"))
    return folder


def _same(a: str, b: str) -> bool:
    names = sorted(n for n in os.listdir(a) if n.startswith("job") and n != "job.lst")
    return names == sorted(n for n in os.listdir(b) if n.startswith("job") and n != "job.lst") \
        and all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False)
                for n in names)


def killed_and_resumed(root: str, lst: str, base: str, shards: int, clean: str) -> dict:
    folder = _fresh(base, "killed", lst)
    args = [root, *OPTIONS, "--num-shards", str(shards)]
    started = time.perf_counter()
    proc = subprocess.Popen([_im2rec(), os.path.join(folder, "job"), *args, "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = os.path.join(folder, ".recio-pack-job", "part-*.json")
    while len(glob.glob(done)) < shards // 2 and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = time.perf_counter() - started
    seconds, report = _run(args + ["--resume"], folder)
    if not _same(folder, clean):
        sys.exit("the resumed set differs from the clean one")
    items = report["packed"] + report["skipped"]
    return {"first": first, "resume": seconds, "total": first + seconds,
            "packed": items - report["resumed"], "items": items,
            "kept": report["parts_kept"]}


def verify_rate(root: str, lst: str, base: str, shards: int) -> float:
    """MB/s of a resume's check of kept parts: a staging folder whose parts are all done
    (the pack stopped just before publishing), then its done records verified."""
    from recio.image.packing import shards as shard_pack
    from recio.image.packing.paths import staging_folder
    from recio.image.packing.progress import PackProgress
    from recio.image.packing.settings import PackSettings
    from recio.image.pixels.transform import ImageOptions

    folder = _fresh(base, "verify", lst)

    def stop(*_args: object) -> None:
        raise KeyboardInterrupt
    original, shard_pack._write_errors = shard_pack._write_errors, stop
    try:
        shard_pack.pack_shards(os.path.join(folder, "job.lst"), root,
                               PackSettings(ImageOptions(resize=256), num_shards=shards,
                                            workers=2))
    except KeyboardInterrupt:
        pass
    finally:
        shard_pack._write_errors = original
    store = PackProgress(staging_folder(os.path.join(folder, "job")))
    records = store.done_records(store.job()["job"])
    size = sum(entry[1] for doc in records.values() for entry in doc["files"])
    times = []
    for _ in range(3):
        started = time.perf_counter()
        kept, rejected = store.verify(records)
        times.append(time.perf_counter() - started)
        assert len(kept) == shards and not rejected
    return size / statistics.median(times) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="images in the corpus")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None, help="working folder (default: a temporary one)")
    args = parser.parse_args()
    root = os.path.join(HERE, "out", f"corpus-{args.n}")
    make_corpus(root, n=args.n)
    base = args.dir or tempfile.mkdtemp(prefix="bench-pack-resume-")
    try:
        lst = _list_for(root, os.path.join(base, "list"))
        plain, clean = [], []
        for _ in range(args.repeats):
            plain.append(_run([root, *OPTIONS], _fresh(base, "plain", lst))[0])
            clean.append(_run([root, *OPTIONS, "--num-shards", str(args.shards)],
                              _fresh(base, "clean", lst))[0])
        runs = [killed_and_resumed(root, lst, base, args.shards, os.path.join(base, "clean"))
                for _ in range(args.repeats)]
        rate = verify_rate(root, lst, base, args.shards)
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    p, c = statistics.median(plain), statistics.median(clean)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    lost = med["total"] - c
    allowed = c / args.shards + 3.0
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load}; {args.n} images, {args.shards} shards, median of "
          f"{args.repeats} runs")
    print(f"{'case':38} {'figure':>14}   target")
    print(f"{'plain pack (one .rec)':38} {p:>12.2f} s")
    print(f"{'clean pack in parts':38} {c:>12.2f} s   <= plain + 5%: "
          f"{'OK' if c <= 1.05 * p else 'MISSED'} ({100 * (c / p - 1):+.1f}%)")
    print(f"{'killed at half: first run':38} {med['first']:>12.2f} s")
    print(f"{'  resume':38} {med['resume']:>12.2f} s   parts kept {med['kept']:.0f} "
          f"of {args.shards}, {med['packed']:.0f} of {med['items']:.0f} items packed")
    print(f"{'  time the kill cost':38} {lost:>12.2f} s   <= {allowed:.2f} s (a part's share "
          f"+ 3 s): {'OK' if lost <= allowed else 'MISSED'}")
    print(f"{'verify kept parts':38} {rate:>9,.0f} MB/s   >= 500 MB/s: "
          f"{'OK' if rate >= 500 else 'MISSED'}")


if __name__ == "__main__":
    main()
