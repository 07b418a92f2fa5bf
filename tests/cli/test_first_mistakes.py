"""A newcomer's first mistakes with im2rec do not stick: each is one line naming the culprit and
what to type instead, exits with a status a script can test, and writes nothing that would make
the corrected command refuse. Every test runs the command as a user does (a subprocess)."""
import os
import shutil
import subprocess

import pytest

from recio.errors import OutputExistsError
from recio.image.lists import read_list
from recio.records.atomic import check_outputs

from conftest import GOLDEN

IMAGES = GOLDEN / "im2rec" / "images"


pytestmark = pytest.mark.slow  # every test here runs the commands many times or waits


def _jpeg(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(IMAGES / "cat" / "cat_0.jpg", path)


def _run(script, *args, cwd=None):
    return subprocess.run([*script("im2rec"), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def _one_error_line(proc):
    """The command's stderr is one 'Error: ...' line (no traceback); returns it."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    return lines[0]


def _class_folders(tmp_path):
    root = tmp_path / "photos"
    for name in ("cats/a.jpg", "cats/b.jpg", "dogs/c.jpg"):
        _jpeg(root / name)
    return root


# -- --list that finds nothing ---------------------------------------------------------------

def test_list_without_recursive_on_class_folders_writes_nothing_and_the_fix_runs(script,
                                                                                tmp_path):
    root = _class_folders(tmp_path)
    proc = _run(script, "P", "photos", "--list", cwd=tmp_path)
    assert proc.returncode == 1
    line = _one_error_line(proc)
    assert line.startswith("Error: photos: no image to list") and "add --recursive" in line
    assert "3 images in its sub-folders" in line and "nothing was written" in line
    assert sorted(os.listdir(tmp_path)) == ["photos"]  # no P.lst, no classes file, no temporary
    fixed = _run(script, "P", "photos", "--list", "--recursive", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert sorted(i.path for i in read_list(tmp_path / "P.lst")) == [
        "cats/a.jpg", "cats/b.jpg", "dogs/c.jpg"]
    assert sorted(os.listdir(root)) == ["cats", "dogs"]  # ROOT untouched


@pytest.mark.parametrize("files, args, hint", [
    (["a.webp", "b.WEBP", "c.gif"], [], "3 other files (2 .webp, 1 .gif): add --exts .webp,.gif"),
    (["sub/a.webp"], [], "its sub-folders hold 1 other file (1 .webp): add --recursive --exts "
                         ".webp"),
    (["sub/a.webp", "b.tif"], ["--recursive"], "but 2 other files"),
    ([], ["--recursive"], "the folder and its sub-folders hold no files"),
    (["notes"], [], "1 other file (1 without extension)"),
])
def test_list_that_finds_nothing_says_what_is_there(script, tmp_path, files, args, hint):
    root = tmp_path / "root"
    root.mkdir()
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x")
    proc = _run(script, tmp_path / "out", root, "--list", *args)
    assert proc.returncode == 1
    line = _one_error_line(proc)
    assert f"{root}: no image to list" in line and hint in line, line
    assert sorted(os.listdir(tmp_path)) == ["root"]


def test_list_json_mode_fails_the_same_way(script, tmp_path):
    _class_folders(tmp_path)
    proc = _run(script, "P", "photos", "--list", "--json", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == "" and "add --recursive" in proc.stderr


# -- packing that packs nothing ---------------------------------------------------------------

def _listing(folder):
    return sorted(os.listdir(folder))


@pytest.mark.parametrize("content", ["", "\n  \n\n"], ids=["empty", "blank-lines"])
def test_packing_an_empty_list_fails_and_writes_nothing(script, tmp_path, content):
    (tmp_path / "P.lst").write_text(content)
    proc = _run(script, "P", IMAGES, cwd=tmp_path)
    assert proc.returncode == 1
    line = _one_error_line(proc)
    assert "P.lst holds no line" in line and "nothing was written" in line
    assert _listing(tmp_path) == ["P.lst"]  # no .rec, .idx, .partial, journal or temporary


def test_an_empty_list_among_others_is_left_out_and_named(script, tmp_path):
    shutil.copy(GOLDEN / "im2rec" / "all.lst", tmp_path / "P_train.lst")
    (tmp_path / "P_test.lst").write_text("")
    proc = _run(script, "P", IMAGES, "--pass-through", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "warning: P_test.lst holds no line: skipped" in proc.stderr
    assert "packed 13 images" in proc.stdout
    assert _listing(tmp_path) == ["P_test.lst", "P_train.idx", "P_train.lst", "P_train.rec"]


def test_a_sharded_pack_of_an_empty_list_fails_too(script, tmp_path):
    (tmp_path / "P.lst").write_text("")
    proc = _run(script, "P", IMAGES, "--num-shards", "2", cwd=tmp_path)
    assert proc.returncode == 1 and "holds no line" in _one_error_line(proc)
    assert _listing(tmp_path) == ["P.lst"]


def test_a_list_of_space_separated_lines_says_why_and_writes_nothing(script, tmp_path):
    lines = [f"{i} 0.000000 {p}" for i, p in enumerate(["cat/cat_0.jpg", "dog/dog_0.jpg"] * 3)]
    (tmp_path / "P.lst").write_text("\n".join(lines[:5]) + "\n")
    proc = _run(script, "P", IMAGES, cwd=tmp_path)
    assert proc.returncode == 1
    line = _one_error_line(proc)
    assert "P.lst" in line and "no image could be packed (5 malformed lines; first, line 1: " \
        "fields must be separated by tabs, not spaces" in line
    assert _listing(tmp_path) == ["P.lst"]


def test_a_malformed_line_among_good_ones_is_named_with_its_reason(script, tmp_path):
    good = (GOLDEN / "im2rec" / "all.lst").read_text().splitlines(keepends=True)
    (tmp_path / "P.lst").write_text("".join(good[:3]) + "7,0,cat/cat_0.jpg\n"
                                    + "8 0.000000 dog/dog_0.jpg\n" + "".join(good[3:5]))
    proc = _run(script, "P", IMAGES, "--pass-through", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "packed 5 images, skipped 2 (2 malformed lines)" in proc.stdout
    assert "P.lst: 2 items skipped (first, line 4: fields must be separated by tabs, not " \
        "commas" in proc.stderr
    report = (tmp_path / "P.errors.tsv").read_text()
    assert "\n5\t-\t-\tfields must be separated by tabs, not spaces" in report  # its own reason


def test_a_list_saved_with_a_byte_order_mark_names_the_bom(script, tmp_path):
    """Notepad's and Excel's 'UTF-8 with BOM': the first line's index starts with U+FEFF. Its
    image is skipped, as MXNet's im2rec skips it, and the reason says what to do, not
    "must be an integer, not '\\ufeff0'"."""
    good = (GOLDEN / "im2rec" / "all.lst").read_text().splitlines(keepends=True)
    (tmp_path / "P.lst").write_text("".join(good[:4]), encoding="utf-8-sig")
    proc = _run(script, "P", IMAGES, "--pass-through", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "packed 3 images, skipped 1 (1 malformed line)" in proc.stdout
    assert "P.lst: 1 item skipped (first, line 1: the line starts with a byte-order mark (BOM" \
        in proc.stderr and "save the list as UTF-8 without BOM" in proc.stderr
    assert "ufeff" not in proc.stderr


def test_skip_counts_agree_in_number(script, tmp_path):
    good = (GOLDEN / "im2rec" / "all.lst").read_text().splitlines(keepends=True)
    (tmp_path / "P.lst").write_text("".join(good[:4]) + "x\t0\tcat/cat_0.jpg\n"
                                    + "99\t0\tnope.jpg\n")
    proc = _run(script, "P", IMAGES, "--pass-through", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "skipped 2 (1 malformed line, 1 missing)" in proc.stdout
    assert "packed 4 images" in proc.stdout


# -- MXNet's old boolean spellings ------------------------------------------------------------

def test_mxnet_equals_spellings_of_boolean_flags(script, tmp_path):
    new = _run(script, tmp_path / "new", IMAGES, "--list", "--recursive", "--no-shuffle")
    old = _run(script, tmp_path / "old", IMAGES, "--list=1", "--recursive=1", "--shuffle=0")
    assert new.returncode == old.returncode == 0, old.stderr
    assert (tmp_path / "old.lst").read_bytes() == (tmp_path / "new.lst").read_bytes() \
        == (GOLDEN / "im2rec" / "noshuffle.lst").read_bytes()
    shuffled = _run(script, tmp_path / "mx", IMAGES, "--list=True", "--recursive=true",
                    "--shuffle=1")
    assert shuffled.returncode == 0, shuffled.stderr
    assert (tmp_path / "mx.lst").read_bytes() == (GOLDEN / "im2rec" / "all.lst").read_bytes()
    # --list=0 means pack mode; --pass-through=1 stores the files' bytes, as --pass-through
    packed = _run(script, tmp_path / "mx", IMAGES, "--list=0", "--pass-through=1",
                  "--center-crop=0", "--pack-label=False")
    shutil.copy(tmp_path / "mx.lst", tmp_path / "ref.lst")
    plain = _run(script, tmp_path / "ref", IMAGES, "--pass-through")
    assert packed.returncode == plain.returncode == 0, packed.stderr
    assert (tmp_path / "mx.rec").read_bytes() == (tmp_path / "ref.rec").read_bytes()
    assert (tmp_path / "mx.idx").read_bytes() == (tmp_path / "ref.idx").read_bytes()
    assert "ignored" not in packed.stderr


def test_a_flag_with_another_value_is_a_usage_error(script, tmp_path):
    proc = _run(script, tmp_path / "x", IMAGES, "--list=yes please")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--list is a flag: write --list alone (or MXNet's --list=1 / --list=0)" in proc.stderr
    assert os.listdir(tmp_path) == []


# -- a mistyped PREFIX ------------------------------------------------------------------------

@pytest.mark.parametrize("typed, near", [
    ("data/trian", "did you mean data/train?"),
    ("data/train.rec", "did you mean data/train?"),
    ("dta/train", "did you mean data/train?"),
    ("data/tset", "did you mean data/test?"),
])
def test_a_mistyped_prefix_suggests_near_names(script, tmp_path, typed, near):
    (tmp_path / "data").mkdir()
    for name in ("train.lst", "test_train.lst", "test_val.lst"):
        shutil.copy(GOLDEN / "im2rec" / "all.lst", tmp_path / "data" / name)
    proc = _run(script, typed, IMAGES, cwd=tmp_path)
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert near in line, line
    assert _listing(tmp_path / "data") == ["test_train.lst", "test_val.lst", "train.lst"]


def test_a_prefix_given_as_a_file_name_is_told_to_drop_the_extension(script, tmp_path):
    """No list yet and PREFIX spelled data/train.rec: the hint's command uses data/train (it
    would otherwise make data/train.rec.lst)."""
    (tmp_path / "data").mkdir()
    proc = _run(script, "data/train.rec", IMAGES, cwd=tmp_path)
    assert proc.returncode == 2
    assert _one_error_line(proc) == (
        f"Error: data/train.rec: PREFIX names files without their extension: did you mean "
        f"data/train? (to make a list: im2rec data/train {IMAGES} --list --recursive)")
    assert _listing(tmp_path / "data") == []


def test_one_prefix_rule_in_list_and_pack_modes(script, tmp_path):
    """PREFIX names files without their extension in both modes; one ending in .lst names that
    one list: --list writes it (not s/train.lst.lst) and pack mode packs exactly it."""
    root = _class_folders(tmp_path)
    (tmp_path / "s").mkdir()
    made = _run(script, "s/train.lst", root, "--list", "--recursive", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert _listing(tmp_path / "s") == ["train.classes.tsv", "train.lst"]
    assert "-> s/train.lst (3), s/train.classes.tsv" in made.stderr
    shutil.copy(tmp_path / "s" / "train.lst", tmp_path / "s" / "train.lst.old.lst")
    packed = _run(script, "s/train.lst", root, cwd=tmp_path)  # that one list, named as given
    assert packed.returncode == 0, packed.stderr
    assert "im2rec: packing" not in packed.stderr
    assert packed.stdout.startswith("s/train.lst: packed 3 images")
    assert _listing(tmp_path / "s") == ["train.classes.tsv", "train.idx", "train.lst",
                                        "train.lst.old.lst", "train.rec"]
    # the same PREFIX without .lst: every list that starts with it, as always
    both = _run(script, "s/train", root, "--force", cwd=tmp_path)
    assert both.returncode == 0 and "packing 2 lists" in both.stderr, both.stderr


@pytest.mark.parametrize("prefix, options, says", [
    ("s/train.rec", [], "s/train.rec: PREFIX names files without their extension: did you "
                        "mean s/train? Nothing was written"),
    ("s/train.idx", ["--chunks", "2"], "did you mean s/train?"),
    ("s/train.lst", ["--train-ratio", "0.8"],
     "s/train.lst: PREFIX train.lst names one list, but these options write 2 (train_val.lst, "
     "train_train.lst), named after PREFIX without .lst: did you mean s/train? Nothing was "
     "written"),
    ("s/train.lst", ["--chunks", "3"], "write 3 (train_0.lst, train_1.lst, train_2.lst)"),
])
def test_a_list_prefix_that_names_other_files_is_refused_and_the_fix_runs(script, tmp_path,
                                                                          prefix, options,
                                                                          says):
    root = _class_folders(tmp_path)
    (tmp_path / "s").mkdir()
    proc = _run(script, prefix, root, "--list", "--recursive", *options, cwd=tmp_path)
    assert proc.returncode == 2
    assert says in _one_error_line(proc)
    assert _listing(tmp_path / "s") == []
    fixed = _run(script, "s/train", root, "--list", "--recursive", *options, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    packed = _run(script, "s/train", root, cwd=tmp_path)
    assert packed.returncode == 0, packed.stderr


@pytest.mark.parametrize("mode", [["--list", "--recursive"], []], ids=["list", "pack"])
def test_a_mistyped_root_suggests_near_folders(script, tmp_path, mode):
    _class_folders(tmp_path)
    shutil.copy(GOLDEN / "im2rec" / "all.lst", tmp_path / "P.lst")
    proc = _run(script, "P", "photo", *mode, cwd=tmp_path)
    assert proc.returncode == 2
    assert _one_error_line(proc) == "Error: ROOT photo: no such folder; did you mean photos?"
    assert _listing(tmp_path) == ["P.lst", "photos"]


def test_no_list_at_all_says_how_to_make_one(script, tmp_path):
    proc = _run(script, "data", "photos", cwd=tmp_path)
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert "did you mean" not in line
    assert "im2rec data photos --list --recursive" in line or "no such folder" in line


# -- packing a folder of lists ----------------------------------------------------------------

def test_every_list_is_named_before_packing_starts(script, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("split_train.lst", "split_val.lst", "split2_train.lst"):
        shutil.copy(GOLDEN / "im2rec" / "chunks_0.lst", data / name)
    proc = _run(script, "data/split", IMAGES, "--pass-through", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first, note = proc.stderr.splitlines()[:2]
    assert first == ("im2rec: packing 3 lists that start with data/split: "
                     "data/split2_train.lst, data/split_train.lst, data/split_val.lst")
    assert note.startswith("note: data/split2_train.lst also starts with data/split; to pack "
                           "without it, give a longer PREFIX (data/split_)")
    only = _run(script, "data/split_", IMAGES, "--pass-through", "--force", cwd=tmp_path)
    assert only.returncode == 0, only.stderr
    assert "packing 2 lists that start with data/split_: data/split_train.lst, " \
        "data/split_val.lst" in only.stderr and "note:" not in only.stderr
    folder = _run(script, "data/", IMAGES, "--pass-through", "--force", cwd=tmp_path)
    assert folder.returncode == 0, folder.stderr
    assert folder.stderr.splitlines()[0].startswith("im2rec: packing 3 lists that start with "
                                                    "data/:")


def test_one_list_named_exactly_by_its_prefix_gets_no_announcement(script, tmp_path):
    shutil.copy(GOLDEN / "im2rec" / "all.lst", tmp_path / "P.lst")
    proc = _run(script, "P", IMAGES, "--pass-through", cwd=tmp_path)
    assert proc.returncode == 0 and "im2rec: packing" not in proc.stderr


# -- --force in messages ----------------------------------------------------------------------

def test_a_refused_output_names_the_option_the_user_types(script, tmp_path):
    shutil.copy(GOLDEN / "im2rec" / "all.lst", tmp_path / "P.lst")
    (tmp_path / "P.rec").write_bytes(b"mine")
    proc = _run(script, "P", IMAGES, cwd=tmp_path)
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert line.endswith("P.rec: already exists; use --force to replace it")
    assert "force=True" not in line
    with pytest.raises(OutputExistsError, match="already exists; pass force=True to replace "
                                                "it$") as info:
        check_outputs([tmp_path / "P.rec"])
    assert info.value.for_command() == f"{tmp_path / 'P.rec'}: already exists; use --force " \
                                       "to replace it"


# -- PNG output: what --quality means and costs ------------------------------------------------

def test_png_quality_is_explained_and_the_slow_default_is_pointed_out(script, tmp_path):
    helped = _run(script, "--help")
    text = " ".join(helped.stdout.split())
    assert "With --encoding .png (lossless), the zlib compression level 0-9" in text
    assert "the default 95, mean 9" in text and "slowest" in text and "--quality 1" in text
    shutil.copy(GOLDEN / "im2rec" / "all.lst", tmp_path / "P.lst")
    slow = _run(script, "P", IMAGES, "--encoding", ".png", "--resize", "16", cwd=tmp_path)
    assert slow.returncode == 0, slow.stderr
    assert "note: --encoding .png with the default --quality 95 compresses at PNG level 9" \
        in slow.stderr
    level9 = (tmp_path / "P.rec").read_bytes()
    fast = _run(script, "P", IMAGES, "--encoding", ".png", "--resize", "16", "--quality", "1",
                "--force", cwd=tmp_path)
    assert fast.returncode == 0 and "note:" not in fast.stderr
    assert len((tmp_path / "P.rec").read_bytes()) > len(level9)  # level 1 compresses less
    quiet = _run(script, "P", IMAGES, "--encoding", ".png", "--resize", "16", "--force", "-q",
                 cwd=tmp_path)
    assert quiet.returncode == 0 and "note:" not in quiet.stderr
