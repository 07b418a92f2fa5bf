"""`make check-install`, and the CI workflow's same step on Windows (which has no make): after
an install, check that what recio declares is there and works, in one script instead of
Python one-liners in the Makefile and the workflow that no test runs.

1. Every requirement of recio and of the extras checked (by default every extra recio declares
   but torch and docs, i.e. what `make install-dev` installs; `--torch` and `--docs` add those)
   that applies to this platform and Python is installed at a version it accepts, and so are
   the requirements of the extras those name (``moto[server]``, ``ray[data]``).
2. Each such requirement's packages import (found from the distribution's own file list, so
   no import name is written here that a new release of a dependency could move).
3. The commands run as a user runs them: ``recio --version``, ``im2rec --version``, and a list
   and a resized pack of two images it makes (JPEG and PNG), checked by ``recio verify``.

With ``--torch``, torch and torchdata's StatefulDataLoader (installed without pip's
dependency resolution, so not a requirement of recio) must import too. It uses only recio's
commands and metadata, never recio's module internals. Exit status 0 when all is well, else 1
with one line per problem, each naming what to install.
"""
from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

try:  # packaging comes with pytest and build (the dev extra); pip carries a copy of it
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
except ImportError:  # pragma: no cover - an install without the dev extra
    from pip._vendor.packaging.markers import default_environment  # type: ignore
    from pip._vendor.packaging.requirements import Requirement  # type: ignore

#: extras with an install step of their own (make install-torch, make install-docs)
SEPARATE_EXTRAS = ("torch", "docs")
#: what `--torch` checks besides the torch extra (tests/with_torch/test_torch_resume.py needs it)
TORCH_MODULES = ("torch", "torchdata.stateful_dataloader")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> Dict[str, metadata.Distribution]:
    """Every installed distribution by its canonical name (the first on sys.path wins, as for
    imports)."""
    found: Dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(_canonical(name), dist)
    return found


def applies(req: Requirement, extras: Sequence[str]) -> bool:
    """Whether ``req`` is wanted here: its marker holds on this platform and Python for no
    extra or for one of ``extras``."""
    if req.marker is None:
        return True
    env = dict(default_environment())
    return any(req.marker.evaluate({**env, "extra": extra}) for extra in ("", *extras))


def import_names(dist: metadata.Distribution) -> List[str]:
    """The packages and top-level modules ``dist`` installs: ``x/__init__.py`` gives ``x``,
    ``x.py`` gives ``x``; a folder without ``__init__.py`` (a namespace) gives its packages one
    level down (``ns/y/__init__.py`` gives ``ns.y``). Private names (``_x``) are left out."""
    names: Set[str] = set()
    files = dist.files or []
    for file in files:
        parts = file.parts
        if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith(
                (".dist-info", ".data", ".libs", ".egg-info")):
            continue
        if len(parts) == 1 and parts[0].endswith(".py"):
            names.add(parts[0][:-3])
        elif len(parts) == 2 and parts[1] == "__init__.py":
            names.add(parts[0])
        elif len(parts) == 3 and parts[2] == "__init__.py":
            if not any(f.parts == (parts[0], "__init__.py") for f in files):
                names.add(f"{parts[0]}.{parts[1]}")
    if not names:  # no file list (an egg, say): top_level.txt
        names.update((dist.read_text("top_level.txt") or "").split())
    return sorted(n for n in names if not any(p.startswith("_") for p in n.split("."))
                  and n.replace(".", "").isidentifier() and n not in ("test", "tests"))


def check_requirements(extras: Sequence[str]) -> Tuple[List[str], List[str]]:
    """(problems, distributions checked) for recio's requirements under ``extras``."""
    dists = installed()
    recio = dists.get("recio")
    if recio is None:
        return [f"recio is not installed for {sys.executable}: run make install-dev "
                "(pip install -e '.[dev]')"], []
    declared = recio.metadata.get_all("Provides-Extra") or []
    problems = [f"recio declares no extra {e!r} (it has {', '.join(declared)})"
                for e in extras if e not in declared]
    checked: List[str] = []
    todo: List[Tuple[Requirement, Sequence[str], str]] = [
        (Requirement(r), extras, "recio") for r in recio.requires or []]
    seen: Set[str] = set()
    while todo:
        req, wanted, needed_by = todo.pop(0)
        if not applies(req, wanted):
            continue
        key = _canonical(req.name)
        dist = dists.get(key)
        extra = re.search(r'extra == "([^"]+)"', str(req.marker or ""))
        by = f"{needed_by}[{extra.group(1)}]" if extra and needed_by == "recio" else needed_by
        wanted_spec = f"{req.name}{'[%s]' % ','.join(sorted(req.extras)) if req.extras else ''}"
        hint = f"(needed by {by}): pip install '{wanted_spec}{req.specifier}'"
        if dist is None:
            problems.append(f"{req.name} is not installed {hint}")
            continue
        version = dist.version
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name} {version} is installed, which {req} excludes {hint}")
            continue
        if key in seen:
            continue
        seen.add(key)
        checked.append(f"{req.name} {version}")
        if needed_by == "recio":  # what recio imports: its packages must import
            problems += import_problems(dist, req, hint)
            for extra in sorted(req.extras):  # moto[server]: the server extra's requirements
                todo += [(Requirement(r), (extra,), f"{req.name}[{extra}]")
                         for r in dist.requires or [] if "extra" in r]
    return problems, checked


def import_problems(dist: metadata.Distribution, req: Requirement, hint: str) -> List[str]:
    problems = []
    for name in import_names(dist):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                importlib.import_module(name)
        except Exception as exc:  # any failure to import is the finding
            first = (str(exc).splitlines() or [""])[0]
            problems.append(f"{req.name} {dist.version} is installed but `import {name}` fails: "
                            f"{type(exc).__name__}: {first} {hint}")
    return problems


def check_torch() -> List[str]:
    problems = []
    for name in TORCH_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:
            problems.append(f"`import {name}` fails: {type(exc).__name__}: {exc} (make "
                            "install-torch installs the pinned torch and torchdata)")
    return problems


def _run(argv: List[str], cwd: Path) -> Tuple[int, str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    return done.returncode, (done.stdout + done.stderr).strip()


def check_commands(python: str = sys.executable) -> Tuple[List[str], str]:
    """Run the commands as a user does; (problems, what ran)."""
    from PIL import Image  # a core dependency, checked above

    recio_cmd, im2rec_cmd = [python, "-m", "recio"], [python, "-m", "recio.im2rec"]
    problems: List[str] = []
    version = metadata.version("recio")
    for name, argv in (("recio", recio_cmd), ("im2rec", im2rec_cmd)):
        status, out = _run(argv + ["--version"], Path.cwd())
        if status != 0 or out != f"{name}, version {version}":
            problems.append(f"`{name} --version` printed {out!r} (exit status {status})")
    with tempfile.TemporaryDirectory(prefix="recio-check-install-") as tmp:
        folder = Path(tmp)
        for label, ext, size in (("red", ".jpg", (64, 48)), ("blue", ".png", (40, 72))):
            (folder / "images" / label).mkdir(parents=True)
            colour = (200, 30, 30) if label == "red" else (30, 30, 200)
            Image.new("RGB", size, colour).save(folder / "images" / label / f"one{ext}")
        steps = (im2rec_cmd + ["data", "images", "--list", "--recursive"],
                 im2rec_cmd + ["data", "images", "--resize", "32", "--num-thread", "2"],
                 recio_cmd + ["verify", "data.rec", "--images"],
                 recio_cmd + ["inspect", "data.rec", "--json"])
        for argv in steps:
            status, out = _run(argv, folder)
            if status != 0:
                problems.append(f"`{' '.join(argv[2:])}` failed with exit status {status}: "
                                f"{out.splitlines()[-1] if out else ''}")
                break
        else:
            if '"records": 2' not in out:
                problems.append(f"`recio inspect data.rec --json` counted not 2 records: {out}")
    return problems, "recio --version, im2rec --version, a list, a pack, verify, inspect"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", action="store_true", help="also torch and torchdata")
    parser.add_argument("--docs", action="store_true", help="also the docs extra")
    parser.add_argument("--extras", help="the extras to check, comma-separated (default: every "
                        "extra recio declares but torch and docs)")
    args = parser.parse_args(argv)
    if args.extras is not None:
        extras = [e for e in args.extras.split(",") if e]
    else:
        try:
            declared = metadata.metadata("recio").get_all("Provides-Extra") or []
        except metadata.PackageNotFoundError:
            declared = []
        extras = [e for e in declared if e not in SEPARATE_EXTRAS]
    extras += [e for e in SEPARATE_EXTRAS if getattr(args, e) and e not in extras]
    problems, checked = check_requirements(extras)
    if args.torch:
        problems += check_torch()
    if not problems:  # the commands need the core dependencies
        found, ran = check_commands()
        problems += found
    for problem in problems:
        print(f"check_install: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_install: recio[{','.join(extras)}]: {len(checked)} requirements installed "
          f"and importing{', torch and torchdata' if args.torch else ''}; ran {ran}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
