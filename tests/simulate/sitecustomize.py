"""Run Python as if on a platform without Linux's facilities: the tests' RECIO_TEST_REMOVE mode.

``RECIO_TEST_REMOVE`` names what to take away, comma-separated (``all``: everything):

- ``pread``: ``os.pread`` and ``os.pwrite`` are deleted (as on Windows);
- ``madvise``: every ``mmap.MADV_*`` constant is deleted (as on Windows);
- ``nonblock``: ``os.O_NONBLOCK`` and ``os.O_NOCTTY`` are deleted (as on Windows);
- ``procfd``: recio is told there is no ``/proc/self/fd`` (as on macOS and Windows);
- ``fallocate``: recio is told there is no ``fallocate`` (as on macOS and Windows);
- ``windows-files``: Windows' file rules: ``os.replace``, ``os.rename``, ``os.unlink`` and
  ``os.remove`` of a file that this process has open or memory-mapped raise ``PermissionError``
  with Windows' error number, as does ``os.open(..., O_TRUNC)`` of a mapped file; and recio's
  ``portable.system()`` answers ``"win32"``, so its Windows code paths are the ones that run.

This file is ``sitecustomize`` for the processes the tests start (tests/conftest.py puts its
folder first on ``PYTHONPATH`` in this mode), so the commands a test runs and the workers they
start are under the same rules as the test process. The facilities are removed before recio is
imported, as a user's ``del os.pread; import recio`` would.
"""
import mmap
import os

ITEMS = ("pread", "madvise", "nonblock", "procfd", "fallocate", "windows-files")

_real_replace, _real_rename = os.replace, os.rename
_real_unlink, _real_remove, _real_open = os.unlink, os.remove, os.open


def requested():
    """The items of RECIO_TEST_REMOVE (``all`` expanded); ValueError for an unknown one."""
    names = {n.strip() for n in os.environ.get("RECIO_TEST_REMOVE", "").split(",") if n.strip()}
    if "all" in names:
        return set(ITEMS)
    unknown = names - set(ITEMS)
    if unknown:
        raise ValueError(f"RECIO_TEST_REMOVE: unknown item(s) {sorted(unknown)}; known: "
                         f"{', '.join(ITEMS)}, all")
    return names


def held_paths(mapped_only=False):
    """Real paths of the files this process has open (descriptors) or memory-mapped."""
    held = set()
    if not mapped_only:
        for fd in os.listdir("/proc/self/fd"):
            try:
                held.add(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                pass
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            fields = line.rstrip("\n").split(None, 5)
            if len(fields) == 6 and fields[5].startswith("/"):
                held.add(fields[5][:-len(" (deleted)")] if fields[5].endswith(" (deleted)")
                         else fields[5])
    return held


def _in_use(path, winerror, mapped_only=False):
    error = PermissionError(13, "The process cannot access the file because it is being used "
                                "by another process (simulated Windows rule)", os.fsdecode(path))
    error.winerror = winerror
    return error if os.path.realpath(path) in held_paths(mapped_only) else None


class _Function:
    """A stand-in for an ``os`` function. An object, not a Python function: code that stores
    ``os.open`` as a class attribute (Python 3.9's pathlib) must not get it bound as a method."""

    def __init__(self, call):
        self.call = call

    def __call__(self, *args, **kwargs):
        return self.call(*args, **kwargs)


def _checked(real, arity):
    def call(*args, **kwargs):
        if not any(kwargs.get(k) is not None for k in ("dir_fd", "src_dir_fd", "dst_dir_fd")):
            for path in args[:arity]:
                if isinstance(path, (str, bytes, os.PathLike)) and os.path.lexists(path):
                    error = _in_use(path, 32)
                    if error is not None:
                        raise error
        return real(*args, **kwargs)
    return _Function(call)


def _open_checked(path, flags, mode=0o777, *, dir_fd=None):
    if flags & os.O_TRUNC and dir_fd is None and os.path.exists(path):
        error = _in_use(path, 1224, mapped_only=True)  # ERROR_USER_MAPPED_FILE
        if error is not None:
            raise error
    return _real_open(path, flags, mode, dir_fd=dir_fd)


_open = _Function(_open_checked)


def apply(items):
    """Take ``items`` away from this process (idempotent)."""
    if getattr(os, "_recio_removed", None) is not None:
        return
    os._recio_removed = frozenset(items)
    if "pread" in items:
        for name in ("pread", "pwrite", "preadv", "pwritev"):
            if hasattr(os, name):
                delattr(os, name)
    if "madvise" in items:
        for name in [n for n in dir(mmap) if n.startswith("MADV_")]:
            delattr(mmap, name)
    if "nonblock" in items:
        for name in ("O_NONBLOCK", "O_NOCTTY"):
            if hasattr(os, name):
                delattr(os, name)
    if "windows-files" in items:
        os.replace, os.rename = _checked(_real_replace, 2), _checked(_real_rename, 2)
        os.unlink, os.remove = _checked(_real_unlink, 1), _checked(_real_remove, 1)
        os.open = _open
    if items & {"procfd", "fallocate", "windows-files"}:
        from recio import portable

        if "windows-files" in items:
            portable.system = lambda: "win32"
        if "procfd" in items:
            portable.has_proc_fd = lambda: False
        if "fallocate" in items:
            portable.reserve = lambda fd, offset, length: False


if os.environ.get("RECIO_TEST_REMOVE"):
    apply(requested())
