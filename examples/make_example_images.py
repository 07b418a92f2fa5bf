"""Regenerate examples/images/: ~32 small photos in 4 class folders for `make demo`.

Crops of photographs shipped with scikit-image (``skimage.data``), all public domain or CC0
(see examples/images/LICENSE.txt). Needs ``pip install scikit-image``; the generated images are
committed, so ``make demo`` itself never needs scikit-image.
"""
import os
import random
import sys

from PIL import Image

#: class folder -> skimage.data photograph
CLASSES = {"cat": "chelsea", "coffee": "coffee", "rocket": "rocket", "space": "hubble_deep_field"}
PER_CLASS = 8


def main(out_dir: str) -> None:
    import skimage.data

    rng = random.Random(5)
    for folder, source in CLASSES.items():
        photo = Image.fromarray(getattr(skimage.data, source)())
        os.makedirs(os.path.join(out_dir, folder), exist_ok=True)
        sw, sh = photo.size
        for i in range(PER_CLASS):
            long_side = rng.randint(160, 240)
            ratio = rng.uniform(0.6, 0.9)
            tw, th = (long_side, int(long_side * ratio)) if i % 3 else (int(long_side * ratio),
                                                                          long_side)
            scale = min(sw / tw, sh / th) * rng.uniform(0.5, 1.0)
            cw, ch = int(tw * scale), int(th * scale)
            left, top = rng.randint(0, sw - cw), rng.randint(0, sh - ch)
            img = photo.resize((tw, th), Image.LANCZOS, box=(left, top, left + cw, top + ch))
            if i == PER_CLASS - 1:
                img.save(os.path.join(out_dir, folder, f"{folder}_{i}.png"), optimize=True)
            else:
                img.save(os.path.join(out_dir, folder, f"{folder}_{i}.jpg"), quality=85)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "images"))
