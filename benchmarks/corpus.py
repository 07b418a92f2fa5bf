"""A reproducible photo-like image corpus for the benchmarks, cut from real photographs.

``make_corpus(out_dir, n=2000, seed=0)`` writes ``n`` images into 10 class folders
(``class_0`` … ``class_9``): random crops of the colour photographs (and, for ~10%, the grey
ones) shipped inside scikit-image (``skimage.data``: public domain or CC0, see each function's
docstring), flipped and rescaled so that about 85% have the long side in 400–640 px and 15% in
1200–2400 px; about 3% are PNG, the rest JPEG at quality 80–95. The same ``(n, seed)`` always
gives the same files, and a finished corpus is reused (a ``corpus.json`` marker records it).

Benchmark-only: needs ``pip install scikit-image`` (never a dependency of recio).
"""
from __future__ import annotations

import json
import os
import random
import sys
from typing import List

#: skimage.data photographs used as sources (all public domain or CC0)
SOURCES = ("astronaut", "coffee", "chelsea", "rocket", "retina", "hubble_deep_field",
           "immunohistochemistry", "camera", "coins", "grass", "gravel", "brick")
_N_COLOUR = 7  # the first seven are colour
CLASSES = 10
_VERSION = 2


def _load_sources():
    try:
        import skimage.data
    except ImportError as exc:  # benchmark-only dependency
        raise ImportError("the benchmark corpus needs scikit-image: "
                          "pip install scikit-image") from exc
    from PIL import Image

    images = []
    for name in SOURCES:
        array = getattr(skimage.data, name)()
        images.append(Image.fromarray(array))  # RGB or L (camera, coins, textures)
    return images


def make_corpus(out_dir: str, n: int = 2000, seed: int = 0) -> List[str]:
    """Write (or reuse) the corpus in ``out_dir``; returns the image paths, sorted."""
    from PIL import Image

    marker = os.path.join(out_dir, "corpus.json")
    wanted = {"version": _VERSION, "n": n, "seed": seed}
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as f:
            info = json.load(f)
        if {k: info.get(k) for k in wanted} == wanted:
            return [os.path.join(out_dir, p) for p in info["files"]]
    rng = random.Random(seed)
    sources = _load_sources()
    files = []
    for c in range(CLASSES):
        os.makedirs(os.path.join(out_dir, f"class_{c}"), exist_ok=True)
    for i in range(n):
        # mostly colour photographs; about 10% from the grey ones (camera, coins, textures)
        src = sources[rng.randrange(_N_COLOUR) if rng.random() < 0.9
                      else rng.randrange(_N_COLOUR, len(sources))]
        big = rng.random() < 0.15
        long_side = rng.randint(1200, 2400) if big else rng.randint(400, 640)
        ratio = rng.uniform(0.56, 0.9)  # short / long
        short_side = max(1, int(long_side * ratio))
        landscape = rng.random() < 0.7
        tw, th = (long_side, short_side) if landscape else (short_side, long_side)
        # the largest crop of the source with the target's aspect, then a random fraction of it
        sw, sh = src.size
        scale = min(sw / tw, sh / th) * rng.uniform(0.45, 1.0)
        cw, ch = max(8, int(tw * scale)), max(8, int(th * scale))
        left, top = rng.randint(0, sw - cw), rng.randint(0, sh - ch)
        img = src.resize((tw, th), Image.BICUBIC, box=(left, top, left + cw, top + ch))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        png = rng.random() < 0.03
        rel = os.path.join(f"class_{i % CLASSES}", f"img_{i:05d}.{'png' if png else 'jpg'}")
        path = os.path.join(out_dir, rel)
        if png:
            img.save(path, "PNG", compress_level=6)
        else:
            img.save(path, "JPEG", quality=rng.randint(80, 95))
        files.append(rel)
    files.sort()
    with open(marker, "w", encoding="utf-8") as f:
        json.dump(dict(wanted, files=files), f)
    return [os.path.join(out_dir, p) for p in files]


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "out",
                                                             "corpus")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    paths = make_corpus(out, count)
    print(f"{len(paths)} images in {out}")
