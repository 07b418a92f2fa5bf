"""Where a pack in parts keeps its progress, so that ``resume`` can continue it from anywhere.

A pack in parts (``recio.image.shard_pack``: ``--num-shards``, ``--shard-size``, ``--engine
ray``, a URL PREFIX or ROOT) keeps all of it in its staging folder beside the outputs,
``.recio-pack-NAME`` (NAME: the list's name without ``.lst``; a folder, or the objects under
that prefix in a bucket), never in this machine's temporary folder, so the resume may run in
another process, working directory or machine that sees the same outputs:

* ``job.json``, written first: the settings the parts depend on (the list's size and CRC-32,
  ROOT, the image options, the layout of the parts) and a random job id. A staging folder
  without it holds nothing worth keeping and is deleted.
* ``part-NNNNN.ATTEMPT.rec`` / ``.idx`` / ``.crc32``: part N's files as one attempt wrote
  them (each attempt has its own: overlapping attempts never share a file).
* ``part-NNNNN.json``, the *done record*, written by part N's task after its files: their names,
  sizes and CRC-32s, the part's counts and skip rows, where and when it ran, and the job id.
* ``part-NNNNN.RUN.attemptK``: attempt K of part N in driver run RUN started (where, when): how
  retries are counted and the time they cost measured.
* anything else is an unfinished attempt's files.

The resume rule (:meth:`PackProgress.done_records`, :meth:`~PackProgress.verify`,
:meth:`~PackProgress.clean`): a part is kept when its done record names this job and its files
have the sizes and CRC-32s the record gives (in the folder, or where an interrupted commit
moved them); everything else in the folder is deleted and the parts not kept are packed
again.
"""
from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

from recio import storage
from recio.errors import OutputWriteError
from recio.records.atomic import atomic_open
from recio.records.manifest import file_crc32
from recio.records.write_errors import folder_write_failed, is_write_only_error
from recio.storage import StorageOptions

#: the staging folder of ``STEM``'s pack: ``DIR/.recio-pack-NAME``
_STAGING_PREFIX = ".recio-pack-"
PROGRESS_FORMAT = "recio-pack-progress"
PROGRESS_VERSION = 1
_JOB_FILE = "job.json"
_DONE = re.compile(r"part-(\d{5,})\.json\Z")
#: files checksummed at once when a resume verifies the kept parts
_VERIFY_THREADS = 8


def staging_folder(stem: str) -> str:
    """``data/train`` -> ``data/.recio-pack-train`` (a URL stays a URL)."""
    return storage.join(storage.dirname(stem), _STAGING_PREFIX + storage.basename(stem))


def part_name(number: int) -> str:
    """``part-00007``: the stem of part 7's files in the staging folder."""
    return f"part-{number:05d}"


class PackProgress:
    """The staging folder ``folder`` of one pack (see the module docstring)."""

    def __init__(self, folder: str, storage_options: StorageOptions = None) -> None:
        self.folder = folder
        self.storage_options = storage_options
        self.remote = storage.is_url(folder)

    def path(self, name: str) -> str:
        return storage.join(self.folder, name)

    def _read_json(self, name: str) -> Optional[Dict[str, Any]]:
        try:
            doc = json.loads(storage.read_bytes(self.path(name), self.storage_options))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except ValueError:  # cut short or not JSON: as good as absent
            return None
        return doc if isinstance(doc, dict) else None

    def _write_json(self, name: str, doc: Dict[str, Any]) -> None:
        with atomic_open(self.path(name), "wb", storage_options=self.storage_options) as out:
            out.write(json.dumps(doc, indent=1).encode("utf-8") + b"\n")

    def _names(self) -> List[str]:
        if not self.remote and not os.path.isdir(self.folder):
            return []
        if self.remote and not storage.isdir(self.folder, self.storage_options):
            return []
        return [storage.basename(p) for p in storage.listdir(self.folder, self.storage_options)]

    # -- the job ---------------------------------------------------------------------------
    def job(self) -> Optional[Dict[str, Any]]:
        """``job.json``, or None when there is none (or it is unreadable)."""
        doc = self._read_json(_JOB_FILE)
        if doc is None or doc.get("format") != PROGRESS_FORMAT \
                or doc.get("version") != PROGRESS_VERSION or not isinstance(doc.get("job"), str):
            return None
        return doc

    def leftovers(self) -> bool:
        """True when the folder exists (with or without a job)."""
        return bool(self._names())

    def start(self, settings: Dict[str, Any], layout: Dict[str, Any]) -> Dict[str, Any]:
        """A fresh staging folder (whatever was there is deleted) holding only ``job.json``."""
        self.discard()
        if not self.remote:
            os.makedirs(self.folder, exist_ok=True)
        doc = {"format": PROGRESS_FORMAT, "version": PROGRESS_VERSION, "job": uuid.uuid4().hex,
               "settings": settings, "layout": layout}
        try:
            self._write_json(_JOB_FILE, doc)
        except OSError as exc:  # a full disk: nothing to resume from, no staging folder
            self.discard()
            if isinstance(exc, OutputWriteError) or is_write_only_error(exc):
                raise folder_write_failed(exc, self.folder) from exc
            raise
        return doc

    def discard(self) -> None:
        """Delete the folder and everything in it."""
        storage.remove_tree(self.folder, self.storage_options)

    def finish(self) -> None:
        """Delete the folder of a pack that is published: ``job.json`` first, so a process
        killed half way leaves a folder that is known to hold nothing."""
        storage.remove(self.path(_JOB_FILE), self.storage_options)
        self.discard()

    # -- the parts -------------------------------------------------------------------------
    def write_done(self, number: int, doc: Dict[str, Any]) -> None:
        """Part ``number``'s done record (its files are in place already)."""
        self._write_json(part_name(number) + ".json", doc)

    def done_count(self) -> int:
        """How many parts have a done record (not verified: for messages)."""
        return sum(1 for name in self._names() if _DONE.match(name))

    def attempt(self, number: int, run: str, where: str) -> Tuple[int, List[Dict[str, Any]]]:
        """Record that an attempt at part ``number`` starts now, in driver run ``run``:
        ``(its number in this run (1, 2, ...), what the earlier attempts recorded)``."""
        base = f"{part_name(number)}.{run}.attempt"
        earlier: List[Dict[str, Any]] = []
        while True:
            doc = self._read_json(f"{base}{len(earlier) + 1}")
            if doc is None:
                break
            earlier.append(doc)
        mine = {"started": time.time(), "host": socket.gethostname(), "pid": os.getpid(),
                "where": where}
        self._write_json(f"{base}{len(earlier) + 1}", mine)
        return len(earlier) + 1, earlier

    def done_records(self, job_id: str) -> Dict[int, Dict[str, Any]]:
        """The done records of job ``job_id``, by part number (their files not checked)."""
        records: Dict[int, Dict[str, Any]] = {}
        for name in self._names():
            match = _DONE.match(name)
            if match:
                doc = self._read_json(name)
                if doc is not None and doc.get("job") == job_id \
                        and isinstance(doc.get("files"), list):
                    records[int(match.group(1))] = doc
        return records

    def verify(self, records: Dict[int, Dict[str, Any]], moved: Optional[Dict[str, str]] = None
               ) -> Tuple[Dict[int, Dict[str, Any]], List[int]]:
        """``(kept, rejected)``: the ``records`` whose files have the sizes and CRC-32s they
        give, and the numbers of the others. A file missing from the folder verifies at the
        path ``moved`` gives for its name, if any (where an interrupted commit put it)."""
        checks = [(number, entry) for number, doc in records.items() for entry in doc["files"]]
        with ThreadPoolExecutor(max(1, min(_VERIFY_THREADS, len(checks)))) as pool:
            verdicts = list(pool.map(lambda check: self._verifies(check[1], moved or {}),
                                     checks))
        rejected = sorted({number for (number, _), ok in zip(checks, verdicts) if not ok})
        return {n: doc for n, doc in records.items() if n not in rejected}, rejected

    def clean(self, kept: Dict[int, Dict[str, Any]]) -> None:
        """Delete every file but ``job.json`` and the ``kept`` parts' records and files."""
        keep = {_JOB_FILE} | {part_name(n) + ".json" for n in kept} \
            | {entry[0] for doc in kept.values() for entry in doc["files"]}
        for name in self._names():
            if name not in keep:
                storage.remove(self.path(name), self.storage_options)

    def _verifies(self, entry: Any, moved: Dict[str, str]) -> bool:
        try:
            name, size, crc = entry
        except (ValueError, TypeError):
            return False
        for path in (self.path(str(name)), moved.get(str(name))):
            if path is None:
                continue
            try:
                return file_crc32(path, self.storage_options) == (size, crc)
            except FileNotFoundError:
                continue
            except (OSError, ValueError):
                return False
        return False


__all__ = ["PackProgress", "staging_folder"]
