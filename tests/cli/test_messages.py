"""Messages that lead somewhere: ``recio --help`` and the exit statuses it promises, numeric
options that say what they expect, unknown keyword arguments that suggest the name meant, and
a missing key that says what keys the file has. Commands run as users run them."""
import os
import re
import signal
import subprocess
import time

import click
import pytest
from click.testing import CliRunner

from conftest import as_in_a_terminal
from recio.cli.common import EXIT_DAMAGE, EXIT_INTERRUPTED, EXIT_OK, EXIT_STATUS_HELP, EXIT_USAGE
from recio.cli.main import SUBCOMMANDS, recio as recio_group
from recio.cli.termination import EXIT_TERMINATED


# -- recio --help ----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("columns", ["60", "80", "200"])
def test_recio_help_shows_every_command_summary_whole(script, columns):
    proc = subprocess.run([*script("recio"), "--help"], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": columns})
    assert proc.returncode == 0
    commands = proc.stdout.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    assert "..." not in commands
    flat = " ".join(commands.split())
    for name in SUBCOMMANDS:
        command = recio_group.get_command(click.Context(recio_group), name)
        first = command.get_short_help_str(limit=10_000)
        assert first.endswith(".") and f"{name} {first}" in flat, (name, flat)


@pytest.mark.slow
def test_the_exit_statuses_help_lists_are_the_ones_the_commands_use(script):
    proc = subprocess.run([*script("recio"), "--help"], capture_output=True, text=True)
    text = " ".join(proc.stdout.split())
    assert " ".join(EXIT_STATUS_HELP.split()) in text
    listed = [int(n) for n in re.findall(r"(?:^|; )(\d+) ", EXIT_STATUS_HELP.split(": ", 1)[1])]
    assert listed == [EXIT_OK, EXIT_DAMAGE, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED] \
        == [0, 1, 2, 130, 143]
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "commands.md")) as f:
        rules = " ".join(f.read().split())
    for status in ("130 interrupted (Ctrl-C)", "143 terminated (SIGTERM"):
        assert status in rules


def _big_rec(path, records=200, size=1 << 20):
    import recio

    blob = os.urandom(size)
    with recio.IndexedRecordWriter(path, os.path.splitext(path)[0] + ".idx") as w:
        for i in range(records):
            w.write(i, recio.pack(recio.IRHeader(0, float(i % 3), i, 0), blob))
    return path


def _written(folder):
    total = 0
    for entry in os.scandir(folder):
        try:
            total += entry.stat().st_size
        except FileNotFoundError:  # renamed meanwhile
            pass
    return total


@pytest.mark.slow
@pytest.mark.posix_only("sends SIGTERM and SIGINT")
@pytest.mark.parametrize("sig, status, said", [(signal.SIGTERM, 143, "Terminated (SIGTERM)."),
                                               (signal.SIGINT, 130, "Interrupted.")])
def test_a_stopped_command_exits_with_its_status_and_leaves_no_temporary(script, tmp_path, sig,
                                                                         status, said):
    """143 and 130, as the help says, for any command: its writer discards its temporary
    files (SIGTERM used to end the process where it stood, leaving them)."""
    rec = _big_rec(str(tmp_path / "big.rec"))
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([*script("recio"), "repack", rec, str(out / "x.rec"), "--shuffle",
                             "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_in_a_terminal)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline and _written(out) < (4 << 20):
        time.sleep(0.01)  # its temporary output holds records: it is writing
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    assert err.strip() == said
    assert os.listdir(out) == []


def test_im2rec_help_lists_the_same_exit_statuses():
    result = CliRunner().invoke(__import__("recio.cli.im2rec", fromlist=["x"]).im2rec_cmd,
                                ["--help"])
    text = " ".join(result.output.split())
    for status in ("130 interrupted (Ctrl-C)", "143 terminated (SIGTERM)"):
        assert status in text


# -- numeric options -------------------------------------------------------------------------

def _numeric_options():
    """(command name, click command, option) for every numeric option of recio and im2rec."""
    from recio.cli.im2rec import im2rec_cmd
    from recio.cli.numbers import Number, Size

    commands = [("im2rec", im2rec_cmd)] + [
        (name, recio_group.get_command(click.Context(recio_group), name)) for name in SUBCOMMANDS]
    found = []
    for name, command in commands:
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(param.type, (Number, Size)):
                found.append((name, command, param))
    return found


NUMERIC = _numeric_options()


def test_every_numeric_option_is_one_of_the_types_that_explain_themselves():
    names = {(name, p.opts[-1]) for name, _, p in NUMERIC}
    assert {("im2rec", "--resize"), ("im2rec", "--quality"), ("im2rec", "--train-ratio"),
            ("im2rec", "--shard-size"), ("convert", "--chunk-size"), ("show", "--label"),
            ("split", "--num-parts"), ("buckets", "--batch-size")} <= names
    for name, command, _ in NUMERIC:  # and no click number type is left
        for param in command.params:
            assert not isinstance(param.type, (click.types.IntParamType,
                                               click.types.FloatParamType)), (name, param.opts)


def _valid(param):
    from recio.cli.numbers import Number, Size

    if isinstance(param.type, Size):
        return "64K"
    if not isinstance(param.type, Number):
        return "out.png"  # show's -o
    low = param.type.low
    return str(low if low is not None else 1)


@pytest.mark.parametrize("name, command, param", NUMERIC,
                         ids=[f"{n}{p.opts[-1]}" for n, _, p in NUMERIC])
def test_a_numeric_option_given_a_word_says_what_it_expects(name, command, param):
    option = param.opts[-1]
    here = os.path.abspath(__file__)  # positional arguments that exist
    positional = [here, here] if name in ("im2rec", "convert", "repack") else [here]
    result = CliRunner().invoke(command, [option, "abc", *positional])
    assert result.exit_code == 2
    line = result.output.strip().splitlines()[-1]
    assert line.startswith(f"Error: Invalid value for '{option}'") or \
        line.startswith("Error: Invalid value for '") and f"'{option}'" in line, line
    assert "expected " in line and line.endswith(", got 'abc'"), line
    assert "valid integer" not in line and "valid float" not in line and "range" not in line
    # what it asks for is accepted
    required = [arg for p in command.params if isinstance(p, click.Option) and p.required
                and p is not param for arg in (p.opts[-1], _valid(p))]
    ctx = command.make_context(name, [option, _valid(param), *required, *positional])
    assert ctx.params[param.name] is not None


@pytest.mark.parametrize("args, says", [
    (["--resize", "abc"], "expected a whole number of pixels, 0 or more (0 keeps the size), "
                          "got 'abc'"),
    (["--resize", "-3"], "expected a whole number of pixels, 0 or more (0 keeps the size), "
                         "got -3"),
    (["--train-ratio", "2"], "expected a fraction from 0 to 1 (e.g. 0.8), got 2"),
    (["--color", "5"], "expected a colour mode: -1, 0 or 1 (1 colour, 0 greyscale, -1 as "
                       "stored), got 5"),
    (["--shard-size", "abc"], "expected a shard size such as 600 (bytes), 64K, 32MB, 32MiB or "
                              "50GB, got 'abc'"),
])
@pytest.mark.slow
def test_im2rec_numeric_mistakes_in_a_real_command(script, tmp_path, args, says):
    proc = subprocess.run([*script("im2rec"), str(tmp_path / "data"), str(tmp_path), *args],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == \
        f"Error: Invalid value for '{args[0]}': {says}"
    assert os.listdir(tmp_path) == []


# -- unknown keyword arguments ---------------------------------------------------------------

MX_ARGS = dict(data_shape=(3, 8, 8), batch_size=2)


@pytest.mark.parametrize("typed, meant", [("rand_crops", "rand_crop"), ("Shuffle", "shuffle"),
                                          ("batchsize", "batch_size"),
                                          ("path_imgidex", "path_imgidx"),
                                          ("mean_R", "mean_r")])
def test_mx_image_record_iter_suggests_the_parameter_meant(golden, typed, meant):
    import recio.mx as mx

    rec = str(golden / "im2rec" / "all.rec")
    args = dict(MX_ARGS, path_imgrec=rec)
    value = args.pop(meant, True if meant in ("rand_crop", "shuffle") else 0)
    if meant == "path_imgidx":
        value = rec[:-4] + ".idx"
    with pytest.raises(ValueError) as info:
        mx.io.ImageRecordIter(**args, **{typed: value})
    message = str(info.value)
    assert message.startswith(f"ImageRecordIter: unknown parameter {typed} (did you mean "
                              f"{meant}?); MXNet 1.9.1's ")
    assert "\n" not in message and "aug_seq, batch_size" not in message  # not all 64 names
    with mx.io.ImageRecordIter(**args, **{meant: value}) as it:  # the name meant works
        assert next(iter(it)).data[0].shape[0] == 2


def test_a_name_near_nothing_still_lists_every_parameter():
    import recio.mx as mx

    with pytest.raises(ValueError, match=r"unknown parameter facebook_aug; MXNet 1\.9\.1's "
                                         r"ImageRecordIter takes: aug_seq, batch_size"):
        mx.io.ImageRecordIter(path_imgrec="x.rec", facebook_aug=True, **MX_ARGS)


def test_mx_image_iter_suggests_its_own_and_the_augmenters_names():
    import recio.mx as mx

    with pytest.raises(ValueError, match=r"ImageIter: unknown parameter rand_crops \(did you "
                                         r"mean rand_crop\?\); besides its own"):
        mx.image.ImageIter(2, (3, 8, 8), path_imgrec="x.rec", rand_crops=True)
    with pytest.raises(ValueError, match=r"unknown parameter path_imgidex \(did you mean "
                                         r"path_imgidx\?\)"):
        mx.image.ImageIter(2, (3, 8, 8), path_imgrec="x.rec", path_imgidex="x.idx")


def _mx_calls():
    import numpy as np
    import recio.mx as mx

    return [
        (lambda **kw: mx.image.CreateAugmenter((3, 8, 8), **kw), "rand_crops", "rand_crop",
         True, "CreateAugmenter"),
        (lambda **kw: mx.io.NDArrayIter(np.zeros((4, 2), np.float32), **kw), "batchsize",
         "batch_size", 2, "NDArrayIter"),
        (lambda **kw: mx.gluon.data.DataLoader(mx.gluon.data.ArrayDataset([1, 2, 3]),
                                               batch_size=1, **kw), "num_worker",
         "num_workers", 0, "DataLoader"),
    ]


@pytest.mark.parametrize("index", range(3))
def test_mx_constructors_with_named_parameters_suggest_the_keyword_meant(index):
    call, typed, meant, value, owner = _mx_calls()[index]
    with pytest.raises(TypeError) as info:
        call(**{typed: value})
    assert str(info.value) == (f"{owner}() got an unknown keyword argument {typed} (did you "
                               f"mean {meant}?)")
    assert call(**{meant: value}) is not None


def test_gluon_image_record_dataset_suggests_flag(golden):
    import inspect

    import recio.mx as mx

    rec = str(golden / "im2rec" / "all.rec")
    with pytest.raises(TypeError, match=r"ImageRecordDataset\(\) got an unknown keyword "
                                        r"argument flags \(did you mean flag\?\)"):
        mx.gluon.data.vision.ImageRecordDataset(rec, flags=0)
    assert len(mx.gluon.data.vision.ImageRecordDataset(rec, flag=0)) > 0
    # the signature users see (help(), IDEs) is the real one
    assert "flag" in inspect.signature(mx.gluon.data.vision.ImageRecordDataset).parameters
    assert list(inspect.signature(mx.image.CreateAugmenter).parameters)[:2] == ["data_shape",
                                                                               "resize"]


def test_the_old_top_level_name_says_which_iterator_to_use():
    import recio

    with pytest.raises(AttributeError) as info:
        _ = recio.ImageRecordIter
    message = str(info.value)
    assert "recio.mx.io.ImageRecordIter" in message and "recio.ImageBatchIter" in message
    assert "batch.data[0].asnumpy()" in message
    assert not hasattr(recio, "ImageRecordIter")
    with pytest.raises(AttributeError, match=r"did you mean recio\.IndexedRecordReader\?"):
        _ = recio.IndexedRecordReadr


# -- a key the file does not hold ------------------------------------------------------------

@pytest.fixture
def im2rec_file(script, tmp_path):
    """A .rec packed by im2rec from a list whose ids run from 1 to 4,711 (20 images, shuffled):
    keys that are no record numbers, as im2rec writes them."""
    from PIL import Image

    images = tmp_path / "images"
    images.mkdir()
    rng = __import__("numpy").random.default_rng(0)
    ids = sorted(set(rng.choice(range(2, 4711), 18, replace=False).tolist()) | {1, 4711})
    order = rng.permutation(len(ids))
    lines = []
    for i in order:
        Image.new("RGB", (8, 8), (i * 10 % 255, 0, 0)).save(images / f"{ids[i]}.jpg")
        lines.append(f"{ids[i]}\t0\t{ids[i]}.jpg\n")
    (tmp_path / "a.lst").write_text("".join(lines))
    proc = subprocess.run([*script("im2rec"), str(tmp_path / "a"), str(images)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "a.rec", [ids[i] for i in order]


@pytest.mark.slow
def test_a_missing_key_says_what_keys_the_file_has(im2rec_file):
    import pickle

    import recio
    from recio.errors import MissingKeyError

    rec, keys = im2rec_file
    with recio.IndexedRecordReader(rec) as reader:
        with pytest.raises(KeyError) as info:
            reader[0]
        error = info.value
        assert isinstance(error, MissingKeyError) and error.args == (0,) and error.key == 0
        assert str(error) == (
            f"no record with key 0 in {rec}: its 20 keys are ids from 1 to 4,711 (as im2rec "
            f"writes them: each image's index in its .lst), not record numbers; the first "
            f"record's is {keys[0]}, and .keys() lists them in file order")
        # what it says to do works, and the mapping protocol is a mapping's
        assert reader.keys() == keys and reader[reader.keys()[0]] == reader[keys[0]]
        assert 0 not in reader and reader.get(0) is None and reader.get(0, "none") == "none"
        with pytest.raises(MissingKeyError, match="with key 9999 in"):
            reader.read_many([keys[0], 9999])
        with pytest.raises(MissingKeyError, match=r"key '1' in .*did you mean 1\?"):
            reader["1"]
        assert reader[1]
        again = pickle.loads(pickle.dumps(error))
        assert str(again) == str(error) and again.key == 0


def test_a_missing_key_of_a_file_keyed_by_record_number(tmp_path):
    import recio

    rec = str(tmp_path / "n.rec")
    with recio.RecordWriter(rec) as writer:
        for i in range(5):
            writer.write(b"%d" % i)
    with recio.IndexedRecordReader(rec, scan=True) as reader:  # keys 0..4, as MXNet's rec2idx
        with pytest.raises(KeyError, match=rf"^no record with key 5 in {re.escape(rec)}: its 5 "
                                           r"keys are the record numbers 0 to 4$"):
            reader[5]


@pytest.mark.slow
def test_mxnet_read_idx_says_the_same(im2rec_file):
    import recio.mx as mx

    rec, keys = im2rec_file
    record = mx.recordio.MXIndexedRecordIO(str(rec)[:-4] + ".idx", str(rec), "r")
    with pytest.raises(KeyError, match="its 20 keys are ids from 1 to 4,711"):
        record.read_idx(0)
    assert record.read_idx(keys[0])
    record.close()
