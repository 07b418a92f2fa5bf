"""``recio verify``: a full scan reporting every damaged byte region (exit 0 clean, 1 damaged)."""
from __future__ import annotations

import sys
from typing import Optional

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
from recio.image.verify import VerifyReport, verify_file


@click.command("verify")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.option("--images", is_flag=True,
              help="Also decode every image record and list those that fail (slow).")
@index_option
@json_option
@quiet_option
@handle_errors
def verify_cmd(rec: str, images: bool, index_path: Optional[str], as_json: bool,
               quiet: bool) -> None:
    """Check every byte of REC; list each damaged region with its byte offsets.

    Checks the framing of every record (magic, lengths, multi-part sequences, truncation),
    that no payload holds an unescaped aligned magic word, and that the .idx beside the file
    (if any) points at exactly the records. Exit status: 0 clean, 1 damage found, 2 usage
    error or unreadable file.

    \b
    Examples:
      recio verify train.rec
      recio verify train.rec --images --json > report.json
    """
    with file_progress(rec, "verify", quiet) as bar, \
            progress(desc="images", unit="img", quiet=quiet or not images) as image_bar:
        report = verify_file(rec, images=images, idx_path=index_path, progress=bar.update,
                             image_progress=image_bar.update)
    if as_json:
        echo_json(report.to_dict())
    else:
        _print_report(report)
    sys.exit(EXIT_OK if report.clean else EXIT_DAMAGE)


def _print_report(report: VerifyReport) -> None:
    st, rec = report.stats, report.path
    for d in st.damage:
        click.echo(f"{rec}: damaged bytes [{d.start}, {d.end}) ({d.end - d.start:,} bytes): "
                   f"{d.reason}")
    for d in report.bad_images:
        click.echo(f"{rec}: bad image at byte {d.start}: {d.reason}")
    for problem in report.index_problems:
        click.echo(f"{report.idx_path}: {problem}")
    verdict = "OK" if report.clean else "DAMAGED"
    extra = f", {len(report.bad_images):,} bad images" if report.images_checked else ""
    if report.index_problems:
        extra += f", index problems: {len(report.index_problems)}"
    click.echo(f"{verdict}: {rec}: {st.records:,} records, {st.size:,} bytes, "
               f"{len(st.damage):,} damaged region(s) ({st.damaged_bytes:,} bytes){extra}")
