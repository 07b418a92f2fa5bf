"""Sample-counted sequences (CNTK style) on the record core.

* ``records``    the sequence record format (dense and ``Sparse`` streams), its writer and the
                 sample-count sidecar (``PREFIX.len``). Its names are re-exported here.
* ``minibatch``  ``MinibatchSource``: CNTK's sample-counted minibatches with checkpoint/restore,
                 and the corpora it reads (``RecordCorpus``, ``MemoryCorpus``, ``ConcatCorpus``).
* ``bucketing``  length buckets that minimise padding.
* ``bucket_summary``  what ``recio buckets`` reports about a file's lengths.
* ``cbf``        CNTK's binary format (CBF) reader and writer.
* ``ctf``        CNTK's text format (CTF): a reader exact to CNTK 2.7 (streams: ``ctf_streams``).
* ``convert``    CBF <-> records; CTF -> CBF (ctf2bin's job) or records.
"""
from recio.sequence.records import *  # noqa: F401,F403  (the names of the sequence format)
from recio.sequence.records import MAX_DENSE_BYTES
from recio.sequence.records import __all__ as _records_all

__all__ = [*_records_all, "MAX_DENSE_BYTES"]
