"""Image lists (.lst): byte-identical to MXNet's im2rec.py, and strict, located parse errors."""
import json
import os
import subprocess

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from recio.errors import ListFileError
from recio.image.list_folder import list_images, make_lists, normalize_exts, split_items
from recio.image.lists import ListItem, format_list_line, parse_list_line, read_classes, read_list
from recio.cli.im2rec import _mxnet_argv, im2rec_cmd

# golden file name(s) -> the manifest command that made them
CASES = {
    "all": ["all"],
    "split": ["split_train", "split_test", "split_val"],
    "chunks": ["chunks_0", "chunks_1"],
    "noshuffle": ["noshuffle"],
}


@pytest.fixture(scope="module")
def manifest(golden):
    with open(golden / "im2rec" / "manifest.json") as f:
        return json.load(f)


def _args(manifest, case, prefix, root):
    return [{"PREFIX": str(prefix), "ROOT": str(root)}.get(a, a)
            for a in manifest["commands"][case]["args"]]


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_lists_are_byte_identical_to_mxnet(case, manifest, golden, tmp_path):
    root = golden / "im2rec" / "images"
    result = CliRunner().invoke(im2rec_cmd, _args(manifest, case, tmp_path / case, root))
    assert result.exit_code == 0, result.output
    assert result.stdout == manifest["commands"][case]["stdout"]  # the folder -> label map
    for name in CASES[case]:
        assert (tmp_path / f"{name}.lst").read_bytes() == \
            (golden / "im2rec" / f"{name}.lst").read_bytes(), name
    written = sorted(p.name for p in tmp_path.iterdir())
    recursive = "--recursive" in manifest["commands"][case]["args"]
    classes = [f"{case}.classes.tsv"] if recursive else []
    assert written == sorted([f"{n}.lst" for n in CASES[case]] + classes)


@pytest.mark.slow
def test_console_script_list_mode(script, manifest, golden, tmp_path):
    root = golden / "im2rec" / "images"
    proc = subprocess.run([*script("im2rec"), *_args(manifest, "split", tmp_path / "split", root)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == manifest["commands"]["split"]["stdout"]
    for name in CASES["split"]:
        assert (tmp_path / f"{name}.lst").read_bytes() == \
            (golden / "im2rec" / f"{name}.lst").read_bytes()


def test_library_make_lists_matches_golden(golden, tmp_path):
    result = make_lists(tmp_path / "all", golden / "im2rec" / "images", recursive=True)
    assert result.mapping == [(".", 0), ("cat", 1), ("dog", 2), ("zebra", 3)]
    assert result.written == [(str(tmp_path / "all.lst"), 13)]
    assert read_classes(result.classes_path) == {0: ".", 1: "cat", 2: "dog", 3: "zebra"}
    assert (tmp_path / "all.lst").read_bytes() == (golden / "im2rec" / "all.lst").read_bytes()


def test_non_recursive_lists_only_root_files(golden, tmp_path):
    items, mapping = list_images(golden / "im2rec" / "images", recursive=False)
    assert items == [ListItem(0, (0.0,), "top_level.jpg")] and mapping == []


def test_extension_filter_is_case_insensitive_and_ignores_other_files(golden):
    items, _ = list_images(golden / "im2rec" / "images", recursive=True, exts=[".JPG"])
    paths = [item.path for item in items]
    assert "dog/notes.txt" not in paths and not any(p.endswith(".png") for p in paths)
    assert "cat/cat_3.JPG" in paths and "cat/cat_0.jpg" in paths and len(paths) == 7


def test_exts_forms(golden, tmp_path):
    root = str(golden / "im2rec" / "images")
    assert normalize_exts([".jpg,PNG", "jpeg", ".jpg"]) == (".jpg", ".png", ".jpeg")
    # MXNet's argparse form `--exts .jpg .png`, comma form, and repeated form are the same
    for exts in ([".png", ".jpeg"], [".png,.jpeg"]):
        argv = [str(tmp_path / "x"), root, "--list", "--recursive", "--no-shuffle", "--force",
                "--exts", *exts]
        result = CliRunner().invoke(im2rec_cmd, argv)
        assert result.exit_code == 0, result.output
        assert (tmp_path / "x.lst").read_text().count("\n") == 6
    argv = [str(tmp_path / "y"), root, "--list", "--recursive", "--exts", ".png", "--exts", ".jpeg"]
    assert CliRunner().invoke(im2rec_cmd, argv).exit_code == 0
    assert (tmp_path / "y.lst").read_text().count("\n") == 6


def test_old_boolean_option_spellings():
    assert _mxnet_argv(["p", "r", "--list", "True", "--recursive", "1", "--shuffle", "False"]) \
        == ["p", "r", "--list", "--recursive", "--no-shuffle"]
    assert _mxnet_argv(["--pack-label", "false", "--exts", ".jpg", ".png", "p", "r"]) \
        == ["--exts", ".jpg,.png", "p", "r"]


def test_format_list_line_is_mxnet_format():
    assert format_list_line(3, [1.0, -0.5], "a/b.jpg") == "3\t1.000000\t-0.500000\ta/b.jpg\n"
    assert format_list_line(7, 2, "x.png") == "7\t2.000000\tx.png\n"


@settings(max_examples=60, deadline=None)
@given(index=st.integers(0, 2 ** 64 - 1),
       labels=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=4),
       path=st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")),
                    min_size=1, max_size=20))
def test_format_parse_round_trip(index, labels, path):
    item = parse_list_line(format_list_line(index, labels, path))
    assert item.index == index and item.path == path.strip()
    assert item.labels == tuple(float("%f" % x) for x in labels)


@pytest.mark.parametrize("line, message", [
    ("12\tcat.jpg\n", "at least 3"),
    ("x\t1\tcat.jpg\n", "integer"),
    ("1.5\t1\tcat.jpg\n", "integer"),
    ("-1\t1\tcat.jpg\n", "outside"),
    ("3\tdog\tcat.jpg\n", "numbers"),
])
def test_malformed_line_names_file_and_line(tmp_path, line, message):
    lst = tmp_path / "bad.lst"
    lst.write_text("0\t0.000000\ta.jpg\n\n1\t1.000000\tb.jpg\n" + line)
    with pytest.raises(ListFileError) as info:
        list(read_list(lst))
    assert info.value.line == 4 and info.value.path == str(lst)
    assert message in str(info.value) and f"{lst}: line 4" in str(info.value)


def test_read_list_skips_blank_lines_and_strips_fields(tmp_path):
    lst = tmp_path / "ok.lst"
    lst.write_bytes(b"0\t1.000000\t2.5\t a b.jpg \r\n\n  \n5\t0\tc.png")
    assert list(read_list(lst)) == [ListItem(0, (1.0, 2.5), "a b.jpg"),
                                    ListItem(5, (0.0,), "c.png")]


def test_split_items_arithmetic():
    items = [ListItem(i, (0.0,), f"{i}.jpg") for i in range(10)]
    parts = dict(split_items(items, "p", chunks=3, train_ratio=0.5, test_ratio=0.25))
    # chunk size ceil(10/3) = 4: test int(4*.25)=1, train int(4*.5)=2, val the rest
    assert [i.index for i in parts["p_0_test.lst"]] == [0]
    assert [i.index for i in parts["p_0_train.lst"]] == [1, 2]
    assert [i.index for i in parts["p_0_val.lst"]] == [3]
    assert [i.index for i in parts["p_2_train.lst"]] == [9] and parts["p_2_val.lst"] == []
    more = dict(split_items(items[:2], "q", chunks=3))
    assert [len(v) for v in more.values()] == [1, 1, 0]  # empty chunks still get a file


def test_list_mode_cli_errors(tmp_path, golden):
    missing = CliRunner().invoke(im2rec_cmd, [str(tmp_path / "x"), str(tmp_path / "nope"),
                                              "--list"])
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    nofolder = CliRunner().invoke(im2rec_cmd, [str(tmp_path / "a" / "x"),
                                               str(golden / "im2rec" / "images"), "--list"])
    assert nofolder.exit_code == 2 and "does not exist" in nofolder.output
    assert not os.path.exists(tmp_path / "a")
