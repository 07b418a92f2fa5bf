"""Record the real CNTK 2.7's minibatch traces for tests/test_cntk_api.py.

Run under a Python with CNTK 2.7 installed (e.g. Python 3.6 with ``pip install cntk==2.7``;
CNTK needs OpenMPI's libmpi.so.12/libmpi_cxx.so.1 on LD_LIBRARY_PATH)::

    python tests/data/cntk/make_traces.py          # writes tests/data/cntk/traces.json

The corpora (``*.cbf`` beside this script) were written by recio's CBFWriter
(``make_corpora`` in tests/test_cntk_api.py documents their layout): stream ``id`` (dense, dim 1,
every sample = the sequence's number in file order) and ``y`` (sparse, dim 5). Each case is run
until two runs agree (CNTK 2.7's block randomizer has a rare data race that corrupts a run).

``make_source`` and ``record`` take the reader API as their first argument (``cntk.io`` here,
``recio.sequence.cntk`` in the test), so CNTK and recio are traced by the same code.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def cases(C):
    one, var, w14 = "one.cbf", "var.cbf", "w14.cbf"
    out = []

    def add(name, corpus, sizes, steps, workers=1, mb_stream=None, restore_at=None, **source):
        out.append({"name": name, "corpus": corpus, "sizes": sizes, "steps": steps,
                    "workers": workers, "mb_stream": mb_stream, "restore_at": restore_at,
                    "source": source})
    # D1: no limit given -> never ends (runs on across sweeps)
    add("d1_default_no_randomize", one, [7], 20, randomize=False)
    add("d1_default_randomized", var, [32], 40)
    add("d1_max_sweeps_1", var, [20], 40, randomize=False, max_sweeps=1)
    add("d1_full_data_sweep", var, [20], 40, randomize=False, max_samples=C.FULL_DATA_SWEEP)
    # D2: max_samples caps the last budget; a longer sequence still comes whole
    add("d2_max_samples_25", var, [20], 10, randomize=False, max_samples=25)
    add("d2_max_samples_randomized", w14, [32], 60, max_samples=500, randomization_seed=2)
    add("d2_max_samples_workers", var, [20], 40, workers=3, randomize=False, max_samples=150)
    # D4: windows bound the chunks open at once
    add("d4_window_1_chunk", w14, [32], 80, randomization_window_in_chunks=1)
    add("d4_window_3_chunks", w14, [32], 80, randomization_window_in_chunks=3,
        randomization_seed=1)
    add("d4_window_100_samples", w14, [32], 80, randomization_window_in_chunks=0,
        randomization_window_in_samples=100)
    add("d4_window_300_samples", w14, [100], 40, randomization_window_in_chunks=0,
        randomization_window_in_samples=300, randomization_seed=3)
    add("d4_default_window", w14, [100], 30, randomization_seed=7)
    # D5: distributed reading
    add("d5_size2_3workers", one, [2], 30, workers=3, randomize=False)
    add("d5_size2_3workers_randomized", one, [2], 30, workers=3)
    add("d5_var_3workers", var, [20], 40, workers=3, randomize=False)
    add("d5_var_2workers_randomized", w14, [32], 60, workers=2, randomization_seed=4,
        max_sweeps=2)
    add("d5_sizes_3workers_randomized", w14, [7, 32, 100], 60, workers=3, randomization_seed=5,
        max_sweeps=2)
    add("d5_size1_4workers", var, [1], 40, workers=4, randomize=False)
    # the CNTK Text Format (the golden data.ctf: F dense dim 3, L sparse dim 5)
    ctf = "../golden/cbf/data.ctf"
    add("ctf_file_order", ctf, [20], 20, randomize=False, max_sweeps=1)
    add("ctf_max_samples_labels", ctf, [20], 20, mb_stream="y", randomize=False,
        max_samples=25)
    add("ctf_randomized_2workers", ctf, [10], 40, workers=2, max_sweeps=2,
        randomization_seed=9)
    # checkpoint, then fresh sources restored from it (restoring into sweep 0 with a seed != 0
    # reshuffles the rest of the sweep with seed `sweep`: CNTK's quirk, mirrored by recio)
    add("restore_sweep0_seed3", w14, [32], 30, restore_at=10, randomization_seed=3)
    add("restore_sweep0_window2", w14, [32], 50, restore_at=20, randomization_seed=3,
        randomization_window_in_chunks=2)
    add("sizes_change_window2", w14, [32, 32, 32, 32, 32, 32, 32, 100], 50,
        randomization_seed=6, randomization_window_in_chunks=2)
    add("restore_sweep1_workers", w14, [20, 50], 60, workers=2, restore_at=45,
        randomization_window_in_chunks=4, randomization_seed=1)
    add("restore_no_randomize", var, [20], 30, workers=3, restore_at=12, randomize=False)
    # sizes of a CNTK trace: 1, 7, 32, 100, 300
    for size in (1, 7, 32, 100, 300):
        add("sizes_%d" % size, w14, [size], 40, randomization_window_in_chunks=2,
            max_sweeps=2)
    return out


def make_source(C, case, **override):
    """A MinibatchSource of API ``C`` over the case's corpus, with the case's arguments (and
    ``override``)."""
    path = os.path.join(HERE, case["corpus"])
    mb = case.get("mb_stream")
    if path.endswith(".ctf"):  # id: the first value of each F row identifies the sequence
        d = C.CTFDeserializer(path, C.StreamDefs(
            id=C.StreamDef(field="F", shape=3, is_sparse=False, defines_mb_size=mb == "id"),
            y=C.StreamDef(field="L", shape=5, is_sparse=True, defines_mb_size=mb == "y")))
    else:
        d = C.CBFDeserializer(path, C.StreamDefs(
            id=C.StreamDef(field="id", shape=1, is_sparse=False),
            y=C.StreamDef(field="y", shape=5, is_sparse=True)))
    return C.MinibatchSource(d, **dict(case["source"], **override))


def record(C, case):
    """The case's trace through API ``C``: per step, per worker, the sequence ids, sample
    counts, sweep_end and checkpoint position (None once a worker's source has ended). At
    ``restore_at`` fresh sources continue from the checkpoints, passed through JSON."""
    k = case["workers"]
    sources = [make_source(C, case) for _ in range(k)]
    trace = []
    for step in range(case["steps"]):
        if step == case.get("restore_at"):
            states = [json.loads(json.dumps(src.get_checkpoint_state())) for src in sources]
            sources = [make_source(C, case) for _ in range(k)]
            for src, state in zip(sources, states):
                src.restore_from_checkpoint(state)
        size = case["sizes"][step % len(case["sizes"])]
        row = []
        for rank, src in enumerate(sources):
            mb = src.next_minibatch(size, num_data_partitions=k, partition_index=rank) \
                if k > 1 else src.next_minibatch(size)
            if not mb:
                row.append(None)
                continue
            data = mb[src.streams.id]
            ids = [float(np.asarray(s).reshape(-1)[0])
                   for s in (data.as_sequences() if data.number_of_sequences else [])]
            row.append({"ids": ids, "samples": data.number_of_samples,
                        "y_samples": mb[src.streams.y].number_of_samples,
                        "sweep_end": bool(data.sweep_end),
                        "position": src.get_checkpoint_state()["minibatchSourcePosition"]})
            del mb, data  # CNTK's packer reuses its buffers: hold nothing across calls
        trace.append(row)
        if all(r is None for r in row):
            break
    return trace


def main():
    import cntk.io as C

    out = {"cntk": C.__name__, "cases": []}
    for case in cases(C):
        runs = []
        for attempt in range(5):
            try:
                runs.append(json.dumps(record(C, case)))
            except RuntimeError as exc:  # CNTK's own race; retried
                print("retry", case["name"], exc, file=sys.stderr)
                continue
            if runs.count(runs[-1]) >= 2:
                break
        else:
            raise SystemExit("no two runs of %s agree" % case["name"])
        case = dict(case, trace=json.loads(runs[-1]))
        out["cases"].append(case)
        print(case["name"], len(case["trace"]), "minibatches", file=sys.stderr)
    with open(os.path.join(HERE, "traces.json"), "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))


if __name__ == "__main__":
    main()
