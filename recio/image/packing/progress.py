"""Where a pack in parts keeps its progress, so that ``resume`` can continue it from anywhere.

A pack in parts (``recio.image.packing.shards``: ``--num-shards``, ``--shard-size``, ``--engine
ray``, a URL PREFIX or ROOT) keeps all of it in its staging folder beside the outputs,
``.recio-pack-NAME`` (NAME: the list's name without ``.lst``; a folder, or the objects under
that prefix in a bucket), never in this machine's temporary folder, so the resume may run in
another process, working directory or machine that sees the same outputs:

* ``job.json``, written first: the settings the parts depend on (the list's size and CRC-32,
  ROOT, the image options, the layout of the parts) and a random job id. A staging folder
  without it holds nothing worth keeping and is deleted.
* ``part-NNNNN.ATTEMPT.rec`` / ``.idx`` / ``.crc32``: part N's files as one attempt wrote
  them (each attempt has its own: overlapping attempts never share a file). ATTEMPT names the
  attempt's host and process (:func:`attempt_token`). While it packs, an attempt keeps its
  progress as a single-list pack does (``recio.image.packing.output``): ``.rec.partial`` and
  ``.pack.journal``.
* ``part-NNNNN.json``, the *done record*, written by part N's task after its files: their names,
  sizes and CRC-32s, the part's counts and skip rows, where and when it ran, and the job id.
* ``part-NNNNN.RUN.attemptK``: attempt K of part N in driver run RUN started (where, when): how
  retries are counted and the time they cost measured.
* anything else is an unfinished attempt's files.

The resume rule (:meth:`PackProgress.done_records`, :meth:`~PackProgress.verify`,
:meth:`~PackProgress.clean`): a part is kept when its done record names this job and its files
have the sizes and CRC-32s the record gives (in the folder, or where an interrupted commit
moved them); the partial files of an attempt that did not finish are kept too; everything
else in the folder is deleted and the parts not kept are packed again. A new attempt at a part
first takes over the partial files of an earlier attempt of this machine whose process is gone
(:meth:`~PackProgress.claim_partial`: renamed to its own names, so two attempts never write one
file) and goes on from the last item their journal vouches for, as ``im2rec --resume`` does for
a single list: a pack killed every few seconds still finishes.
"""
from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

from recio import portable, storage
from recio.errors import OutputWriteError
from recio.image.packing.paths import PackPaths
from recio.records.atomic import atomic_open
from recio.records.manifest import file_crc32
from recio.records.write_errors import folder_write_failed, is_write_only_error
from recio.storage import StorageOptions

_PROGRESS_FORMAT = "recio-pack-progress"
_PROGRESS_VERSION = 1
_JOB_FILE = "job.json"
_DONE = re.compile(r"part-(\d{5,})\.json\Z")
#: an attempt's partial files (``PackPaths.partial`` of its stem) and the ``.rec`` a
#: publish cut short renamed the ``.rec.partial`` to: ``part-NNNNN.ATTEMPT.SUFFIX``
_PARTIAL = re.compile(r"(part-\d{5,})\.([0-9a-z-]+)\.(pack\.journal|rec\.partial|rec)\Z")
#: ``ATTEMPT`` of :func:`attempt_token`: host, process, random
_TOKEN = re.compile(r"h([0-9a-f]{8})-p(\d+)-r[0-9a-f]+\Z")
#: files checksummed at once when a resume verifies the kept parts
_VERIFY_THREADS = 8


def part_name(number: int) -> str:
    """``part-00007``: the stem of part 7's files in the staging folder."""
    return f"part-{number:05d}"


def _host_tag() -> str:
    return f"{zlib.crc32(socket.gethostname().encode('utf-8', 'surrogateescape')):08x}"


def attempt_token() -> str:
    """A new attempt's name, ``hHOST-pPID-rRANDOM``: unique, and telling a later attempt on the
    same machine whether the process that wrote its files is gone."""
    return f"h{_host_tag()}-p{os.getpid()}-r{uuid.uuid4().hex[:8]}"


def _abandoned(token: str) -> bool:
    """Whether the attempt ``token`` ran on this machine in a process that is gone (so nothing
    writes its files any more)."""
    match = _TOKEN.match(token)
    if match is None or match.group(1) != _host_tag():
        return False
    pid = int(match.group(2))
    return pid != os.getpid() and not portable.process_alive(pid)


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
        if doc is None or doc.get("format") != _PROGRESS_FORMAT \
                or doc.get("version") != _PROGRESS_VERSION or not isinstance(doc.get("job"), str):
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
        doc = {"format": _PROGRESS_FORMAT, "version": _PROGRESS_VERSION, "job": uuid.uuid4().hex,
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
        """Delete every file but ``job.json``, the ``kept`` parts' records and files, and the
        partial files (journal, ``.rec.partial``) of the other parts' unfinished attempts,
        which their next attempt continues (:meth:`claim_partial`)."""
        names = self._names()
        keep = {_JOB_FILE} | {part_name(n) + ".json" for n in kept} \
            | {entry[0] for doc in kept.values() for entry in doc["files"]}
        done = {part_name(n) for n in kept}
        journals = {(m.group(1), m.group(2)) for m in map(_PARTIAL.match, names)
                    if m and m.group(3) == "pack.journal" and m.group(1) not in done}
        for name in names:
            match = _PARTIAL.match(name)
            if name in keep or (match and match.group(3) != "rec"
                                and (match.group(1), match.group(2)) in journals):
                continue
            if match and match.group(3) == "rec" and (match.group(1), match.group(2)) in journals:
                continue  # a publish cut short: its journal writes the .idx again
            storage.remove(self.path(name), self.storage_options)

    def claim_partial(self, number: int, stem: str) -> bool:
        """Take over the partial files of the furthest earlier attempt at part ``number``
        whose process is gone (this machine's; a local staging folder): they are renamed to
        ``stem``'s (this attempt's) partial names, so that its pack continues from their
        journal. The others of those attempts are deleted. False when there is none."""
        if self.remote:
            return False
        prefix = part_name(number)
        names = self._names()
        candidates = []
        for name in names:
            match = _PARTIAL.match(name)
            if match and match.group(1) == prefix and match.group(3) == "pack.journal" \
                    and _abandoned(match.group(2)):
                try:
                    size = os.path.getsize(self.path(name))
                except OSError:
                    continue
                candidates.append((size, match.group(2)))
        new = PackPaths.of(stem + ".lst")
        claimed = False
        for _, token in sorted(candidates, reverse=True):
            old = PackPaths.of(self.path(f"{prefix}.{token}") + ".lst")
            if not claimed:
                try:
                    os.rename(old.journal, new.journal)  # the journal first: whoever moves it
                except FileNotFoundError:            # owns the pair
                    continue
                for source, target in ((old.rec_partial, new.rec_partial), (old.rec, new.rec)):
                    try:
                        os.rename(source, target)
                        claimed = True
                    except FileNotFoundError:
                        pass
                if not claimed:  # a journal without its records: nothing to go on from
                    os.unlink(new.journal)
                    continue
            self._forget_attempt(prefix, token)
        return claimed

    def _forget_attempt(self, prefix: str, token: str) -> None:
        """Delete whatever is left of attempt ``token`` at part ``prefix``."""
        for name in self._names():
            if name.startswith(f"{prefix}.{token}."):
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


