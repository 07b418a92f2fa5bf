"""Record what the real MXNet 1.9.1 makes of this folder's damaged images: run once, never edit.

    python tests/data/mxnet_damaged/make_images.py              # the sources (project Python)
    /work/mxvenv/bin/python tests/data/mxnet_damaged/make.py    # MXNet 1.9.1 + the cv2 its
                                                                # tools/im2rec.py imports

With nothing but ``mxnet`` and ``cv2``, writes into ``mxnet/``:

- ``NAME.rec`` / ``.idx``: MXNet's own ``tools/im2rec.py`` (the copy inside the mxnet package,
  ``--num-thread 2``: with one thread it fails on the first image it cannot read)
  with ROOT this folder, on a list and with the arguments of ``manifest.json["im2rec"][NAME]``.
  ``raw_recoverable`` and ``raw_damaged`` are ``--pass-through`` packs: the damaged bytes as
  they are, for the iterators.
- ``expected.npz``: ``mx.io.ImageRecordIter`` over ``raw_recoverable.rec`` (resize 48, crop
  48x48, uint8, no shuffle, batch 1): ``iter|K|data`` and ``iter|K|label`` for each batch K;
  and ``mx.image.imdecode`` of each damaged image (``imdecode|NAME``) where it decodes.
- ``manifest.json``: the runs, what ``cv2.imread`` (MXNet's im2rec.py's decoder) and
  ``mx.image.imdecode`` (MXNet's own OpenCV 3.4.2) said of each image, how many batches the
  iterator gave, what became of it over ``raw_damaged.rec`` (which holds images nothing
  decodes: its process's exit status, the batches it gave first, its last error line), and
  the versions used.
"""
import json
import os
import shutil
import subprocess
import sys

import cv2
import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "mxnet")
#: the im2rec runs: name -> (list, arguments after PREFIX ROOT)
IM2REC = {
    "resize64_q90": ("damaged", ["--resize", "64", "--quality", "90"]),
    "whole_q95": ("damaged", ["--quality", "95"]),
    "grey_resize48": ("damaged", ["--color", "0", "--resize", "48"]),
    "raw_recoverable": ("recoverable", ["--pass-through"]),
    "raw_damaged": ("damaged", ["--pass-through"]),
}


def im2rec(manifest):
    tool = os.path.join(os.path.dirname(mx.__file__), "tools", "im2rec.py")
    runs = {}
    for name, (lst, args) in IM2REC.items():
        work = os.path.join(OUT, "work", name)
        os.makedirs(work, exist_ok=True)
        shutil.copy(os.path.join(HERE, f"{lst}.lst"), os.path.join(work, f"{name}.lst"))
        proc = subprocess.run([sys.executable, tool, os.path.join(work, name), HERE, *args,
                               "--num-thread", "2"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        for suffix in (".rec", ".idx"):
            shutil.move(os.path.join(work, name + suffix), os.path.join(OUT, name + suffix))
        reader = mx.recordio.MXIndexedRecordIO(os.path.join(OUT, name + ".idx"),
                                               os.path.join(OUT, name + ".rec"), "r")
        runs[name] = {"list": f"{lst}.lst", "args": args, "records": len(reader.keys),
                      "keys": [int(k) for k in reader.keys]}
        reader.close()
    shutil.rmtree(os.path.join(OUT, "work"))
    manifest["im2rec"] = runs


def decoders(manifest, arrays):
    said = {}
    for name in sorted(os.listdir(os.path.join(HERE, "images"))):
        path = os.path.join(HERE, "images", name)
        imread = cv2.imread(path, 1)
        with open(path, "rb") as f:
            data = f.read()
        try:
            decoded = mx.image.imdecode(data, to_rgb=0).asnumpy()
            if not name.startswith("ok_"):
                arrays[f"imdecode|{name}"] = decoded
            own = list(decoded.shape)
        except Exception as exc:  # noqa: BLE001 - recorded as MXNet said it
            own = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}"
        said[name] = {"cv2.imread": None if imread is None else list(imread.shape),
                      "mx.image.imdecode": own}
    manifest["decoders"] = said


def iterators(manifest, arrays):
    args = dict(data_shape=(3, 48, 48), resize=48, batch_size=1, dtype="uint8",
                preprocess_threads=1, shuffle=False, round_batch=False)
    it = mx.io.ImageRecordIter(path_imgrec=os.path.join(OUT, "raw_recoverable.rec"),
                               path_imgidx=os.path.join(OUT, "raw_recoverable.idx"), **args)
    count = 0
    for k, batch in enumerate(it):
        arrays[f"iter|{k}|data"] = batch.data[0].asnumpy()
        arrays[f"iter|{k}|label"] = batch.label[0].asnumpy()
        count += 1
    manifest["iter"] = {"args": {k: list(v) if isinstance(v, tuple) else v
                                 for k, v in args.items()},
                        "recoverable_batches": count}
    # over images nothing decodes MXNet's iterator may kill its process: run it in a child
    code = ("import mxnet as mx, sys\n"
            f"it = mx.io.ImageRecordIter(path_imgrec={os.path.join(OUT, 'raw_damaged.rec')!r}, "
            f"path_imgidx={os.path.join(OUT, 'raw_damaged.idx')!r}, **{args!r})\n"
            "seen = 0\n"
            "for _ in it:\n"
            "    seen += 1\n"
            "    print('batch', seen, flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    lines = [line for line in proc.stderr.splitlines()
             if line.strip() and not line.startswith(("[", "Corrupt", "Premature", "libpng"))]
    manifest["iter"]["damaged"] = {
        "returncode": proc.returncode, "batches": proc.stdout.count("batch "),
        "last_stderr_line": lines[-1][:300] if lines else None}


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest, arrays = {}, {}
    im2rec(manifest)
    decoders(manifest, arrays)
    iterators(manifest, arrays)
    manifest["versions"] = {"mxnet": mx.__version__, "cv2": cv2.__version__,
                            "numpy": np.__version__, "python": sys.version.split()[0]}
    np.savez_compressed(os.path.join(OUT, "expected.npz"), **arrays)
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
