"""Sample-counted sequences (CNTK style) on the record core.

* ``records``    the sequence record format (dense and ``Sparse`` streams), its writer and the
                 sample-count sidecar (``PREFIX.len``). Its names are re-exported here.
                 ``MinibatchSource`` and ``SWEEP_FOREVER``/``SWEEP_ONCE``, ``BucketBatchSampler``,
                 ``bucket_boundaries``, ``CBFReader`` and ``CBFWriter`` are too, on first use.
* ``minibatch``  ``MinibatchSource``: CNTK's sample-counted minibatches with checkpoint/restore,
                 and the corpora it reads (``RecordCorpus``, ``MemoryCorpus``, ``ConcatCorpus``).
* ``bucketing``  length buckets that minimise padding.
* ``bucket_summary``  what ``recio buckets`` reports about a file's lengths.
* ``cbf``        CNTK's binary format (CBF) reader and writer.
* ``ctf``        CNTK's text format (CTF): a reader exact to CNTK 2.7 (streams: ``ctf_streams``).
* ``convert``    CBF <-> records; CTF -> CBF (ctf2bin's job) or records.
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports
from recio.sequence.records import *  # noqa: F401,F403  (the names of the sequence format)
from recio.sequence.records import MAX_DENSE_BYTES
from recio.sequence.records import __all__ as _records_all

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/test_lazy.py)
    from recio.sequence.bucketing import BucketBatchSampler, bucket_boundaries
    from recio.sequence.cbf import CBFReader, CBFWriter
    from recio.sequence.minibatch import SWEEP_FOREVER, SWEEP_ONCE, MinibatchSource

#: the readers of sequences, imported on first use (the sequence format above is all that
#: writing needs)
_LAZY = {
    "MinibatchSource": "recio.sequence.minibatch",
    "SWEEP_FOREVER": "recio.sequence.minibatch",
    "SWEEP_ONCE": "recio.sequence.minibatch",
    "BucketBatchSampler": "recio.sequence.bucketing",
    "bucket_boundaries": "recio.sequence.bucketing",
    "CBFReader": "recio.sequence.cbf",
    "CBFWriter": "recio.sequence.cbf",
}

__all__ = [*_records_all, "MAX_DENSE_BYTES", *_LAZY]

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
