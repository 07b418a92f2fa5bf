"""What a resumed pack must find unchanged, and how a refused resume names what changed.

An interrupted pack records the settings its bytes depend on: a plain pack in its journal's
first line (``recio.image.packing.output.pack_settings``), a pack in parts in its staging folder's
``job.json`` (``recio.image.packing.shards``). ``--resume`` with other settings would splice two
different packs into one file, so it is refused, and the refusal names every changed option
with its old and new value as the command line spells it (``--resize was 256, now 224``) and
the options that resume it as it was started.

Kept apart because both kinds of pack use it: one rule for naming a changed setting.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from recio.errors import InterruptedPackError

#: settings that are the same thing for the user as another one that is named instead
_IMPLIED = {"layout"}  # follows from --num-shards / --shard-size
#: options written with an argument (the rest of the ImageOptions fields and pack settings
#: are flags); None means "not given"
_FLAGS = {"center_crop", "pass_through", "pack_label", "allow_outside_root", "checksums"}


def _option(key: str) -> str:
    return "--" + key.replace("_", "-")


def _value(key: str, value: Any) -> str:
    """A setting's value as a person reads it."""
    if key in _FLAGS:
        return "given" if value else "not given"
    if key == "exif_transpose":
        return {None: "the default", True: "--exif-transpose",
                False: "--no-exif-transpose"}.get(value, repr(value))
    if value is None:
        return "not given"
    return str(value)


def _typed(key: str, value: Any) -> str:
    """The option that gives ``value`` on the command line; "" when nothing does (a flag off,
    an option not given, the default)."""
    if key in _FLAGS:
        return _option(key) if value else ""
    if key == "exif_transpose":
        return "" if value is None else ("--exif-transpose" if value else "--no-exif-transpose")
    return "" if value is None else f"{_option(key)} {value}"


def _list_change(old: Dict[str, Any], new: Dict[str, Any]) -> Optional[str]:
    """How the list changed between two packs' settings (plain: path, size, mtime; in parts:
    bytes and CRC-32), or None."""
    if "lst" in new and old.get("lst") != new["lst"]:
        return f"the list was {old.get('lst')}, now {new['lst']}"
    size_key = "lst_size" if "lst_size" in new else None
    old_list, new_list = old.get("list") or {}, new.get("list") or {}
    if size_key is not None:
        old_size, new_size = old.get(size_key), new.get(size_key)
        same_time = old.get("lst_mtime_ns") == new.get("lst_mtime_ns")
    else:
        old_size, new_size = old_list.get("bytes"), new_list.get("bytes")
        same_time = old_list.get("crc32") == new_list.get("crc32")
    if old_size != new_size:
        return f"the list changed since: {old_size:,} bytes then, {new_size:,} now"
    if not same_time:
        return "the list changed since (same size, " + (
            "modified" if size_key else "other content") + ")"
    return None


def _changed_settings(old: Dict[str, Any], new: Dict[str, Any]
                     ) -> Tuple[List[str], List[str], bool]:
    """``(changes, resume_with, list_changed)``: one phrase per changed setting
    (``"--resize was 256, now 224"``), the options that give the old values, and whether the
    list itself changed (then no option resumes it)."""
    changes, resume_with = [], []
    listed = _list_change(old, new)
    if listed:
        changes.append(listed)
    for key, value in new.items():
        if key in ("lst", "lst_size", "lst_mtime_ns", "list") or key in _IMPLIED:
            continue
        if key == "options" and isinstance(value, dict):
            pairs = [(k, (old.get(key) or {}).get(k), v) for k, v in value.items()]
        else:
            pairs = [(key, old.get(key), value)]
        for name, was, now in pairs:
            if was == now:
                continue
            if name == "root":
                changes.append(f"ROOT was {was}, now {now}")
                resume_with.append(f"ROOT {was}")
                continue
            changes.append(f"{_option(name)} was {_value(name, was)}, now {_value(name, now)}")
            typed = _typed(name, was)
            resume_with.append(typed or f"without {_option(name)}")
    if not changes and old.get("layout") != new.get("layout"):
        changes.append(f"the pack was {old.get('layout')}, now {new.get('layout')}")
    return changes, resume_with, bool(listed)


def check_same_settings(old: Dict[str, Any], new: Dict[str, Any], lst_path: str,
                        kept: str) -> None:
    """Raise :class:`InterruptedPackError` (``path``: the list) when a resume's settings
    ``new`` differ from the interrupted pack's ``old``, naming each change and how to resume;
    ``kept`` names what the interrupted pack kept (deleted by ``--force``)."""
    changes, resume_with, list_changed = _changed_settings(old, new)
    if not changes:
        return
    if list_changed:
        todo = f"start over with --force (which deletes {kept})"
    else:
        todo = (f"resume it as it was started ({', '.join(resume_with)}), or start over with "
                f"--force (which deletes {kept})")
    raise InterruptedPackError(f"the interrupted pack used other settings: {'; '.join(changes)};"
                               f" {todo}", path=lst_path)
