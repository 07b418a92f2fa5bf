"""Conversion between CNTK's formats (binary CBF, text CTF) and RecordIO sequence records.

``cbf_to_rec``: one sequence record (:func:`recio.sequence.pack_sequence`) per CBF sequence, in
file order, keys 0..n-1, with ``.idx`` and the ``.len`` sample-count sidecar beside the ``.rec``.
``rec_to_cbf``: the way back; streams (name, dense/sparse, dtype, dim) come from the first
record and must be float32 or float64, as CBF stores nothing else. A round trip
CBF -> rec -> CBF reproduces every sequence's values and dtypes; the chunk table is rebuilt
from ``chunk_size_bytes`` and each sequence's meta sample count is the largest stream's N.

``ctf_to_cbf`` replaces CNTK's ``ctf2bin.py``: the CTF file is read by
:class:`recio.sequence.ctf.CTFReader` (CNTK's own reading of it: zero-padded dense samples,
empty sparse samples kept, sparse pairs in file order), and each sequence's meta sample count is
the size CNTK's text reader gives it, so CNTK reads the ``.cbf`` as it reads the ``.ctf``.
Chunks close at ``chunk_size_bytes`` and the count restarts per chunk (ctf2bin never restarts
it, so after its first chunk every chunk holds one sequence). ``ctf_to_rec`` writes the same
sequences as sequence records.

Both report progress through ``progress(n)``: ``n`` input bytes processed since the last call
(what ``tqdm.update`` takes), so a caller can show a bar over the input file's size.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from recio import storage
from recio.errors import CBFError, OutputWriteError, SequenceError
from recio.records.atomic import check_outputs, publish_staged
from recio.records.index_format import sibling_index_path
from recio.records.reader import RecordReader
from recio.sequence.cbf import CBFReader, CBFWriter
from recio.sequence.cbf_decode import decode_chunk
from recio.sequence.cbf_format import StreamInfo
from recio.sequence.ctf import CTFReader
from recio.sequence.ctf_streams import CTFStream
from recio.sequence.records import unpack_sequence
from recio.sequence.sidecar import sidecar_path
from recio.sequence.writer import SequenceWriter

PathLike = Union[str, "os.PathLike[str]"]
Progress = Optional[Callable[[int], Any]]


def cbf_to_rec(cbf_path: PathLike, rec_path: PathLike, idx_path: Optional[PathLike] = None,
               alias: Optional[Mapping[str, str]] = None,
               progress: Progress = None) -> Dict[str, Any]:
    """Write every CBF sequence as a sequence record; returns a summary dict."""
    started = time.perf_counter()
    reader = CBFReader(cbf_path, alias=alias)
    rec_path = os.fspath(rec_path)
    mismatched = 0
    count = 0
    with SequenceWriter(rec_path, idx_path) as writer:
        for info in reader.chunks:
            metas, seqs = decode_chunk(reader.read_chunk_bytes(info.index), info,
                                       reader.streams, reader.path)
            for meta, seq in zip(metas.tolist(), seqs):
                streams = {}
                most = 0
                for stream in reader.streams:
                    data = seq[stream.name]  # a recio.sequence.Sparse or an (N, dim) array
                    most = max(most, data.num_samples if stream.is_sparse else len(data))
                    streams[stream.name] = data
                mismatched += meta != most
                try:
                    writer.write(streams)
                except SequenceError as exc:  # e.g. a stream name longer than 255 bytes
                    raise SequenceError(f"sequence {count} cannot be written as a sequence "
                                        f"record: {exc.message}", path=reader.path,
                                        offset=info.offset) from None
                count += 1
            if progress is not None:
                progress(info.size)
        idx_written = writer.idx_path
        len_written = writer.len_path
    if mismatched:
        warnings.warn(f"{cbf_path}: {mismatched} sequence(s) store a meta sample count other "
                      f"than their largest stream's; sequence records keep per-stream counts "
                      f"only, so converting back gives the largest stream's count",
                      stacklevel=2)
    return {
        "direction": "cbf->rec", "source": reader.path, "destination": rec_path,
        "index": idx_written, "sample_counts": len_written, "sequences": count,
        "samples": reader.num_samples, "chunks_read": reader.num_chunks,
        "streams": [_describe(s) for s in reader.streams],
        "bytes_read": reader.size, "bytes_written": os.path.getsize(rec_path),
        "seconds": round(time.perf_counter() - started, 3),
    }


def rec_to_cbf(rec_path: PathLike, cbf_path: PathLike, chunk_size_bytes: int = 32 << 20,
               progress: Progress = None) -> Dict[str, Any]:
    """Write the sequence records of ``rec_path`` (file order) as a CBF file; returns a summary."""
    started = time.perf_counter()
    rec_path = os.fspath(rec_path)
    cbf_path = os.fspath(cbf_path)
    writer: Optional[CBFWriter] = None
    streams: List[StreamInfo] = []
    count = 0
    done = 0
    reader = RecordReader(rec_path)
    try:
        for offset, payload in reader.records_with_offsets():
            try:
                seq = unpack_sequence(payload)
            except SequenceError as exc:
                raise SequenceError(exc.message, path=rec_path, offset=offset) from None
            if writer is None:
                streams = [_stream_of(name, data, rec_path, offset) for name, data in seq.items()]
                writer = CBFWriter(cbf_path, streams, chunk_size_bytes)
            _check_same(streams, seq, rec_path, offset)
            try:
                writer.write(seq)
            except OutputWriteError:  # a full disk: not the record's fault
                raise
            except ValueError as exc:
                raise CBFError(f"record cannot be written as CBF: {exc}", path=rec_path,
                               offset=offset) from None
            count += 1
            if progress is not None and offset > done:
                progress(offset - done)
                done = offset
        if writer is None:
            raise SequenceError("no sequence records: nothing to describe the CBF streams "
                                "with (an empty CBF file needs its stream list)", path=rec_path,
                                offset=0)
        chunks = writer.close()
    except BaseException:
        if writer is not None:
            writer.discard()
        raise
    finally:
        reader.close()
    size = os.path.getsize(rec_path)
    if progress is not None and size > done:
        progress(size - done)
    return {
        "direction": "rec->cbf", "source": rec_path, "destination": cbf_path,
        "sequences": count, "samples": sum(c.num_samples for c in chunks),
        "chunks_written": len(chunks), "chunk_size_bytes": int(chunk_size_bytes),
        "streams": [_describe(s) for s in streams],
        "bytes_read": size, "bytes_written": os.path.getsize(cbf_path),
        "seconds": round(time.perf_counter() - started, 3),
    }


def _ctf_chunks(reader: CTFReader, progress: Progress):
    """``(sequences, sizes)`` of each chunk of ``reader`` in file order, reporting the file's
    bytes to ``progress`` as they are parsed (all of them by the end)."""
    done = 0
    for i in range(reader.num_chunks):
        first, end = reader.chunk_range(i)
        seqs = reader.read_chunk(i)
        yield seqs, reader.sizes[first:end].tolist()
        if progress is not None:
            reached = reader.chunk_span(i)[1]
            progress(reached - done)
            done = reached
    if progress is not None and reader.size > done:
        progress(reader.size - done)


def ctf_to_cbf(ctf_path: PathLike, cbf_path: PathLike, streams: Sequence[Any],
               chunk_size_bytes: int = 32 << 20, dtype: Any = np.float32,
               progress: Progress = None) -> Dict[str, Any]:
    """Write the sequences CNTK reads from a CTF file as a CBF file (``ctf2bin.py``'s job, with
    CNTK's reading of the text and chunks of ``chunk_size_bytes``); returns a summary.

    ``streams``: :class:`recio.sequence.ctf_streams.CTFStream` definitions (their names become
    the CBF stream names, which must be ASCII). ``dtype``: float32 (ctf2bin's ``--precision
    float``) or float64 (``double``). Raises CTFError where CNTK would refuse the text; the
    ``.cbf`` appears only when complete.
    """
    started = time.perf_counter()
    reader = CTFReader(ctf_path, streams, dtype=dtype)
    cbf_path = os.fspath(cbf_path)
    infos = [StreamInfo(s.name, s.storage, reader.dtype, s.dim) for s in reader.streams]
    writer = CBFWriter(cbf_path, infos, chunk_size_bytes)
    count = 0
    try:
        for seqs, sizes in _ctf_chunks(reader, progress):
            for seq, size in zip(seqs, sizes):
                writer.write(seq, num_samples=size)
                count += 1
        chunks = writer.close()
    except BaseException:
        writer.discard()
        raise
    return {
        "direction": "ctf->cbf", "source": reader.path, "destination": cbf_path,
        "sequences": count, "samples": sum(c.num_samples for c in chunks),
        "skipped_sequences": reader.skipped_sequences,
        "chunks_written": len(chunks), "chunk_size_bytes": int(chunk_size_bytes),
        "precision": "float" if reader.dtype == np.float32 else "double",
        "streams": [_describe(s) for s in infos],
        "bytes_read": reader.size, "bytes_written": os.path.getsize(cbf_path),
        "seconds": round(time.perf_counter() - started, 3),
    }


def ctf_to_rec(ctf_path: PathLike, rec_path: PathLike, streams: Sequence[Any],
               idx_path: Optional[PathLike] = None, dtype: Any = np.float32,
               progress: Progress = None) -> Dict[str, Any]:
    """Write the sequences CNTK reads from a CTF file as sequence records (keys 0..n-1, with
    ``.idx`` and the ``.len`` sample-count sidecar); returns a summary."""
    started = time.perf_counter()
    reader = CTFReader(ctf_path, streams, dtype=dtype)
    rec_path = os.fspath(rec_path)
    count = 0
    with SequenceWriter(rec_path, idx_path) as writer:
        for seqs, _ in _ctf_chunks(reader, progress):
            for seq in seqs:
                writer.write(seq)
                count += 1
        idx_written, len_written = writer.idx_path, writer.len_path
    return {
        "direction": "ctf->rec", "source": reader.path, "destination": rec_path,
        "index": idx_written, "sample_counts": len_written, "sequences": count,
        "samples": reader.num_samples, "skipped_sequences": reader.skipped_sequences,
        "chunks_read": reader.num_chunks,
        "precision": "float" if reader.dtype == np.float32 else "double",
        "streams": [{"name": s.name, "alias": s.alias, "storage": s.storage,
                     "dtype": reader.dtype.name, "sample_dim": s.dim} for s in reader.streams],
        "bytes_read": reader.size, "bytes_written": os.path.getsize(rec_path),
        "seconds": round(time.perf_counter() - started, 3),
    }


def convert(source: PathLike, destination: PathLike, chunk_size_bytes: int = 32 << 20,
            alias: Optional[Mapping[str, str]] = None, force: bool = False,
            progress: Progress = None, streams: Optional[Sequence[CTFStream]] = None,
            dtype: Any = None) -> Dict[str, Any]:
    """Convert by file extension: ``.cbf`` -> ``.rec``, ``.rec`` -> ``.cbf``, ``.ctf`` ->
    ``.cbf`` or ``.ctf`` -> ``.rec``. A ``.ctf`` source needs ``streams`` (its definitions) and
    takes ``dtype`` (float32, the default, or float64).

    The outputs (a ``.rec`` with its ``.idx`` and ``.len``, or a ``.cbf``) never replace the
    source or its sidecars, and replace existing files only with ``force``
    (:class:`~recio.errors.OutputExistsError`, before anything is written).
    """
    source, destination = os.fspath(source), os.fspath(destination)
    _check_convert_outputs(source, destination, force)
    if not (storage.is_url(source) or storage.is_url(destination)):
        return _convert_local(source, destination, chunk_size_bytes, alias, progress,
                              streams, dtype)
    # a URL: its files staged in a private local folder (downloaded, or written then uploaded)
    staging = tempfile.mkdtemp(prefix=".recio-convert-",
                               dir=os.environ.get("RECIO_STAGING_DIR") or None)
    try:
        with storage.local_copies(_family(source)) as copies:
            assert copies[0] is not None  # the first path is always there (or it raised)
            return _convert_staged(copies[0], source, destination, staging, chunk_size_bytes,
                                   alias, progress, streams, dtype)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _convert_staged(local_source: str, source: str, destination: str, staging: str,
                    chunk_size_bytes: int, alias: Optional[Mapping[str, str]],
                    progress: Progress, streams: Optional[Sequence[CTFStream]],
                    dtype: Any) -> Dict[str, Any]:
    """``convert`` from a local copy of ``source``, to ``destination`` (written in ``staging``
    and uploaded when it is a URL)."""
    local_destination = destination
    if storage.is_url(destination):
        os.mkdir(os.path.join(staging, "out"))
        local_destination = os.path.join(staging, "out", storage.basename(destination))
    report = _convert_local(local_source, local_destination, chunk_size_bytes, alias,
                            progress, streams, dtype)
    report.update(source=source, destination=destination)
    if storage.is_url(destination):  # the data first, its sidecars after it
        publish_staged([(staged, final) for staged, final in
                        zip(_family(local_destination), _family(destination))
                        if os.path.exists(staged)])
    return report


def _convert_local(source: str, destination: str, chunk_size_bytes: int,
                   alias: Optional[Mapping[str, str]], progress: Progress,
                   streams: Optional[Sequence[CTFStream]] = None,
                   dtype: Any = None) -> Dict[str, Any]:
    src, dst = source.lower(), destination.lower()
    if src.endswith(".ctf") and dst.endswith((".cbf", ".rec")):
        if alias:
            raise ValueError("alias renames CBF streams; a .ctf source names its streams in "
                             "its definitions")
        dtype = np.float32 if dtype is None else dtype
        if dst.endswith(".cbf"):
            return ctf_to_cbf(source, destination, streams or (), chunk_size_bytes, dtype,
                              progress=progress)
        return ctf_to_rec(source, destination, streams or (), dtype=dtype, progress=progress)
    if streams or dtype is not None:
        raise ValueError("stream definitions and dtype apply to a .ctf source only")
    if src.endswith(".cbf") and dst.endswith(".rec"):
        return cbf_to_rec(source, destination, alias=alias, progress=progress)
    if src.endswith(".rec") and dst.endswith(".cbf"):
        if alias:
            raise ValueError("alias renames CBF streams; it applies only to .cbf -> .rec")
        return rec_to_cbf(source, destination, chunk_size_bytes, progress=progress)
    raise ValueError(f"cannot tell the direction from {os.fspath(source)!r} -> "
                     f"{os.fspath(destination)!r}: convert FILE.cbf OUT.rec, IN.rec OUT.cbf, "
                     f"FILE.ctf OUT.cbf or FILE.ctf OUT.rec")


def _describe(stream: StreamInfo) -> Dict[str, Any]:
    return {"name": stream.name, "storage": stream.storage, "dtype": stream.dtype.name,
            "sample_dim": stream.sample_dim}


def _stream_of(name: str, data: Any, path: str, offset: int) -> StreamInfo:
    """The CBF stream description of one stream of the first sequence record."""
    sparse = hasattr(data, "indptr")
    dtype = np.dtype(data.values.dtype if sparse else np.asarray(data).dtype)
    if dtype.newbyteorder("<") not in (np.dtype("<f4"), np.dtype("<f8")):
        raise CBFError(f"stream {name!r} holds {dtype}; CBF stores only float32 or float64 "
                       f"(cast the stream before writing the records)", path=path, offset=offset)
    if sparse:
        dim = int(data.dim)
    else:
        arr = np.asarray(data)
        dim = 1 if arr.ndim == 1 else int(arr.shape[1])
    try:
        return StreamInfo(name, "sparse" if sparse else "dense", dtype, dim)
    except ValueError as exc:
        raise CBFError(f"stream {name!r} cannot be described in CBF: {exc}", path=path,
                       offset=offset) from None


def _signature(data: Any) -> tuple:
    """(sparse?, dtype, dim) of one stream of a record, for a cheap comparison."""
    if hasattr(data, "indptr"):
        return True, data.values.dtype, int(data.dim)
    return False, data.dtype, 1 if data.ndim == 1 else int(data.shape[1])


def _check_same(streams: List[StreamInfo], seq: Mapping[str, Any], path: str,
                offset: int) -> None:
    """Every record must have the first record's streams, kinds, dtypes and dims."""
    if len(seq) != len(streams):
        raise SequenceError(f"record has streams {list(seq)}, the first had "
                            f"{[s.name for s in streams]}", path=path, offset=offset)
    for stream in streams:
        if stream.name not in seq:
            raise SequenceError(f"record has no stream {stream.name!r} (streams {list(seq)})",
                                path=path, offset=offset)
        if _signature(seq[stream.name]) == (stream.is_sparse, stream.dtype, stream.sample_dim):
            continue
        got = _stream_of(stream.name, seq[stream.name], path, offset)
        raise SequenceError(f"stream {stream.name!r} is {got.storage} {got.dtype.name} dim "
                            f"{got.sample_dim} here but {stream.storage} "
                            f"{stream.dtype.name} dim {stream.sample_dim} in the first "
                            f"record; CBF needs one description per stream",
                            path=path, offset=offset)


def _family(path: str) -> List[str]:
    """A file and its sidecars (a ``.rec``'s ``.idx`` and ``.len``), data first."""
    if path.lower().endswith(".rec"):
        return [path, sibling_index_path(path), sidecar_path(path)]
    return [path]


def _check_convert_outputs(source: str, destination: str, force: bool) -> None:
    check_outputs(_family(destination), _family(source), force=force)
