"""What a file that is not a ``.rec`` is: the one rule behind "you passed X where a .rec was
expected" messages.

A mix-up of files is the commonest first mistake with RecordIO datasets: a shard set's
manifest, the ``.idx`` or the ``.lst`` given where the ``.rec`` belongs. Read as records, such
a file fails at byte 0 with a bad magic word, which blames a file that is fine. Readers call
``not_a_record_file`` when the first record head is missing; it returns the error that names
what the file is and what to pass instead, or None when the file looks like a damaged ``.rec``
(binary data of no known kind), which then gets the framing error.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Optional

from recio import storage
from recio.errors import NotRecordFileError
from recio.records.framing import MAGIC_BYTES
from recio.records.index_format import sibling_record_path

#: the first two bytes of an image payload -> format name (``recio.image.tools.stats`` reads more)
IMAGE_SIGNATURES = {b"\xff\xd8": "jpeg", b"\x89P": "png", b"GI": "gif", b"BM": "bmp",
                    b"RI": "webp", b"II": "tiff", b"MM": "tiff"}
#: bytes read from the start of a file to tell what it is
SNIFF_BYTES = 4096
#: a manifest no larger than this is parsed to name one of its shards
_MANIFEST_READ_LIMIT = 1 << 24
_CBF_PREFIX = b"nib_ktnc"  # recio.sequence.cbf's magic as it lies on disk (a lower layer)
_SIDECAR_PREFIX = b"RECIOLEN"  # recio.sequence.sidecar.SIDECAR_MAGIC
_IDX_LINE = re.compile(r"\s*\S+\t\s*\d+\s*")
_LST_LINE = re.compile(r"\s*\d+\t[^\t]*\t.*")


def image_signature(head: bytes) -> Optional[str]:
    """The image format whose signature ``head`` starts with, else None (a first guess:
    ``recio.image.tools.stats.image_format`` checks more of the header)."""
    fmt = IMAGE_SIGNATURES.get(bytes(head[:2]))
    if fmt == "webp" and bytes(head[8:12]) != b"WEBP":
        return None
    if fmt == "jpeg" and (len(head) < 3 or head[2] != 0xFF):
        return None
    return fmt


def describe(path: Any, head: Optional[bytes] = None, storage_options: Any = None) -> Optional[str]:
    """What the file at ``path`` is when it is plainly not RecordIO data, as a phrase ("an
    index (.idx) ..."), else None (it may be a damaged ``.rec``). ``head``: its first bytes,
    when the caller has them."""
    if head is None:
        with storage.open_input(path, storage_options) as f:
            head = f.read(SNIFF_BYTES)
    head = bytes(head[:SNIFF_BYTES])
    if not head or head.startswith(MAGIC_BYTES):
        return None
    fmt = image_signature(head)
    if fmt is not None:
        return f"an image ({fmt}), not a record file: pack images with im2rec"
    if head.startswith(_CBF_PREFIX):
        return "a CNTK Binary Format file (.cbf): read it with recio.sequence.CBFReader"
    if head.startswith(_SIDECAR_PREFIX):
        rec = sibling_record_path(path)
        return f"a sample-count sidecar (.len), not a record file: give {rec}"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a character cut by the read
            return None
        text = head[:exc.start].decode("utf-8")
    if any(c < " " and c not in "\t\r\n" for c in text):
        return None  # binary: perhaps a .rec damaged at its start
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        return _describe_json(path, storage_options)
    lines = text.splitlines()
    if len(head) == SNIFF_BYTES and len(lines) > 1:
        lines.pop()  # the last line may be cut by the read
    lines = [line for line in lines[:6] if line.strip()]
    base = os.path.splitext(os.fspath(path))[0]
    if lines and all(_IDX_LINE.fullmatch(line) for line in lines):
        return (f"an index (.idx) of key<TAB>offset lines, not a record file: give the .rec "
                f"it indexes ({base}.rec)")
    if lines and all(_LST_LINE.fullmatch(line) for line in lines):
        return (f"an image list (.lst), not a record file: give the .rec packed from it "
                f"({base}.rec; `im2rec {base} ROOT` packs it)")
    return "a text file, not a record file"


def _describe_json(path: Any, storage_options: Any) -> str:
    """A JSON file: a shard set's manifest (naming a shard to use instead) or other JSON."""
    try:
        if storage.size(path, storage_options) <= _MANIFEST_READ_LIMIT:
            with storage.open_input(path, storage_options) as f:
                doc = json.loads(f.read().decode("utf-8"))
        else:
            doc = None
    except (OSError, ValueError):
        doc = None
    shards = doc.get("shards") if isinstance(doc, dict) else None
    if isinstance(doc, dict) and (doc.get("format") == "recio.shards" or shards is not None):
        first = shards[0].get("rec") if shards and isinstance(shards[0], dict) else None
        example = f" (e.g. {storage.join(os.path.dirname(os.fspath(path)), first)})" \
            if isinstance(first, str) else ""
        return (f"a shard set's manifest, not a .rec: give it to a command that reads shard "
                f"sets (recio verify, inspect, split; RecordDataset, InputSplit), or give one "
                f"of its shards{example}")
    return "a JSON file, not a record file"


def not_a_record_file(path: Any, head: Optional[bytes] = None,
                      storage_options: Any = None) -> Optional[NotRecordFileError]:
    """The ``NotRecordFileError`` for ``path`` when ``describe`` knows what it is instead of a
    ``.rec``, else None."""
    if path is None:
        return None
    try:
        what = describe(path, head, storage_options)
    except OSError:
        return None
    if what is None:
        return None
    return NotRecordFileError(f"not a RecordIO file: this is {what}", path=os.fspath(path))
