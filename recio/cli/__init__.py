"""recio's command line: a thin click layer over the library (``python -m recio``,
``python -m recio.im2rec``, or the ``recio`` / ``im2rec`` console scripts).

* ``entry``     ``run_command``, what the entry points call: light (no click, NumPy or OpenCV), it
                imports a command's module only once it can answer a Ctrl-C during that import.
* ``main``      the ``recio`` group; ``im2rec`` the ``im2rec`` command; the other modules one
                command each (``inspect``, ``verify``, ``split``, ...).
* ``common``    what every command shares: errors as one-line messages and exit statuses.
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.cli.entry import run_command

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "run_command": "recio.cli.entry",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
