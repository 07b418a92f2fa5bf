"""Train a tiny model from sequence records, get killed mid-run, resume, and continue identically.

    python examples/minibatch_resume.py [--out DIR] [--brief]

writes DIR/minibatch_seq.rec (default examples/out/) and runs the demo; ``--brief`` prints the
table's rows around the kill and its last row instead of all of them (``make demo``).

1. writes a corpus of variable-length sequences (``recio.sequence.SequenceWriter``);
2. runs training uninterrupted for STEPS minibatches: the reference;
3. runs it again in a child process that saves a checkpoint (model weights + the
   ``MinibatchSource`` state, a small JSON dict) after every step and is killed with SIGKILL
   after step CRASH;
4. starts a new process that restores the checkpoint and finishes the run;
5. shows that the minibatch stream and the final weights equal the uninterrupted run's.

The model is a logistic regression on mean-pooled frames (NumPy only), trained with a per-sample
learning rate as CNTK does; minibatches hold up to 256 *samples* (frames), not sequences.
"""
import hashlib
import json
import os
import signal
import subprocess
import sys

import numpy as np

import recio
from recio.sequence import SequenceWriter

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("MINIBATCH_DEMO_OUT") or os.path.join(HERE, "out")  # the child's too
REC = os.path.join(OUT, "minibatch_seq.rec")
CKPT = os.path.join(OUT, "minibatch_ckpt.json")
STEPS, CRASH, MB_SAMPLES, DIM = 30, 12, 256, 8


def make_corpus() -> None:
    """400 sequences of 5..60 frames; the label says whether the frames' mean has positive sum."""
    rng = np.random.default_rng(0)
    with SequenceWriter(REC) as w:
        for _ in range(400):
            frames = rng.standard_normal((int(rng.integers(5, 61)), DIM)).astype(np.float32)
            frames += rng.standard_normal(DIM).astype(np.float32) * 0.5
            w.write({"frames": frames,
                     "label": np.array([frames.mean(0).sum() > 0], dtype=np.float32)})


def open_source() -> "recio.MinibatchSource":
    return recio.MinibatchSource(REC, randomization_window=2000, seed=42,
                                 epoch_size=recio.sequence.SWEEP_FOREVER, defines_mb_size="frames")


def step(weights: np.ndarray, mb) -> float:
    """One SGD step; returns the loss. Deterministic, so resumed runs match bit for bit."""
    x = np.stack([f.mean(axis=0) for f in mb["frames"]]).astype(np.float64)
    y = np.array([float(label[0]) for label in mb["label"]])
    x = np.hstack([x, np.ones((len(x), 1))])
    p = 1 / (1 + np.exp(-x @ weights))
    lengths = np.array([len(f) for f in mb["frames"]], dtype=np.float64)
    weights -= 0.002 * x.T @ ((p - y) * lengths)  # per-sample rate: long sequences count more
    return float(-np.mean(y * np.log(p + 1e-9) + (1 - y) * np.log(1 - p + 1e-9)))


def digest(mb) -> str:
    return hashlib.sha1(np.asarray(mb.ids).tobytes()).hexdigest()[:10]


def train(start_step: int, weights: np.ndarray, source, crash_after=None, save=True) -> list:
    log = []
    for i in range(start_step, STEPS):
        mb = source.next_minibatch(MB_SAMPLES)
        loss = step(weights, mb)
        log.append([i, mb.num_sequences, mb.num_samples, digest(mb), round(loss, 6)])
        if not save:
            continue
        state = {"step": i + 1, "weights": weights.tolist(),
                 "source": source.get_checkpoint_state()}
        tmp = CKPT + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, CKPT)  # the checkpoint is written atomically
        print(json.dumps(log[-1]), flush=True)
        if crash_after is not None and i + 1 == crash_after:
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no goodbye: a real crash
    return log


def child(mode: str) -> None:
    source = open_source()
    if mode == "fresh":
        train(0, np.zeros(DIM + 1), source, crash_after=CRASH)
    else:
        with open(CKPT) as f:
            state = json.load(f)
        source.restore_from_checkpoint(state["source"])
        weights = np.array(state["weights"])
        train(state["step"], weights, source)
        print("WEIGHTS " + json.dumps(weights.tolist()), flush=True)


def run_child(mode: str):
    done = subprocess.run([sys.executable, __file__, "--child", mode], capture_output=True,
                          text=True, env={**os.environ, "MINIBATCH_DEMO_OUT": OUT})
    lines = done.stdout.splitlines()
    steps = [json.loads(line) for line in lines if line.startswith("[")]
    weights = [json.loads(line[8:]) for line in lines if line.startswith("WEIGHTS ")]
    return done.returncode, steps, weights[0] if weights else None


def main(brief: bool = False) -> int:
    os.makedirs(OUT, exist_ok=True)
    make_corpus()
    source = open_source()
    print(f"corpus: {source.num_sequences} sequences, {source.num_samples} samples; "
          f"minibatches of <= {MB_SAMPLES} samples")
    weights = np.zeros(DIM + 1)
    reference = train(0, weights, source, save=False)
    code, before, _ = run_child("fresh")
    print(f"training process killed after {len(before)} steps (exit status {code})")
    code, after, final = run_child("resume")
    print(f"new process restored the checkpoint and ran steps {after[0][0]}..{after[-1][0]}")
    print("step  seqs  samples  minibatch-ids     loss      | uninterrupted run")
    shown = set(range(len(before) - 2, len(before) + 2)) | {STEPS - 1} if brief \
        else set(range(STEPS))
    for n, (got, ref) in enumerate(zip(before + after, reference)):
        if n == len(before):
            print("  -- killed here; a new process restored the checkpoint --")
        if n not in shown:
            if n - 1 in shown:
                print("   ...")
            continue
        mark = "same" if got == ref else "DIFFERENT"
        print(f"{got[0]:4d}  {got[1]:4d}  {got[2]:7d}  {got[3]}  {got[4]:9.6f} | {mark}")
    same = before + after == reference and np.array_equal(final, weights)
    print("minibatch stream and final weights identical to the uninterrupted run:", same)
    return 0 if same else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        import argparse

        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--out", help="folder for the corpus and checkpoint "
                                          "(default: examples/out)")
        parser.add_argument("--brief", action="store_true",
                            help="print the rows around the kill and the last row only")
        args = parser.parse_args()
        if args.out:
            OUT = os.path.abspath(args.out)
            REC = os.path.join(OUT, "minibatch_seq.rec")
            CKPT = os.path.join(OUT, "minibatch_ckpt.json")
        sys.exit(main(args.brief))
