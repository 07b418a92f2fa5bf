"""The record core: the RecordIO container, with nothing about what the records hold.

Reading from the bottom up:

* ``framing``  the part header (magic, length, cflag) and padding: the one framing check.
* ``atomic``   how every output appears complete or not at all (temporary name, then rename).
* ``index``    the ``.idx`` text format, the ``.idx`` beside a ``.rec``, the parsed ``Index``.
* ``reader``   ``RecordReader``: sequential and by-offset reads of whole records.
* ``writer``   ``RecordWriter`` / ``IndexedRecordWriter``.
* ``indexed``  ``IndexedRecordReader`` and the load-the-index-or-scan decision.
* ``reindex``  rebuild an ``.idx`` by scanning the ``.rec`` (MXNet's ``rec2idx``).
* ``split``    ``InputSplit``: record boundaries for N partitions of one or more files.
* ``reshard``  write the parts of a split as files of their own (``recio split --write``).
* ``threaded`` ``ThreadedIter``: a bounded background prefetch for any iterator.
"""
from recio.records.index import Index, open_index, read_index, sibling_index_path, write_index
from recio.records.indexed import IndexedRecordReader
from recio.records.reader import RecordReader
from recio.records.split import InputSplit
from recio.records.threaded import ThreadedIter
from recio.records.writer import IndexedRecordWriter, RecordWriter

__all__ = ["RecordReader", "RecordWriter", "IndexedRecordWriter", "IndexedRecordReader", "Index",
           "open_index", "read_index", "write_index", "sibling_index_path", "InputSplit",
           "ThreadedIter"]
