"""``im2rec`` / ``recio im2rec``: MXNet's tools/im2rec.py command line, faster and safer."""
from __future__ import annotations

import os
import re
import sys
import time
from typing import Any, List, Optional, Sequence

import click

from recio.cli.common import (
    EXIT_DAMAGE,
    EXIT_INTERRUPTED,
    echo_json,
    fail,
    force_option,
    handle_errors,
    json_option,
    printable_output,
    progress,
    quiet_option,
)
from recio.cli.numbers import FRACTION, Number, Size
from recio.cli.termination import EXIT_TERMINATED, SigtermSeen, Terminated, sigterm_interrupts
from recio.errors import RecordIOError, plural
from recio.image.pixels.codec import DEFAULT_MAX_PIXELS
from recio.image.list_folder import DEFAULT_EXTS, make_lists, near_folders, normalize_exts
from recio.image.packing.executors import pack_threads_running
from recio.image.packing.paths import PackPaths
from recio.image.packing.prefix import PrefixLists
from recio.image.packing.progress import PackProgress
from recio.image.packing.settings import PackSettings
from recio.image.packing.worker import describe_skips
from recio.image.packing.pipeline import PackResult
from recio.image.packing.dispatch import pack_prefix_to
from recio.image.pixels.transform import RESIZE_MODES, ImageOptions
from recio.storage import is_url

_BOOL_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_FLAGS = ("--list", "--recursive", "--pass-through", "--center-crop", "--pack-label")
_EXT_TOKEN = re.compile(r"^\.[A-Za-z0-9]{1,8}$")


def _mxnet_argv(args: Sequence[str]) -> List[str]:
    """Accept MXNet's spellings click would reject.

    ``--exts .jpg .png`` (argparse ``nargs='+'``) becomes ``--exts .jpg,.png``. MXNet <= 1.1
    declared its boolean options ``type=bool``, and tutorials still write ``--list=1``,
    ``--recursive True``, ``--shuffle=0``: each becomes the flag (or nothing; ``--shuffle`` off
    is ``--no-shuffle``). A false value means off, as its writer meant (argparse's ``bool("0")``
    was True: that MXNet bug is not reproduced). Any other value is a usage error.
    """
    out: List[str] = []
    i = 0
    args = list(args)
    while i < len(args):
        arg = args[i]
        nxt = args[i + 1].lower() if i + 1 < len(args) else None
        name, eq, value = arg.partition("=")
        if eq and name in _FLAGS + ("--shuffle",):
            on = _BOOL_WORDS.get(value.lower())
            if on is None:
                raise click.UsageError(f"{name} is a flag: write {name} alone (or MXNet's "
                                       f"{name}=1 / {name}=0), not {arg!r}")
            if name == "--shuffle":
                out += [] if on else ["--no-shuffle"]
            elif on:
                out.append(name)
            i += 1
            continue
        if arg == "--exts" and i + 1 < len(args):
            exts = [args[i + 1]]
            i += 2
            while i < len(args) and _EXT_TOKEN.match(args[i]):
                exts.append(args[i])
                i += 1
            out += ["--exts", ",".join(exts)]
            continue
        if arg in _FLAGS and nxt in _BOOL_WORDS:
            if _BOOL_WORDS[nxt]:
                out.append(arg)
            i += 2
            continue
        if arg == "--shuffle":
            if nxt in _BOOL_WORDS:
                i += 1
                if not _BOOL_WORDS[nxt]:
                    out.append("--no-shuffle")
            i += 1
            continue
        out.append(arg)
        i += 1
    return out


class _MXNetCompatCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        try:
            converted = _mxnet_argv(args)
        except click.UsageError as exc:
            exc.ctx = ctx  # printed with the usage line, exit status 2
            raise
        return super().parse_args(ctx, converted)


_HELP = """Make image lists (--list) or pack the images of PREFIX*.lst into .rec/.idx.

\b
Same command line as MXNet's tools/im2rec.py, and the same files, byte for byte: the .lst
files, and the .rec/.idx (the same OpenCV decode, crop, bilinear resize and JPEG bytes;
--resize-mode antialias trades that for speed and resize quality):
  im2rec data/train images/ --list --recursive     # data/train.lst + folder -> label map
  im2rec data/train images/ --resize 256 --quality 95 --num-thread 4
  im2rec data/train images/ --resume                # finish an interrupted pack

\b
List mode walks ROOT (with --recursive, each folder holding images gets the next label,
printed as "folder label"), shuffles with MXNet's seed unless --no-shuffle, and writes
PREFIX.lst, or PREFIX_train/_val/_test.lst with ratios, PREFIX_<i>*.lst with --chunks.
Pack mode packs every PREFIX*.lst into a .rec and .idx of the same name, in list order.
PREFIX names files without their extension in both modes; one ending in .lst names that
one list (--list writes it, pack mode packs only it).
Malformed lines, missing files, paths outside ROOT (absolute, '..', symlinks: see
--allow-outside-root), FIFOs and devices, unreadable and undecodable images are skipped,
counted by cause and listed in PREFIX.errors.tsv (line, index, path, reason); --strict
makes that exit with status 1. A list or pack that finds (nearly) nothing fails with no
output: --list finding no image (it says what it found: sub-folders for --recursive, other
extensions for --exts), lists holding no line, no image packed, more than --max-missing of
the list missing (default 0.5), or the first 100 images all missing ("is ROOT right?").
Every list packed is named first when PREFIX matches more than PREFIX.lst. Output is written
under temporary names (.rec.partial, .pack.journal) and renamed when complete; an existing
.rec/.idx or .lst is replaced only with --force.

\b
MXNet's older spellings work too: --list=1, --recursive True, --shuffle=0 (the boolean
options of MXNet <= 1.1; 0/false means off) and --exts .jpg .png.

\b
Interrupted (Ctrl-C, SIGTERM, a kill, a lost Ray driver) or failed, a pack keeps its
progress beside its outputs: .rec.partial and .pack.journal, or for shards, URLs and Ray a
staging folder .recio-pack-NAME holding the finished parts (in the bucket for a URL PREFIX).
--resume continues it, from any process or machine that sees the outputs, and ends byte for
byte as an uninterrupted pack; finished parts are kept when their checksums verify. Running
the pack again without --resume is refused (--force starts over, deleting the progress), as
is a second pack of the same PREFIX while one runs (PREFIX.pack.lock names it).

\b
Also available as `recio im2rec`. Exit status: 0 done; 1 images skipped with --strict, or a
list or pack that found (nearly) nothing; 2 usage error, a refused output, an interrupted
pack in the way or one that is running; 130 interrupted (Ctrl-C); 143 terminated (SIGTERM).
"""


@click.command("im2rec", cls=_MXNetCompatCommand, help=_HELP,
               context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="recio")  # the same line as `recio --version`
@click.argument("prefix", type=click.Path())
@click.argument("root", type=click.Path())
@click.option("--list", "make_list", is_flag=True,
              help="Create image list(s) by walking ROOT instead of packing.")
@click.option("--exts", multiple=True, metavar="EXTS",
              help="Image extensions for --list, comma-separated or repeated "
                   "(--exts .jpg,.png or --exts .jpg --exts .png); case-insensitive. "
                   "[default: .jpeg,.jpg,.png]")
@click.option("--chunks", type=Number(int, 1, what="a whole number of chunks"), default=1, show_default=True,
              help="Cut the list into this many chunks.")
@click.option("--train-ratio", type=FRACTION, default=1.0, show_default=True,
              help="Fraction of each chunk for PREFIX_train.lst.")
@click.option("--test-ratio", type=FRACTION, default=0.0, show_default=True,
              help="Fraction of each chunk for PREFIX_test.lst.")
@click.option("--recursive", is_flag=True,
              help="Walk sub-folders; each folder with images gets its own label.")
@click.option("--no-shuffle", is_flag=True, help="Keep the walk order in the list.")
@click.option("--pass-through", is_flag=True,
              help="Store the image files' bytes untouched (no decode, resize or re-encode).")
@click.option("--resize", type=Number(int, 0, what="a whole number of pixels",
                                          note="(0 keeps the size)", metavar="PIXELS"), default=0, show_default=True,
              help="Resize the shorter side to this many pixels (0: keep the size).")
@click.option("--center-crop", is_flag=True, help="Crop the centred square before resizing.")
@click.option("--quality", type=Number(int, note="(JPEG quality 1-100; with --encoding .png the "
                                               "compression level 0-9)"), default=95, show_default=True,
              help="JPEG quality 1-100. With --encoding .png (lossless), the zlib compression "
                   "level 0-9; larger values, such as the default 95, "
                   "mean 9, as in MXNet: the smallest files and by far the slowest (at 256 px "
                   "about 8x the encode time of level 1, at 2000 px about 45x, for files 5-25% "
                   "smaller). --quality 1 packs PNGs several times faster.")
@click.option("--num-thread", type=Number(int, 1, what="a whole number of workers"), default=1, show_default=True,
              help="Number of workers decoding and encoding images; order is kept.")
@click.option("--color", type=Number(int, -1, 1, what="a colour mode", metavar="MODE",
                                        note="(1 colour, 0 greyscale, -1 as stored)"), default=1, show_default=True,
              help="1: colour (alpha dropped), 0: greyscale, -1: as stored.")
@click.option("--encoding", type=click.Choice([".jpg", ".png"]), default=".jpg",
              show_default=True, help="Format of the packed images.")
@click.option("--pack-label", is_flag=True,
              help="Store all labels of a line (flag = count) when it has several.")
@quiet_option
@json_option
@force_option
@click.option("--allow-outside-root", is_flag=True,
              help="Read .lst paths that resolve outside ROOT (absolute, '..', symlinks); "
                   "by default each such line is refused and listed in PREFIX.errors.tsv.")
@click.option("--max-missing", type=FRACTION, default=0.5, show_default=True,
              help="Fail (no output) when more than this share of the list is missing "
                   "under ROOT.")
@click.option("--strict", is_flag=True, help="Exit with status 1 if any image was skipped.")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted pack: from its last complete record, or for "
                   "shards, URLs and Ray from its finished parts (any engine, process or "
                   "machine); a finished one is left as it is.")
@click.option("--exif-transpose/--no-exif-transpose", default=None,
              help="Apply the EXIF orientation, or not. Default: as MXNet's im2rec (OpenCV's "
                   "imread), for --color 1 and 0, not for -1.")
@click.option("--max-pixels", type=Number(int, 1, what="a whole number of pixels",
                                             metavar="PIXELS"), default=None,
              help="Skip images declaring more pixels than this (decompression-bomb guard; "
                   "default 89478485, Pillow's).")
@click.option("--num-shards", type=Number(int, 1, what="a whole number of shards"), default=None,
              help="Write each list as a shard set of this many shards: PREFIX-00000.rec/.idx, "
                   "... and PREFIX.manifest.json, written last (see recio verify).")
@click.option("--shard-size", type=Size("a shard size"), default=None,
              help="Write shard sets whose .rec files hold at most SIZE bytes each "
                   "(e.g. 1GB, 512MiB): the list is packed in parts and the records cut "
                   "into shards in list order (with --engine ray, by the driver: one copy "
                   "of the records; --num-shards avoids it).")
@click.option("--checksums", is_flag=True,
              help="With shards: also write per-record CRC-32 sidecars (recio verify --deep).")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where the pack runs: on this machine (local), or as Ray tasks on a Ray "
                   "cluster (ray; pip install 'recio[ray]'): one task per shard of "
                   "--num-shards, or without it parts joined into PREFIX.rec. The files are "
                   "the same either way.")
@click.option("--ray-address", metavar="ADDRESS", default=None,
              help="With --engine ray: the cluster to use (auto, ray://HOST:10001; default "
                   "RAY_ADDRESS, else a local Ray instance on this machine).")
@click.option("--executor", type=click.Choice(["auto", "thread", "process"]), default="auto",
              show_default=True, help="Run --num-thread workers as threads or processes.")
@click.option("--resize-mode", type=click.Choice(RESIZE_MODES), default="mxnet",
              show_default=True,
              help="mxnet: decode at full size and resize with OpenCV's bilinear, as MXNet's "
                   "im2rec: the .rec is byte for byte MXNet's. antialias (the fast mode): "
                   "JPEGs decoded at a reduced DCT scale, then an area-average and bicubic "
                   "resize: no aliasing (+3 dB PSNR against an exact downscale) and faster on "
                   "large photos; pixels differ from MXNet's.")
@handle_errors
def im2rec_cmd(prefix: str, root: str, make_list: bool, exts: Sequence[str], chunks: int,
               train_ratio: float, test_ratio: float, recursive: bool, no_shuffle: bool,
               pass_through: bool, resize: int, center_crop: bool, quality: int,
               num_thread: int, color: int, encoding: str, pack_label: bool, quiet: bool,
               as_json: bool, force: bool, allow_outside_root: bool, max_missing: float,
               strict: bool, resume: bool, exif_transpose: Optional[bool],
               max_pixels: Optional[int], num_shards: Optional[int], shard_size: Optional[int],
               checksums: bool, engine: str, ray_address: Optional[str], executor: str,
               resize_mode: str) -> None:
    if is_url(root):
        if make_list:
            fail(f"--list walks a local folder; ROOT {root} is a URL")
    elif not os.path.isdir(root):
        near = [] if os.path.exists(root) else near_folders(root)
        fail(f"ROOT {root}: " + ("not a folder" if os.path.exists(root) else "no such folder")
             + (f"; did you mean {' or '.join(near)}?" if near else ""), code=2)
    if make_list:
        _list_mode(prefix, root, exts, chunks, train_ratio, test_ratio, recursive,
                   not no_shuffle, quiet, as_json, force)
        return

    if encoding == ".jpg" and not 1 <= quality <= 100:
        fail(f"--quality {quality} is outside 1-100 for JPEG encoding")
    if encoding == ".png" and not pass_through and not quiet and not as_json and \
            click.get_current_context().get_parameter_source("quality") \
            is click.core.ParameterSource.DEFAULT:
        click.echo("note: --encoding .png with the default --quality 95 compresses at PNG level "
                   "9 (as MXNet): the smallest files, but several times slower than --quality "
                   "1 (see im2rec --help, --quality)", err=True)
    options = ImageOptions(color=color, resize=resize, center_crop=center_crop,
                           encoding=encoding, quality=quality, exif_transpose=exif_transpose,
                           max_pixels=max_pixels or DEFAULT_MAX_PIXELS, resize_mode=resize_mode)
    if pass_through:
        ignored = [name for name, given in (
            ("--resize", resize != 0), ("--center-crop", center_crop),
            ("--quality", quality != 95), ("--color", color != 1),
            ("--encoding", encoding != ".jpg"),
            ("--exif-transpose/--no-exif-transpose", exif_transpose is not None),
            ("--max-pixels", max_pixels is not None), ("--resize-mode", resize_mode != "mxnet"))
            if given]
        if ignored:
            click.echo(f"warning: --pass-through stores the files untouched: "
                       f"{', '.join(ignored)} ignored", err=True)
    settings = PackSettings(options, pass_through=pass_through, pack_label=pack_label,
                            allow_outside_root=allow_outside_root, workers=num_thread,
                            executor=executor, resume=resume, force=force,
                            max_missing=max_missing, num_shards=num_shards,
                            shard_size=shard_size, checksums=checksums)
    if ray_address is not None and engine != "ray":
        fail("--ray-address goes with --engine ray")
    _pack_mode(prefix, root, settings, _ray_engine(ray_address) if engine == "ray" else None,
               strict, quiet, as_json)


def _ray_engine(address: Optional[str]) -> Any:
    try:
        from recio.ray import RayEngine, messages_to_stderr
    except ImportError as exc:
        fail(f"--engine ray: {exc}")
    messages_to_stderr()  # stdout is the summary or --json
    return RayEngine(address)


def _list_mode(prefix: str, root: str, exts: Sequence[str], chunks: int, train_ratio: float,
               test_ratio: float, recursive: bool, shuffle: bool, quiet: bool, as_json: bool,
               force: bool) -> None:
    ext_list = normalize_exts(exts) if exts else DEFAULT_EXTS
    if not ext_list:
        fail("--exts is empty; give extensions such as --exts .jpg,.png")
    folder = os.path.dirname(os.path.abspath(prefix))
    if not is_url(prefix) and not os.path.isdir(folder):
        fail(f"{folder}: the folder for the list files does not exist")
    start = time.monotonic()
    with progress(desc="listing", unit="file", quiet=quiet or as_json) as bar:
        result = make_lists(prefix, root, recursive=recursive, exts=ext_list, chunks=chunks,
                            train_ratio=train_ratio, test_ratio=test_ratio, shuffle=shuffle,
                            force=force, progress=bar.update)
    if as_json:
        echo_json({**result.to_dict(), "seconds": round(time.monotonic() - start, 3)})
        return
    for relpath, label in result.mapping:  # exactly what MXNet prints
        click.echo(f"{relpath} {label}")
    for warning in result.warnings():
        click.echo(f"warning: {warning}", err=True)
    listed = len(result.scan.items)
    if not quiet:
        lists = ", ".join(f"{_rel(path)} ({count})" for path, count in result.written)
        classes = f", {_rel(result.classes_path)}" if result.classes_path else ""
        skipped = result.scan.unlistable + result.ratio_dropped
        click.echo(f"listed {listed} images in {time.monotonic() - start:.2f} s"
                   + (f", {skipped} left out" if skipped else "")
                   + f" -> {lists}{classes}", err=True)


def _rel(path: str) -> str:
    if is_url(path):
        return path
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else path


def _pack_mode(prefix: str, root: str, settings: PackSettings, engine: Any, strict: bool,
               quiet: bool, as_json: bool) -> None:
    bars: list = []

    def progress_for(lst: str):
        bar = progress(desc=os.path.basename(lst), unit="img", quiet=quiet or as_json)
        bars.append((lst, bar))

        def report(done: int, total: int) -> None:
            if bar.total != total:
                bar.total = total
            bar.update(done - bar.n)
        return report

    def on_lists(found: PrefixLists) -> None:
        if not as_json:
            for line in _lists_lines(found):
                click.echo(line, err=True)

    results = pack_prefix_to(prefix, root, settings, engine=engine,
                             progress_for=progress_for, on_lists=on_lists)
    done: List[PackResult] = []
    term = SigtermSeen()
    try:
        with sigterm_interrupts(term):
            for result in results:
                bars[-1][1].close()
                done.append(result)
                if not as_json:
                    _print_result(_rel(result.lst_path), result, quiet)
    except KeyboardInterrupt as exc:
        if term.seen and not isinstance(exc, Terminated):
            # SIGTERM's Terminated, caught on its way by a library that raised a plain
            # KeyboardInterrupt instead (Ray's ray.get/ray.wait do): still a SIGTERM
            exc = Terminated()
        if bars:
            bars[-1][1].close()
            click.echo(f"{_interrupted(exc)}: {_kept(bars[-1][0])}", err=True)
            # said what happened: not handle_errors' "Interrupted." as well
            _exit_interrupted(EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED)
        if isinstance(exc, Terminated):
            _exit_interrupted(EXIT_TERMINATED)
        raise
    finally:
        for _, bar in bars:
            bar.close()
    if as_json:
        echo_json({"lists": [r.to_dict() for r in done]})
    failed = [r for r in done if r.skipped and not r.already_done]
    if strict and failed:
        total = sum(r.skipped for r in failed)
        fail(f"{total} image(s) could not be packed (--strict); see "
             + ", ".join(_rel(r.errors_path) for r in failed if r.errors_path), code=EXIT_DAMAGE)


def _exit_interrupted(code: int) -> None:
    """Exit with ``code`` after a stopped pack has said what it kept. A stopped pack waits for
    its worker threads to leave, but one stuck reading a file (or inside an image that takes
    longer than that wait) stays; were it inside OpenCV, Python's shutdown would end it by
    unwinding C++ frames, which aborts the process ("terminate called without an active
    exception", status -6) instead of exiting with ``code``. The outputs are closed by now, so
    then leave without that shutdown."""
    if pack_threads_running():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _lists_lines(found: PrefixLists) -> List[str]:
    """What im2rec says before packing: every list it will pack when that is not just
    PREFIX.lst, lists that only share PREFIX's start, and empty lists it leaves out."""
    lines = []
    names = [_rel(lst) for lst in found.lists]
    exact = found.prefix if is_url(found.prefix) else os.path.abspath(found.prefix)
    if len(names) > 1 or (names and exact not in (found.lists[0],
                                                  os.path.splitext(found.lists[0])[0])):
        lines.append(f"im2rec: packing {plural(len(names), 'list')} that "
                     f"{'starts' if len(names) == 1 else 'start'} with {found.prefix}: "
                     f"{', '.join(names)}")
    if found.others and len(found.others) < len(found.lists):
        own = f"{found.prefix}_" if any(
            os.path.basename(lst)[len(os.path.basename(found.prefix)):].startswith("_")
            for lst in found.lists) else None
        them = "it" if len(found.others) == 1 else "them"
        lines.append(f"note: {', '.join(_rel(lst) for lst in found.others)} also "
                     f"{'starts' if len(found.others) == 1 else 'start'} with {found.prefix}; "
                     f"to pack without {them}, give a longer PREFIX"
                     + (f" ({own})" if own else "") + f" or move {them} to another folder")
    for lst in found.empty:
        lines.append(f"warning: {_rel(lst)} holds no line: skipped (no .rec or .idx for it)")
    return lines


def _interrupted(exc: BaseException) -> str:
    return "Terminated (SIGTERM)" if isinstance(exc, Terminated) else "Interrupted"


def _kept(lst: str) -> str:
    """What an interrupted pack of ``lst`` kept, and how to go on."""
    paths = PackPaths.of(lst)
    parts = PackProgress(paths.staging)
    try:
        saved = parts.job()
    except (OSError, RecordIOError):
        saved = None
    if saved is not None:
        return (f"the finished parts of {_rel(lst)} are kept ({parts.done_count()} in "
                f"{_rel(parts.folder)}); rerun with --resume to continue")
    if not is_url(lst) and paths.has_partial():
        return f"the partial output of {_rel(lst)} is kept; rerun with --resume to continue"
    return f"nothing of {_rel(lst)} was written; run the command again"


def _print_result(name: str, result: PackResult, quiet: bool) -> None:
    """One line per packed list, and warnings on stderr for what was skipped or dropped."""
    outputs = _rel(result.rec_path) if result.idx_path is None \
        else f"{_rel(result.rec_path)}, {_rel(result.idx_path)}"
    if result.already_done:
        click.echo(f"{name}: already packed ({outputs}); nothing to resume")
        return
    rate = (result.packed + result.skipped - result.resumed) / result.seconds \
        if result.seconds > 0 else 0.0
    resumed = f", resumed after {result.resumed}" if result.resumed else ""
    if result.parts_kept:
        resumed += f"; {result.parts_kept} of {result.parts} parts kept"
    causes = describe_skips(result.skips)
    click.echo(f"{name}: packed {plural(result.packed, 'image')}, skipped {result.skipped}"
               + (f" ({causes})" if causes else "")
               + f", {result.bytes:,} bytes, {result.seconds:.2f} s ({rate:.0f} images/s"
               f"{resumed}) -> {outputs}")
    if result.retried:
        click.echo(f"{name}: {result.retried} part(s) ran again after a failure (a worker or "
                   f"node lost, an I/O error): {result.seconds_lost:.1f} s of work lost",
                   err=True)
    if result.skipped:
        first = ""
        if result.first_skip is not None:
            first = f" (first, line {result.first_skip[0]}: {result.first_skip[1]})"
        assert result.errors_path is not None  # every skip is written there
        click.echo(f"{name}: {plural(result.skipped, 'item')} skipped{first}; every reason is "
                   f"in {_rel(result.errors_path)}", err=True)
    for warning in _dropped(result):
        click.echo(f"warning: {name}: {warning}", err=True)


def _dropped(result: PackResult) -> List[str]:
    out = []
    if result.labels_ignored:
        out.append(f"{result.labels_ignored} line(s) have several labels; only the first was "
                   "stored (add --pack-label to store them all)")
    if result.repeated_indices:
        out.append(f"{result.repeated_indices} list index(es) repeat, so the .idx holds "
                   "repeated keys (readers use the last record of a key)")
    if result.alpha_dropped:
        out.append(f"{result.alpha_dropped} image(s) had transparency, dropped in the packed "
                   "images (keep it with --color -1 --encoding .png)")
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point for ``im2rec``."""
    printable_output()
    im2rec_cmd.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="im2rec")
