"""``im2rec PREFIX ROOT``: which ``.lst`` files a PREFIX names, and packing them one by one.

A PREFIX names every list in its folder whose path starts with it (``data/train`` finds
``data/train_0_train.lst``, ``data/train_0_val.lst``, ...); one ending in ``.lst`` names that
one list, as in list mode (``recio.image.lists.prefix_extension``). Lists holding no line are
left out when others have lines; a PREFIX that names nothing gets a message naming the near
ones ("did you mean data/train?") and how to make a list.

Apart from the pack of one list (``recio.image.packing.pipeline``) because it is the command's rule
for finding lists, which a pack in parts and a URL PREFIX (``recio.image.packing.dispatch``) share.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Union

from recio import storage
from recio.errors import ListFileError, NothingFoundError
from recio.image.list_folder import near_folders
from recio.image.lists import prefix_extension
from recio.image.packing.settings import PackSettings
from recio.image.packing.pipeline import PackResult, ProgressCallback, pack_list
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]

def find_lists(prefix: PathLike) -> List[str]:
    """The ``.lst`` files im2rec packs for ``prefix``: files in its folder (or in ``prefix`` if
    that is a folder) whose absolute path starts with ``prefix`` and ends in ``.lst``; sorted."""
    prefix = os.path.abspath(os.fspath(prefix))
    folder = prefix if os.path.isdir(prefix) else os.path.dirname(prefix)
    found = []
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if path.startswith(prefix) and name.endswith(".lst"):
            if not os.path.isfile(path):
                storage.check_regular(path)  # a FIFO or device named like a list: refused
                continue
            found.append(path)
    return sorted(found)


def pack_prefix(prefix: PathLike, root: PathLike, settings: Optional[PackSettings] = None, *,
                progress_for: Optional[Callable[[str], Optional[ProgressCallback]]] = None,
                on_lists: Optional[Callable[["PrefixLists"], None]] = None
                ) -> Iterator[PackResult]:
    """Pack every ``.lst`` im2rec finds for a local ``prefix`` (:func:`prefix_lists`) with
    ``pack_list``, one after another, yielding each list's ``PackResult`` as it completes.

    ``on_lists(found)`` is called once before anything is packed, with the lists that will be
    packed and those left out (so a command can name them); ``progress_for(lst_path)`` gives
    the progress callback for one list (or None). No list at all raises ``ListFileError``
    saying how to make one (and naming near prefixes); lists that hold no line at all,
    ``NothingFoundError``. ``im2rec`` itself (shards, URLs, an engine) is
    ``recio.image.packing.dispatch.pack_prefix_to``.
    """
    found = prefix_lists(prefix, root)
    if on_lists is not None:
        on_lists(found)
    for lst in found.lists:
        progress = progress_for(lst) if progress_for is not None else None
        yield pack_list(lst, root, settings, progress=progress)


@dataclass
class PrefixLists:
    """The ``.lst`` files im2rec packs for a PREFIX, as :func:`prefix_lists` found them."""

    prefix: str
    #: the lists to pack, in order
    lists: List[str]
    #: lists left out because they hold no line (e.g. an empty test part of a small list);
    #: packing them would write an empty .rec
    empty: List[str] = field(default_factory=list)
    #: lists (packed) whose name continues PREFIX's name with more than ``_`` or ``.``
    #: (``data/split2_train.lst`` for PREFIX ``data/split``): probably another dataset's
    others: List[str] = field(default_factory=list)


def prefix_lists(prefix: PathLike, root: PathLike, found: Optional[List[str]] = None,
                 storage_options: StorageOptions = None) -> PrefixLists:
    """The lists im2rec packs for ``prefix``: ``found`` (a URL prefix's, listed by the
    caller) or, for a local prefix, :func:`find_lists`; lists holding no line are left out
    when others have lines.

    Raises ``ListFileError`` when there is none (naming near prefixes, "did you mean
    data/train", and how to make a list) and ``NothingFoundError`` when every list is empty.
    """
    given = os.fspath(prefix)
    ext = prefix_extension(given)
    if found is None:
        prefix = os.path.abspath(given)
        folder = prefix if os.path.isdir(prefix) else os.path.dirname(prefix)
        if not os.path.isdir(folder):
            raise ListFileError(f"no such folder for PREFIX {given}{_did_you_mean(given)}",
                                path=os.path.dirname(given) or ".")
        # a PREFIX ending in .lst names that one list (prefix_extension: the one rule)
        found = [prefix] if ext == ".lst" and os.path.isfile(prefix) else find_lists(prefix)
    else:
        prefix = given
    make = f"im2rec {given} {os.fspath(root)} --list --recursive"
    if not found and ext:
        stem = given[:len(given) - len(ext)]
        raise ListFileError(
            f"PREFIX names files without their extension: did you mean {stem}? (to make a "
            f"list: im2rec {stem} {os.fspath(root)} --list --recursive)", path=given)
    if not found:
        raise ListFileError(f"no .lst file starts with this PREFIX{_did_you_mean(given)} (to "
                            f"make a list: {make})", path=given)
    empty = [lst for lst in found if _holds_no_line(lst, storage_options)]
    if len(empty) == len(found):
        names = ", ".join(_as_given(given, lst) for lst in empty)
        raise NothingFoundError(
            f"no image to pack: {names} {'holds' if len(empty) == 1 else 'hold'} no line; "
            f"nothing was written (to make a list: {make} --force)", path=given)
    lists = [lst for lst in found if lst not in empty]
    isfolder = not storage.is_url(prefix) and os.path.isdir(prefix)
    base = storage.basename(prefix)
    others = [] if isfolder or base.endswith(("_", ".", "-")) else [
        lst for lst in lists if storage.basename(lst)[len(base):][:1] not in ("_", ".", "")]
    return PrefixLists(given, lists, empty, others)


def _as_given(given: str, lst: str) -> str:
    """A list's path in the form the PREFIX was given (relative stays relative)."""
    if storage.is_url(lst):
        return lst
    folder = given if os.path.isdir(given) else os.path.dirname(given)
    return os.path.join(folder, os.path.basename(lst))


def _holds_no_line(lst: str, storage_options: StorageOptions = None) -> bool:
    """True when a list has no non-blank line (read up to its first one)."""
    with storage.open_input(lst, storage_options) as f:
        while True:
            block = f.read(1 << 16)
            if not block:
                return True
            if block.strip():
                return False


def _did_you_mean(prefix: str) -> str:
    """``"; did you mean data/train?"`` naming the prefixes of existing lists (or folders)
    nearest to a local ``prefix`` that matched nothing; ``""`` when none is near."""
    if storage.is_url(prefix):
        return ""
    head, base = os.path.split(prefix)
    folder = head or "."
    if not os.path.isdir(folder):  # a typo in the folder: look for the nearest existing one
        near = [os.path.join(d, base) for d in near_folders(folder)]
        return f"; did you mean {' or '.join(near)}?" if near else ""
    try:
        names = os.listdir(folder)
    except OSError:
        return ""
    stems = set()
    for name in names:
        if name.endswith(".lst"):
            stem = name[:-4]
            stems.add(stem)
            stems.add(_LIST_PART.sub("", stem))
    near = difflib.get_close_matches(base, sorted(stems), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(os.path.join(head, n) for n in near)}?" if near else ""


#: what im2rec --list appends to PREFIX: _<chunk>, then _train/_val/_test
_LIST_PART = re.compile(r"(_\d+)?(_train|_val|_test)?$")
