"""Pack a list in parts, one list range per task: the same work on every engine, resumable.

A pack in parts cuts the list, in list order, into ranges of list items (malformed lines
included): ``im2rec PREFIX ROOT --num-shards S`` into S ranges of ``ceil(N / S)`` items, one per
shard; the other packs in parts (``--shard-size``, ``--engine ray`` without shards, a URL
PREFIX or ROOT) into ranges of at most :data:`_PART_ITEMS` items, at least
``engine.parallelism()`` of them. Part k is one task, :func:`pack_part`: it packs its items with
``pack_list``'s pipeline into files of this attempt's own, ``STAGING/part-0000k.ATTEMPT.rec``/
``.idx``/``.crc32`` (uploaded when the staging folder is in a bucket), then writes the part's
done record (``recio.image.packing.progress``) naming them; a task that runs again (a retry
after a crash, a resume) writes exactly the same bytes. The engine decides where tasks run:
:class:`LocalEngine` runs them one after another in this process, each on ``workers`` threads
or processes; ``recio.ray.RayEngine`` runs them on a Ray cluster. Records, keys, headers and
shard boundaries do not depend on the engine.

The driver, :func:`pack_shards`, holds the outputs' lock (``STEM.pack.lock``,
``recio.records.lock``) throughout, and publishes only when every part is done:
``STEM.errors.tsv`` (the skips in list order), then

* shards (``num_shards``): each part's staged files renamed to ``STEM-NNNNN.*`` (a part whose
  images were all skipped gets no shard, so the shards are numbered without gaps), the
  combined index ``STEM.combined.idx`` and, last, ``STEM.manifest.json``;
* shards by size (``shard_size``): the parts' records copied in list order into shards of at
  most that many bytes (``ShardWriter``, manifest last);
* neither: the parts joined into ``STEM.rec`` + ``STEM.idx``, byte for byte what ``pack_list``
  writes.

The staging folder (``.recio-pack-NAME`` beside the outputs: a folder, or objects under that
prefix in a bucket) is deleted once that is done. An interrupted (Ctrl-C, SIGTERM, SIGKILL, a
lost driver) or failed pack keeps it: ``resume=True`` keeps the parts that are done and
verify, packs the rest and publishes (every publishing step can be done again), and the result
is byte for byte an uninterrupted pack's. A new pack over it is refused
(:class:`~recio.errors.InterruptedPackError`) unless ``force`` deletes it; so is one whose
settings differ. A pack that finds (nearly) nothing deletes it: nothing in it is worth
resuming.

The parts, their task and the engines are ``recio.image.packing.parts``'s; this module is the
driver.
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from recio import storage
from recio.errors import InterruptedPackError
from recio.image.packing.output import check_found
from recio.image.packing.parts import (
    ERRORS_HEADER,
    Engine,
    Fault,
    ListPart,
    LocalEngine,
    PartJob,
    PartResult,
)
from recio.image.packing.paths import PackPaths
from recio.image.packing.progress import PackProgress
from recio.image.packing.settings import PackSettings
from recio.image.packing.worker import Task
from recio.image.packing.resume_settings import check_same_settings
from recio.image.packing.pipeline import (
    ListTally,
    NothingFoundError,
    PackResult,
    ProgressCallback,
    count_items,
    list_tasks,
)
from recio.records.atomic import (
    AtomicFile,
    OutputSet,
    atomic_open,
    check_outputs,
    remove_orphaned_temps,
)
from recio.records.index import open_index
from recio.records.lock import OutputLock
from recio.records.manifest import RECORD_CHECKSUM_SUFFIX, file_crc32, load_manifest, shard_stem
from recio.records.reader import RecordReader
from recio.records.shards.commit import (
    COMBINED_INDEX_SUFFIX,
    combined_lines,
    commit_staged,
    set_outputs,
)
from recio.records.shards.shard_set import ShardWriter
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]

#: parts are joined into one ``.rec`` in blocks of this size
_COPY_BLOCK = 8 << 20
#: a pack in parts without ``num_shards`` cuts its list into parts of at most this many items
#: (what a resume may have to pack again of each part that was running)
_PART_ITEMS = 10_000


# -- the driver ----------------------------------------------------------------------------------
def part_size(items: int, parts: int) -> int:
    """Items per part when ``items`` are cut into at most ``parts`` parts: ``ceil(items /
    parts)`` (at least 1)."""
    return max(1, -(-items // max(1, parts)))


def split_list(lst_path: str, per_part: int, pack_label: bool, result: PackResult,
               total: Optional[int] = None) -> Tuple[int, Iterator[ListPart]]:
    """``(items, parts)``: the list cut in list order into parts of ``per_part`` items (the
    last may have fewer), read as the parts are taken (a list larger than memory is never
    held whole). ``result`` gets the list's own counts (labels beyond the first, repeated
    indices); ``total``: the list's items, when already counted."""
    total = count_items(lst_path) if total is None else total

    def parts() -> Iterator[ListPart]:
        tally = ListTally(result, pack_label)
        tasks: List[Task] = []
        number = 0
        for task in list_tasks(lst_path, tally):
            tasks.append(task)
            if len(tasks) == per_part:
                yield ListPart(number, tuple(tasks), total)
                number, tasks = number + 1, []
        if tasks:
            yield ListPart(number, tuple(tasks), total)
    return total, parts()


@dataclass
class ShardPackReport:
    """What :func:`pack_shards` did besides the ``PackResult``: each part's timing (the parts
    a resume kept included)."""

    engine: str
    parts: List[PartResult] = field(default_factory=list)

    def timings(self) -> List[Dict[str, Any]]:
        return [{"shard": p.number, "items": p.items, "started": p.started,
                 "seconds": round(p.seconds, 3), "host": p.host, "pid": p.pid,
                 "attempt": p.attempt, "where": p.where, "lost": round(p.lost, 3),
                 "lost_on": p.lost_on, "kept": p.kept}
                for p in sorted(self.parts, key=lambda p: p.number)]


def pack_shards(lst_path: PathLike, root: PathLike, settings: Optional[PackSettings] = None, *,
                engine: Optional[Engine] = None, progress: Optional[ProgressCallback] = None,
                storage_options: StorageOptions = None, fault: Optional[Fault] = None,
                report: Optional[ShardPackReport] = None) -> PackResult:
    """Pack ``lst_path`` in parts on ``engine`` (default :class:`LocalEngine`) as ``settings``
    say: with ``num_shards`` into the shard set ``STEM-NNNNN.rec``/``.idx`` (STEM: the list's
    path without ``.lst``; local or a URL), ``STEM.combined.idx`` and ``STEM.manifest.json``,
    one shard per part; with ``shard_size`` instead into shards of at most that many bytes;
    with neither into one ``STEM.rec`` + ``STEM.idx``, byte for byte what ``pack_list``
    writes (the driver joins the parts: one sequential copy of the records, which shards
    avoid). ``root``: the images, a folder or a URL. Returns the ``PackResult`` (for a set,
    ``rec_path`` is the manifest and ``idx_path`` None); ``report`` collects each part's
    timing.

    ``resume`` continues an interrupted or failed pack of the list (the same settings; any
    engine, process or machine that sees the outputs) or returns at once when its outputs are
    complete; ``force`` replaces existing outputs and discards an interrupted pack. See the
    module docstring for what appears when."""
    settings = settings or PackSettings()
    paths = PackPaths.of(lst_path)
    root = storage.absolute(root)
    engine = engine or LocalEngine()
    layout = settings.layout
    started = time.perf_counter()
    result = PackResult(paths.lst, paths.rec if layout == "joined" else paths.manifest,
                        paths.idx if layout == "joined" else None, None)  # type: ignore[arg-type]
    store = PackProgress(paths.staging, storage_options)
    paths.check()  # no FIFO or device where the pack writes (a URL passes)
    with OutputLock(paths.lock, storage_options, output=result.rec_path,
                    remedy=paths.beside_the_list()) as lock, \
            storage.local_copy(paths.lst, storage_options) as local_lst:
        total = count_items(local_lst)
        job_settings = _job_settings(local_lst, root, settings)
        _check_plain_partial(paths, settings.force)
        saved = store.job()
        if saved is not None and not settings.resume and not settings.force:
            raise _interrupted_error(store, saved, paths.lst)
        resumed = saved is not None and settings.resume
        if resumed:
            assert saved is not None  # resumed: there was a job
            check_same_settings(saved.get("settings") or {}, job_settings, paths.lst,
                                storage.basename(store.folder))
            per_part = int(saved["layout"]["per_part"])
            kept = _kept_parts(store, saved["job"], -(-total // per_part),
                               paths.stem if layout == "shards" else None)
        else:
            outputs = (set_outputs(paths.stem, storage_options) if layout != "joined"
                       else [paths.rec, paths.idx])
            if settings.resume and _complete(layout, paths, storage_options):
                if store.leftovers():  # a run killed while deleting it at the very end
                    store.discard()
                return _already_done(result, layout, paths, storage_options)
            check_outputs(outputs, [paths.lst], force=settings.force,
                          storage_options=storage_options)
            per_part = part_size(total, settings.num_shards if settings.num_shards is not None
                                 else max(engine.parallelism(), -(-total // _PART_ITEMS)))
            saved = store.start(job_settings, {"items": total, "per_part": per_part})
            kept = {}
        if not storage.is_url(paths.stem):
            remove_orphaned_temps(paths.stem)  # writers of an earlier run killed mid-publish
        result.resumed = sum(p.items for p in kept.values())
        _, parts = split_list(local_lst, per_part, settings.pack_label, result, total)
        job = PartJob(root, settings, store.folder, storage_options, fault, paths.lst,
                      saved["job"], uuid.uuid4().hex[:8])
        if report is not None:
            report.parts.extend(kept.values())
        try:
            new = _run(engine, (p for p in parts if p.number not in kept), job, progress,
                       total, result.resumed, report)
            finished = sorted([*kept.values(), *new], key=lambda p: p.number)
            for part in finished:
                _add_counts(result, part.result)
            first_missing = next((p.first_missing for p in finished if p.first_missing), None)
            check_found(result, total, settings.max_missing, first_missing, root, paths.lst)
        except NothingFoundError:
            store.discard()  # nothing in it is worth resuming
            raise
        lock.check()
        _write_errors(finished, paths.errors, storage_options)
        force = settings.force or resumed
        if layout == "shards":
            commit_staged(paths.stem, [p.shard for p in finished if p.shard is not None],
                          _made_by(paths.lst, result), checksums=settings.checksums,
                          force=force, storage_options=storage_options)
        elif layout == "sized":
            _reshard(finished, paths.stem, settings.shard_size, settings.checksums,  # type: ignore
                     force, _made_by(paths.lst, result), storage_options)
        else:
            _join(finished, paths.rec, paths.idx, storage_options)
        store.finish()
    result.bytes = sum(p.shard.rec_bytes for p in finished if p.shard is not None)
    result.errors_path = paths.errors if result.skipped else None
    result.parts, result.parts_kept = len(finished), len(kept)
    result.retried = sum(1 for p in new if p.attempt > 1)
    result.seconds_lost = sum(p.lost for p in new)
    result.seconds = time.perf_counter() - started
    return result


def _job_settings(local_lst: str, root: str, settings: PackSettings) -> Dict[str, Any]:
    """What the parts' bytes and their layout depend on (a resume needs the same)."""
    size, crc = file_crc32(local_lst)
    return {"list": {"bytes": size, "crc32": crc}, "root": root,
            "options": asdict(settings.options), "pass_through": settings.pass_through,
            "pack_label": settings.pack_label, "allow_outside_root": settings.allow_outside_root,
            "checksums": settings.checksums, "layout": settings.layout,
            "num_shards": settings.num_shards, "shard_size": settings.shard_size}


def _interrupted_error(store: PackProgress, saved: Dict[str, Any],
                       lst_path: str) -> InterruptedPackError:
    """The refusal of a new pack over an interrupted one: how far it got, what to do."""
    layout = saved.get("layout") or {}
    parts = -(-int(layout.get("items", 0)) // max(1, int(layout.get("per_part", 1))))
    return InterruptedPackError(
        f"an interrupted pack of this list is kept in {store.folder} ({store.done_count()} of "
        f"{parts} part(s) done); continue it with --resume, or start over with --force (which "
        "deletes it)", path=lst_path)


def _check_plain_partial(paths: PackPaths, force: bool) -> None:
    """A pack in parts of a list whose plain pack (``pack_list``) was interrupted: refused,
    or with ``force`` the plain pack's partial files are deleted."""
    if storage.is_url(paths.lst) or not paths.has_partial():
        return
    if not force:
        names = " and ".join(os.path.basename(p) for p in paths.partial)
        raise InterruptedPackError(
            f"an interrupted pack of this list left {names}; continue it the way it was started "
            "(--resume without --num-shards, --shard-size, --engine ray or URLs), or start "
            "over with --force (which deletes them)", path=paths.lst)
    for path in paths.partial:
        storage.remove(path)


def _kept_parts(store: PackProgress, job_id: str, parts: int,
                set_stem: Optional[str]) -> Dict[int, PartResult]:
    """The parts a resume keeps: done records of this job whose files verify (for a set
    published part by part, at ``set_stem``, also where an interrupted commit moved them);
    everything else in the staging folder is deleted."""
    records = store.done_records(job_id)
    moved = _committed_names(records, parts, set_stem) if set_stem is not None else {}
    kept_docs, _ = store.verify(records, moved)
    store.clean(kept_docs)
    kept = {}
    for number, doc in kept_docs.items():
        try:
            kept[number] = PartResult.from_doc(doc, store.folder)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # a record this version cannot read: the part is packed again
    return kept


def _committed_names(records: Dict[int, Dict[str, Any]], parts: int,
                     stem: str) -> Dict[str, str]:
    """Where ``commit_staged`` moves each part's files (staged name -> final path), once
    every one of the ``parts`` is done (no commit starts earlier): a resume finds there the
    files of a commit that was interrupted."""
    if set(records) != set(range(parts)):
        return {}
    moved: Dict[str, str] = {}
    number = 0
    for _, doc in sorted(records.items()):
        entry = doc.get("shard")
        if not isinstance(entry, dict):
            continue
        final = shard_stem(stem, number)
        for role, suffix in (("rec", ".rec"), ("idx", ".idx"), ("crc", RECORD_CHECKSUM_SUFFIX)):
            if entry.get(role):
                moved[str(entry[role])] = final + suffix
        number += 1
    return moved


def _complete(layout: str, paths: PackPaths, storage_options: StorageOptions) -> bool:
    outputs = [paths.rec, paths.idx] if layout == "joined" else [paths.manifest]
    return all(storage.exists(p, storage_options) for p in outputs)


def _already_done(result: PackResult, layout: str, paths: PackPaths,
                  storage_options: StorageOptions) -> PackResult:
    result.already_done = True
    result.errors_path = paths.errors if storage.exists(paths.errors, storage_options) else None
    result.bytes = (storage.size(result.rec_path, storage_options) if layout == "joined"
                    else load_manifest(paths.manifest, storage_options).nbytes)
    return result


def _made_by(lst_path: str, result: PackResult) -> Dict[str, Any]:
    return {"tool": "im2rec", "list": storage.basename(lst_path), "images": result.packed}


def _run(engine: Engine, parts: Iterator[ListPart], job: PartJob,
         progress: Optional[ProgressCallback], total: int, base: int,
         report: Optional[ShardPackReport]) -> List[PartResult]:
    """Run ``parts`` on ``engine``; ``base`` items were done before (a resume)."""
    counted = None
    if progress is not None:
        progress(base, total)

        def counted(done: int, _total: int) -> None:
            progress(base + done, total)
    finished: List[PartResult] = []
    for part in engine.run(parts, job, counted):
        finished.append(part)
        if report is not None:
            report.parts.append(part)
    return finished


def _add_counts(total: PackResult, part: PackResult) -> None:
    total.packed += part.packed
    total.skipped += part.skipped
    total.alpha_dropped += part.alpha_dropped
    for cause, n in part.skips.items():
        total.skips[cause] = total.skips.get(cause, 0) + n
    total.first_skip = total.first_skip or part.first_skip  # parts come in list order


def _write_errors(finished: Sequence[PartResult], errors_path: str,
                  storage_options: StorageOptions) -> None:
    """``PREFIX.errors.tsv``: the parts' rows in list order (an old report is deleted when
    nothing was skipped)."""
    rows = b"".join(p.error_rows for p in finished)
    if rows:
        with atomic_open(errors_path, "wb", storage_options=storage_options) as out:
            out.write(ERRORS_HEADER + rows)
    else:
        storage.remove(errors_path, storage_options)


def _join(finished: Sequence[PartResult], rec_path: str, idx_path: str,
          storage_options: StorageOptions) -> None:
    """Join the staged parts into one ``.rec`` and its ``.idx`` (records are position-free, so
    the parts' bytes one after another are the whole pack), published together (the ``.rec``
    first, an old ``.idx`` deleted before it)."""
    shards = [p.shard for p in finished if p.shard is not None]
    outputs = OutputSet([AtomicFile(rec_path, "wb", storage_options=storage_options),
                         AtomicFile(idx_path, "wb", storage_options=storage_options)])
    try:
        rec_out, idx_out = outputs.files[0].file, outputs.files[1].file
        for shard in shards:
            with storage.open_input(shard.rec, storage_options) as part:
                shutil.copyfileobj(part, rec_out, _COPY_BLOCK)
        for block in combined_lines(shards, storage_options):
            idx_out.write(block)
    except BaseException:
        outputs.discard()
        raise
    outputs.commit()


def _reshard(finished: Sequence[PartResult], stem: str, shard_size: int, checksums: bool,
             force: bool, made_by: Dict[str, Any], storage_options: StorageOptions) -> None:
    """Copy the staged parts' records, in list order with their keys, into a shard set at
    ``stem`` of shards of at most ``shard_size`` bytes (``ShardWriter``: the manifest last).
    A set made this way has no combined index: an old one is deleted."""
    storage.remove(stem + COMBINED_INDEX_SUFFIX, storage_options)
    with ShardWriter(stem, max_bytes=shard_size, checksums=checksums, force=force,
                     made_by=made_by, storage_options=storage_options) as writer:
        for shard in (p.shard for p in finished if p.shard is not None):
            index = open_index(shard.idx, key_type=int, rec_size=shard.rec_bytes, cache=False,
                               storage_options=storage_options)
            with RecordReader(shard.rec, storage_options=storage_options) as reader:
                for key, record in zip(index.key_array().tolist(), reader):
                    writer.write(key, record)
