"""Helpers shared by the commands: error mapping, progress bars, output."""
from __future__ import annotations

import errno
import functools
import json
import math
import os
import sys
import time
from typing import Any, Callable, Optional

import click

from recio.cli.termination import EXIT_TERMINATED, Terminated, sigterm_interrupts
from recio.errors import (
    NothingFoundError,
    OutputExistsError,
    OutputWriteError,
    PackSettingsError,
    RecordIOError,
)
from recio.records.temp_files import output_of_temp
from recio.storage import is_url, local_path
from recio.storage import size as storage_size

#: exit statuses scripts can rely on
EXIT_OK, EXIT_DAMAGE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

EXIT_STATUS_HELP = ("Exit status: 0 success; 1 damage found or items skipped (verify, --strict, "
                    "a list, pack or extract that found nothing); 2 usage error, unreadable "
                    "input, a refused output or one that could not be written (a full disk, "
                    "an I/O error); 130 interrupted (Ctrl-C); 143 terminated (SIGTERM). Either "
                    "stop leaves no partial output (im2rec keeps a pack's progress for "
                    "--resume).")


class PathOrURL(click.Path):
    """``click.Path`` that passes URLs (``s3://...``) through unchecked: they are opened by
    the library through fsspec, which reports a missing object in one line."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if is_url(value):
            return value
        return super().convert(local_path(value) if isinstance(value, str) else value,
                               param, ctx)


def printable_output() -> None:
    """Let the commands print any file name: where stdout or stderr cannot encode a character
    (a pipe on Windows uses the ANSI code page; a C locale is ASCII) it is written as a
    backslash escape instead of failing the command with ``UnicodeEncodeError``."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "") == "strict":
            reconfigure(errors="backslashreplace")


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """Print a one-line error to stderr and exit with ``code``."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


#: what to do about an output the OS would not let a command write, by ``errno``
_WRITE_ADVICE = {
    errno.ENOSPC: "free space on that disk",
    getattr(errno, "EDQUOT", -1): "free space within your disk quota (or have it raised)",
    errno.EFBIG: "write it to a file system that takes files this large",
    errno.EROFS: "the file system is read-only: write the output elsewhere (or remount it "
                 "read-write)",
    errno.EIO: "an I/O error: check that disk (the system log says more)",
}


def os_error_line(exc: OSError) -> str:
    """The one line a command prints for an ``OSError``: the user's file (a temporary name a
    writer used is turned back into the file it stood for), what happened and, for an output
    that could not be written (a full disk or quota, a read-only or failing file system),
    what to do: free space, then run the same command again, or with ``--resume`` when the
    output written so far was kept for it (``OutputWriteError.resumable``: im2rec)."""
    filename = getattr(exc, "filename", None)
    name = f"{_user_file_name(os.fspath(filename))}: " if filename else ""
    if isinstance(exc, OutputWriteError):
        text = f"{exc}"
    else:
        text = f"{name}{exc.strerror or exc}"
    advice = _WRITE_ADVICE.get(exc.errno) if exc.errno is not None else None
    if advice is None:
        return text
    again = ("then run the same command with --resume to continue"
             if getattr(exc, "resumable", False) else "then run the same command again")
    if exc.errno == errno.EROFS:
        again = "then run the command again"
    return f"{text}; {advice}, {again}"


def _user_file_name(path: str) -> str:
    """``path``, or the output it stands for when it is a writer's temporary name."""
    return output_of_temp(path) or path


def handle_errors(func: Callable) -> Callable:
    """Turn library and OS errors into one line on stderr and exit status 2 (1 for a job that
    found nothing to do), no traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with sigterm_interrupts():  # SIGTERM stops the command as Ctrl-C does
                return func(*args, **kwargs)
        except (OutputExistsError, PackSettingsError) as exc:
            fail(exc.for_command())
        except NothingFoundError as exc:  # found nothing to do where work was expected
            fail(str(exc), code=EXIT_DAMAGE)
        except OutputWriteError as exc:  # a full disk, an I/O error: the file, what to do
            fail(os_error_line(exc))
        except RecordIOError as exc:
            fail(str(exc))
        except BrokenPipeError:  # output piped into `head` and closed: not an error
            sys.stderr.close()
            sys.exit(0)
        except OSError as exc:
            fail(os_error_line(exc))
        except Terminated:
            click.echo("Terminated (SIGTERM).", err=True)
            sys.exit(EXIT_TERMINATED)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(EXIT_INTERRUPTED)

    return wrapper


def progress(total: Optional[int] = None, desc: str = "", unit: str = "it",
             quiet: bool = False, unit_scale: bool = False):
    """Progress on stderr: a tqdm bar on a terminal; otherwise (a log file, a pipe, a batch
    job) a plain line every ``RECIO_PROGRESS_SECONDS`` (default 10) seconds, so logs of long
    jobs show life. ``--quiet`` turns both off."""
    if not quiet and not sys.stderr.isatty():
        return LogProgress(total=total, desc=desc, unit=unit, unit_scale=unit_scale)
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, disable=quiet,
                file=sys.stderr, dynamic_ncols=True, leave=False)


def _log_interval() -> float:
    try:
        return max(0.0, float(os.environ.get("RECIO_PROGRESS_SECONDS", "10")))
    except ValueError:
        return 10.0


class LogProgress:
    """The bar's stand-in when stderr is not a terminal: ``desc: 12,000/50,000 img (24%),
    830 img/s`` lines at a steady interval and one when it closes (same calls as tqdm's)."""

    def __init__(self, total: Optional[int] = None, desc: str = "", unit: str = "it",
                 unit_scale: bool = False) -> None:
        self.total, self.desc, self.unit, self.unit_scale = total, desc, unit, unit_scale
        self.n = 0
        self.interval = _log_interval()
        self.start = self.last = time.monotonic()
        self.closed = False
        self.shown = 0

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._line(now)

    def _amount(self, value: float) -> str:
        if not self.unit_scale:
            return f"{value:,.0f}"
        for prefix in ("", "k", "M", "G", "T"):
            if abs(value) < 1000 or prefix == "T":
                return f"{value:.1f}{prefix}" if prefix else f"{value:.0f}"
            value /= 1000
        return f"{value}"

    def _line(self, now: float) -> None:
        elapsed = max(now - self.start, 1e-9)
        done = f"{self._amount(self.n)}"
        if self.total:
            done += f"/{self._amount(self.total)} {self.unit} ({100 * self.n / self.total:.0f}%)"
        else:
            done += f" {self.unit}"
        rate = self.n / elapsed
        rate_text = f"{self._amount(rate)} {self.unit}/s" if math.isfinite(rate) else ""
        name = f"{self.desc}: " if self.desc else ""
        click.echo(f"{name}{done}, {rate_text}, {elapsed:.0f} s", err=True)
        self.shown += 1

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.shown:
                self._line(time.monotonic())

    def __enter__(self) -> "LogProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def file_progress(path: str, desc: str, quiet: bool = False):
    """A byte-counting bar over the file at ``path`` (no total when it cannot be sized: the
    command's library call then reports why)."""
    if is_url(path):
        try:
            total: Optional[int] = storage_size(path)
        except (OSError, RecordIOError, ImportError):
            total = None
    else:
        total = os.path.getsize(path) if os.path.isfile(path) else None
    return progress(total=total, desc=desc, unit="B", unit_scale=True, quiet=quiet)


def echo_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout: always valid JSON (NaN and infinities, which
    JSON cannot hold, become null)."""
    click.echo(json.dumps(_json_safe(obj), indent=2, sort_keys=False, default=_json_default,
                          allow_nan=False))


def _json_safe(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float (which JSON cannot hold) replaced by None,
    through dicts, lists and tuples."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.ndarray):
        return _json_safe(obj.tolist())
    raise TypeError(f"cannot serialise {type(obj).__name__}")


quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
force_option = click.option("--force", is_flag=True,
                            help="Replace existing output files (an input is never replaced).")
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
index_option = click.option("--index", "index_path", type=PathOrURL(exists=True, dir_okay=False),
                            default=None,
                            help="Index to check (default: the .idx beside the .rec, if any).")
