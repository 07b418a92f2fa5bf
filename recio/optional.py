"""Optional dependencies: the one place that imports them and says what to install.

The core needs click, Pillow, NumPy, tqdm and OpenCV (opencv-python-headless), imported as
usual, and simplejpeg, looked up here (``optional("simplejpeg")``) so that a platform without
its wheel decodes with OpenCV alone. The rest are extras, imported on first use: ``optional("fsspec")`` gives the module or
``None`` (for features that do without it), and ``require("torch", feature="recio.torch")``
gives the module or raises an ``ImportError`` telling the user which ``pip install`` brings
it.
"""
from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Dict, Optional

# import name -> (extra that installs it, the pip package)
_EXTRAS: Dict[str, tuple] = {
    "torch": ("torch", "torch"),
    "fsspec": ("remote", "fsspec"),
    "s3fs": ("remote", "s3fs"),
    "ray": ("ray", "ray[data]"),
}

_found: Dict[str, Optional[ModuleType]] = {}
_lock = threading.Lock()


def optional(name: str) -> Optional[ModuleType]:
    """The module ``name``, or None when it is not installed (looked up once per process)."""
    if name not in _found:
        with _lock:
            if name not in _found:
                try:
                    _found[name] = importlib.import_module(name)
                except ImportError:
                    _found[name] = None
    return _found[name]


#: PyTorch's CPU-only wheels: on Linux a plain ``pip install torch`` fetches the CUDA build
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def install_hint(name: str) -> str:
    """``pip install 'recio[extra]'`` (or the package) that provides module ``name``."""
    extra, package = _EXTRAS.get(name, (None, name))
    if name == "torch":
        return (f"pip install 'recio[torch]' (without an NVIDIA GPU, first pip install torch "
                f"--index-url {TORCH_CPU_INDEX}: plain pip fetches the multi-GB CUDA build)")
    return f"pip install 'recio[{extra}]' (or {package})" if extra else f"pip install {package}"


def require(name: str, feature: str) -> ModuleType:
    """The module ``name``; ``ImportError`` naming ``feature`` and what to install when it is
    missing (or fails to import: the original error is kept as the cause)."""
    module = optional(name)
    if module is not None:
        return module
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"{feature} needs {name}: {install_hint(name)} "
                          f"(import failed: {exc})") from exc
