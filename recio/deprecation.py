"""Renamed keywords keep working for one release, with a ``DeprecationWarning``.

recio's own APIs share one vocabulary (``part_index``/``num_parts`` for "which part am I",
``rec_path``/``idx_path`` for files). Where an older recio spelling existed, the function is
decorated with ``renamed_keywords(old="new")``: a call with the old name works, warns once per
call site, and fails when both names are given.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def renamed_keywords(**renames: str) -> Callable[[F], F]:
    """Decorator: accept each ``old`` keyword as ``renames[old]`` with a DeprecationWarning."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{func.__qualname__}() got both {old!r} and its new "
                                        f"name {new!r}; pass only {new!r}")
                    warnings.warn(f"{func.__qualname__}({old}=...) is deprecated: use {new}=",
                                  DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        wrapper.__renamed_keywords__ = dict(renames)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def deprecated_alias(module_name: str, old: str, new: str, value: Any) -> Any:
    """For a module ``__getattr__``: warn that ``module.old`` is now ``module.new``, return it."""
    warnings.warn(f"{module_name}.{old} is deprecated: use {module_name}.{new}",
                  DeprecationWarning, stacklevel=3)
    return value


__all__ = ["renamed_keywords", "deprecated_alias"]
