"""Misuse of the public objects gets a clear error, never a wrong answer or a stray traceback.

* Every public method of a closed reader, writer, split, dataset or iterator raises
  ``ClosedError`` (a ``ValueError``) naming its file: ``I/O on a closed reader: PATH``; pickling
  one raises too; closing again does nothing.
* ``.idx`` keys the format cannot carry are refused at ``write``, naming the key; every key
  a writer accepts reads back equal (hypothesis).
* A reader's position shared by threads is refused (``ConcurrentUseError``), never a record
  twice or skipped without a word; keyed and by-offset reads stay safe from any number of
  threads.
"""
import inspect
import pathlib
import pickle
import shutil
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recio
from recio.errors import ClosedError, ConcurrentUseError, RecordIOError
from recio.records.index_format import key_text
from conftest import need


CBF_GOLDEN = pathlib.Path(__file__).parents[1] / "data" / "golden" / "cbf"
GOLDEN_CBF = str(CBF_GOLDEN / "float.cbf")
GOLDEN_CTF = str(CBF_GOLDEN / "data.ctf")
GOLDEN_CTF_HEADER = str(CBF_GOLDEN / "header.txt")


@pytest.fixture
def files(tmp_path, golden, monkeypatch):
    """The cwd holds the image set ``img.rec``/``img.idx`` and a shard set ``set.*``."""
    monkeypatch.chdir(tmp_path)
    for ext in (".rec", ".idx"):
        shutil.copy(golden / "im2rec" / ("all" + ext), tmp_path / ("img" + ext))
    with recio.ShardWriter("set", max_records=3) as writer:
        for key in range(7):
            writer.write(key, b"record %d" % key)
    return tmp_path


def _sequences(tmp_path):
    from recio.sequence import SequenceWriter

    with SequenceWriter(tmp_path / "seq.rec") as writer:
        for i in range(6):
            writer.write({"x": np.arange(3 + i, dtype=np.float32).reshape(-1, 1)}, key=i)
    return str(tmp_path / "seq.rec")


# -- what each object is, and the arguments of each of its public methods -------------------------
def _objects():
    """name -> (make an open object, the file its errors name, {method: args}). Every public
    method of the object's class must be listed (or in NOT_IO): a new one fails the test until
    it is."""
    import recio.mx.io
    import recio.mx.recordio as mx
    import recio.torch
    from recio.sequence import MinibatchSource, SequenceWriter
    from recio.sequence.cbf import CBFReader, CBFWriter
    from recio.sequence.ctf import CTFReader
    from recio.sequence.ctf_streams import read_header

    image_iter = dict(path_imgrec="img.rec", data_shape=(3, 8, 8), batch_size=2)
    return {
        "RecordReader": (lambda tmp: recio.RecordReader("img.rec"), "img.rec", {
            "read": (), "read_batch": (2,), "read_at": (0,), "view_at": (0,),
            "peek_at": (0, 4), "read_many_at": ([0],), "records_with_offsets": (),
            "__iter__": (), "iter_spans": (), "iter_offsets": (), "seek": (0,), "tell": (),
            "reset": (), "span_bytes": ([(8, 12)],), "evicted": ()}),
        "IndexedRecordReader": (lambda tmp: recio.IndexedRecordReader("img.rec"), "img.rec", {
            "__getitem__": (0,), "__len__": (), "__iter__": (), "__contains__": (0,),
            "keys": (), "values": (), "items": (), "get": (0,), "read_at": (0,),
            "peek_at": (0, 4), "read_many": ([0],), "__eq__": ({},)}),
        "RecordWriter": (lambda tmp: recio.RecordWriter("new.rec"), "new.rec", {
            "write": (b"x",), "tell": (), "flush": (), "hand_over": ()}),
        "IndexedRecordWriter": (lambda tmp: recio.IndexedRecordWriter("new.rec", "new.idx"),
                                "new.rec", {"write": (0, b"x"), "tell": (), "flush": (),
                                            "hand_over": ()}),
        "ShardWriter": (lambda tmp: recio.ShardWriter("out"), "out.manifest.json", {
            "write": (0, b"x"), "hand_over": ()}),
        "SequenceWriter": (lambda tmp: SequenceWriter("new.rec"), "new.rec", {
            "write": ({"x": np.zeros((2, 1), np.float32)},), "tell": (), "hand_over": ()}),
        "InputSplit": (lambda tmp: recio.InputSplit("img.rec"), "img.rec", {
            "read": (), "reset": (), "set_epoch": (1,), "count_records": (),
            "record_offsets": (), "records_with_offsets": (), "__iter__": ()}),
        "ShardReader": (lambda tmp: recio.ShardReader("set.manifest.json"), "set.manifest.json", {
            "read": (0, 0), "by_key": (0,), "__getitem__": (0,), "__iter__": (), "__len__": ()}),
        "RecordDataset": (lambda tmp: recio.torch.RecordDataset("img.rec", decode="raw"),
                          "img.rec", {"__getitem__": (0,), "__getitems__": ([0, 1],),
                                      "__len__": (), "read_record": (0,), "prefetch": ([],),
                                      "fingerprint": ()}),
        "MXRecordIO": (lambda tmp: mx.MXRecordIO("img.rec", "r"), "img.rec", {
            "read": (), "tell": (), "write": (b"x",)}),
        "MXRecordIO-w": (lambda tmp: mx.MXRecordIO("new.rec", "w"), "new.rec", {
            "write": (b"x",), "tell": (), "read": ()}),
        "MXIndexedRecordIO": (lambda tmp: mx.MXIndexedRecordIO("img.idx", "img.rec", "r"),
                              "img.rec", {"read_idx": (0,), "seek": (0,), "read": (),
                                          "tell": (), "write": (b"x",),
                                          "write_idx": (0, b"x")}),
        "MXIndexedRecordIO-w": (lambda tmp: mx.MXIndexedRecordIO("new.idx", "new.rec", "w"),
                                "new.rec", {"write_idx": (0, b"x"), "write": (b"x",),
                                            "tell": (), "read": (), "read_idx": (0,),
                                            "seek": (0,)}),
        "ImageBatchIter": (lambda tmp: recio.ImageBatchIter(**image_iter), "img.rec", {
            "next": (), "__next__": (), "reset": ()}),
        "mx.io.ImageRecordIter": (lambda tmp: recio.mx.io.ImageRecordIter(**image_iter),
                                  "img.rec", {"next": (), "__next__": (), "reset": (),
                                              "iter_next": (), "getdata": (), "getlabel": (),
                                              "getindex": (), "getpad": ()}),
        "CBFReader": (lambda tmp: CBFReader(GOLDEN_CBF), "float.cbf", {
            "read_chunk": (0,), "read_chunk_bytes": (0,), "chunk_sample_counts": (0,),
            "__iter__": (), "sequences_with_counts": (), "__len__": (), "validate": ()}),
        "CTFReader": (lambda tmp: CTFReader(GOLDEN_CTF, read_header(GOLDEN_CTF_HEADER)),
                      "data.ctf", {
            "read_chunk": (0,), "chunk_bytes": (0,), "chunk_sample_counts": (0,),
            "__iter__": (), "__len__": ()}),
        "CBFWriter": (lambda tmp: CBFWriter("new.cbf", CBFReader(GOLDEN_CBF).streams),
                      "new.cbf", {"write": (next(iter(CBFReader(GOLDEN_CBF))),), "tell": (),
                                  "end_chunk": (), "hand_over": ()}),
        "MinibatchSource": (lambda tmp: MinibatchSource(_sequences(tmp)), "seq.rec", {
            "next_minibatch": (4,), "restore_from_checkpoint": (
                {"format": "x", "version": 0},)}),
    }


#: public names that are no I/O on the file (the lifecycle, descriptions made when it was
#: opened, classmethods)
NOT_IO = {"close", "abort", "discard", "open", "describe", "chunk_range", "chunk_span", "get_checkpoint_state", "sweep_order", "all_parts",
          "provide_data", "provide_label", "stream_names", "position", "resident_samples"}
#: MXNet's reset() closes and opens the file again: it is how a closed object is reopened
REOPENS = {"MXRecordIO": {"reset"}, "MXRecordIO-w": {"reset"}, "MXIndexedRecordIO": {"reset"},
           "MXIndexedRecordIO-w": {"reset"}}
OBJECTS = sorted(_objects())
#: the objects that need torch (recio.torch's datasets)
TORCH_OBJECTS = {"RecordDataset"}


def _public_methods(obj):
    names = set()
    for name, value in inspect.getmembers(type(obj)):
        if name.startswith("_") or isinstance(inspect.getattr_static(type(obj), name),
                                               (property, classmethod, staticmethod)):
            continue
        if callable(value):
            names.add(name)
    return names


@pytest.mark.parametrize("name", OBJECTS)
def test_every_public_method_of_a_closed_object_raises_naming_its_file(files, name):
    if name in TORCH_OBJECTS:
        need("torch")
    make, path, methods = _objects()[name]
    obj = make(files)
    listed = set(methods) | NOT_IO | REOPENS.get(name, set())
    missing = sorted(_public_methods(obj) - listed)
    assert not missing, f"{name}: add {missing} to the table (with their arguments)"
    obj.close()
    obj.close()  # closing again does nothing
    for method, args in methods.items():
        with pytest.raises(ClosedError) as info:
            result = getattr(obj, method)(*args)
            if hasattr(result, "__iter__") and not isinstance(result, (bytes, str)):
                next(iter(result))  # an iterator, or a view (keys, items) that reads lazily
            pytest.fail(f"{name}.{method}{args} after close() gave {result!r:.80}")
        assert isinstance(info.value, ValueError)
        assert str(info.value).startswith("I/O on a closed "), (method, str(info.value))
        assert path in str(info.value), (method, str(info.value))


@pytest.mark.parametrize("name", OBJECTS)
def test_a_closed_object_refuses_to_be_pickled(files, name):
    if name in TORCH_OBJECTS:
        need("torch")
    obj = _objects()[name][0](files)
    obj.close()
    with pytest.raises(ClosedError, match="I/O on a closed .*" + _objects()[name][1]):
        pickle.dumps(obj)


def test_open_readers_still_pickle_and_writers_never_do(files):
    original = recio.IndexedRecordReader("img.rec")
    reader = pickle.loads(pickle.dumps(original))
    assert reader.keys() == original.keys() and reader[0] == original[0]
    with recio.RecordWriter("new.rec") as writer:
        with pytest.raises(TypeError, match="new.rec"):
            pickle.dumps(writer)


def test_a_closed_reader_keeps_what_it_counted(files):
    with recio.RecordReader("img.rec", on_error="skip") as reader:
        list(reader)
    assert reader.skipped_bytes == 0 and reader.errors == []


def test_mx_objects_reopen_as_mxnet_does(files):
    """``reset()`` and ``open()`` reopen a closed MXRecordIO; pickling (which closes it, as
    MXNet does) leaves it readable again in this process."""
    import recio.mx.recordio as mx

    record = mx.MXIndexedRecordIO("img.idx", "img.rec", "r")
    first = record.read_idx(0)
    copy = pickle.loads(pickle.dumps(record))
    assert record.read_idx(0) == first and copy.read_idx(0) == first
    record.close()
    with pytest.raises(ClosedError):
        record.read_idx(0)
    record.reset()
    assert record.read_idx(0) == first


# -- keys the .idx cannot carry ---------------------------------------------------------------
@pytest.mark.parametrize("key", ["a\tb", "a\nb", "a\r\nb", "a\rb", "", " a", "a ", "\ta",
                                 "x\n", "\u2028x", "\ud800"])
def test_keys_an_idx_cannot_carry_are_refused_at_write(tmp_path, key):
    import recio.mx.recordio as mx

    with recio.IndexedRecordWriter(tmp_path / "a.rec", tmp_path / "a.idx",
                                   key_type=str) as writer:
        writer.write("fine", b"first")
        with pytest.raises(RecordIOError, match="cannot be written to an .idx") as info:
            writer.write(key, b"x")
        assert key_text(key) in str(info.value) and "a.idx" in str(info.value)
        writer.write("after", b"second")  # the writer goes on: nothing was written for it
    with recio.IndexedRecordReader(tmp_path / "a.rec", key_type=str) as reader:
        assert reader.keys() == ["fine", "after"] and reader["after"] == b"second"
    record = mx.MXIndexedRecordIO(str(tmp_path / "m.idx"), str(tmp_path / "m.rec"), "w",
                                  key_type=str)
    with pytest.raises(RecordIOError, match="cannot be written to an .idx"):
        record.write_idx(key, b"x")
    record.close()


def test_a_key_whose_text_reads_back_as_another_is_refused(tmp_path):
    with recio.IndexedRecordWriter(tmp_path / "a.rec", tmp_path / "a.idx",
                                   key_type=float) as writer:
        writer.write(1.5, b"x")
        with pytest.raises(RecordIOError, match="nan"):
            writer.write(float("nan"), b"y")
    with recio.IndexedRecordReader(tmp_path / "a.rec", key_type=float) as reader:
        assert reader[1.5] == b"x"


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.text(max_size=12), min_size=1, max_size=6, unique=True))
def test_every_key_a_writer_accepts_reads_back_equal(tmp_path, keys):
    rec, idx = tmp_path / "h.rec", tmp_path / "h.idx"
    accepted = []
    with recio.IndexedRecordWriter(rec, idx, key_type=str) as writer:
        for key in keys:
            try:
                writer.write(key, key.encode("utf-8", "surrogatepass"))
            except RecordIOError as exc:
                assert key_text(key) in str(exc)
                continue
            accepted.append(key)
    if accepted:
        with recio.IndexedRecordReader(rec, key_type=str) as reader:
            assert reader.keys() == accepted
            for key in accepted:
                assert reader[key] == key.encode("utf-8")
    for key in keys:  # the rule: refused exactly when the line would not read back
        text_ok = key and "\t" not in key and "\n" not in key and "\r" not in key \
            and not key[0].isspace() and not key[-1].isspace()
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            text_ok = False
        assert (key in accepted) == bool(text_ok), key


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.integers(-(1 << 70), 1 << 70), min_size=1, max_size=6, unique=True))
def test_every_integer_key_reads_back_equal(tmp_path, keys):
    with recio.IndexedRecordWriter(tmp_path / "i.rec", tmp_path / "i.idx") as writer:
        for key in keys:
            writer.write(key, b"x")
    with recio.IndexedRecordReader(tmp_path / "i.rec") as reader:
        assert reader.keys() == keys


# -- threads -------------------------------------------------------------------------------------
@pytest.fixture
def many(tmp_path):
    """200,000 small records ``b"%d"`` under keys 0..n-1."""
    rec, idx = tmp_path / "many.rec", tmp_path / "many.idx"
    with recio.IndexedRecordWriter(rec, idx) as writer:
        for i in range(200_000):
            writer.write(i, b"%d" % i)
    return rec


def _in_threads(count, work):
    results, errors = [None] * count, [None] * count

    def run(k):
        try:
            results[k] = work(k)
        except BaseException as exc:  # collected for the test to look at
            errors[k] = exc
    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
        assert not t.is_alive()
    return results, errors


@pytest.mark.slow
def test_keyed_reads_are_safe_from_many_threads(many):
    reader = recio.IndexedRecordReader(many)
    plain = recio.RecordReader(many)
    offsets = reader.index.offsets

    def work(k):
        rng = np.random.default_rng(k)
        for key in rng.integers(0, 200_000, 20_000).tolist():
            assert reader[key] == b"%d" % key
            assert plain.read_at(int(offsets[key])) == b"%d" % key
            assert bytes(plain.view_at(int(offsets[key]))) == b"%d" % key
        return True
    results, errors = _in_threads(6, work)
    assert errors == [None] * 6 and all(results)


@pytest.mark.slow
def test_a_shared_sequential_read_never_hands_a_record_out_twice(many):
    """Threads calling ``read()`` on one reader: each call either gives the next record or, when
    another thread is inside ``read()`` at that moment, raises ``ConcurrentUseError``; so no
    record comes twice, and every one comes once when no call was refused."""
    reader = recio.RecordReader(many)

    def work(k):
        got = []
        while True:
            try:
                record = reader.read()
            except ConcurrentUseError as exc:
                assert "many.rec" in str(exc) and "two threads" in str(exc)
                return got, True
            if record is None:
                return got, False
            got.append(record)
    results, errors = _in_threads(4, work)
    assert errors == [None] * 4
    records = [r for got, _ in results for r in got]
    assert len(records) == len(set(records))  # never twice
    if not any(refused for _, refused in results):
        assert len(records) == 200_000


@pytest.mark.slow
def test_a_second_iteration_while_one_is_under_way_is_refused(many):
    with recio.RecordReader(many) as reader:
        first = iter(reader)
        assert next(first) == b"0"
        with pytest.raises(ConcurrentUseError, match="many.rec"):
            next(iter(reader))
        with pytest.raises(ConcurrentUseError):
            reader.read()
        assert next(first) == b"1"  # the first goes on
        first.close()
        assert reader.read() == b"2"  # and once it ended, read() continues where it was

        started, release = threading.Event(), threading.Event()

        def iterate():
            it = reader.records_with_offsets()
            next(it)
            started.set()
            release.wait(30)
            it.close()
        thread = threading.Thread(target=iterate)
        thread.start()
        started.wait(30)
        try:
            with pytest.raises(ConcurrentUseError):
                reader.read()
        finally:
            release.set()
            thread.join(30)
        assert reader.read() is not None


@pytest.mark.slow
def test_input_split_read_from_two_threads_is_refused_not_duplicated(many):
    split = recio.InputSplit(str(many))

    def work(k):
        got = []
        while True:
            try:
                record = split.read()
            except ConcurrentUseError:
                return got, True
            if record is None:
                return got, False
            got.append(record)
    results, errors = _in_threads(4, work)
    assert errors == [None] * 4
    records = [r for got, _ in results for r in got]
    assert len(records) == len(set(records))
    if not any(refused for _, refused in results):
        assert len(records) == 200_000
