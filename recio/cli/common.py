"""Helpers shared by the commands: error mapping, progress bars, output."""
from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Callable, Optional

import click

from recio.errors import RecordIOError

#: exit statuses scripts can rely on
EXIT_OK, EXIT_DAMAGE, EXIT_USAGE = 0, 1, 2


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """Print a one-line error to stderr and exit with ``code``."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


def handle_errors(func: Callable) -> Callable:
    """Turn library and OS errors into one line on stderr and exit status 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RecordIOError as exc:
            fail(str(exc))
        except BrokenPipeError:  # output piped into `head` and closed: not an error
            sys.stderr.close()
            sys.exit(0)
        except OSError as exc:
            name = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            fail(f"{name}{exc.strerror or exc}")
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)

    return wrapper


def progress(total: Optional[int] = None, desc: str = "", unit: str = "it",
             quiet: bool = False, unit_scale: bool = False):
    """A tqdm bar on stderr, disabled with --quiet or when stderr is not a terminal."""
    from tqdm import tqdm

    disable = quiet or not sys.stderr.isatty()
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, disable=disable,
                file=sys.stderr, dynamic_ncols=True, leave=False)


def file_progress(path: str, desc: str, quiet: bool = False):
    """A byte-counting bar over the file at ``path`` (no total when it cannot be sized: the
    command's library call then reports why)."""
    total = os.path.getsize(path) if os.path.isfile(path) else None
    return progress(total=total, desc=desc, unit="B", unit_scale=True, quiet=quiet)


def echo_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout."""
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=_json_default))


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot serialise {type(obj).__name__}")


quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
index_option = click.option("--index", "index_path", type=click.Path(exists=True, dir_okay=False),
                            default=None,
                            help="Index to check (default: the .idx beside the .rec, if any).")
