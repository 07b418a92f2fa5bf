"""A fresh-seed fuzz campaign: every mutation property of the suite, with many examples.

The properties in ``tests/fuzz/test_fuzz_formats.py`` (sequence records, sidecars, CBF, .lst,
image records, a damaged .idx through every reader, MinibatchSource), the framing agreement of
``tests/records/test_framing_agreement.py`` and ``recio repair``'s in
``tests/image/tools/test_repair.py`` run here
with ``--examples`` examples each and hypothesis seeded with ``--seed`` (the suite itself runs
few examples from a random seed on every run). One line per property: how many examples, how
long, or the failing example. Run from the repository:
``python tests/fuzz/campaign.py --seed 12345 --examples 5000 [--only NAME]``.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pathlib
import sys
import tempfile
import time

from hypothesis import Phase, seed, settings

TESTS = pathlib.Path(__file__).resolve().parent.parent
#: the folders of the test modules below, and tests/ itself (conftest, support)
sys.path[:0] = [str(TESTS / "fuzz"), str(TESTS / "records"), str(TESTS / "image" / "tools"),
                str(TESTS)]

PROPERTIES = {
    "test_fuzz_formats": ["test_damaged_sequence_payload",
                          "test_damaged_record_is_checked_against_its_sidecar",
                          "test_damaged_record_through_minibatch_source", "test_damaged_sidecar",
                          "test_damaged_cbf", "test_damaged_image_list",
                          "test_damaged_image_record", "test_damaged_index_through_every_reader"],
    "test_framing_agreement": ["test_every_entry_point_agrees_on_damaged_files"],
    "test_repair": ["test_every_intact_record_is_rescued_byte_for_byte",
                    "test_records_without_images_are_rescued_or_dropped_never_garbled"],
}


class TempFactory:
    """What the properties use of pytest's ``tmp_path_factory``."""

    def __init__(self, root: str) -> None:
        self.root = root

    def mktemp(self, name: str) -> pathlib.Path:
        return pathlib.Path(tempfile.mkdtemp(prefix=name, dir=self.root))


def fixtures(module, test, root: str) -> dict:
    """The arguments ``test`` takes (besides hypothesis's): tmp_path_factory, golden and the
    module's own fixtures, built by calling their functions."""
    made = {"tmp_path_factory": TempFactory(root), "golden": TESTS / "data" / "golden"}
    kwargs = {}
    for name in inspect.signature(test.hypothesis.inner_test).parameters:
        if name in made:
            kwargs[name] = made[name]
        elif hasattr(module, name):
            fixture = getattr(module, name)
            function = getattr(fixture, "_get_wrapped_function", lambda: fixture)()
            kwargs[name] = function(**{p: made[p] for p in inspect.signature(function).parameters})
    return kwargs


def run(module_name: str, name: str, examples: int, chosen_seed: int, root: str) -> str:
    module = importlib.import_module(module_name)
    test = getattr(module, name)
    test._hypothesis_internal_use_settings = settings(
        test._hypothesis_internal_use_settings, max_examples=examples, database=None,
        phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink])
    start = time.monotonic()
    try:
        seed(chosen_seed)(test)(**fixtures(module, test, root))
    except BaseException as exc:  # a finding: say what and the example hypothesis shrank to
        notes = [n for e in [exc, *getattr(exc, "exceptions", [])]
                 for n in getattr(e, "__notes__", [])]
        return f"{name}: FAILED after {time.monotonic() - start:.0f} s: {exc!r}\n  " + \
            "\n  ".join(notes)
    return f"{name}: {examples} examples, seed {chosen_seed}: no failure " \
           f"({time.monotonic() - start:.0f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True, help="hypothesis seed (a fresh one)")
    parser.add_argument("--examples", type=int, default=2000, help="examples per property")
    parser.add_argument("--only", default=None, help="run only the property of this name")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="recio-fuzz-") as root:
        for module, names in PROPERTIES.items():
            for name in names:
                if args.only in (None, name):
                    print(run(module, name, args.examples, args.seed, root), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("CI", "true")
    main()
