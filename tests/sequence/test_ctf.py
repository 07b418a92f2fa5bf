"""CNTK Text Format: recio.sequence.ctf against CNTK 2.7's rules, `recio convert FILE.ctf ...`.

The values CNTK computes are checked three ways: a small reference copy of CNTK's number state
machine in this file (per token), the fixtures the real CNTK 2.7 produced
(tests/data/ctf/expected_cntk.json, made by tests/data/ctf/make_expected_cntk.py), and the
reader's own exact byte-by-byte path, which must agree with its fast path.
"""
import hashlib
import importlib.util
import json
import math
import os
import pathlib
import re
import struct
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recio.cli.convert import convert_cmd
from recio.errors import CTFError, OutputExistsError, RecordIOError
from recio.records.reader import RecordReader
from recio.sequence import Sparse, sample_counts, unpack_sequence
from recio.sequence import ctf, ctf_index
from recio.sequence.cbf import CBFReader
from recio.sequence.convert import convert, ctf_to_cbf, ctf_to_rec
from recio.sequence.corpora import open_corpus
from recio.sequence.ctf import CTFReader
from recio.sequence.ctf_streams import CTFStream, read_header
from recio.sequence.minibatch import MinibatchSource

DATA = pathlib.Path(__file__).parents[1] / "data"
EXPECTED = json.loads((DATA / "ctf" / "expected_cntk.json").read_text())
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

F3 = CTFStream("x", "F", 3)
L5 = CTFStream("y", "L", 5, is_sparse=True)


# -- helpers ------------------------------------------------------------------------------------

def cntk_number(token: str) -> float:
    """CNTK's TryReadRealNumber on one whole token, the double before the cast (a reference
    written from TextParser.cpp, independent of the library's two paths)."""
    m = re.fullmatch(r"([+-]?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?)(\d+))?", token)
    assert m and not re.search(r"\.[eE]", token), token
    sign, whole, frac, exp_sign, exp = m.groups()
    number = 0.0
    for c in whole:
        number = number * 10.0 + float(ord(c) - 48)
    coefficient = number
    if frac:
        number, divider = 0.0, 1.0
        for c in frac:
            number = number * 10.0 + float(ord(c) - 48)
            divider *= 10.0
        coefficient = coefficient + number / divider
    if sign == "-":
        coefficient = -coefficient
    if exp is None:
        return coefficient
    e = 0.0
    for c in exp:
        e = e * 10.0 + float(ord(c) - 48)
    try:
        scale = math.pow(10.0, -e if exp_sign == "-" else e)
    except OverflowError:
        scale = math.inf
    return coefficient * scale


def f32(x: float) -> np.float32:
    with np.errstate(over="ignore"):
        return np.float32(x)


def bits(a) -> list:
    return np.asarray(a).view(np.uint32 if np.asarray(a).dtype == np.float32 else np.uint64) \
        .tolist()


def write(tmp_path, text, name="data.ctf") -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("latin-1"))
    return str(path)


def read(path, streams=(F3, L5), **kw):
    return list(CTFReader(path, streams, **kw))


def pairs(sparse: Sparse) -> list:
    """Per sample ``[(index, value), ...]`` in stored order."""
    return [[(int(i), float(v)) for i, v in zip(sparse.indices[a:b], sparse.values[a:b])]
            for a, b in zip(sparse.indptr[:-1], sparse.indptr[1:])]


def same_sequences(a, b):
    """Two lists of sequences are equal: dtypes, shapes, values bit for bit, sparse order."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert list(x) == list(y)
        for name in x:
            u, v = x[name], y[name]
            if isinstance(u, Sparse):
                assert isinstance(v, Sparse) and u.dim == v.dim
                assert np.diff(u.indptr).tolist() == np.diff(v.indptr).tolist()
                assert u.indices.tolist() == v.indices.tolist()
                assert u.values.dtype == v.values.dtype and bits(u.values) == bits(v.values)
            else:
                assert u.dtype == v.dtype and u.shape == v.shape and bits(u) == bits(v)


@pytest.fixture
def exact_only(monkeypatch):
    """Send every sequence to the reader's exact byte-by-byte parser."""
    monkeypatch.setattr(ctf._ChunkParser, "_suspect",
                        lambda self, counts, expected: np.ones(self.n, dtype=bool))


def read_both(path, streams, monkeypatch, **kw):
    """The sequences by the fast path and by the exact path (which must agree), or the CTFError
    both raise (same line and offset)."""
    try:
        fast, fast_error = read(path, streams, **kw), None
    except CTFError as exc:
        fast, fast_error = None, exc
    with monkeypatch.context() as m:
        m.setattr(ctf._ChunkParser, "_suspect",
                  lambda self, counts, expected: np.ones(self.n, dtype=bool))
        try:
            slow, slow_error = read(path, streams, **kw), None
        except CTFError as exc:
            slow, slow_error = None, exc
    if fast_error or slow_error:
        assert fast_error is not None and slow_error is not None, (fast_error, slow_error)
        assert (fast_error.line, fast_error.offset, fast_error.message) == \
            (slow_error.line, slow_error.offset, slow_error.message)
        raise fast_error
    same_sequences(fast, slow)
    return fast


# -- the golden files (ctf2bin's example data) --------------------------------------------------

def test_golden_data_parses_to_the_manifest(golden):
    streams = read_header(golden / "cbf" / "header.txt")
    assert streams == [CTFStream("features", "F", 3), CTFStream("labels", "L", 5, True)]
    reader = CTFReader(golden / "cbf" / "data.ctf", streams)
    manifest = json.loads((golden / "cbf" / "manifest.json").read_text())
    assert reader.num_sequences == len(manifest["sequences"]) == 23
    assert reader.sizes.tolist() == [s["num_samples"] for s in manifest["sequences"]]
    assert reader.keys.tolist() == list(range(23))
    assert reader.skipped_sequences == 0 and not reader.line_mode
    for seq, want in zip(reader, manifest["sequences"]):
        assert seq["features"].dtype == np.float32
        assert bits(seq["features"]) == bits(np.array(want["features"], np.float32))
        assert pairs(seq["labels"]) == [[(i, float(np.float32(v))) for i, v in sample]
                                        for sample in want["labels"]]


def test_golden_convert_cli_gives_the_same_sequences_as_ctf2bin(golden, tmp_path, script):
    """`recio convert data.ctf out.cbf --header header.txt` (run as users run it): the same
    sequences and meta counts as ctf2bin's float.cbf, in full chunks instead of ctf2bin's
    one-sequence chunks."""
    out = tmp_path / "out.cbf"
    done = subprocess.run([*script("recio"), "convert", str(golden / "cbf" / "data.ctf"),
                           str(out), "--header", str(golden / "cbf" / "header.txt"),
                           "--chunk-size", "600", "--quiet"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "23 sequences" in done.stdout
    ours, theirs = CBFReader(out), CBFReader(golden / "cbf" / "float.cbf")
    assert ours.streams == theirs.streams
    a, b = list(ours.sequences_with_counts()), list(theirs.sequences_with_counts())
    assert [c for c, _ in a] == [c for c, _ in b]
    same_sequences([s for _, s in a], [s for _, s in b])
    assert ours.num_chunks == 6 and theirs.num_chunks == 20


def cbf_chunk_table(path):
    """``[(offset, sequences, samples)]`` read straight from the bytes of a CBF file."""
    raw = pathlib.Path(path).read_bytes()
    (header,) = struct.unpack_from("<q", raw, len(raw) - 8)
    magic, nchunks, nstreams = struct.unpack_from("<QII", raw, header)
    pos = header + 16
    for _ in range(nstreams):
        _, length = struct.unpack_from("<BI", raw, pos)
        pos += 5 + length + 5
    return [struct.unpack_from("<qII", raw, pos + 16 * i) for i in range(nchunks)]


@pytest.mark.parametrize("precision, item", [("float", 4), ("double", 8)])
def test_cbf_chunk_table_bytes(golden, tmp_path, precision, item):
    """The chunk table of the converted file, byte for byte: each sequence takes 4 bytes of meta
    count plus its streams (dense 4 + N*3 values, sparse 8 + nnz values and indices + N counts);
    a chunk closes before the sequence that would take it past 1000 bytes."""
    out = tmp_path / "out.cbf"
    result = CliRunner().invoke(convert_cmd, [str(golden / "cbf" / "data.ctf"), str(out),
                                              "--header", str(golden / "cbf" / "header.txt"),
                                              "--chunk-size", "1000", "--precision", precision,
                                              "--quiet"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((golden / "cbf" / "manifest.json").read_text())
    table, chunk, offset = [], [], 12
    for want in manifest["sequences"]:
        n, nnz = len(want["features"]), sum(len(s) for s in want["labels"])
        size = 4 + (4 + n * 3 * item) + (8 + nnz * (item + 4) + 4 * len(want["labels"]))
        if chunk and sum(s for s, _ in chunk) + size > 1000:
            table.append((offset, len(chunk), sum(k for _, k in chunk)))
            offset += sum(s for s, _ in chunk)
            chunk = []
        chunk.append((size, want["num_samples"]))
        if sum(s for s, _ in chunk) >= 1000:
            table.append((offset, len(chunk), sum(k for _, k in chunk)))
            offset += sum(s for s, _ in chunk)
            chunk = []
    if chunk:
        table.append((offset, len(chunk), sum(k for _, k in chunk)))
    assert cbf_chunk_table(out) == table
    reader = CBFReader(out)
    assert reader.streams[0].dtype == np.dtype(f"<f{item}")
    assert len(table) < 20


def test_double_precision_is_cntks_arithmetic_not_float(golden, tmp_path):
    """float64 values are CNTK's double computation: for some golden tokens that is one ulp
    away from Python's correctly rounded float()."""
    streams = read_header(golden / "cbf" / "header.txt")
    text = (golden / "cbf" / "data.ctf").read_text()
    tokens = re.findall(r"(?<= )-?\d+\.\d+(?= |\n)", text.split("|L")[0].split("|F")[1])
    reader = CTFReader(golden / "cbf" / "data.ctf", streams, dtype=np.float64)
    first = next(iter(reader))["features"]
    assert first.dtype == np.float64
    assert first[0].tolist() == [cntk_number(t) for t in tokens]
    differ = [t for t in set(re.findall(r"-?\d+\.\d+", text)) if cntk_number(t) != float(t)]
    assert differ, "the golden file should hold tokens where CNTK's double is not float()"
    got = {float(v) for seq in reader for v in seq["features"].ravel()}
    assert {cntk_number(t) for t in differ} & got
    assert not {float(t) for t in differ} & got - {cntk_number(t) for t in differ}
    out = tmp_path / "d.cbf"
    ctf_to_cbf(golden / "cbf" / "data.ctf", out, streams, dtype=np.float64)
    same_sequences(list(CBFReader(out).sequences_with_counts())[0][1:], [next(iter(reader))])


def test_ctf_to_rec_round_trip(golden, tmp_path):
    streams = read_header(golden / "cbf" / "header.txt")
    summary = convert(golden / "cbf" / "data.ctf", tmp_path / "seq.rec", streams=streams)
    assert summary["direction"] == "ctf->rec" and summary["sequences"] == 23
    want = read(golden / "cbf" / "data.ctf", streams)
    got = [unpack_sequence(r) for r in RecordReader(tmp_path / "seq.rec")]
    same_sequences(want, got)
    counts = sample_counts(tmp_path / "seq.rec")
    assert counts.tolist() == CTFReader(golden / "cbf" / "data.ctf", streams).sizes.tolist()
    back = convert(tmp_path / "seq.rec", tmp_path / "back.cbf")
    assert back["sequences"] == 23
    same_sequences(want, [s for _, s in CBFReader(tmp_path / "back.cbf").sequences_with_counts()])
    ctf_to_rec(golden / "cbf" / "data.ctf", tmp_path / "d.rec", streams, dtype=np.float64)
    assert unpack_sequence(next(iter(RecordReader(tmp_path / "d.rec"))))["features"].dtype \
        == np.float64


# -- the grammar --------------------------------------------------------------------------------

def test_dense_short_samples_are_zero_padded_and_empty_sparse_kept(tmp_path, monkeypatch):
    path = write(tmp_path, "0 |F 1 |L\n0 |F |L 3:1 1:2 3:4\n0 |F 1 2 3 |L 4:5\n")
    (seq,) = read_both(path, [F3, L5], monkeypatch)
    assert seq["x"].tolist() == [[1, 0, 0], [0, 0, 0], [1, 2, 3]]
    assert pairs(seq["y"]) == [[], [(3, 1.0), (1, 2.0), (3, 4.0)], [(4, 5.0)]]


def test_sample_counts_per_stream_are_not_aligned_to_lines(tmp_path, monkeypatch):
    path = write(tmp_path, "0 |F 1 2 3 |L 0:1\n0 |F 4 5 6\n1 |L 1:1 |F 7 8 9\n")
    reader = CTFReader(path, [F3, L5])
    assert reader.sizes.tolist() == [2, 1]
    assert reader.chunk_sample_counts(0).tolist() == [[2, 1], [1, 1]]
    seqs = read_both(path, [F3, L5], monkeypatch)
    assert [len(s["x"]) for s in seqs] == [2, 1]
    assert [s["y"].num_samples for s in seqs] == [1, 1]


def test_comments_unknown_names_and_delimiters(tmp_path, monkeypatch):
    """'|#' runs to the next '|'; unknown names and names longer than every alias are skipped;
    tabs, CR, control bytes and bytes >= 0x80 separate samples; DEL (0x7f) is text."""
    text = (b"0 |# note |F 1 2 3 |Extra 9 |L 1:1\r\n"
            b"0\t|F\t4\t5\t6\t|L 2:2\t\r\n"
            b"0 |F 7 8 9\x80|L 3:3 \x01\x1f\xff\n"
            b"1 |Unknown 1 |F 1 2 3 |L 0:1 |FF 1 |Ffff |#c|# \n")
    path = write(tmp_path, text)
    seqs = read_both(path, [F3, L5], monkeypatch)
    assert seqs[0]["x"].tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert pairs(seqs[0]["y"]) == [[(1, 1.0)], [(2, 2.0)], [(3, 3.0)]]
    assert pairs(seqs[1]["y"]) == [[(0, 1.0)]]
    with pytest.raises(CTFError) as info:
        read_both(write(tmp_path, b"0 |F 1 2 3 \x7f\n|L 0:1\n", "del.ctf"), [F3, L5],
                  monkeypatch)
    assert info.value.line == 1 and info.value.offset == 11


def test_id_grouping(tmp_path, monkeypatch):
    """Ids compare as numbers; a line without an id continues the sequence; an id that comes
    back later starts a new sequence with the same key."""
    path = write(tmp_path, "01 |F 1\n1 |F 2\n|F 3\n\t|F 4\n2 |F 5\n1 |F 6\n007 |F 7\n7|F 8\n")
    x = CTFStream("x", "F", 1)
    reader = CTFReader(path, [x])
    assert reader.keys.tolist() == [1, 2, 1, 7]
    assert reader.sizes.tolist() == [4, 1, 1, 2]
    seqs = read_both(path, [x], monkeypatch)
    assert [s["x"].ravel().tolist() for s in seqs] == [[1, 2, 3, 4], [5], [6], [7, 8]]
    big = write(tmp_path, "100000000000000001 |F 1\n100000000000000002 |F 2\n"
                          "18446744073709551615 |F 3\n018446744073709551615 |F 4\n", "big.ctf")
    reader = CTFReader(big, [x])
    assert reader.keys.tolist() == [100000000000000001, 100000000000000002, 2**64 - 1]
    assert reader.sizes.tolist() == [1, 1, 2]


def test_line_mode(tmp_path, monkeypatch):
    """A file starting with '|' (after whitespace) has one sequence per line, keyed by its
    0-based line number; ids on later lines are ignored."""
    path = write(tmp_path, "\n\n|F 1 2 3\n|F 4 5 6 |F 7 8 9\n5 |F 1 1 1\n")
    reader = CTFReader(path, [F3])
    assert reader.line_mode and reader.keys.tolist() == [2, 3, 4]
    assert reader.sizes.tolist() == [1, 1, 1]
    with pytest.raises(CTFError) as info:   # the second line has two samples, one line
        read_both(path, [F3], monkeypatch)
    assert info.value.line == 4


def test_bom_leading_whitespace_and_missing_final_newline(tmp_path, monkeypatch):
    path = write(tmp_path, b"\xef\xbb\xbf\n  \n\t0 |F 1 2 3\n0 |F 4 5 6\n1 |F 7 8 9")
    reader = CTFReader(path, [F3])
    assert reader.data_offset == 8 and reader.lines.tolist() == [3, 5]
    seqs = read_both(path, [F3], monkeypatch)
    assert [s["x"].tolist() for s in seqs] == [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9]]]


def test_crlf_gives_the_same_data_as_lf(tmp_path, monkeypatch):
    text = "0 |F 1 2 |L 0:1\n0 |F 3 |L\n1 |F 1e3 -2 3 |L 4:2 0:1\n"
    lf = read_both(write(tmp_path, text, "lf.ctf"), [F3, L5], monkeypatch)
    crlf = read_both(write(tmp_path, text.replace("\n", "\r\n"), "crlf.ctf"), [F3, L5],
                     monkeypatch)
    same_sequences(lf, crlf)


def test_numbers_follow_cntks_parser(tmp_path, monkeypatch):
    tokens = ["0", "-0", "+0", "5.", "-5.", "007", "1.281", "-1.281", "1e3", "1E-3", "1.5e+3",
              "3.4028235e38", "3.4028236e38", "1e39", "1.4e-45", "7e-46", "1e-400", "1e400",
              "0e400", "1.288191e+08", "123456789012345678901234", "0.1234567890123456789",
              "1" + "0" * 310, "9" * 400 + ".5"]
    x = CTFStream("x", "F", 1)
    path = write(tmp_path, "".join(f"|F {t}\n" for t in tokens))
    got = [s["x"][0, 0] for s in read_both(path, [x], monkeypatch)]
    assert bits(np.array(got)) == bits(np.array([f32(cntk_number(t)) for t in tokens]))
    assert np.signbit(got[1]) and math.isnan(got[18]) and got[17] == np.inf
    double = [s["x"][0, 0] for s in read_both(path, [x], monkeypatch, dtype=np.float64)]
    assert bits(np.array(double)) == bits(np.array([cntk_number(t) for t in tokens]))


def test_numbers_run_together(tmp_path, monkeypatch):
    """A number ends where the grammar does: '1-2' is two values, as in CNTK."""
    path = write(tmp_path, "0 |F 1-2 3+4\n0 |F 1e5-3 -0.\n")
    (seq,) = read_both(path, [CTFStream("x", "F", 4)], monkeypatch)
    assert seq["x"].tolist() == [[1, -2, 3, 4], [1e5, -3, -0.0, 0]]


def test_defines_mb_size(tmp_path, monkeypatch):
    """With a defines_mb_size stream a sequence's size is its lines holding that stream, other
    streams may hold more samples, and a sequence without the stream is left out (counted)."""
    text = ("0 |F 1 |L 0:1\n0 |F 2\n0 |F 3\n1 |F 4\n2 |F 5 |L 1:1\n2 |L 0:2 |F 6\n2 |F 7\n"
            "3 |L 1:3\n3 |L 0:4 |F 8 |F 9 |F 10\n")
    streams = [CTFStream("x", "F", 1), CTFStream("y", "L", 2, True, defines_mb_size=True)]
    path = write(tmp_path, text)
    reader = CTFReader(path, streams)
    assert reader.keys.tolist() == [0, 2, 3] and reader.skipped_sequences == 1
    assert reader.sizes.tolist() == [1, 2, 2]
    seqs = read_both(path, streams, monkeypatch)
    assert [len(s["x"]) for s in seqs] == [3, 3, 3]
    with pytest.raises(ValueError, match="only one stream may define"):
        CTFReader(path, [CTFStream("x", "F", 1, defines_mb_size=True), streams[1]])


def test_stream_twice_on_a_line_within_the_line_count(tmp_path, monkeypatch):
    path = write(tmp_path, "0 |F 1 |F 2 |L 0:1\n0 |L 1:1\n")
    (seq,) = read_both(path, [CTFStream("x", "F", 1), CTFStream("y", "L", 2, True)],
                       monkeypatch)
    assert seq["x"].ravel().tolist() == [1, 2]


def test_file_end_cases(tmp_path, monkeypatch):
    """Without a final newline: digits alone on the last line belong to the sequence before;
    an empty sparse sample is kept when its stream already has values in the sequence."""
    x, y = CTFStream("x", "F", 1), CTFStream("y", "L", 2, True)
    (seq,) = read_both(write(tmp_path, "0 |F 1\n5", "a.ctf"), [x], monkeypatch)
    assert seq["x"].tolist() == [[1.0]]
    (seq,) = read_both(write(tmp_path, "0 |L 0:1\n0 |L ", "b.ctf"), [y], monkeypatch)
    assert pairs(seq["y"]) == [[(0, 1.0)], []]


# -- errors -------------------------------------------------------------------------------------

X1 = [CTFStream("x", "F", 1)]
XY = [CTFStream("x", "F", 1), CTFStream("y", "L", 2, True)]

ERRORS = [
    # name, text, streams, line, offset, words in the message
    ("empty", b"", X1, 1, 0, "empty"),
    ("whitespace only", b" \n\t\n", X1, 3, 4, "only whitespace"),
    ("utf-16", "\ufeff0 |F 1\n".encode("utf-16-le"), X1, 1, 0, "UTF-16"),
    ("no first id", b"a |F 1\n", X1, 1, 0, "sequence id"),
    ("first id at eof", b"123", X1, 1, 0, "no sequence id"),
    ("id overflow", b"99999999999999999999 |F 1\n", X1, 1, 0, "overflows"),
    ("junk before bar", b"0 x |F 1\n", X1, 1, 2, "unexpected 'x'"),
    ("space before id", b"0 |F 1\n 1 |F 2\n", X1, 2, 8, "unexpected '1'"),
    ("empty name", b"0 | 1 |F 1\n", X1, 1, 3, "instead of a stream name"),
    ("space before #", b"0 |F 1 | # c\n", X1, 1, 8, "instead of a stream name"),
    ("dense too long", b"0 |F 1 2\n", X1, 1, 2, "more than its dim 1"),
    ("leading dot", b"0 |F .5\n", X1, 1, 5, "cannot start a number"),
    ("inf", b"0 |F inf\n", X1, 1, 5, "cannot start a number"),
    ("nan", b"0 |F nan\n", X1, 1, 5, "cannot start a number"),
    ("comma", b"0 |F 1,5\n", [CTFStream("x", "F", 2)], 1, 6, "','"),
    ("e alone", b"0 |F 1e\n", X1, 1, 7, "exponent 'e'"),
    ("e after period", b"0 |F 5.e3\n", [CTFStream("x", "F", 2)], 1, 7, "'e' cannot start"),
    ("exponent sign alone", b"0 |F 1e+\n", X1, 1, 8, "exponent sign"),
    ("sign alone", b"0 |F -\n", X1, 1, 6, "a sign"),
    ("sparse no value", b"0 |L 1:\n", XY[1:], 1, 7, "cannot start a number"),
    ("sparse no colon", b"0 |L 1\n", XY[1:], 1, 6, "expected ':'"),
    ("sparse space colon", b"0 |L 1 :1\n", XY[1:], 1, 6, "expected ':'"),
    ("sparse index dim", b"0 |L 2:1\n", XY[1:], 1, 5, "not below its dim 2"),
    ("sparse signed index", b"0 |L -1:1\n", XY[1:], 1, 5, "sparse index (digits)"),
    ("sparse index overflow", b"0 |L 99999999999999999999:1\n", XY[1:], 1, 5, "overflows"),
    ("stream absent", b"0 |F 1 |L 0:1\n1 |F 2\n", XY, 2, 14, "'y' have no sample"),
    ("blank line inside", b"0 |F 1\n\n0 |F 2\n", X1, 2, 7, "holds no sample"),
    ("trailing blank line", b"0 |F 1\n0 |F 2\n\n", X1, 3, 14, "holds no sample"),
    ("comment-only line", b"0 |F 1\n0 |# nothing\n", X1, 2, 7, "holds no sample"),
    ("unknown-only line", b"0 |F 1\n0 |G 2\n", X1, 2, 7, "holds no sample"),
    ("more samples than lines", b"0 |F 1 |F 2\n", X1, 1, 0, "2 samples but the sequence "
                                                           "has 1 lines"),
    ("fewer samples than lines", b"0 |F 1\n0 |L 0:1\n", XY, 1, 0, "has 2 lines but"),
    ("whitespace at eof", b"0 |F 1\n  ", X1, 1, 0, "has 2 lines but"),
    ("dangling name at eof", b"0 |F 1\n0 |F", X1, 2, 9, "ends inside the stream name"),
    ("sparse empty at eof", b"0 |L ", XY[1:], 1, 2, "before any index:value"),
    ("short dense at eof", b"0 |F 1 2", [CTFStream("x", "F", 3)], 1, 2, "undefined memory"),
    ("dense name at eof", b"0 |F ", X1, 1, 2, "without values"),
    ("line mode blank line", b"|F 1\n\n|F 2\n", X1, 2, 5, "holds no sample"),
    ("main stream twice", b"0 |F 1 |F 2 |L 0:1\n",
     [CTFStream("x", "F", 1, defines_mb_size=True), XY[1]], 1, 0, "lines with it"),
]


@pytest.mark.parametrize("name, text, streams, line, offset, words", ERRORS,
                         ids=[e[0] for e in ERRORS])
def test_errors_name_the_line_and_byte(tmp_path, monkeypatch, name, text, streams, line,
                                       offset, words):
    path = write(tmp_path, text)
    with pytest.raises(CTFError) as info:
        read_both(path, streams, monkeypatch)
    exc = info.value
    assert (exc.path, exc.line, exc.offset) == (path, line, offset), str(exc)
    assert words in exc.message
    assert isinstance(exc, RecordIOError)


def test_index_errors_come_at_open_and_parse_errors_at_read(tmp_path):
    with pytest.raises(CTFError, match="sequence id"):
        CTFReader(write(tmp_path, "x |F 1\n"), X1)
    reader = CTFReader(write(tmp_path, "0 |F 1\n1 |F 1 2\n", "b.ctf"), X1,
                       chunk_size_bytes=1)
    assert reader.num_chunks == 2
    assert reader.read_chunk(0)[0]["x"].tolist() == [[1.0]]
    with pytest.raises(CTFError, match="more than its dim"):
        reader.read_chunk(1)


def test_file_changed_or_truncated_after_indexing(tmp_path):
    path = write(tmp_path, "0 |F 1\n1 |F 2\n")
    reader = CTFReader(path, X1)
    with open(path, "r+b") as f:
        f.truncate(9)
    with pytest.raises(CTFError, match="changed since it was indexed"):
        reader.read_chunk(0)
    truncated = CTFReader(path, X1)   # "0 |F 1\n1 " : a sequence with no sample
    with pytest.raises(CTFError, match="'x' have no sample"):
        list(truncated)


def test_truncated_files(golden, tmp_path, monkeypatch):
    """A file cut anywhere parses (both paths agreeing; the sequences before the cut unchanged)
    or raises CTFError; a conversion that fails leaves no output."""
    text = (golden / "cbf" / "data.ctf").read_bytes()
    streams = read_header(golden / "cbf" / "header.txt")
    full = read(write(tmp_path, text, "full.ctf"), streams)
    outcomes = set()
    for cut in range(1, len(text), 89):
        path = write(tmp_path, text[:cut], "cut.ctf")
        try:
            seqs = read_both(path, streams, monkeypatch)
        except CTFError as exc:
            outcomes.add("error")
            assert exc.path == path and 0 <= exc.offset <= cut
            assert 1 <= exc.line <= text[:cut].count(b"\n") + 1
            with pytest.raises(CTFError):
                ctf_to_cbf(path, tmp_path / "cut.cbf", streams)
            assert not (tmp_path / "cut.cbf").exists()
            continue
        outcomes.add("parsed")
        assert len(seqs) <= len(full)
        same_sequences(seqs[:-1], full[:len(seqs) - 1])
    assert outcomes == {"error", "parsed"}


# -- stream definitions -------------------------------------------------------------------------

def test_header_file(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text("# name alias kind dim\n\nfeatures\tF\tdense\t40\nlabels L SPARSE 1000\n")
    assert read_header(path) == [CTFStream("features", "F", 40),
                                 CTFStream("labels", "L", 1000, is_sparse=True)]


@pytest.mark.parametrize("text, line, words", [
    ("a F dense\n", 1, "expected 4 fields"),
    ("a F dense 3\nb G packed 2\n", 2, "'dense' or 'sparse'"),
    ("a F dense three\n", 1, "not an integer"),
    ("a F dense 0\n", 1, "dim 0"),
    ("a F dense 3\nb F sparse 2\n", 2, "alias 'F' is already defined on line 1"),
    ("a F dense 3\na G sparse 2\n", 2, "name 'a' is already defined"),
    ("a |F dense 3\n", 1, "can never match"),
    ("\n# only comments\n", 1, "no stream definitions"),
])
def test_header_file_errors(tmp_path, text, line, words):
    path = tmp_path / "h.txt"
    path.write_text(text)
    with pytest.raises(CTFError) as info:
        read_header(path)
    assert info.value.line == line and words in info.value.message


def test_stream_definitions_are_checked():
    assert CTFStream.parse("x:F:dense:3") == CTFStream("x", "F", 3)
    assert CTFStream.parse("y:L:sparse:5") == L5
    for spec in ["x:F:dense", "x:F:packed:3", "x:F:dense:-1", "x::dense:3", "x:#F:dense:3",
                 "x:F G:dense:3"]:
        with pytest.raises(ValueError):
            CTFStream.parse(spec)
    with pytest.raises(ValueError, match="given twice"):
        CTFReader(DATA / "golden" / "cbf" / "data.ctf", [F3, CTFStream("z", "F", 2)])
    with pytest.raises(ValueError, match="float32 or float64"):
        CTFReader(DATA / "golden" / "cbf" / "data.ctf", [F3], dtype=np.float16)


# -- chunks and streaming -----------------------------------------------------------------------

def cntk_chunks(offsets, sizes, limit):
    """Index::AddSequence, sequence by sequence."""
    firsts, start, end = [], None, None
    for i, (offset, size) in enumerate(zip(offsets, sizes)):
        if start is None or (end - start) + size > limit:
            firsts.append(i)
            start = offset
        end = offset + size
    return firsts


@given(lines=st.lists(st.integers(1, 30), min_size=1, max_size=40),
       limit=st.integers(1, 400))
@SETTINGS
def test_chunks_follow_cntk(tmp_path, lines, limit):
    text = "".join(f"{i} |F {'1 ' * n}\n" for i, n in enumerate(lines))
    path = write(tmp_path, text)
    reader = CTFReader(path, [CTFStream("x", "F", 30)], chunk_size_bytes=limit)
    offsets = np.cumsum([0] + [len(f"{i} |F {'1 ' * n}\n") for i, n in enumerate(lines)])
    sizes = np.diff(offsets)
    firsts = cntk_chunks(offsets[:-1], sizes, min(limit, len(text)))
    assert [reader.chunk_range(i)[0] for i in range(reader.num_chunks)] == firsts


def test_chunks_with_left_out_sequences_count_sizes_as_cntk(tmp_path):
    """With defines_mb_size, the bytes of a left-out sequence are in the chunk's span but not
    added for the next sequence (CNTK's own arithmetic)."""
    text = "0 |F 1 |L 0:1\n1 |F 2\n2 |F 3 |L 0:1\n3 |F 4 |L 1:1\n"
    streams = [CTFStream("x", "F", 1), CTFStream("y", "L", 2, True, defines_mb_size=True)]
    path = write(tmp_path, text)
    lengths = [len(s) + 1 for s in text.split("\n")[:-1]]
    offsets = np.cumsum([0] + lengths)[[0, 2, 3]]
    sizes = [lengths[0], lengths[2], lengths[3]]
    for limit in range(10, 60):
        reader = CTFReader(path, streams, chunk_size_bytes=limit)
        assert [reader.chunk_range(i)[0] for i in range(reader.num_chunks)] == \
            cntk_chunks(offsets, sizes, limit)


def test_index_streams_in_blocks(tmp_path, monkeypatch):
    """The index pass reads small blocks (lines longer than a block, sequences across blocks)
    and finds what one big block finds."""
    rng = np.random.default_rng(3)
    lines = []
    for i in range(60):
        for _ in range(int(rng.integers(1, 4))):
            values = " ".join(str(v) for v in rng.integers(-9, 9, int(rng.integers(0, 40))))
            lines.append(f"{i if rng.random() < 0.8 else ''} |F {values} |L {i % 5}:1")
    path = write(tmp_path, "\n".join(lines) + "\n")
    streams = [CTFStream("x", "F", 40), L5]
    big = CTFReader(path, streams, chunk_size_bytes=300)
    monkeypatch.setattr(ctf_index, "_BLOCK", 37)
    small = CTFReader(path, streams, chunk_size_bytes=300)
    for name in ("offsets", "keys", "sizes", "counts", "lines", "_bounds"):
        assert getattr(small, name).tolist() == getattr(big, name).tolist(), name
    same_sequences(list(small), list(big))


# -- property tests -----------------------------------------------------------------------------

TOKEN = st.from_regex(r"[+-]?[0-9]{1,18}(\.[0-9]{0,18})?([eE][+-]?[0-9]{1,3})?",
                      fullmatch=True).filter(lambda t: not re.search(r"\.[eE]", t))
SPACE = st.sampled_from([" ", "  ", "\t", " \t"])


@st.composite
def ctf_files(draw):
    """(text, streams, expected sequences as lists): valid CTF in id mode, drawn formatting."""
    kinds = draw(st.lists(st.tuples(st.booleans(), st.integers(1, 6)), min_size=1,
                          max_size=3))
    aliases = draw(st.lists(st.sampled_from(["F", "L", "feat", "a1", "Q_z", "y"]),
                            min_size=len(kinds), max_size=len(kinds), unique=True))
    streams = [CTFStream(f"s{i}", a, dim, sparse) for i, (a, (sparse, dim)) in
               enumerate(zip(aliases, kinds))]
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text, expected, key = "", [], draw(st.integers(0, 5))
    for _ in range(draw(st.integers(1, 5))):
        key += draw(st.integers(1, 1000))
        nlines = draw(st.integers(1, 4))
        present = [[True] * nlines] + [draw(st.lists(st.booleans(), min_size=nlines,
                                                     max_size=nlines)) for _ in streams[1:]]
        for p in present[1:]:
            p[draw(st.integers(0, nlines - 1))] = True
        seq = {s.name: [] for s in streams}
        for line in range(nlines):
            parts = []
            for stream, p in zip(streams, present):
                if not p[line]:
                    continue
                if stream.is_sparse:
                    items = draw(st.lists(st.tuples(st.integers(0, stream.dim - 1), TOKEN),
                                          max_size=4))
                    seq[stream.name].append([(i, cntk_number(t)) for i, t in items])
                    body = "".join(draw(SPACE) + f"{i}:{t}" for i, t in items)
                else:
                    tokens = draw(st.lists(TOKEN, max_size=stream.dim))
                    values = [cntk_number(t) for t in tokens]
                    seq[stream.name].append(values + [0.0] * (stream.dim - len(values)))
                    body = "".join(draw(SPACE) + t for t in tokens)
                parts.append(f"|{stream.alias}{body}")
            if draw(st.booleans()):
                parts.insert(draw(st.integers(0, len(parts))), "|# a comment: 1 2")
            if draw(st.booleans()):
                parts.insert(draw(st.integers(0, len(parts))), "|unknown 1 2 x")
            order = draw(st.permutations(parts))
            prefix = str(key) if line == 0 or draw(st.booleans()) else ""
            if prefix and draw(st.booleans()):
                prefix = "0" + prefix
            text += prefix + draw(SPACE) + draw(SPACE).join(order) + \
                draw(st.sampled_from(["", " ", "\t"])) + newline
        expected.append(seq)
    return text, streams, expected


@pytest.mark.slow
@given(ctf_files())
@SETTINGS
def test_random_files_parse_to_cntks_values(tmp_path, monkeypatch, case):
    text, streams, expected = case
    path = write(tmp_path, text)
    for dtype, cast in ((np.float32, f32), (np.float64, float)):
        got = read_both(path, streams, monkeypatch, dtype=dtype)
        assert len(got) == len(expected)
        for seq, want in zip(got, expected):
            for stream in streams:
                data = seq[stream.name]
                if stream.is_sparse:
                    assert data.values.dtype == dtype
                    assert [[i for i, _ in s] for s in pairs(data)] == \
                        [[i for i, _ in s] for s in want[stream.name]]
                    assert bits(data.values) == bits(np.array(
                        [cast(v) for s in want[stream.name] for _, v in s], dtype))
                else:
                    assert data.dtype == dtype
                    assert bits(data) == bits(np.array(
                        [[cast(v) for v in row] for row in want[stream.name]], dtype)
                        .reshape(-1, stream.dim))


@given(st.binary(min_size=1, max_size=8), st.integers(0, 10**6), st.integers(0, 1))
@SETTINGS
def test_damaged_files_raise_ctferror_or_parse_the_same_both_ways(tmp_path, monkeypatch, junk,
                                                                  where, mode):
    """Bytes dropped into a valid file: the fast and exact paths give the same sequences or the
    same CTFError; nothing else escapes."""
    text = (DATA / "golden" / "cbf" / "data.ctf").read_bytes()[:600]
    text = text[:text.rfind(b"\n") + 1]
    at = where % len(text)
    damaged = text[:at] + junk + text[at + (len(junk) if mode else 0):]
    path = write(tmp_path, damaged)
    try:
        read_both(path, [CTFStream("features", "F", 3), CTFStream("labels", "L", 5, True)],
                  monkeypatch)
    except CTFError as exc:
        assert exc.path == path and exc.line >= 1 and 0 <= exc.offset <= len(damaged)


# -- what the real CNTK 2.7 read (tests/data/ctf/expected_cntk.json) ----------------------------

CASES = EXPECTED["cases"]


def case_streams(case):
    return [CTFStream(s[0], s[1], s[2], s[3] == "sparse", len(s) > 4 and s[4])
            for s in case["streams"]]


def densified(sparse: Sparse) -> list:
    """As CNTK's Python API shows sparse data: dense rows, duplicate indices summed."""
    out = np.zeros((sparse.num_samples, sparse.dim), np.float32)
    for row, sample in enumerate(pairs(sparse)):
        for i, v in sample:
            out[row, i] += np.float32(v)
    return out.view(np.uint32).tolist()


def assert_as_cntk_read(seqs, case, result):
    assert len(seqs) == len(result["sequences"])
    for seq, want in zip(seqs, result["sequences"]):
        for spec in case["streams"]:
            data = seq[spec[0]]
            if spec[3] == "dense":
                assert len(data) == want["counts"][spec[0]]
                assert bits(data) == want[spec[0]]
            else:
                assert data.num_samples == want["counts"][spec[0]]
                for ours, theirs in zip(densified(data), want[spec[0]]):
                    values = np.array(ours, np.uint32).view(np.float32)
                    if np.isfinite(values).all():   # CNTK's densifying spreads inf/NaN
                        assert ours == theirs


def test_the_fixtures_were_made_by_cntk():
    assert EXPECTED["made_by"].startswith("CNTK 2.7")
    assert sum("error" in c["cntk"] for c in CASES) >= 30
    assert sum("cbf" in c for c in CASES) >= 12


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_reads_as_cntk_2_7(tmp_path, monkeypatch, case):
    path = write(tmp_path, case["text"].encode("latin-1"))
    streams = case_streams(case)
    if "error" in case["cntk"]:
        with pytest.raises(CTFError):
            read_both(path, streams, monkeypatch)
        return
    assert_as_cntk_read(read_both(path, streams, monkeypatch), case, case["cntk"])
    main = next((s.name for s in streams if s.defines_mb_size), None)
    for size, want in case["cntk"]["minibatches"].items():
        source = MinibatchSource(CTFReader(path, streams), randomize=False,
                                 defines_mb_size=main)
        got = []
        while (mb := source.next_minibatch(int(size))) is not None:
            per_stream = mb.samples_per_stream
            got.append([mb.num_sequences] + [per_stream[s.name] for s in streams])
        assert got == want, size


@pytest.mark.parametrize("case", [c for c in CASES if "cbf" in c], ids=lambda c: c["name"])
def test_converted_cbf_is_read_by_cntk_as_the_ctf(tmp_path, case):
    """CNTK 2.7 read the .cbf `recio convert` writes (same SHA-256) exactly as it read the
    .ctf: values, sample counts, minibatches."""
    path = write(tmp_path, case["text"].encode("latin-1"))
    out = tmp_path / "out.cbf"
    args = [path, str(out), "--quiet", "--chunk-size", str(case["cbf"]["chunk_size"])]
    for s in case["streams"]:
        args += ["--stream", f"{s[0]}:{s[1]}:{s[3]}:{s[2]}"]
        if len(s) > 4 and s[4]:
            args += ["--defines-mb-size", s[0]]
    result = CliRunner().invoke(convert_cmd, args)
    assert result.exit_code == 0, result.output
    assert hashlib.sha256(out.read_bytes()).hexdigest() == case["cbf"]["sha256"], \
        "the converter's output changed: rerun tests/data/ctf/make_expected_cntk.py"
    assert case["cbf"]["cntk"] == case["cntk"]
    reader = CBFReader(out)
    seqs = [s for _, s in reader.sequences_with_counts()]
    assert_as_cntk_read(seqs, case, case["cbf"]["cntk"])
    same_sequences(seqs, read(path, case_streams(case)))
    assert [c for c, _ in reader.sequences_with_counts()] == \
        CTFReader(path, case_streams(case)).sizes.tolist()


# -- MinibatchSource and open_corpus ------------------------------------------------------------

def same_minibatches(a, b, size):
    """Draw minibatches of ``size`` from sources ``a`` and ``b`` until both end, checking that
    they are the same (ids, sample counts, both streams' values); returns how many."""
    count = 0
    while True:
        x, y = a.next_minibatch(size), b.next_minibatch(size)
        if x is None or y is None:
            assert x is None and y is None
            return count
        assert list(x.streams) == ["features", "labels"]
        assert x.ids.tolist() == y.ids.tolist() and x.num_samples == y.num_samples
        for name in ("features", "labels"):
            same_sequences([{name: s} for s in x[name]], [{name: s} for s in y[name]])
        count += 1


@pytest.mark.parametrize("randomize", [False, True])
def test_minibatch_source_over_ctf_equals_over_converted_cbf(golden, tmp_path, randomize):
    streams = read_header(golden / "cbf" / "header.txt")
    ctf_to_cbf(golden / "cbf" / "data.ctf", tmp_path / "d.cbf", streams, chunk_size_bytes=500)
    a = MinibatchSource(CTFReader(golden / "cbf" / "data.ctf", streams), randomize=randomize,
                        seed=3, max_sweeps=2)
    b = MinibatchSource(str(tmp_path / "d.cbf"), randomize=randomize, seed=3, max_sweeps=2)
    assert same_minibatches(a, b, 13) > 10


def test_open_corpus_needs_stream_definitions_for_ctf(golden, tmp_path):
    path = str(golden / "cbf" / "data.ctf")
    with pytest.raises(ValueError, match=r"data\.ctf: a CTF file does not name its streams.*"
                                         r"read_header"):
        open_corpus(path)
    with pytest.raises(ValueError, match="does not name its streams"):
        MinibatchSource(path)
    with pytest.raises(ValueError, match="does not name its streams"):
        ctf_to_cbf(path, tmp_path / "d.cbf", [])
    assert not (tmp_path / "d.cbf").exists()
    reader = CTFReader(path, read_header(golden / "cbf" / "header.txt"))
    assert open_corpus(reader) is reader
    assert reader.stream_names == ["features", "labels"]


@pytest.mark.parametrize("randomize", [False, True])
def test_minibatch_source_reads_a_ctf_path_directly(golden, tmp_path, randomize):
    """``MinibatchSource("data.ctf", streams=read_header(...))`` is the same source as one over a
    CTFReader; a glob of two copies reads them one after the other."""
    path = golden / "cbf" / "data.ctf"
    streams = read_header(golden / "cbf" / "header.txt")
    direct = MinibatchSource(str(path), streams=streams, randomize=randomize, seed=5)
    via = MinibatchSource(CTFReader(path, streams), randomize=randomize, seed=5)
    assert isinstance(direct.corpus, CTFReader)
    assert same_minibatches(direct, via, 17) > 3
    for copy in ("a.ctf", "b.ctf"):
        (tmp_path / copy).write_bytes(path.read_bytes())
    both = MinibatchSource(str(tmp_path / "*.ctf"), streams=streams, randomize=False)
    assert both.num_sequences == 2 * via.num_sequences
    assert both.num_samples == 2 * via.num_samples


def test_minibatch_source_takes_defines_mb_size_from_a_ctf_stream(golden):
    path = golden / "cbf" / "data.ctf"
    streams = read_header(golden / "cbf" / "header.txt")
    flagged = [CTFStream(s.name, s.alias, s.dim, s.is_sparse, s.name == "labels")
               for s in streams]
    by_flag = MinibatchSource(str(path), streams=flagged, randomize=False)
    by_arg = MinibatchSource(str(path), streams=streams, randomize=False,
                             defines_mb_size="labels")
    assert by_flag.defines_mb_size == "labels"
    assert by_flag.sizes.tolist() == by_arg.sizes.tolist()
    with pytest.raises(TypeError, match="mixes CTFStream"):
        MinibatchSource(str(path), streams=[streams[0], "labels"])


# -- the command line ---------------------------------------------------------------------------

def test_cli_ctf_to_rec_with_stream_options(golden, tmp_path):
    out = tmp_path / "d.rec"
    result = CliRunner().invoke(convert_cmd, [
        str(golden / "cbf" / "data.ctf"), str(out), "--stream", "features:F:dense:3",
        "--stream", "labels:L:sparse:5", "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["direction"] == "ctf->rec" and summary["sequences"] == 23
    assert (tmp_path / "d.idx").exists() and (tmp_path / "d.len").exists()


@pytest.mark.parametrize("args, words", [
    ([], "does not name its streams: give --header FILE"),
    (["--stream", "x:F:dense"], "NAME:ALIAS:dense|sparse:DIM"),
    (["--stream", "x:F:dense:3", "--defines-mb-size", "z"], "not one of the streams"),
    (["--stream", "features:F:dense:2", "--stream", "labels:L:sparse:5"],
     "line 1: byte 2: dense sample of stream 'features' has 3 values, more than its dim 2"),
])
def test_cli_ctf_errors_are_one_line_exit_2(golden, tmp_path, args, words):
    out = tmp_path / "o.cbf"
    result = CliRunner().invoke(convert_cmd, [str(golden / "cbf" / "data.ctf"), str(out),
                                              *args, "--quiet"])
    assert result.exit_code == 2 and words in result.output, result.output
    assert not out.exists() and not list(tmp_path.iterdir())


def test_cli_ctf_options_only_for_ctf(golden, tmp_path):
    result = CliRunner().invoke(convert_cmd, [str(golden / "cbf" / "float.cbf"),
                                              str(tmp_path / "a.rec"), "--precision", "double"])
    assert result.exit_code == 2 and "only for a .ctf source" in result.output
    result = CliRunner().invoke(convert_cmd, [str(golden / "cbf" / "data.ctf"),
                                              str(tmp_path / "a.rec"), "--header",
                                              str(golden / "cbf" / "header.txt"),
                                              "--chunk-size", "1K"])
    assert result.exit_code == 2 and "--chunk-size" in result.output


@pytest.mark.posix_only("makes a symlink, which Windows allows only with a privilege")
def test_outputs_never_replace_the_input_or_existing_files(golden, tmp_path):
    source = tmp_path / "data.ctf"
    source.write_bytes((golden / "cbf" / "data.ctf").read_bytes())
    streams = read_header(golden / "cbf" / "header.txt")
    existing = tmp_path / "old.cbf"
    existing.write_bytes(b"keep me")
    with pytest.raises(OutputExistsError):
        convert(source, existing, streams=streams)
    assert existing.read_bytes() == b"keep me"
    convert(source, existing, streams=streams, force=True)
    assert CBFReader(existing).num_sequences == 23
    link = tmp_path / "link.cbf"
    os.symlink(source, link)
    with pytest.raises(OutputExistsError, match="input"):
        convert(source, link, streams=streams, force=True)
    result = CliRunner().invoke(convert_cmd, [str(source), str(existing), "--header",
                                              str(golden / "cbf" / "header.txt"), "--quiet"])
    assert result.exit_code == 2 and "already exists" in result.output
    assert source.read_bytes() == (golden / "cbf" / "data.ctf").read_bytes()


def test_a_bad_file_leaves_no_output(tmp_path):
    path = write(tmp_path, "0 |F 1 2 3\n" * 50 + "1 |F 1 x\n")
    with pytest.raises(CTFError):
        ctf_to_cbf(path, tmp_path / "o.cbf", [F3], chunk_size_bytes=64)
    with pytest.raises(CTFError):
        ctf_to_rec(path, tmp_path / "o.rec", [F3])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.ctf"]


def test_progress_covers_the_input_bytes(golden, tmp_path):
    seen = []
    ctf_to_cbf(golden / "cbf" / "data.ctf", tmp_path / "o.cbf",
               read_header(golden / "cbf" / "header.txt"), progress=seen.append)
    assert sum(seen) == (golden / "cbf" / "data.ctf").stat().st_size and len(seen) >= 1
    assert all(n > 0 for n in seen)


# -- single number tokens, as the real CNTK 2.7 read them ------------------------------------------

TOKENS_CNTK = json.loads((DATA / "ctf" / "tokens_cntk.json").read_text())


def test_number_tokens_read_as_cntk_reads_them(tmp_path):
    """72 tokens (float32 overflow and subnormals, underflow, ties, 400-digit numbers, signs,
    and what CNTK refuses) in ``0 |F <token> 2``: recio gives CNTK's float32 bits, or refuses
    the file where CNTK does (tests/data/ctf/make_tokens_cntk.py recorded them)."""
    spec = importlib.util.spec_from_file_location("make_tokens_cntk",
                                                  DATA / "ctf" / "make_tokens_cntk.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)  # the token list and file layout CNTK was given
    TOKENS, token_file = maker.TOKENS, maker.token_file
    assert sorted(TOKENS) == sorted(TOKENS_CNTK)
    wrong = {}
    for i, token in enumerate(TOKENS):
        path = token_file(str(tmp_path), i, token)
        try:
            reader = CTFReader(path, [CTFStream("f", "F", 2)])
            seqs = [s for c in range(reader.num_chunks) for s in reader.read_chunk(c)]
            got = np.asarray(seqs[0]["f"], np.float32).reshape(-1).view(np.uint32).tolist()
        except CTFError:
            got = "refused"
        if got != TOKENS_CNTK[token]:
            wrong[token[:40]] = (got, TOKENS_CNTK[token])
    assert not wrong, wrong
    assert sum(v == "refused" for v in TOKENS_CNTK.values()) == 10
