"""Verifying a record file: every byte of its framing, its ``.idx``, and optionally its images.

``verify_file`` is what ``recio verify`` reports: one full scan (``scan_file``) listing every
damaged byte region, the problems of the index beside the file (or the one given), and, with
``images=True``, every image record whose image does not decode.
"""
from __future__ import annotations

import errno
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from recio import portable, storage
from recio.errors import ImageError
from recio.image.pixels.codec import DEFAULT_MAX_PIXELS, decode, decodes_as_stored
from recio.image.header import unpack_header
from recio.image.tools.id_index import index_command
from recio.image.packing.output import resume_command
from recio.records.diagnose import repair_hint
from recio.records.lock import pack_journal_path
from recio.records.framing import pad_size
from recio.records.reader import RecordReader
from recio.image.tools.stats import DamageRegion, FileStats, image_format, scan_file

PathLike = Union[str, "os.PathLike[str]"]
Progress = Optional[Callable[[int], Any]]


@dataclass
class VerifyReport:
    """The outcome of ``verify_file``: the scan's ``stats``, undecodable images (when images
    were checked) and the index's problems. ``clean`` when there are none of any kind."""

    path: str
    stats: FileStats
    images_checked: bool = False
    bad_images: List[DamageRegion] = field(default_factory=list)
    index_problems: List[str] = field(default_factory=list)
    #: no index was given and none is beside the file (readers by key refuse it)
    index_missing: bool = False
    #: the journal of the interrupted im2rec pack that left the file without its index
    pack_journal: Optional[str] = None
    #: the command that continues that pack (None: its journal says too little)
    resume: Optional[str] = None
    #: the ``recio index`` command that writes a working index (a missing or bad one)
    index_fix: Optional[str] = None

    @property
    def clean(self) -> bool:
        """No damaged bytes, no bad images, no index problems, no padding missing, and not
        the ``.rec`` of an interrupted pack (``INCOMPLETE``)."""
        return not self.stats.damage and not self.bad_images and not self.index_problems \
            and not self.padding_missing and self.pack_journal is None

    @property
    def padding_missing(self) -> int:
        """How many bytes (1-3) of its last record's padding the file lacks, when its framing
        is otherwise whole: a file cut that close to its end. Every record reads whole here,
        but MXNet's reader (dmlc-core's) reads each part with its padding and stops at the
        cut ("Invalid RecordIO File"). A whole file's size is a multiple of 4 (each part is
        padded to 4 bytes). 0 otherwise."""
        st = self.stats
        return pad_size(st.size) if st.records and not st.damage else 0

    @property
    def idx_path(self) -> Optional[str]:
        """The index that was checked (None: there was none)."""
        return None if self.stats.index is None else self.stats.index.path

    @property
    def truncated_at(self) -> Optional[int]:
        """The head of the record the end of the file cuts, when being cut short is the
        ``.rec``'s only damage; the file's size when it was cut between two records (it holds
        only whole records, and its index lists more past its end, as readers then raise
        ``TruncatedFileError``); None otherwise."""
        damage = self.stats.damage
        if len(damage) == 1 and damage[0].truncated and damage[0].problems == 1:
            return damage[0].start
        chk = self.stats.index
        if not damage and chk is not None and chk.error is None and not chk.foreign and \
                chk.past_end and chk.bad_offsets == chk.past_end and not chk.unindexed_records:
            return self.stats.size
        return None

    @property
    def verdict(self) -> str:
        """``OK``; ``TRUNCATED`` (cut short, every record before the cut intact); ``DAMAGED``
        (the ``.rec`` holds damage or bad images); ``BAD INDEX`` (the ``.rec`` is intact, its
        index does not match it)."""
        if (self.truncated_at is not None or self.padding_missing) and not self.bad_images:
            return "TRUNCATED"
        if self.stats.damage or self.bad_images:
            return "DAMAGED"
        if self.pack_journal is not None:
            return "INCOMPLETE"
        if self.index_missing:
            return "NO INDEX"
        return "BAD INDEX" if self.index_problems else "OK"

    @property
    def checked(self) -> str:
        """What was checked, as the report's last line says it."""
        index = f"its index {self.idx_path}" if self.idx_path is not None else ""
        if self.images_checked:
            parts = ["the framing of every record"] + ([index] if index else [])
            return f"checked {', '.join(parts)} and decoded every image"
        index = f" and {index}" if index else ""
        return (f"checked the framing of every record{index}, not the images inside "
                f"(--images decodes every image)")

    def next_step(self) -> Optional[str]:
        """The command that fixes what was found (None when clean)."""
        verdict = self.verdict
        if verdict == "TRUNCATED" or (verdict == "DAMAGED" and self.stats.damage):
            return f"rescue the intact records: {repair_hint(self.path)}"
        if verdict == "DAMAGED":
            return "the records whose images do not decode are listed above"
        if verdict == "INCOMPLETE":
            if self.resume is not None:
                return f"finish the pack: `{self.resume}`"
            return ("finish the pack: run the im2rec command that made it again, with "
                    "--resume")
        if verdict == "NO INDEX":
            return f"write its index: `{self.index_fix}`"
        if verdict == "BAD INDEX":
            chk = self.stats.index
            if chk is not None and chk.error is None and chk.duplicate_keys and not (
                    chk.bad_offsets or chk.duplicate_offsets or chk.unindexed_records):
                return f"give every record its own key: `{self.index_fix}`"
            return f"the .rec is intact; rebuild the index with `{self.index_fix}`"
        return None

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict of everything found."""
        st = self.stats
        return {"path": self.path, "size": st.size, "records": st.records, "clean": self.clean,
                "verdict": self.verdict, "truncated_at": self.truncated_at,
                "padding_missing": self.padding_missing,
                "damage": [vars(d) for d in st.damage], "damaged_bytes": st.damaged_bytes,
                "bad_images": [vars(d) for d in self.bad_images], "index": self.idx_path,
                "index_problems": list(self.index_problems),
                "index_missing": self.index_missing, "pack_journal": self.pack_journal,
                "checked": self.checked, "next_step": self.next_step()}


def verify_file(rec_path: PathLike, *, images: bool = False, idx_path: Optional[PathLike] = None,
                progress: Progress = None, image_progress: Progress = None) -> VerifyReport:
    """Check every byte of ``rec_path``; with ``images``, also decode every image record.

    ``idx_path``: the index to check (default: the ``.idx`` beside the file, when there is
    one; a given path that does not exist raises ``FileNotFoundError``). ``progress(n)``: bytes
    scanned since the last call; ``image_progress(n)``: images decoded since the last call.
    Damage is reported, not raised; an unreadable file raises ``OSError``.
    """
    rec_path = os.fspath(rec_path)
    if idx_path is not None and not storage.exists(idx_path):
        raise FileNotFoundError(errno.ENOENT, "No such file", os.fspath(idx_path))
    stats, heads = scan_file(rec_path, sample=0,
                             idx_path=None if idx_path is None else os.fspath(idx_path),
                             collect_heads=True, progress=progress)
    assert heads is not None  # collect_heads
    report = VerifyReport(rec_path, stats, images_checked=images)
    if images:
        report.bad_images = check_images(rec_path, heads, progress=image_progress)
    if stats.index is not None:
        report.index_problems = stats.index.problems()
    else:
        report.index_missing = idx_path is None
        journal = pack_journal_path(os.path.splitext(rec_path)[0])
        if report.index_missing and not storage.is_url(rec_path) and os.path.exists(journal):
            report.pack_journal, report.resume = journal, resume_command(journal)
    if report.verdict in ("NO INDEX", "BAD INDEX") and not stats.damage:
        given = None if idx_path is None else os.fspath(idx_path)
        report.index_fix = index_command(rec_path, np.frombuffer(heads, np.uint64).astype(
            np.int64), given)
    return report


def check_images(path: PathLike, heads: Sequence[int], progress: Progress = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS) -> List[DamageRegion]:
    """Decode the image of every record starting at the byte offsets ``heads`` with
    ``recio.image.pixels.codec.decode`` (as every reader decodes them); one region per record whose
    IRHeader is damaged, that holds no image, whose payload is not an image or does not
    decode, or that decodes only as libjpeg repairs it. Records of labels only (a label
    vector and nothing after it, as a face-recognition set's header and identity records)
    are not images and pass."""
    bad: List[DamageRegion] = []
    reader = RecordReader(os.fspath(path))
    try:
        for off in heads:
            record = reader.read_at(off)
            if progress is not None:
                progress(1)
            end = off + 8 + len(record)
            try:
                header, body = unpack_header(record)
            except ImageError as exc:
                bad.append(DamageRegion(off, end, f"IRHeader: {exc.message}"))
                continue
            rid = header.id
            if body == len(record) and header.flag > 0:
                continue  # labels only: a face-recognition set's header or identity record
            if body == len(record):
                bad.append(DamageRegion(off, end, f"record id {rid}: holds no image (an image "
                                                  "header and nothing after it)"))
                continue
            if image_format(record, body) is None:
                bad.append(DamageRegion(off, end, f"record id {rid}: payload is not a known "
                                                  "image format"))
                continue
            problem = _decode_problem(bytes(record[body:]), max_pixels)
            if problem is not None:
                bad.append(DamageRegion(off, end, f"record id {rid}: {problem}"))
    finally:
        reader.close()
    return bad


def _decode_problem(image: bytes, max_pixels: int) -> Optional[str]:
    """Why ``image`` is damaged, or None. A JPEG that libjpeg decodes only by repairing it
    (stray bytes, corrupt scan data, a cut-off end: its warnings, which the readers let pass
    as MXNet's do) is damaged too: a checker names it. Other formats' library warnings (a
    PNG's "known incorrect sRGB profile") pass on to stderr."""
    with portable.native_messages() as messages:
        try:
            decode(image, -1, max_pixels=max_pixels)
            failed = None
        except ImageError as exc:
            failed = exc.message
    if failed is not None:
        return f"image does not decode ({failed})"
    if image[:2] == b"\xff\xd8" and messages:
        return f"image decodes only as libjpeg repairs it ({'; '.join(messages)[:200]})"
    if image[:2] == b"\xff\xd8" and image.rstrip(b"\0")[-2:] != b"\xff\xd9" \
            and not decodes_as_stored(image):
        return "image decodes only with the end-of-image marker it lacks (cut short)"
    for line in messages:
        print(line, file=sys.stderr)  # noqa: T201 - another library's own warning, passed on
    return None
