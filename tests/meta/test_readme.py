"""README.md and the documentation site's pages (docs/**/*.md) are tested: every code block runs
as written, every command and name they show exists.

Each fenced ``python`` or ``bash`` block must follow an HTML comment (invisible on GitHub) that
says what the block needs::

    <!-- readme-test: setup=images needs=torch -->      python: run in a fresh namespace
    <!-- readme-test: run setup=cbf -->                 bash: run each command, exit status 0
    <!-- readme-test: check -->                         bash: check each command, run nothing

``setup`` names the input files the test writes into an empty folder before the block runs (the
SETUPS below; ``none`` for a block that makes its own), ``needs`` the optional dependencies (a
missing one skips the block, and fails it under ``CI=true``). A python block without the comment,
an unknown setup, or a shell command the test does not know how to check is a failure, so a new
block cannot go untested. Blocks run as written, in a temporary working folder.

Besides the blocks, every ``recio``/``im2rec`` command line quoted in the text must use options
the commands have, every ``recio.x.y`` name must resolve, and every ``recio/...py`` or
``examples/...`` path must exist. The site's own links, anchors and API reference are checked by
``mkdocs build --strict`` (``make test``); the README's links to its sections here.
"""
from __future__ import annotations

import pathlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import click
import numpy as np
import pytest

import recio
from conftest import GOLDEN, command, need
from recio.cli.im2rec import im2rec_cmd
from recio.cli.main import recio as recio_group
from recio.optional import TORCH_CPU_INDEX

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: every page of the documentation site (mkdocs.yml), then the README: each runs the same way
DOCUMENTS = sorted((ROOT / "docs").rglob("*.md")) + [README]

PYTHON_LANGS = {"python", "py", "python3"}
SHELL_LANGS = {"bash", "sh", "shell", "console"}
#: fenced blocks that are not code (byte layouts, the source tree)
TEXT_LANGS = {"", "text"}

_FENCE = re.compile(r"^```([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_SPEC = re.compile(r"<!--\s*readme-test:((?:(?!-->).)*)-->\s*\Z", re.S)


# -- parsing the README ---------------------------------------------------------------------------

@dataclass
class Block:
    """One fenced code block: where it is, its language, code and readme-test comment."""

    doc: str                     # the file, relative to the repository
    line: int                    # line of the opening fence, 1-based
    lang: str
    code: str
    spec: Optional[str]          # the text of the readme-test comment, None when there is none
    setups: List[str] = field(default_factory=list)
    needs: List[str] = field(default_factory=list)
    flags: List[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        first = next((ln for ln in self.code.splitlines() if ln.strip()
                      and not ln.startswith("#")), "")
        return f"{self.doc}:{self.line} {first.strip()[:40]}"


def parse_blocks(text: str, doc: str = "README.md") -> List[Block]:
    """Every fenced block of ``text`` with the readme-test comment right before it (only blank
    lines may come between), split into setups, needs and flags (``run``, ``check``)."""
    blocks = []
    for m in _FENCE.finditer(text):
        before = text[:m.start()].rstrip()
        spec = _SPEC.search(before)
        block = Block(doc, text.count("\n", 0, m.start()) + 1, m.group(1).lower(), m.group(2),
                      spec.group(1).strip() if spec else None)
        for word in (block.spec or "").split():
            key, _, value = word.partition("=")
            if key == "setup":
                block.setups += [v for v in value.split(",") if v]
            elif key == "needs":
                block.needs += [v for v in value.split(",") if v]
            else:
                block.flags.append(word)
        blocks.append(block)
    return blocks


def spec_problems(block: Block) -> List[str]:
    """Why the test could not run ``block`` as its comment asks (empty when it can)."""
    if block.lang in TEXT_LANGS:
        return [] if block.spec is None else ["a readme-test comment on a block that is not code"]
    if block.lang not in PYTHON_LANGS | SHELL_LANGS:
        return [f"unknown block language {block.lang!r}: tests/meta/test_readme.py runs python and "
                f"bash blocks; mark text as plain ``` and teach the test other languages"]
    if block.spec is None:
        return ["no <!-- readme-test: setup=... --> comment before the block: say which input "
                "files it needs (see tests/meta/test_readme.py)"]
    problems = [f"unknown setup {s!r} (known: {', '.join(sorted(SETUPS))})"
                for s in block.setups if s not in SETUPS]
    if block.lang in PYTHON_LANGS:
        if not block.setups:
            problems.append("a python block needs setup=NAME (setup=none when it makes its "
                            "own files)")
        problems += [f"unknown flag {f!r} for a python block" for f in block.flags]
    else:
        modes = [f for f in block.flags if f in ("run", "check")]
        if len(modes) != 1 or len(block.flags) != 1:
            problems.append(f"a shell block takes exactly one of run / check, got {block.flags}")
    return problems


# -- input files ----------------------------------------------------------------------------------

def _copy(src: pathlib.Path, dst: str) -> None:
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)


def _photo() -> None:
    """cat.jpg: one JPEG photo."""
    _copy(GOLDEN / "im2rec" / "images" / "cat" / "cat_0.jpg", "cat.jpg")


def _photos() -> None:
    """images/: the folder of class sub-folders im2rec's golden files were made from."""
    _copy(GOLDEN / "im2rec" / "images", "images")


def _images() -> None:
    """train.rec + train.idx: 13 image records (JPEG and PNG) packed by MXNet's im2rec."""
    _copy(GOLDEN / "im2rec" / "all.rec", "train.rec")
    _copy(GOLDEN / "im2rec" / "all.idx", "train.idx")


def _damaged() -> None:
    """damaged.rec + damaged.idx: the 15 images of tests/data/mxnet_damaged as MXNet's im2rec
    packed them (--pass-through): 4 that nothing decodes (keys 0, 4, 5, 14), 11 that do."""
    _copy(GOLDEN.parent / "mxnet_damaged" / "mxnet" / "raw_damaged.rec", "damaged.rec")
    _copy(GOLDEN.parent / "mxnet_damaged" / "mxnet" / "raw_damaged.idx", "damaged.idx")


def _shards() -> None:
    """train_0.rec, train_1.rec: two image record files written by MXNet."""
    _copy(GOLDEN / "split" / "part0.rec", "train_0.rec")
    _copy(GOLDEN / "split" / "part1.rec", "train_1.rec")


def _faces() -> None:
    """train.rec + train.idx in InsightFace's layout: key 0 holds ``[N+1, N+1+ids]``, keys 1..N
    the faces (label ``[identity, 0]``), then one header-only record per identity."""
    rng = np.random.default_rng(0)
    counts = (3, 2)
    n, ids = sum(counts), len(counts)
    with recio.IndexedRecordWriter("train.rec", "train.idx") as w:
        w.write(0, recio.pack(recio.IRHeader(2, [n + 1, n + 1 + ids], 0, 0), b""))
        key, ranges = 1, []
        for identity, count in enumerate(counts):
            ranges.append((key, key + count))
            for _ in range(count):
                face = rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)
                w.write(key, recio.pack_img(recio.IRHeader(2, [identity, 0], key, 0), face))
                key += 1
        for first, end in ranges:
            w.write(key, recio.pack(recio.IRHeader(2, [first, end], key, 0), b""))
            key += 1


def _sequences() -> None:
    """train.rec + .idx + .len: 48 sequence records, ``features`` (N x 40 float32, N from 3 to
    120) and ``label`` (one int64)."""
    rng = np.random.default_rng(0)
    with recio.sequence.SequenceWriter("train.rec") as w:
        for i in range(48):
            n = int(rng.integers(3, 121))
            w.write({"features": rng.random((n, 40), dtype=np.float32),
                     "label": np.array([i % 5], dtype=np.int64)})


def _cbf() -> None:
    """train.cbf: 23 sequences, streams ``features`` (dense) and ``labels`` (sparse), from the
    golden CBF files."""
    _copy(GOLDEN / "cbf" / "float.cbf", "train.cbf")


#: setup name -> function writing its files into the current folder
SETUPS: Dict[str, Callable[[], None]] = {
    "none": lambda: None,
    "photo": _photo,
    "photos": _photos,
    "images": _images,
    "damaged": _damaged,
    "shards": _shards,
    "faces": _faces,
    "sequences": _sequences,
    "cbf": _cbf,
}


def prepare(block: Block) -> None:
    """Check the block's comment, import what it needs and write its inputs into the current
    folder."""
    problems = spec_problems(block)
    if problems:
        pytest.fail(f"{block.name}: " + "; ".join(problems), pytrace=False)
    for module in block.needs:
        need(module)
    for name in block.setups:
        SETUPS[name]()


# -- running python blocks ------------------------------------------------------------------------

#: the module name the blocks run as
BLOCK_MODULE = "readme_block"


def run_python(code: str, label: str) -> Dict[str, object]:
    """Exec ``code`` as a fresh module in the current folder; returns its namespace."""
    namespace: Dict[str, object] = {"__name__": BLOCK_MODULE}
    exec(compile(code, label, "exec"), namespace)
    return namespace


# -- checking and running shell blocks ------------------------------------------------------------

#: command words that only set up the reader's shell (checked literally, never run)
SHELL_SETUP = {("python3", "-m", "venv", ".venv"), (".", ".venv/bin/activate"),
               ("source", ".venv/bin/activate")}


def shell_commands(code: str) -> List[List[str]]:
    """The commands of a shell block: lines joined at ``\\``, comments dropped, split at &&."""
    commands: List[List[str]] = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            if words[:cut]:
                commands.append(words[:cut])
            words = words[cut + 1:]
    return commands


def _click_command(words: List[str]) -> Tuple[click.Command, List[str]]:
    """The click command that ``recio SUB ...`` / ``im2rec ...`` runs, and its arguments."""
    if words[0] == "im2rec":
        return im2rec_cmd, words[1:]
    group = recio_group
    rest = words[1:]
    sub = next((w for w in rest if not w.startswith("-")), None)
    if sub is None:
        return group, rest
    cmd = group.get_command(click.Context(group), sub)
    if cmd is None:
        raise AssertionError(f"`{' '.join(words)}`: recio has no command {sub!r}")
    return cmd, rest[rest.index(sub) + 1:]


def option_problems(words: List[str]) -> List[str]:
    """Options in a ``recio``/``im2rec`` command line that the command does not have."""
    try:
        cmd, args = _click_command(words)
    except AssertionError as exc:
        return [str(exc)]
    known = {"--help", "-h"}
    for param in cmd.params:
        known.update(getattr(param, "opts", []))
        known.update(getattr(param, "secondary_opts", []))
    problems = []
    for arg in args:
        arg = arg.strip("[]")
        if not arg.startswith("-") or re.fullmatch(r"-\d[\d.]*", arg) or arg == "--":
            continue
        name = arg.split("=", 1)[0]
        if name not in known and not (len(name) > 2 and name[1] != "-" and name[:2] in known):
            problems.append(f"`{' '.join(words)}`: {cmd.name} has no option {name}")
    return problems


def _extras() -> set:
    """The extras pyproject.toml declares (``[project.optional-dependencies]``)."""
    text = (ROOT / "pyproject.toml").read_text()
    section = re.search(r"^\[project\.optional-dependencies\]\n(.*?)(?=^\[)", text, re.S | re.M)
    return set(re.findall(r"^(\w[\w-]*)\s*=", section.group(1), re.M)) if section else set()


def check_command(words: List[str]) -> Tuple[Optional[List[str]], List[str]]:
    """(argv to run or None, problems) for one README shell command."""
    if words[0] in ("recio", "im2rec"):
        return command(words[0]) + words[1:], option_problems(words)
    if words[:2] in (["python", "-m"], ["python3", "-m"]) and words[2] in ("recio", "recio.im2rec"):
        short = "recio" if words[2] == "recio" else "im2rec"
        return command(short) + words[3:], option_problems([short] + words[3:])
    if words[0] == "make":
        makefile = (ROOT / "Makefile").read_text()
        missing = [t for t in words[1:] if "=" not in t
                   and not re.search(rf"^{re.escape(t)}:", makefile, re.M)]
        return None, [f"`make {t}`: the Makefile has no target {t}" for t in missing]
    if words[:3] == ["pip", "install", "-e"] and len(words) == 4:
        m = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", words[3])
        if not m:
            return None, [f"`{' '.join(words)}`: expected . or .[extra,...]"]
        extras = set((m.group(1) or "").split(",")) - {""}
        return None, [f"`{' '.join(words)}`: pyproject.toml has no extra {e!r}"
                      for e in sorted(extras - _extras())]
    if words[:3] == ["pip", "install", "torch"]:
        cpu = ["--index-url", TORCH_CPU_INDEX]
        return None, [] if words[3:] == cpu else [
            f"`{' '.join(words)}`: install torch from PyTorch's CPU index ({' '.join(cpu)}): "
            "plain pip fetches the multi-GB CUDA build on Linux"]
    if words[0] == "mkdir" and words[1:2] == ["-p"]:  # as Python: Windows has no mkdir program
        return [sys.executable, "-c", "import os, sys\nfor p in sys.argv[1:]: "
                "os.makedirs(p, exist_ok=True)", *words[2:]], []
    if words[0] in ("python", "python3") and len(words) >= 2 and words[1].endswith(".py"):
        exists = (ROOT / words[1]).is_file()
        return None, [] if exists else [f"`{' '.join(words)}`: no file {words[1]}"]
    if tuple(words) in SHELL_SETUP:
        return None, []
    return None, [f"`{' '.join(words)}`: tests/meta/test_readme.py does not know this command; "
                  "teach check_command how to check it"]


def run_shell(block: Block) -> None:
    """Check every command of ``block``; with the ``run`` flag also run them, in order."""
    problems, argvs = [], []
    for words in shell_commands(block.code):
        argv, found = check_command(words)
        problems += found
        argvs.append((words, argv))
    assert not problems, f"{block.name}:\n" + "\n".join(problems)
    if "run" not in block.flags:
        return
    for words, argv in argvs:
        assert argv is not None, f"{block.name}: `{' '.join(words)}` cannot be run by the test"
        result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (f"{block.name}: `{' '.join(words)}` exited with "
                                        f"{result.returncode}:\n{result.stdout}\n{result.stderr}")


# -- the tests ------------------------------------------------------------------------------------

def _relative(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


def all_text() -> str:
    """The README and every page of the site, one after another."""
    return "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)


BLOCKS = [block for path in DOCUMENTS
          for block in parse_blocks(path.read_text(encoding="utf-8"), _relative(path))]
CODE_BLOCKS = [b for b in BLOCKS if b.lang not in TEXT_LANGS]


def test_every_page_of_the_site_is_run():
    """The pages mkdocs.yml's navigation lists are among the documents whose blocks run here."""
    nav = re.findall(r"^\s+- (?:[^\n]*: )?([\w/.-]+\.md)\s*$",
                     (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    assert "index.md" in nav and "api/recio.md" in nav
    run = {_relative(path) for path in DOCUMENTS}
    assert {f"docs/{page}" for page in nav} <= run
    assert {b.doc for b in CODE_BLOCKS} >= {"README.md", "docs/im2rec.md",
                                            "docs/training/pytorch.md"}


def test_every_code_block_says_what_it_needs():
    problems = [f"{b.name}: {p}" for b in BLOCKS for p in spec_problems(b)]
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in CODE_BLOCKS if b.lang in PYTHON_LANGS],
                         ids=lambda b: f"{b.doc}:{b.line}")
def test_python_block_runs_as_written(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prepare(block)
    run_python(block.code, f"{block.doc}:{block.line}")


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in CODE_BLOCKS if b.lang in SHELL_LANGS],
                         ids=lambda b: f"{b.doc}:{b.line}")
def test_shell_block_commands_exist_and_run(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prepare(block)
    run_shell(block)


# -- the same blocks on another .rec, made as the docs show -----------------------------------

#: class folder -> the photos made in it: (file name, width, height, Pillow mode)
OTHER_PHOTOS = {f"class_{c}": [(f"p{c}{i}.{'png' if (c + i) % 3 == 0 else 'jpg'}",
                                 40 + 17 * ((c * 3 + i) % 5), 32 + 13 * ((c + 2 * i) % 4),
                                 ("RGB", "L", "RGBA", "RGB")[(c + i) % 4])
                                for i in range(2 + c % 2)] for c in range(7)}


@pytest.fixture(scope="module")
def other_pack(tmp_path_factory) -> pathlib.Path:
    """A folder holding train.rec + train.idx made as README.md and docs/im2rec.md show: the
    photos of 7 class folders (JPEG and PNG; colour, grey and transparent; landscape and
    portrait, none like the golden ones) listed by ``im2rec train images/ --list --recursive``
    and packed by ``im2rec train images/ --resize 256 --quality 95 --num-thread 4``."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("other_pack")
    rng = np.random.default_rng(7)
    for label, photos in OTHER_PHOTOS.items():
        (folder / "images" / label).mkdir(parents=True)
        for name, width, height, mode in photos:
            ramp = np.linspace(0, 255, width * height * 4).reshape(height, width, 4)
            pixels = (ramp + rng.integers(0, 40, ramp.shape)).clip(0, 255).astype(np.uint8)
            image = Image.fromarray(pixels, "RGBA").convert(mode)
            if name.endswith(".jpg") and mode == "RGBA":
                image = image.convert("RGB")
            image.save(folder / "images" / label / name)
    for args in (["--list", "--recursive"], ["--resize", "256", "--quality", "95",
                                              "--num-thread", "4"]):
        done = subprocess.run(command("im2rec") + ["train", "images/"] + args, cwd=folder,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    assert (folder / "train.rec").is_file() and (folder / "train.idx").is_file()
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in CODE_BLOCKS if b.lang in PYTHON_LANGS
                                   and "images" in b.setups], ids=lambda b: f"{b.doc}:{b.line}")
def test_image_blocks_run_on_any_rec_the_docs_make(block, other_pack, tmp_path, monkeypatch):
    """Every block written for ``train.rec`` (setup=images, the golden 13 images of 4 classes)
    runs as written on another one: 7 classes, other sizes and formats. A block that counts
    on the golden file (``num_classes = 4``) fails here."""
    monkeypatch.chdir(tmp_path)
    problems = spec_problems(block)
    assert not problems, problems
    for module in block.needs:
        need(module)
    for name in block.setups:
        if name == "images":
            for ext in (".rec", ".idx"):
                shutil.copyfile(other_pack / f"train{ext}", f"train{ext}")
        else:
            SETUPS[name]()
    run_python(block.code, f"{block.doc}:{block.line}")


def test_the_other_pack_has_seven_classes(other_pack):
    labels = {recio.unpack(r)[0].label for r in recio.RecordReader(str(other_pack / "train.rec"))}
    assert labels == {float(c) for c in range(7)}


def _prose(text: str) -> str:
    """``text`` without its fenced blocks (those are run instead)."""
    return _FENCE.sub("", text)


def quoted_commands(text: str) -> List[List[str]]:
    """``recio ...`` and ``im2rec ...`` command lines quoted in backticks in the prose."""
    found = []
    for span in re.findall(r"`((?:recio|im2rec) [^`\n]+)`", _prose(text)):
        words = shlex.split(span.replace("[", " ").replace("]", " "))
        found.append(words)
    return found


def test_commands_quoted_in_the_text_have_those_options():
    text = all_text()
    commands = quoted_commands(text)
    assert len(commands) >= 10  # the table of commands, the bucketing and im2rec notes
    problems = [p for words in commands for p in option_problems(words)]
    assert not problems, "\n".join(problems)


def dotted_names(text: str) -> List[str]:
    """Every ``recio.a.b`` name ``text`` mentions, in the prose and in the blocks (not in link
    targets: ``api/recio.md`` is a page)."""
    text = re.sub(r"\]\([^)\s]*\)", "]", text)
    return sorted(set(re.findall(r"\brecio(?:\.[A-Za-z_]\w*)+", text)))


def resolve(name: str) -> object:
    """Import the longest module prefix of ``name`` and look the rest up as attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = __import__(module_name, fromlist=["_"])
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue
            raise
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(f"nothing of {name} can be imported")


def test_every_recio_name_in_the_text_exists_under_that_name():
    text = all_text()
    names = dotted_names(text)
    assert "recio.image.pixels.codec.DEFAULT_MAX_PIXELS" in names
    if any(n.startswith("recio.torch") for n in names):
        need("torch")
    problems = []
    for name in names:
        try:
            resolve(name)
        except (ImportError, AttributeError, AssertionError) as exc:
            problems.append(f"{name}: {type(exc).__name__}: {exc}")
    assert not problems, "\n".join(problems)


def test_every_file_path_in_the_text_exists():
    text = all_text()
    paths = set(re.findall(r"`((?:recio|examples|benchmarks|tests)/[\w./-]*\w)`", text))
    paths |= set(re.findall(r"See `(recio/[\w/]+\.py)`", text))
    assert "recio/records/framing.py" in paths
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"the documentation names files that do not exist: {missing}"


def heading_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    each space a ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchor_problems(text: str) -> List[str]:
    """The ``(#anchor)`` links of ``text`` that no heading of it makes."""
    headings = re.findall(r"^#+ (.+)$", _prose(text), re.M)
    anchors = {heading_anchor(h) for h in headings}
    return [f"[{label}](#{target}): no heading makes #{target}" for label, target
            in re.findall(r"\[([^\]]+)\]\(#([^)\s]+)\)", _prose(text)) if target not in anchors]


def test_every_link_to_a_section_finds_it():
    """The contents once linked to "Feeding .rec files to training" after the section was
    gone. (The site's pages: ``mkdocs build --strict`` checks their links and anchors.)"""
    problems = anchor_problems(README.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)
    assert anchor_problems("# Feeding `.rec` files: now!\n[x](#feeding-rec-files-now)") == []
    assert anchor_problems("# Other\n[x](#feeding-rec-files-to-training)") != []


def test_every_file_the_readme_links_to_exists():
    """The README's links into docs/ (GitHub shows the pages as they are in the repository)."""
    links = re.findall(r"\]\(((?![a-z]+:|#)[^)\s#]+)", _prose(README.read_text(encoding="utf-8")))
    assert "docs/index.md" in links
    missing = sorted(link for link in links if not (ROOT / link).exists())
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_no_code_hides_in_indented_blocks():
    """A command or import in a 4-space indented block would escape the tests above."""
    lines = _prose(all_text()).splitlines()
    hidden = [ln for ln in lines
              if re.match(r"    +(recio |im2rec |import |from recio|python )", ln)]
    assert not hidden, f"use a fenced block with a readme-test comment for: {hidden}"


# -- the checks above can fail ---------------------------------------------------------------------

def test_a_block_without_its_comment_or_with_an_unknown_setup_is_refused():
    text = ("Some text.\n\n```python\nimport recio\n```\n\n"
            "<!-- readme-test: setup=nonesuch -->\n```python\nimport recio\n```\n\n"
            "<!-- readme-test: setup=none -->\n```python\nimport recio\n```\n\n"
            "```bash\nrecio inspect train.rec\n```\n\n```\n+---+ a byte layout\n```\n")
    problems = [spec_problems(b) for b in parse_blocks(text)]
    assert [len(p) for p in problems] == [1, 1, 0, 1, 0]
    assert "no <!-- readme-test" in problems[0][0] and "nonesuch" in problems[1][0]


def test_an_option_the_command_lacks_is_reported():
    assert option_problems(["recio", "buckets", "train.rec", "-n", "3", "--json"]) == []
    assert option_problems(["recio", "split", "a.rec", "--parts", "8"]) == \
        ["`recio split a.rec --parts 8`: split has no option --parts"]
    assert option_problems(["recio", "nosuch", "x"]) == \
        ["`recio nosuch x`: recio has no command 'nosuch'"]
    assert check_command(["make", "nosuch"])[1] == \
        ["`make nosuch`: the Makefile has no target nosuch"]
    assert check_command(["pip", "install", "-e", ".[nosuch]"])[1] != []
    assert check_command(["curl", "example.com"])[1] != []


def test_a_missing_name_is_reported():
    with pytest.raises(AttributeError):
        resolve("recio.records.reader.NoSuchName")
    assert resolve("recio.image.pixels.codec.DEFAULT_MAX_PIXELS") == \
        __import__("recio.image.pixels.codec", fromlist=["_"]).DEFAULT_MAX_PIXELS


# -- the Benchmarks page (benchmarks/README.md, the site's benchmarks.md) ----------------------

BENCHMARKS = ROOT / "benchmarks" / "README.md"


def test_the_benchmarks_page_cites_a_record_for_every_figure():
    """Each row of its figure tables names the results file its figures come from, and that
    file exists; the page narrates no development (no issue numbers, no dated sessions)."""
    text = BENCHMARKS.read_text(encoding="utf-8")
    assert (ROOT / "docs" / "benchmarks.md").read_text().strip() == '--8<-- "benchmarks/README.md"'
    figures = text.split("## Current figures", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in figures.splitlines() if ln.startswith("| ") and not ln.startswith(
        ("| what |", "| case |", "| --- |"))]
    assert len(rows) >= 30, len(rows)
    for row in rows:
        if row.startswith("| crop") or row.startswith("| random resized crop"):
            continue  # the DALI table: its paragraph names the record
        cited = re.findall(r"`(?:benchmarks/)?(results/[\w.-]+)`|^\| .* \| as above \|$", row)
        assert cited, f"no record for: {row}"
    named = set(re.findall(r"`(?:benchmarks/)?(results/[\w.-]+\.(?:md|txt))`", text))
    assert len(named) >= 10, named
    missing = sorted(p for p in named if not (ROOT / "benchmarks" / p).is_file())
    assert not missing, missing
    assert not re.search(r"(?i)\bissue \d+|\bsession\b|\bbefore and after\b", text)
    assert "Python ≤ 3.9" not in text and "numpy<1.24" in text
