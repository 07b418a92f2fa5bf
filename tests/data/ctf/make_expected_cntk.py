"""Make expected_cntk.json: what the real CNTK 2.7 reads from each CTF case below.

Run it with a Python that has CNTK 2.7 (cntk 2.7 supports Python <= 3.6):

    /tmp/cntkpy tests/data/ctf/make_expected_cntk.py --recio-python .venv/bin/python

For every case it writes the case's bytes to a temporary folder and reads them with
``cntk.io.CTFDeserializer`` (randomize=False):

* pass 1, one sequence per minibatch: each stream's sample count and the dense values as float32
  bit patterns;
* pass 2, the whole file as one minibatch: each sparse stream densified (CNTK's Python API has
  no raw access to sparse data: ``as_sequences`` densifies, which sums duplicate indices and turns
  a row holding inf/NaN into NaNs; reading sparse data one minibatch at a time trips a CNTK bug,
  "Resize: Cannot resize the matrix because it is a view");
* for each size in the case's ``mb`` list, the minibatches CNTK makes: ``[sequences, samples of
  each stream]``;
* or the first line of the error CNTK raises.

With ``--recio-python``, each case CNTK accepts is also converted by ``recio convert case.ctf
case.cbf`` (that Python runs recio, chunks of 200 bytes) and the ``.cbf`` read back by
``cntk.io.CBFDeserializer`` the same way; its SHA-256 is recorded, so the test suite knows CNTK
read exactly the file recio writes.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# (name, text as latin-1 (one char per byte), streams [name, alias, dim, kind(, defines_mb_size)],
#  minibatch sizes)
CASES = [
    ("golden_like", "0 |F 1 2 3 |L 0:1.5 3:2\n0 |F 4 5 6 |L 1:0.25\n1 |F -1 -2 -3 |L 4:1\n"
     "2 |F 7 8 9 |L 2:3\n2 |F 1e3 1.5e-3 -0.5 |L 0:1\n2 |F 5. 007 +8 |L 3:-2.5\n",
     [["x", "F", 3, "dense"], ["y", "L", 5, "sparse"]], [1, 2, 4, 100]),
    ("streams_not_aligned", "0 |F 1 2 3 |L 0:1\n0 |F 4 5 6\n0 |F 7 8 9\n1 |F 1 1 1\n"
     "1 |L 2:2 |F 2 2 2\n",
     [["x", "F", 3, "dense"], ["y", "L", 5, "sparse"]], [1, 3, 5]),
    ("padding_and_empty", "0 |F 1 |L\n0 |F |L 1:1 1:2 0:3\n0 |F 1 2 |L 4:4 2:2\n1 |F|L\n",
     [["x", "F", 3, "dense"], ["y", "L", 5, "sparse"]], [2]),
    ("comments_unknown_delims", "0 |# a comment |F 1 2 3 |Extra 9 9 |L 1:1\r\n"
     "0\t|F\t4\t5\t6\t|L 2:2\t\r\n0 |F 7 8 9\x80|L 3:3 \x01\x1f\xff\n"
     "1 |Unknown 1 |F 1 2 3 |L 0:1 |#c|# \n",
     [["x", "F", 3, "dense"], ["y", "L", 5, "sparse"]], [1, 10]),
    ("ids", "01 |F 1\n1 |F 2\n|F 3\n\t|F 4\n2 |F 5\n1 |F 6\n007 |F 7\n7|F 8\n",
     [["x", "F", 1, "dense"]], [1, 2, 3]),
    ("line_mode", "|F 1 2 |L 1:1\n|F 3 4 |L 0:1\n5 |F 5 6 |L\n|L 1:1 |F 7 8\n",
     [["x", "F", 2, "dense"], ["y", "L", 2, "sparse"]], [1, 2]),
    ("line_mode_defines_mb_size", "|F 1 |L 0:1\n|F 2\n|G 3\n|L 1:1 |F 4 |F 5\n",
     [["x", "F", 1, "dense"], ["y", "L", 2, "sparse", True]], [1, 2]),
    ("digits_at_eof", "0 |F 1\n5", [["x", "F", 1, "dense"]], [1]),
    ("sparse_empty_at_eof", "0 |L 0:1\n0 |L ", [["y", "L", 2, "sparse"]], [1]),
    ("bom_leading_blank_no_final_newline", "\xef\xbb\xbf\n  \n\t0 |F 1 2\n0 |F 3 4\n1 |F 5 6",
     [["x", "F", 2, "dense"]], [1, 3]),
    ("numbers", "".join("|F %s\n" % t for t in [
        "0", "-0", "+0", "-0.0", "5.", "-5.", "007", "1.281", "-1.281", "0.1", "1e3", "1E3",
        "1e-3", "1.5e+3", "-1.5e-3", "3.4028235e38", "3.4028236e38", "1e39", "-1e39",
        "1.4e-45", "7e-46", "1e-400", "1e400", "0e400", "-0e400", "1.288191e+08",
        "123456789012345", "1234567890123456789", "0.12345678901234567890", "1e0000000000000003",
        "9999999999999999999999999999", "1" + "0" * 310, "1" + "0" * 310 + ".5", "2.2250738585072014e-308",
        "4.9e-324", "1.7976931348623157e308"]),
     [["x", "F", 1, "dense"]], []),
    ("concatenated_numbers", "0 |F 1-2 3+4\n0 |F 1e5-3 -0.\n",
     [["x", "F", 4, "dense"]], []),
    ("stream_twice_on_a_line", "0 |F 1 |F 2 |L 0:1\n0 |L 1:1\n",
     [["x", "F", 1, "dense"], ["y", "L", 2, "sparse"]], [1, 2]),
    ("defines_mb_size", "0 |F 1 |L 0:1\n0 |F 2\n0 |F 3\n1 |F 4\n2 |F 5 |L 1:1\n2 |L 0:2 |F 6\n"
     "2 |F 7\n3 |L 1:3\n3 |L 0:4 |F 8 |F 9 |F 10\n",
     [["x", "F", 1, "dense"], ["y", "L", 2, "sparse", True]], [1, 2, 3]),
    ("long_name_skipped", "0 |FF 1 2 |F 1 |Ffff\n", [["x", "F", 1, "dense"]], []),
    # what CNTK refuses
    ("err_empty", "", [["x", "F", 1, "dense"]], []),
    ("err_only_whitespace", " \n\t\n", [["x", "F", 1, "dense"]], []),
    ("err_utf16", "\xff\xfe0\x00 \x00|\x00F\x00", [["x", "F", 1, "dense"]], []),
    ("err_no_first_id", "a |F 1\n", [["x", "F", 1, "dense"]], []),
    ("err_first_id_at_eof", "123", [["x", "F", 1, "dense"]], []),
    ("err_junk_before_bar", "0 x |F 1\n", [["x", "F", 1, "dense"]], []),
    ("err_empty_name", "0 | 1 |F 1\n", [["x", "F", 1, "dense"]], []),
    ("err_space_before_hash", "0 |F 1 | # c\n", [["x", "F", 1, "dense"]], []),
    ("err_dense_too_long", "0 |F 1 2 3\n", [["x", "F", 2, "dense"]], []),
    ("err_leading_dot", "0 |F .5\n", [["x", "F", 1, "dense"]], []),
    ("err_inf", "0 |F inf\n", [["x", "F", 1, "dense"]], []),
    ("err_nan", "0 |F nan\n", [["x", "F", 1, "dense"]], []),
    ("err_comma", "0 |F 1,5\n", [["x", "F", 2, "dense"]], []),
    ("err_e_alone", "0 |F 1e\n", [["x", "F", 1, "dense"]], []),
    ("err_e_after_period", "0 |F 5.e3\n", [["x", "F", 2, "dense"]], []),
    ("err_exp_sign_alone", "0 |F 1e+\n", [["x", "F", 1, "dense"]], []),
    ("err_sign_alone", "0 |F -\n", [["x", "F", 1, "dense"]], []),
    ("err_sparse_no_value", "0 |L 3:\n", [["y", "L", 5, "sparse"]], []),
    ("err_sparse_no_colon", "0 |L 3\n", [["y", "L", 5, "sparse"]], []),
    ("err_sparse_space_colon", "0 |L 3 :1\n", [["y", "L", 5, "sparse"]], []),
    ("err_sparse_index_dim", "0 |L 5:1\n", [["y", "L", 5, "sparse"]], []),
    ("err_sparse_signed_index", "0 |L -1:1\n", [["y", "L", 5, "sparse"]], []),
    ("err_sparse_index_overflow", "0 |L 99999999999999999999:1\n",
     [["y", "L", 5, "sparse"]], []),
    ("err_stream_absent", "0 |F 1 |L 0:1\n1 |F 2\n",
     [["x", "F", 1, "dense"], ["y", "L", 2, "sparse"]], []),
    ("err_blank_line_inside", "0 |F 1\n\n0 |F 2\n", [["x", "F", 1, "dense"]], []),
    ("err_trailing_blank_line", "0 |F 1\n0 |F 2\n\n", [["x", "F", 1, "dense"]], []),
    ("err_comment_only_line", "0 |F 1\n0 |# nothing\n", [["x", "F", 1, "dense"]], []),
    ("err_unknown_only_line", "0 |F 1\n0 |G 2\n", [["x", "F", 1, "dense"]], []),
    ("err_more_samples_than_lines", "0 |F 1 |F 2\n", [["x", "F", 1, "dense"]], []),
    ("err_fewer_samples_than_lines", "0 |F 1\n0 |L 0:1\n",
     [["x", "F", 1, "dense"], ["y", "L", 2, "sparse"]], []),
    ("err_space_before_id", "0 |F 1\n 1 |F 2\n", [["x", "F", 1, "dense"]], []),
    ("err_delete_byte_is_text", "0 |F 1 \x7f\n", [["x", "F", 1, "dense"]], []),
    ("err_whitespace_at_eof", "0 |F 1\n  ", [["x", "F", 1, "dense"]], []),
    ("err_sparse_empty_at_eof", "0 |L ", [["y", "L", 2, "sparse"]], []),
    ("err_dangling_name_at_eof", "0 |F 1\n0 |F", [["x", "F", 1, "dense"]], []),
    ("err_line_mode_blank_line", "|F 1\n\n|F 2\n", [["x", "F", 1, "dense"]], []),
    ("err_id_overflow", "99999999999999999999 |F 1\n", [["x", "F", 1, "dense"]], []),
    ("err_main_stream_twice", "0 |F 1 |F 2 |L 0:1\n",
     [["x", "F", 1, "dense", True], ["y", "L", 2, "sparse"]], []),
]


def stream_defs(case_streams, cbf=False):
    from cntk.io import StreamDef, StreamDefs
    defs = {}
    for s in case_streams:
        name, alias, dim, kind = s[:4]
        main = len(s) > 4 and s[4]
        if cbf:
            defs[name] = StreamDef(field=name, shape=dim, is_sparse=kind == "sparse")
        else:
            defs[name] = StreamDef(field=alias, shape=dim, is_sparse=kind == "sparse",
                                   defines_mb_size=main)
    return StreamDefs(**defs)


def source(path, case_streams, cbf):
    from cntk.io import CBFDeserializer, CTFDeserializer, MinibatchSource
    kind = CBFDeserializer if cbf else CTFDeserializer
    return MinibatchSource(kind(path, stream_defs(case_streams, cbf)), randomize=False,
                           max_sweeps=1)


def read(path, case_streams, sizes, cbf=False):
    """What CNTK reads from ``path`` (see the module docstring)."""
    import cntk
    import numpy as np
    out = {"sequences": []}
    try:
        src = source(path, case_streams, cbf)
        while True:
            mb = src.next_minibatch(1)
            if not mb:
                break
            seq = {"counts": {}}
            for s in case_streams:
                m = mb[getattr(src.streams, s[0])]
                seq["counts"][s[0]] = m.num_samples
                if s[3] == "dense":
                    clone = m.data.deep_clone()      # keep no view of the reader's buffers
                    clone.__class__ = cntk.core.Value
                    seq[s[0]] = clone.as_sequences()[0].view(np.uint32).tolist()
            out["sequences"].append(seq)
            del mb
        sparse = [s for s in case_streams if s[3] == "sparse"]
        if sparse and out["sequences"]:
            src = source(path, case_streams, cbf)
            mb = src.next_minibatch(1 << 30)
            for s in sparse:
                var = cntk.sequence.input_variable(s[2], is_sparse=True)
                rows = mb[getattr(src.streams, s[0])].data.as_sequences(var)
                for seq, r in zip(out["sequences"], rows):
                    seq[s[0]] = r.toarray().astype(np.float32).view(np.uint32).tolist()
        out["minibatches"] = {}
        for size in sizes:
            src = source(path, case_streams, cbf)
            got = []
            while True:
                mb = src.next_minibatch(size)
                if not mb:
                    break
                first = mb[getattr(src.streams, case_streams[0][0])]
                got.append([first.num_sequences] +
                           [mb[getattr(src.streams, s[0])].num_samples for s in case_streams])
            out["minibatches"][str(size)] = got
    except Exception as exc:  # CNTK raises RuntimeError for what it refuses
        out = {"error": str(exc).split("\n")[0]}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recio-python", default=None,
                        help="a Python with recio installed, to convert each case to .cbf")
    parser.add_argument("--output", default=os.path.join(HERE, "expected_cntk.json"))
    args = parser.parse_args()
    import cntk
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text, case_streams, sizes in CASES:
            path = os.path.join(tmp, name + ".ctf")
            with open(path, "wb") as f:
                f.write(text.encode("latin-1"))
            result = {"name": name, "text": text, "streams": case_streams, "mb": sizes,
                      "cntk": read(path, case_streams, sizes)}
            if args.recio_python and "error" not in result["cntk"]:
                cbf = os.path.join(tmp, name + ".cbf")
                argv = [args.recio_python, "-m", "recio", "convert", path, cbf, "--quiet",
                        "--chunk-size", "200"]
                for s in case_streams:
                    argv += ["--stream", "%s:%s:%s:%d" % (s[0], s[1], s[3], s[2])]
                    if len(s) > 4 and s[4]:
                        argv += ["--defines-mb-size", s[0]]
                subprocess.run(argv, check=True)
                with open(cbf, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                result["cbf"] = {"sha256": digest, "chunk_size": 200,
                                 "cntk": read(cbf, case_streams, sizes, cbf=True)}
            results.append(result)
            print(name, "error" if "error" in result["cntk"] else "ok", file=sys.stderr)
    with open(args.output, "w") as f:
        json.dump({"made_by": "CNTK %s, %s" % (cntk.__version__, os.path.basename(__file__)),
                   "cases": results}, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
