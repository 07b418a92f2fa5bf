"""Coverage-guided fuzzing (atheris, ``pip install atheris``) of recio's readers and the
sequence entry points.

Each input is split into an ``.idx`` and a ``.rec`` (its first byte says how much goes to the
``.idx``), and every reader runs over them: ``RecordReader`` (raise and skip modes),
``IndexedRecordReader``, ``verify_file``, ``recio.image.tools.repair.repair``, ``unpack_sequence``,
``sequence_sample_counts`` and ``MinibatchSource``. Only ``recio.RecordIOError`` and its
subclasses may escape; anything else stops the run with the input that caused it. Starts from
a few valid files (image and sequence records) written into the corpus folder. Run from the
repository: ``python tests/fuzz/atheris_readers.py -max_total_time=1200 -seed=12345
[CORPUS_DIR]`` (libFuzzer's options; the corpus defaults to a temporary folder).
"""
import os
import sys
import tempfile
import warnings

import atheris

with atheris.instrument_imports(include=["recio"]):
    import recio
    from recio.image.tools.repair import repair
    from recio.image.tools.verify import verify_file
    from recio.sequence import sequence_sample_counts, unpack_sequence
    from recio.sequence.minibatch import MinibatchSource

FOLDER = tempfile.mkdtemp(prefix="recio-atheris-")
REC, IDX = os.path.join(FOLDER, "f.rec"), os.path.join(FOLDER, "f.idx")
OUT = os.path.join(FOLDER, "out")


def attempt(run) -> None:
    try:
        run()
    except recio.RecordIOError:
        pass


def one(data: bytes) -> None:
    """Every reader over the .idx and .rec that ``data`` holds."""
    if not data:
        return
    cut = data[0] * len(data) // 256
    idx, rec = data[1:cut + 1], data[cut + 1:]
    with open(REC, "wb") as f:
        f.write(rec)
    if idx:
        with open(IDX, "wb") as f:
            f.write(idx)
    elif os.path.exists(IDX):
        os.remove(IDX)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        attempt(lambda: list(recio.RecordReader(REC)))
        attempt(lambda: list(recio.RecordReader(REC, on_error="skip")))
        attempt(lambda: list(recio.IndexedRecordReader(REC, scan=True).values()))
        attempt(lambda: verify_file(REC).to_dict())
        attempt(lambda: repair(REC, OUT, force=True))
        attempt(lambda: unpack_sequence(rec))
        attempt(lambda: sequence_sample_counts(rec))
        attempt(lambda: MinibatchSource(REC, randomize=False).next_minibatch(64))


def write_seeds(corpus: str) -> None:
    """Valid inputs to start from: image records (one of them multi-part), sequence records."""
    import numpy as np

    def keep(name: str) -> None:
        rec, idx = open(REC, "rb").read(), open(IDX, "rb").read()
        share = len(idx) * 256 // (len(idx) + len(rec) + 1)
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(bytes([share]) + idx + rec)

    with recio.IndexedRecordWriter(REC, IDX) as w:
        for i in range(3):
            jpeg = b"\xff\xd8\xff" + b"x" * i + recio.records.framing.MAGIC_BYTES + b"\xff\xd9"
            w.write(i, recio.pack(recio.IRHeader(0, 1.0, i, 0), jpeg))
    keep("images")
    with recio.sequence.SequenceWriter(REC) as w:
        for n in (1, 2):
            w.write({"s": recio.sequence.Sparse.from_lists([([1], [1.0])] * n, 10),
                     "x": np.ones((n, 2), np.float32)})
    keep("sequences")


if __name__ == "__main__":
    folders = [a for a in sys.argv[1:] if not a.startswith("-")]
    corpus = folders[0] if folders else tempfile.mkdtemp(prefix="recio-atheris-corpus-")
    if not os.listdir(corpus) if os.path.isdir(corpus) else True:
        os.makedirs(corpus, exist_ok=True)
        write_seeds(corpus)
    atheris.Setup([a for a in sys.argv if a not in folders] + [corpus], one)
    atheris.Fuzz()
