"""Sample-counted sequences (CNTK style) on the record core.

* ``records``    the sequence record format (dense and ``Sparse`` streams).
* ``sidecar``    the sample-count sidecar (``PREFIX.len``) beside a file of sequence records.
* ``writer``     ``SequenceWriter``: ``.rec``, ``.idx`` and ``.len`` together.
                 The names of these three are exported here, and ``MinibatchSource`` and
                 ``SWEEP_FOREVER``/``SWEEP_ONCE``, ``BucketBatchSampler``,
                 ``bucket_boundaries``, ``CBFReader`` and ``CBFWriter`` too, each loaded on
                 first use.
* ``minibatch``  ``MinibatchSource``: CNTK's sample-counted minibatches with checkpoint/restore,
                 and the corpora it reads (``RecordCorpus``, ``MemoryCorpus``, ``ConcatCorpus``).
* ``bucketing``  length buckets that minimise padding.
* ``bucket_summary``  what ``recio buckets`` reports about a file's lengths.
* ``cbf``        CNTK's binary format (CBF) reader and writer (layout and header check:
                 ``cbf_format``; one chunk decoded: ``cbf_decode``).
* ``ctf``        CNTK's text format (CTF): a reader exact to CNTK 2.7 (streams: ``ctf_streams``).
* ``convert``    CBF <-> records; CTF -> CBF (ctf2bin's job) or records.
* ``cntk``       CNTK 2.7's reader API under its names (randomizers: ``cntk_randomizers``).
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.sequence.bucketing import bucket_boundaries, BucketBatchSampler
    from recio.sequence.cbf import CBFReader, CBFWriter
    from recio.sequence.minibatch import MinibatchSource, SWEEP_FOREVER, SWEEP_ONCE
    from recio.sequence.records import (
        MAX_DENSE_BYTES,
        pack_sequence,
        sequence_sample_counts,
        Sparse,
        stream_sample_counts,
        unpack_sequence,
    )
    from recio.sequence.sidecar import (
        read_sidecar,
        rebuild_sidecar,
        sample_counts,
        sidecar_path,
        write_sidecar,
    )
    from recio.sequence.writer import SequenceWriter, write_sequences

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "MAX_DENSE_BYTES": "recio.sequence.records",
    "Sparse": "recio.sequence.records",
    "pack_sequence": "recio.sequence.records",
    "sequence_sample_counts": "recio.sequence.records",
    "stream_sample_counts": "recio.sequence.records",
    "unpack_sequence": "recio.sequence.records",
    "read_sidecar": "recio.sequence.sidecar",
    "rebuild_sidecar": "recio.sequence.sidecar",
    "sample_counts": "recio.sequence.sidecar",
    "sidecar_path": "recio.sequence.sidecar",
    "write_sidecar": "recio.sequence.sidecar",
    "SequenceWriter": "recio.sequence.writer",
    "write_sequences": "recio.sequence.writer",
    "MinibatchSource": "recio.sequence.minibatch",
    "SWEEP_FOREVER": "recio.sequence.minibatch",
    "SWEEP_ONCE": "recio.sequence.minibatch",
    "BucketBatchSampler": "recio.sequence.bucketing",
    "bucket_boundaries": "recio.sequence.bucketing",
    "CBFReader": "recio.sequence.cbf",
    "CBFWriter": "recio.sequence.cbf",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY, submodules=(
        "records", "sidecar", "writer"))
