"""``PackSettings``: everything a pack of a list is asked to do, checked once, passed whole.

One value for every engine: ``pack_list`` (one ``.rec`` in this process), ``pack_shards`` (a
pack in parts, on ``LocalEngine`` or ``recio.ray.RayEngine``) and each part's task get the
same settings, so nothing is repeated down the call chain and every rule about them is
checked in one place, when they are made (:class:`~recio.errors.PackSettingsError`, a
``ValueError``, before anything is read or written). ``im2rec`` builds one from its options.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from recio.errors import PackSettingsError
from recio.image.pixels.transform import ImageOptions

#: how workers run: threads share one process (the decoders, OpenCV and NumPy's large array
#: operations release the GIL while they decode, resize and encode; how far two threads scale
#: in each mode is measured by benchmarks/bench_im2rec.py); processes avoid the GIL entirely.
#: "auto" means threads:
#: the same CPU time per image without pickling, and less memory (measurements in
#: benchmarks/README.md).
_EXECUTORS = ("auto", "thread", "process")
_AUTO_EXECUTOR = "thread"
#: a pack fails (no output) when more than this share of its items is missing under ROOT
_MAX_MISSING = 0.5
#: ... and stops early when this many items were tried and every one was missing
EARLY_MISSING = 100


@dataclass(frozen=True)
class PackSettings:
    """How to pack a list (im2rec's options besides PREFIX and ROOT).

    ``options``: what is done to each image (``ImageOptions``); ``pass_through`` stores the
    files' bytes untouched instead; ``pack_label`` stores every label of a line that has
    several; ``allow_outside_root`` reads list paths that resolve outside ROOT. ``workers``
    threads or processes (``executor``: ``"auto"``, ``"thread"`` or ``"process"``) encode the
    images. ``resume`` continues an interrupted pack, ``force`` replaces existing outputs (and
    discards an interrupted pack). ``max_missing``: the share of the list that may be missing
    before the pack fails with no output. ``num_shards`` or ``shard_size`` (not both) packs a shard set
    instead of one ``.rec``, with per-record CRC-32 sidecars when ``checksums``. ``fsync``
    makes a returned pack survive an OS crash; ``batch_size`` (items per batch a worker
    takes) and ``window`` (batches in flight) tune the pipeline, 0 choosing for the workers.
    """

    options: ImageOptions = field(default_factory=ImageOptions)
    pass_through: bool = False
    pack_label: bool = False
    allow_outside_root: bool = False
    workers: int = 1
    executor: str = "auto"
    resume: bool = False
    force: bool = False
    max_missing: float = _MAX_MISSING
    num_shards: Optional[int] = None
    shard_size: Optional[int] = None
    checksums: bool = False
    fsync: bool = False
    batch_size: int = 0
    window: int = 0

    def __post_init__(self) -> None:
        if self.executor not in _EXECUTORS:
            raise PackSettingsError(f"executor must be one of {_EXECUTORS}, got {self.executor!r}",
                                    f"--executor must be one of {', '.join(_EXECUTORS)}")
        if self.workers < 1:
            raise PackSettingsError(f"workers must be at least 1, got {self.workers}",
                                    f"--num-thread must be at least 1, got {self.workers}")
        if not 0.0 <= self.max_missing <= 1.0:
            raise PackSettingsError(f"max_missing must be between 0 and 1, got "
                                    f"{self.max_missing}", f"--max-missing must be between 0 "
                                    f"and 1, got {self.max_missing}")
        if self.batch_size < 0 or self.window < 0:
            raise PackSettingsError(f"batch_size and window must be 0 (chosen for the workers) "
                                    f"or more, got {self.batch_size} and {self.window}")
        if self.num_shards is not None and self.num_shards < 1:
            raise PackSettingsError(f"num_shards must be at least 1, got {self.num_shards}",
                                    f"--num-shards must be at least 1, got {self.num_shards}")
        if self.shard_size is not None and self.shard_size < 1:
            raise PackSettingsError(f"shard_size must be at least 1 byte, got {self.shard_size}",
                                    f"--shard-size must be at least 1 byte, got "
                                    f"{self.shard_size}")
        if self.num_shards is not None and self.shard_size is not None:
            raise PackSettingsError("give num_shards or shard_size, not both",
                                    "give --num-shards or --shard-size, not both")
        if self.checksums and not self.sharded:
            raise PackSettingsError(
                "checksums goes with num_shards or shard_size (a shard set's sidecars)",
                "--checksums goes with --num-shards or --shard-size (a shard set's sidecars)")

    @property
    def sharded(self) -> bool:
        """Whether the pack makes a shard set (``num_shards`` or ``shard_size``)."""
        return self.num_shards is not None or self.shard_size is not None

    @property
    def layout(self) -> str:
        """What a pack in parts publishes: ``"shards"`` (one per part, ``num_shards``),
        ``"sized"`` (shards of at most ``shard_size`` bytes) or ``"joined"`` (one ``.rec``)."""
        return "shards" if self.num_shards is not None else \
            "sized" if self.shard_size is not None else "joined"

    @property
    def executor_kind(self) -> str:
        """``"thread"`` or ``"process"``: ``executor`` with ``"auto"`` resolved."""
        return _AUTO_EXECUTOR if self.executor == "auto" else self.executor
