"""recio.torch's ``decode=`` a callable: sequence records and raw payloads through the same
readers as images (RecordDataset, RecordIterableDataset, RecordSampler, DataLoader workers,
exact resume through torchdata's StatefulDataLoader)."""
import pickle

import numpy as np
import pytest

import recio
from conftest import START_METHODS
from recio.errors import RecordIOError, SequenceError
from recio.sequence import Sparse, SequenceWriter, unpack_sequence
from recio.sequence.corpora import RecordCorpus

try:
    import torch
    from torch.utils.data import DataLoader

    from recio.torch import RecordDataset, RecordIterableDataset, RecordSampler
except ImportError:  # the marker below reports it (a failure under CI=true)
    torch = None

try:
    from torchdata.stateful_dataloader import StatefulDataLoader
except ImportError:
    StatefulDataLoader = None

pytestmark = [pytest.mark.needs("torch"),
              # torchdata 0.11 on torch >= 2.9: "set_vital is deprecated" (harmless)
              pytest.mark.filterwarnings("ignore:.*set_vital.*:UserWarning")]
needs_torchdata = pytest.mark.needs("torch", "torchdata")  # torch first: left out, it skips

N = 29   # sequences
B = 3    # batch size


def _sequence(i, rng):
    n = int(rng.integers(1, 9))
    rows = rng.integers(0, 5, n + 1)
    indptr = np.concatenate([[0], np.cumsum(rows[:n])]).astype(np.int64)
    nnz = int(indptr[-1])
    return {"features": rng.random((n, 4), dtype=np.float32),
            "words": Sparse(indptr, rng.integers(0, 50, nnz).astype(np.int32),
                            rng.random(nnz, dtype=np.float32), 50),
            "label": np.array([i], dtype=np.int64)}


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    """seq.rec (+ .idx, .len): N sequence records, a dense, a sparse and a label stream."""
    rec = tmp_path_factory.mktemp("decode") / "seq.rec"
    rng = np.random.default_rng(0)
    with SequenceWriter(str(rec)) as w:
        for i in range(N):
            w.write(_sequence(i, rng))
    return str(rec)


@pytest.fixture(scope="module")
def payloads(tmp_path_factory):
    """raw.rec: a plain RecordWriter file (no .idx) of non-image bytes, some empty, some long,
    some holding the RecordIO magic."""
    rec = tmp_path_factory.mktemp("raw") / "raw.rec"
    rng = np.random.default_rng(1)
    data = [b"", b"x", (0xCED7230A).to_bytes(4, "little") * 3]
    data += [rng.bytes(int(rng.integers(0, 300))) for _ in range(40)]
    with recio.RecordWriter(str(rec)) as w:
        for d in data:
            w.write(d)
    return str(rec), data


# module-level functions: they pickle into spawned DataLoader workers
def label_of(payload):
    return int(unpack_sequence(payload)["label"][0])


def dense(payload):
    seq = unpack_sequence(payload)
    return torch.from_numpy(seq["features"].copy()), int(seq["label"][0])


def _same_sequence(got, want):
    assert list(got) == list(want)
    for name, value in want.items():
        if isinstance(value, Sparse):
            assert isinstance(got[name], Sparse) and got[name].dim == value.dim
            for a, b in zip(got[name][:3], value[:3]):
                np.testing.assert_array_equal(a, b)
        else:
            assert got[name].dtype == value.dtype
            np.testing.assert_array_equal(got[name], value)


def _corpus(rec):
    """What recio.sequence reads: every record of the file, in order, as RecordCorpus decodes."""
    corpus = RecordCorpus(rec)
    try:
        return [corpus.decode_at(int(off), row) for row, off in enumerate(corpus.offsets)]
    finally:
        corpus.close()


@pytest.mark.slow
def test_sequence_records_through_record_dataset(sequences):
    want = _corpus(sequences)
    ds = RecordDataset(sequences, decode=unpack_sequence)
    assert len(ds) == N
    for i in range(N):
        _same_sequence(ds[i], want[i])
    # keys restrict and order them as for images; transform applies to decode's sample
    picked = RecordDataset(sequences, keys=[7, 2, 20], decode=unpack_sequence,
                           transform=lambda seq: int(seq["label"][0]))
    assert [picked[i] for i in range(3)] == [7, 2, 20]


def test_sequence_records_through_record_iterable_dataset(sequences):
    want = _corpus(sequences)
    got = list(RecordIterableDataset(sequences, decode=unpack_sequence))
    assert len(got) == N
    for g, w in zip(got, want):
        _same_sequence(g, w)
    shuffled = RecordIterableDataset(sequences, decode=label_of, shuffle_buffer=6, seed=2)
    order = list(shuffled)
    assert sorted(order) == list(range(N)) and order != list(range(N))


@pytest.mark.parametrize("start_method", START_METHODS, indirect=True)
def test_sequence_records_in_dataloader_workers(sequences, start_method):
    """Two workers (forked or spawned: the dataset and its decode pickle) deliver every
    sequence once, as tensors of their own length."""
    loader = DataLoader(RecordDataset(sequences, decode=dense), batch_size=None, num_workers=2)
    got = {label: x for x, label in loader}
    want = _corpus(sequences)
    assert sorted(got) == list(range(N))
    for i in range(N):
        np.testing.assert_array_equal(got[i].numpy(), want[i]["features"])
    labels = [int(v) for b in DataLoader(RecordIterableDataset(sequences, decode=label_of),
                                         batch_size=B, num_workers=2) for v in b]
    assert sorted(labels) == list(range(N))


def test_raw_payloads_with_decode_bytes(payloads):
    rec, data = payloads
    assert data == list(recio.RecordReader(rec))
    ds = RecordDataset(rec, decode=bytes)  # no .idx: scanned, keys 0..n-1
    assert [ds[i] for i in range(len(ds))] == data
    assert list(RecordIterableDataset(rec, decode=bytes)) == data
    two = DataLoader(RecordIterableDataset(rec, decode=bytes), batch_size=4, num_workers=2)
    assert sorted(p for batch in two for p in batch) == sorted(data)  # bytes collate as lists
    # the image decoders read an IRHeader first, which these records do not have
    with pytest.raises(RecordIOError, match="key 0") as err:
        RecordDataset(rec)[0]
    assert err.value.path == rec


def test_a_callable_decode_error_names_the_record(sequences, payloads):
    rec, _ = payloads
    ds = RecordDataset(rec, decode=unpack_sequence)
    with pytest.raises(SequenceError, match="key 5") as err:
        ds[5]
    assert err.value.path == rec and err.value.offset == int(ds.offsets[5])
    with pytest.raises(SequenceError, match="of part 0/1") as err:
        list(RecordIterableDataset(rec, decode=unpack_sequence))
    assert err.value.path == rec and err.value.offset == 0

    def broken(payload):  # anything else passes as it is
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        RecordDataset(sequences, decode=broken)[0]


@pytest.mark.parametrize("decode", [5, None, b"tensor", ["raw"]])
def test_a_decode_neither_callable_nor_a_name_is_refused(sequences, decode):
    for make in (RecordDataset, RecordIterableDataset):
        with pytest.raises(TypeError, match="decode must be a callable bytes -> sample or one "
                                            "of .'tensor', 'numpy', 'pil', 'raw'."):
            make(sequences, decode=decode)


def test_unknown_decode_names_and_target_transform_are_refused(sequences):
    for make in (RecordDataset, RecordIterableDataset):
        with pytest.raises(ValueError, match="decode must be one of .*or a callable"):
            make(sequences, decode="jpeg")
        with pytest.raises(ValueError, match="target_transform"):
            make(sequences, decode=unpack_sequence, target_transform=int)


def test_datasets_with_a_callable_decode_pickle(sequences):
    mapped = pickle.loads(pickle.dumps(RecordDataset(sequences, decode=label_of)))
    assert [mapped[i] for i in range(N)] == list(range(N))
    stream = pickle.loads(pickle.dumps(RecordIterableDataset(sequences, decode=label_of)))
    assert list(stream) == list(range(N))


def _labels(batches):
    return [int(v) for b in batches for v in b]


@pytest.mark.slow
@needs_torchdata
@pytest.mark.parametrize("shuffle_buffer", [0, 5])
def test_iterable_resume_mid_epoch_with_a_callable_decode(sequences, shuffle_buffer):
    """Stop after 3 batches of two workers, resume with three: every sequence once."""
    def reader():
        return RecordIterableDataset(sequences, decode=label_of, shuffle_buffer=shuffle_buffer,
                                     seed=3)

    loader = StatefulDataLoader(reader(), batch_size=B, num_workers=2)
    it = iter(loader)
    before = _labels(next(it) for _ in range(3))
    saved = loader.state_dict()
    ds = reader()
    ds.load_state_dict([saved])
    after = _labels(StatefulDataLoader(ds, batch_size=B, num_workers=3))
    assert sorted(before + after) == list(range(N))
    # the same shape: the loader continues exactly the uninterrupted order
    whole = _labels(StatefulDataLoader(reader(), batch_size=B, num_workers=2))
    loader = StatefulDataLoader(reader(), batch_size=B, num_workers=2)
    loader.load_state_dict(saved)
    assert before + _labels(loader) == whole


@needs_torchdata
def test_sampler_resume_mid_epoch_with_a_callable_decode(sequences):
    data = RecordDataset(sequences, decode=label_of)
    whole = _labels(StatefulDataLoader(data, sampler=RecordSampler(data, seed=4), batch_size=B,
                                       num_workers=2))
    loader = StatefulDataLoader(data, sampler=RecordSampler(data, seed=4), batch_size=B,
                                num_workers=2)
    it = iter(loader)
    before = _labels(next(it) for _ in range(4))
    saved = loader.state_dict()
    loader = StatefulDataLoader(data, sampler=RecordSampler(data, seed=4), batch_size=B,
                                num_workers=2)
    loader.load_state_dict(saved)
    assert before + _labels(loader) == whole
    assert sorted(whole) == list(range(N))
