"""Every parser of ``.rec`` framing agrees on damaged files, and none allocates a claimed length.

The reference is ``RecordReader(on_error="skip")``: the records it returns and the byte regions
it passes over. In the default (raise) mode every other entry point must return exactly the
reference records that come before the first damaged region, then raise ``RecordIOError`` at
an offset inside that region; ``recio inspect``'s scan must report exactly those regions.
"""
import os
import tracemalloc

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import recio
from conftest import need
from support import hang_guard
from recio import mx
from recio.records import framing
from recio.sequence.corpora import RecordCorpus
from recio.records.split import InputSplit
from recio.image.tools.stats import scan_file

MAGIC = framing.MAGIC_BYTES


def reference(path):
    """(records as (offset, bytes), damaged regions as (start, end)) from skip mode: one region
    for each place where a reader in raise mode would stop."""
    regions = []
    with recio.RecordReader(path, on_error="skip",
                            on_damage=lambda a, b, e: regions.append((a, b, e))) as reader:
        records = [(o, bytes(r)) for o, r in reader.records_with_offsets()]
    return records, regions


def merged(regions):
    """Regions that touch, joined (as ``recio inspect`` reports them)."""
    out = []
    for a, b, _ in regions:
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def outcome(produce):
    """(items produced, the RecordIOError that ended it or None); any other exception fails."""
    items = []
    try:
        for item in produce():
            items.append(item)
    except recio.RecordIOError as exc:
        return items, exc
    return items, None


def expect_prefix(records, regions, begin=0, end=None):
    """The reference records in ``[begin, end)`` before the first region starting there, and
    that region (or None)."""
    end = float("inf") if end is None else end
    first = next((r for r in regions if begin <= r[0] < end), None)
    stop = end if first is None else first[0]
    return [r for r in records if begin <= r[0] < stop], first


def check_error(error, region, path):
    """``error`` is the one skip mode met at ``region`` (same message and offset), or both None."""
    if region is None:
        assert error is None, f"unexpected error {error}"
        return
    assert error is not None, f"damage at {region[:2]} passed silently"
    expected = region[2]
    assert (error.message, error.offset) == (expected.message, expected.offset)
    assert error.path == os.fspath(path) and type(error) is type(expected)
    assert type(error) in (recio.RecordIOError, recio.errors.TruncatedFileError)


def read_all_sequential(path):
    with recio.RecordReader(path) as reader:
        while True:
            record = reader.read()
            if record is None:
                return
            yield record


def read_all_batches(path):
    with recio.RecordReader(path) as reader:
        while True:
            batch = reader.read_batch(3)
            if not batch:
                return
            yield from batch


def read_mx(path):
    record_io = mx.MXRecordIO(str(path), "r")
    try:
        while True:
            record = record_io.read()
            if record is None:
                return
            yield record
    finally:
        record_io.close()


def assert_agreement(path):
    records, regions = reference(path)
    payloads = [r for _, r in records]
    prefix, region = expect_prefix(records, regions)
    want = [r for _, r in prefix]

    entry_points = {
        "iterate": lambda: iter(recio.RecordReader(path)),
        "read": lambda: read_all_sequential(path),
        "read_batch": lambda: read_all_batches(path),
        "records_with_offsets": lambda: (r for _, r in
                                         recio.RecordReader(path).records_with_offsets()),
        "recio.mx": lambda: read_mx(path),
        "InputSplit": lambda: iter(InputSplit(path)),
    }
    for name, produce in entry_points.items():
        got, error = outcome(produce)
        assert [bytes(g) for g in got] == want, name
        check_error(error, region, path)

    offsets, error = outcome(lambda: recio.RecordReader(path).iter_offsets())
    assert offsets == [o for o, _ in prefix]
    check_error(error, region, path)
    # the scanning IndexedRecordReader and the sequence corpus build the index the same way
    _, error = outcome(lambda: [recio.IndexedRecordReader(path, scan=True)])
    check_error(error, region, path)
    _, error = outcome(lambda: [RecordCorpus(path)])
    if region is None and isinstance(error, recio.errors.SequenceError):
        error = None  # framing is fine; a record that starts like a sequence but is not one
    check_error(error, region, path)
    # inspect / verify: the same regions, the same records
    stats, heads = scan_file(path, sample=0, collect_heads=True, check_index=False)
    assert [(d.start, d.end) for d in stats.damage] == merged(regions)
    assert list(heads) == [o for o, _ in records] and stats.records == len(records)
    # by offset: every reference record reads back alone
    with recio.RecordReader(path) as reader:
        assert [bytes(reader.read_at(o)) for o, _ in records] == payloads
    # every part of every split reads its own share, and raises at damage inside it
    for n in (2, 3, 5):
        for part in InputSplit.all_parts(path, n):
            got, error = outcome(lambda: iter(part))
            part_prefix, part_region = expect_prefix(records, regions, part.begin, part.end)
            assert [bytes(g) for g in got] == [r for _, r in part_prefix], (n, part)
            check_error(error, part_region, path)


def build(payloads):
    return b"".join(framing.encode_record(p) for p in payloads)


payload = st.one_of(
    st.binary(max_size=40),
    # payloads holding the magic at aligned and unaligned places: multi-part records
    st.lists(st.sampled_from([b"ab", b"abcd", MAGIC, b"\0"]), max_size=8).map(b"".join),
)

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10 ** 6), st.integers(0, 7)),
    st.tuples(st.just("word"), st.integers(0, 10 ** 6), st.integers(0, 2 ** 32 - 1)),
    st.tuples(st.just("grow"), st.integers(0, 10 ** 6), st.integers(1, 400)),
    st.tuples(st.just("truncate"), st.integers(0, 10 ** 6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10 ** 6), st.integers(1, 7)),
)


def mutate(data, mutations):
    data = bytearray(data)
    for kind, where, value in mutations:
        if not data:
            break
        at = where % len(data)
        if kind == "flip":
            data[at] ^= 1 << value
        elif kind == "word":  # overwrite an aligned word (a magic or a length field)
            at &= ~3
            data[at:at + 4] = value.to_bytes(4, "little")[:len(data) - at]
        elif kind == "grow":  # a length field that swallows what follows it
            heads = [i for i in range(0, len(data) - 7, 4) if data[i:i + 4] == MAGIC]
            if heads:
                head = heads[where % len(heads)]
                lrec = int.from_bytes(data[head + 4:head + 8], "little")
                data[head + 4:head + 8] = ((lrec + value) & 0xFFFFFFFF).to_bytes(4, "little")
        elif kind == "truncate":
            del data[at:]
        else:
            data[at:at] = b"\xa5" * value
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(payload, min_size=1, max_size=12), st.lists(mutation, min_size=1, max_size=3))
# found by longer runs: a head in the file's last word, whose length word is missing, still
# shows that the record before it swallows it
@example(payloads=[b"", b"", b"", b"ab\x00\n#\xd7\xce"], mutations=[("insert", 32, 1)])
# an interrupted multi-part record: the error names the part that broke
@example(payloads=[b"ab\x00\x00\n#\xd7\xce", b""], mutations=[("word", 257840, 0)])
# damage that begins exactly where a part begins belongs to that part
@pytest.mark.slow
@example(payloads=[b"", b"\x00" * 5], mutations=[("flip", 0, 0), ("flip", 0, 0),
                                                 ("truncate", 352, 0)])
def test_every_entry_point_agrees_on_damaged_files(tmp_path_factory, payloads, mutations):
    path = tmp_path_factory.mktemp("agree") / "d.rec"
    path.write_bytes(mutate(build(payloads), mutations))
    with hang_guard():
        assert_agreement(path)


def swallowing_file(tmp_path, extra=0):
    """Five records; the second's length grows by ``extra`` + two records' worth of bytes."""
    payloads = [bytes([65 + i]) * 20 for i in range(5)]
    data = bytearray(build(payloads))  # each record: 8 + 20 bytes
    data[28 + 4:28 + 8] = (20 + 2 * 28 + extra).to_bytes(4, "little")
    path = tmp_path / "swallow.rec"
    path.write_bytes(bytes(data))
    return path, payloads


def test_a_length_that_swallows_records_raises_in_default_mode(tmp_path):
    path, payloads = swallowing_file(tmp_path)
    with pytest.raises(recio.RecordIOError, match="swallows") as info:
        list(recio.RecordReader(path))
    assert info.value.offset == 28
    assert_agreement(path)
    records, regions = reference(path)
    # skip mode drops only the damaged record: the two it swallowed come back
    assert [r for _, r in records] == [payloads[0]] + payloads[2:]
    assert merged(regions) == [(28, 56)]
    stats, _ = scan_file(path)
    assert stats.damage and "swallows" in stats.damage[0].reason


def test_trust_lengths_is_the_documented_fast_mode(tmp_path):
    path, payloads = swallowing_file(tmp_path)
    with recio.RecordReader(path, trust_lengths=True) as reader:
        got = list(reader)
    # as MXNet reads it: the damaged record comes back with the records it swallowed
    assert got[0] == payloads[0] and len(got) == 3 and len(got[1]) == 20 + 2 * 28
    clean = tmp_path / "clean.rec"
    clean.write_bytes(build(payloads))
    for trust in (False, True):
        with recio.RecordReader(clean, trust_lengths=trust) as reader:
            assert list(reader) == payloads


def test_read_at_checks_the_record_it_reads(tmp_path):
    path, payloads = swallowing_file(tmp_path)
    with recio.RecordReader(path) as reader:
        assert reader.read_at(0) == payloads[0]
        with pytest.raises(recio.RecordIOError, match="swallows"):
            reader.read_at(28)
        with pytest.raises(recio.RecordIOError, match="swallows"):
            reader.peek_at(28, 4)
        assert reader.read_at(56) == payloads[2]


def test_large_records_are_checked_too(tmp_path):
    big = [os.urandom(300_000).replace(MAGIC, b"xxxx") for _ in range(3)]
    data = bytearray(build(big))
    head = 8 + 300_000
    data[head + 4:head + 8] = (300_000 + 8 + 300_000).to_bytes(4, "little")
    path = tmp_path / "big.rec"
    path.write_bytes(bytes(data))
    assert_agreement(path)
    with pytest.raises(recio.RecordIOError, match="swallows"):
        recio.RecordReader(path).read_at(head)


CLAIM = framing.MAX_RECORD_LENGTH - 1  # a 512 MiB record


def claiming_file(tmp_path):
    """A 4.8 KB file whose third record claims 512 MiB."""
    data = bytearray(build([b"x" * 1500, b"y" * 1500, b"z" * 1500]))
    data[2 * 1508 + 4:2 * 1508 + 8] = CLAIM.to_bytes(4, "little")
    path = tmp_path / "claims.rec"
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("entry", [
    "iterate", "read", "read_batch", "read_at", "iter_offsets", "recio.mx", "InputSplit",
    "InputSplit-parts", "InputSplit-records", "IndexedRecordReader", "scan_file", "RecordCorpus",
    "skip-mode", "ImageBatchIter", "torch.RecordDataset", "torch.RecordIterableDataset",
])
@pytest.mark.filterwarnings("ignore::recio.errors.SkippedRecordWarning")
def test_no_entry_point_allocates_a_claimed_length(tmp_path, entry):
    path = claiming_file(tmp_path)
    if entry.startswith("torch."):
        need("torch")
        from recio import torch as rtorch
    runs = {
        "iterate": lambda: list(recio.RecordReader(path)),
        "read": lambda: list(read_all_sequential(path)),
        "read_batch": lambda: list(read_all_batches(path)),
        "read_at": lambda: recio.RecordReader(path).read_at(2 * 1508),
        "iter_offsets": lambda: list(recio.RecordReader(path).iter_offsets()),
        "recio.mx": lambda: list(read_mx(path)),
        "InputSplit": lambda: list(InputSplit(path)),
        "InputSplit-parts": lambda: [list(p) for p in InputSplit.all_parts(path, 3)],
        "InputSplit-records": lambda: list(InputSplit(path, balance="records")),
        "IndexedRecordReader": lambda: recio.IndexedRecordReader(path, scan=True),
        "scan_file": lambda: scan_file(path),
        "RecordCorpus": lambda: RecordCorpus(path),
        "skip-mode": lambda: list(recio.RecordReader(path, on_error="skip")),
        "ImageBatchIter": lambda: list(recio.ImageBatchIter(path_imgrec=str(path),
                                                              data_shape=(3, 8, 8), batch_size=2)),
        "torch.RecordDataset": lambda: [rtorch.RecordDataset(str(path))[i] for i in range(3)],
        "torch.RecordIterableDataset": lambda: list(rtorch.RecordIterableDataset(str(path))),
    }
    tracemalloc.start()
    try:
        with hang_guard():
            try:
                runs[entry]()
            except recio.RecordIOError as exc:  # framing (offset) or content (record number)
                assert exc.path == os.fspath(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{entry} allocated {peak} bytes for a 4.5 KB file"


@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize("last", [b"abcde", b"ab\0\0\n#\xd7\xce" + b"xyz"])  # whole, two parts
def test_position_stays_inside_a_file_whose_last_record_lost_its_padding(tmp_path, on_error,
                                                                          last):
    data = build([b"x" * 10, last])
    path = tmp_path / "short.rec"
    path.write_bytes(data[:len(data) - (-len(last) & 3 or 0)] if -len(last) & 3 else data)
    size = path.stat().st_size
    for read_all in (lambda r: list(r), lambda r: list(iter(r.read, None)),
                     lambda r: r.read_batch(10), lambda r: list(r.iter_offsets())):
        with recio.RecordReader(path, on_error=on_error) as reader:
            read_all(reader)
            assert reader.tell() <= size
            reader.seek(reader.tell())  # what a resuming caller does
            assert reader.read() is None


def remote_outcomes(url):
    """What the readers of a remote object give: (iterate, read, read_batch, skip mode)."""
    out = {}
    out["iterate"] = outcome(lambda: iter(recio.RecordReader(url)))
    out["read"] = outcome(lambda: read_all_sequential(url))
    out["read_batch"] = outcome(lambda: read_all_batches(url))
    regions = []
    with recio.RecordReader(url, on_error="skip",
                            on_damage=lambda a, b, e: regions.append((a, b, e.message))) as r:
        out["skip"] = [(o, bytes(x)) for o, x in r.records_with_offsets()], regions
    return out


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(payload, min_size=1, max_size=12), st.lists(mutation, min_size=0, max_size=3),
       st.sampled_from([16, 64, 1 << 20]), st.sampled_from([8, 32, 1 << 20]))
def test_a_remote_object_reads_exactly_like_the_local_file(tmp_path_factory, payloads, mutations,
                                                           block, window):
    """The same bytes behind a URL (memory://, through recio.storage's streams, blocks and
    windows of any size) give the same records and the same errors at the same offsets."""
    fsspec = need("fsspec")
    from recio.records import walker as walker_module
    from recio.storage import remote_file

    data = mutate(build(payloads), mutations)
    path = tmp_path_factory.mktemp("remote") / "d.rec"
    path.write_bytes(data)
    url = f"memory://agree/{abs(hash((data, block, window)))}.rec"
    fsspec.filesystem("memory").pipe(url[len("memory://"):], data)
    saved = remote_file.STREAM_BLOCK, walker_module._STREAM_WINDOW
    remote_file.STREAM_BLOCK, walker_module._STREAM_WINDOW = block, window
    try:
        with hang_guard():
            remote = remote_outcomes(url)
    finally:
        remote_file.STREAM_BLOCK, walker_module._STREAM_WINDOW = saved
    records, regions = reference(path)
    assert remote["skip"] == (records, [(a, b, e.message) for a, b, e in regions])
    prefix, region = expect_prefix(records, regions)
    for name in ("iterate", "read", "read_batch"):
        got, error = remote[name]
        assert [bytes(g) for g in got] == [r for _, r in prefix], name
        if region is None:
            assert error is None, (name, error)
        else:
            assert error is not None and (error.message, error.offset) == \
                (region[2].message, region[2].offset), name
            assert error.path == url
    with recio.RecordReader(url) as reader:  # by offset, each record alone
        assert [bytes(reader.read_at(o)) for o, _ in records] == [r for _, r in records]
