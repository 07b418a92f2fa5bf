"""``recio verify``: a full scan reporting every damaged byte region (exit 0 clean, 1 damaged)."""
from __future__ import annotations

import sys
from typing import Optional, Tuple, Union

import click

from recio.cli.common import (
    EXIT_DAMAGE,
    EXIT_OK,
    echo_json,
    file_progress,
    handle_errors,
    index_option,
    json_option,
    progress,
    quiet_option,
)
from recio.image.tools.verify import VerifyReport, verify_file
from recio.records.index_format import sibling_index_path
from recio.records.manifest import is_manifest
from recio.records.shards.verify import ManifestReport, verify_manifest
from recio.records.source import expand_source


@click.command("verify")
@click.argument("files", nargs=-1, required=True, metavar="REC_OR_MANIFEST...")
@click.option("--images", is_flag=True,
              help="Also decode every image record and list those that fail (slow).")
@click.option("--deep", is_flag=True,
              help="For a manifest: also read every record and compare it with its per-record "
                   "checksum (sets written with checksums), naming each damaged record.")
@index_option
@json_option
@quiet_option
@handle_errors
def verify_cmd(files: Tuple[str, ...], images: bool, deep: bool, index_path: Optional[str],
               as_json: bool, quiet: bool) -> None:
    """Check the framing of each REC and its index; list each damaged region with its offsets.

    Checks the framing of every record (magic, lengths, multi-part sequences, truncation),
    that no payload holds an unescaped aligned magic word, and that the .idx beside the file
    (if any) points at exactly the records. The bytes inside a payload are not checked: an
    image overwritten in place keeps its framing; --images decodes every image.

    The last line says what was checked and names the culprit: OK; TRUNCATED (the file ends
    inside a record, or between two records while its .idx lists more: the records before
    the cut are intact); DAMAGED (damaged bytes or images); BAD INDEX (the .rec is intact,
    its .idx does not match it: another file's, one cut short, or keys that repeat);
    INCOMPLETE (an interrupted im2rec pack left the .rec without its .idx); NO INDEX (exit
    0: the .rec is intact and has no .idx, so readers by key refuse it). A `next:` line then
    gives the command that fixes it (`recio repair`, `recio index`, `im2rec ... --resume`).

    A REC may also be a glob ('shards/*.rec'), a URL (s3://...) or a shard set's manifest
    (PREFIX.manifest.json): then every shard's .rec, .idx and checksum file is checked for
    presence, size and CRC-32, and each .idx for its record count; --deep also names every
    record whose bytes differ from its checksum.

    Exit status: 0 all clean (OK, NO INDEX), 1 damage found in any (or INCOMPLETE), 2 usage
    error or unreadable file.

    \b
    Examples:
      recio verify train.rec
      recio verify 'shards/*.rec' --images --json > report.json
      recio verify shards/train.manifest.json --deep
    """
    targets = [p for arg in files for p in ([arg] if is_manifest(arg) else expand_source(arg))]
    if index_path and len(targets) > 1:
        raise click.UsageError("--index names the index of one file; give one file")
    if deep and not all(is_manifest(t) for t in targets):
        raise click.UsageError("--deep takes a manifest (PREFIX.manifest.json); a plain .rec "
                               "has no per-record checksums")
    reports, clean = [], True
    for target in targets:
        report = _verify_one(target, images, deep, index_path, as_json, quiet)
        reports.append(report.to_dict())
        clean = clean and report.clean
    if as_json:
        echo_json(reports[0] if len(reports) == 1 else
                  {"clean": clean, "files": reports})
    sys.exit(EXIT_OK if clean else EXIT_DAMAGE)


def _verify_one(rec: str, images: bool, deep: bool, index_path: Optional[str], as_json: bool,
                quiet: bool) -> Union[VerifyReport, ManifestReport]:
    """Check one file or manifest and print its report (unless --json); returns it."""
    if is_manifest(rec):
        if images or index_path:
            raise click.UsageError("--images and --index take a .rec file, not a manifest")
        with progress(desc="verify", unit="B", unit_scale=True, quiet=quiet or as_json) as bar:
            manifest_report = verify_manifest(rec, deep=deep, progress=bar.update)
        if not as_json:
            _print_manifest_report(manifest_report)
        return manifest_report
    with file_progress(rec, "verify", quiet or as_json) as bar, \
            progress(desc="images", unit="img", quiet=quiet or as_json or not images) as image_bar:
        report = verify_file(rec, images=images, idx_path=index_path, progress=bar.update,
                             image_progress=image_bar.update)
    if not as_json:
        _print_report(report)
    return report


def _print_report(report: VerifyReport) -> None:
    st, rec = report.stats, report.path
    for d in st.damage:
        click.echo(f"{rec}: damaged bytes [{d.start}, {d.end}) ({d.end - d.start:,} bytes): "
                   f"{d.reason}")
    for d in report.bad_images:
        click.echo(f"{rec}: bad image at byte {d.start}: {d.reason}")
    for problem in report.index_problems:
        click.echo(f"{report.idx_path}: {problem}")
    verdict = report.verdict
    extra = f", {len(report.bad_images):,} bad images" if report.images_checked else ""
    if report.index_problems:
        extra += f"; its index {report.idx_path}: {len(report.index_problems)} problem(s)"
    if verdict == "TRUNCATED":
        cut = report.truncated_at
        if cut is None:  # its only fault: the padding of its last record (and no index past it)
            click.echo(f"{verdict}: {rec}: the file ends {report.padding_missing} byte(s) short "
                       f"of its last record's padding; all {st.records:,} records are whole, "
                       f"but MXNet's reader stops at the cut ('Invalid RecordIO File'){extra}")
        elif cut == st.size:
            assert st.index is not None  # cut at the size: the index lists records past it
            click.echo(f"{verdict}: {rec}: the file ends at byte {cut:,}, between two records, "
                       f"and its index lists {st.index.past_end:,} more past the end; the "
                       f"{st.records:,} records before it are intact{extra}")
        else:
            click.echo(f"{verdict}: {rec}: the file ends inside the record at byte {cut:,} "
                       f"(its last {st.size - cut:,} bytes); the {st.records:,} records before "
                       f"it are intact{extra}")
    elif verdict == "BAD INDEX":
        click.echo(f"{verdict}: {report.idx_path} does not match {rec}; the .rec itself is "
                   f"intact: {st.records:,} records, {st.size:,} bytes, no damage")
    elif verdict in ("INCOMPLETE", "NO INDEX"):
        idx = sibling_index_path(rec)
        why = (f"an interrupted im2rec pack left it ({report.pack_journal} is beside it)"
               if verdict == "INCOMPLETE" else "sequential readers read it")
        click.echo(f"{verdict}: {rec}: {st.records:,} records, {st.size:,} bytes, no damage, "
                   f"but no index ({idx} not found): readers by key refuse it; {why}{extra}; "
                   f"{report.checked}")
    else:
        click.echo(f"{verdict}: {rec}: {st.records:,} records, {st.size:,} bytes, "
                   f"{len(st.damage):,} damaged region(s) ({st.damaged_bytes:,} bytes){extra}; "
                   f"{report.checked}")
    step = report.next_step()
    if step:
        click.echo(f"next: {step}")


def _print_manifest_report(report: ManifestReport) -> None:
    for problem in report.problems:
        click.echo(str(problem))
    verdict = report.verdict
    checked = "every file and record" if report.deep else "every file"
    click.echo(f"{verdict}: {report.path}: {report.shards:,} shards, {report.records:,} records, "
               f"{report.nbytes:,} bytes; {checked} checked, {len(report.problems):,} "
               f"problem(s)")
