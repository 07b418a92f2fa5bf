"""Make the MXNet reference data of this folder: run once with the real MXNet, never edit.

    /work/mxvenv/bin/python tests/data/mxnet_iter/make.py    # MXNet 1.9.1 (+ numpy, Pillow, cv2)

Writes, with ``mxnet`` (records, iterators) and Pillow (encoding the synthetic source images):

- ``train.rec``/``.idx``: 12 images (JPEG colour and grey, PNG, sizes from 16x16 to 120x90,
  smaller and larger than the 32x32 crop, portrait and landscape), key and label i;
  ``train.lst``: three labels per image id, for ``path_imglist``; ``multi.rec``/``.idx``: the
  same images with two labels each (``label = [i, 10 i]``); ``rgba.rec``/``.idx``: four RGBA
  PNGs; ``photos.rec``/``.idx``: three photo-sized JPEGs (500x375, 375x500, 640x427).
- ``stats_*.rec``/``.idx``: one synthetic image repeated, for the statistics of MXNet's random
  augmentations (``STATS`` below says what each sample reduces to).
- ``mean.nd``: the mean image MXNet's ``ImageRecordIter`` computed and saved for a
  ``mean_img`` path that did not exist.
- ``expected.json``: for each configuration of ``CONFIGS``, the ImageRecordIter arguments,
  ``provide_data``/``provide_label`` (name, shape, dtype, layout), and for three epochs (with
  ``reset()`` after each) every batch's ``pad``, the batch count and the dtypes;
  ``expected.npz``: the batches' labels (``NAME|EPOCH|BATCH|label``) and the first epoch's data
  (each array once, as ``data|SHA``, uint8 when it is integral; the configuration's ``refs``
  in ``expected.json`` map batches to them; ``digests`` are the sha256 of every batch's data
  bytes), with ``round_batch=False`` only the real samples of the last batch (MXNet leaves the
  rest stale); the ``photos_*`` configurations keep only digests and every 8th pixel
  (``|sample``); ``stats|NAME`` are the statistics.
- ``nd|...``, ``imageiter|...``, ``dataset|...``, ``loader|...``: what ``mx.io.NDArrayIter``
  (``ND_CONFIGS``), ``mx.image.ImageIter`` (``IMAGEITER_CONFIGS``, two epochs; the ``random``
  one after ``random.seed(7)`` and ``numpy.random.seed(7)``),
  ``mx.gluon.data.vision.ImageRecordDataset`` (flag 1 and 0) and a ``gluon.data.DataLoader``
  over it returned, with their ``provide_data``/``provide_label``, pads and dtypes.
- ``resize`` (in ``expected.json``): the sha256 of ``mx.image.imresize`` (MXNet's OpenCV) for
  every case of ``resize_cases()`` and interpolation 0-4, on ``noise_image`` inputs.
- ``gluoncv``: GluonCV's ``get_data_rec`` (ImageNet recipe; 32-pixel inputs, batch 5, on
  ``train.rec``): both iterators' descriptions and, for three epochs each (``reset()`` first,
  as the training loop does), every batch's pad, shape, dtype, labels and data sha256; the
  validation batches' data of the first epoch as ``gluoncv|val|BATCH``.
"""
import hashlib
import io
import json
import math
import os
import sys

import mxnet as mx
import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
N = 12


def content(w, h, seed, grey=False, noise=12.0):
    """Smooth ramps, texture and noise: resampling and rounding both show."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(float)
    a = np.stack([x * 255 / max(w - 1, 1), y * 255 / max(h - 1, 1),
                  128 + 100 * np.sin(x / 3.0 + y / 5.0)], -1)
    a += rng.normal(0, noise, a.shape)
    a[h // 3:h // 2, w // 4:w // 2] = [250, 10, 30]
    a = np.clip(a, 0, 255).astype(np.uint8)
    return a.mean(axis=2).astype(np.uint8) if grey else a


def encode(arr, fmt, **kw):
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format=fmt, **kw)
    return buf.getvalue()


# (width, height, format, grey)
TRAIN = [(48, 64, "JPEG", False), (64, 48, "JPEG", False), (40, 40, "PNG", False),
         (20, 30, "JPEG", False), (100, 33, "JPEG", False), (120, 90, "JPEG", False),
         (50, 50, "JPEG", True), (37, 29, "PNG", False), (16, 16, "PNG", False),
         (33, 47, "JPEG", False), (90, 120, "PNG", False), (31, 32, "JPEG", False)]
PHOTOS = [(500, 375), (375, 500), (640, 427)]


def write_rec(name, payloads):
    """payloads: list of (header, bytes); key i for the i-th."""
    w = mx.recordio.MXIndexedRecordIO(os.path.join(HERE, name + ".idx"),
                                      os.path.join(HERE, name + ".rec"), "w")
    for i, (header, data) in enumerate(payloads):
        w.write_idx(i, mx.recordio.pack(header, data))
    w.close()


def write_data():
    IR = mx.recordio.IRHeader
    images = []
    for i, (w, h, fmt, grey) in enumerate(TRAIN):
        arr = content(w, h, i, grey)
        images.append(encode(arr, fmt, **({"quality": 90} if fmt == "JPEG" else {})))
    write_rec("train", [(IR(0, float(i), i, 0), img) for i, img in enumerate(images)])
    write_rec("multi", [(IR(0, [float(i), 10.0 * i], i, 0), img) for i, img in enumerate(images)])
    with open(os.path.join(HERE, "train.lst"), "w") as f:
        for i in range(N):
            f.write("%d\t%f\t%f\t%f\timg_%d.jpg\n" % (i, i + 0.5, -i, 100 + i, i))
    rgba = []
    for i, (w, h) in enumerate([(40, 36), (28, 44), (64, 50), (32, 32)]):
        a = content(w, h, 100 + i)
        alpha = (np.arange(w)[None, :] * 255 // max(w - 1, 1) + np.zeros((h, 1), int))
        rgba.append(encode(np.dstack([a, alpha.astype(np.uint8)]), "PNG"))
    write_rec("rgba", [(IR(0, float(i), i, 0), img) for i, img in enumerate(rgba)])
    photos = [encode(content(w, h, 200 + i, noise=4.0), "JPEG", quality=92)
              for i, (w, h) in enumerate(PHOTOS)]
    write_rec("photos", [(IR(0, float(i), i, 0), img) for i, img in enumerate(photos)])
    for name, arr in STAT_IMAGES.items():
        img = encode(arr(), "PNG")
        write_rec("stats_" + name, [(IR(0, float(i), i, 0), img) for i in range(STAT_COPIES)])


def grid(w, h):
    y, x = np.mgrid[0:h, 0:w]
    return np.dstack([x, y, np.full((h, w), 77)]).astype(np.uint8)


def flat(rgb, w=40, h=40):
    return np.tile(np.array(rgb, np.uint8), (h, w, 1))


def halves(lo, hi, w=40, h=40):
    a = np.full((h, w, 3), lo, np.uint8)
    a[h // 2:] = hi
    return a


STAT_COPIES = 100
STAT_IMAGES = {
    "grid200": lambda: grid(200, 160),
    "grid60": lambda: grid(60, 50),
    "grey100": lambda: flat((100, 100, 100)),
    "halves": lambda: halves(60, 140),
    "colour": lambda: flat((200, 120, 40)),
    "grey128": lambda: flat((128, 128, 128)),
    "white": lambda: flat((255, 255, 255)),
}

BASE = dict(data_shape=(3, 32, 32), batch_size=5, preprocess_threads=1)
MEAN_STD = dict(mean_r=123.68, mean_g=116.779, mean_b=103.939, std_r=58.393, std_g=57.12,
                std_b=57.375)
# name -> (record file, arguments)
CONFIGS = {
    "default": ("train", {}),
    "noidx": ("train", {"path_imgidx": None}),
    "resize40": ("train", {"resize": 40}),
    "resize24": ("train", {"resize": 24}),
    "gluoncv_val": ("train", dict(resize=37, **MEAN_STD)),
    "scale": ("train", dict(scale=1.0 / 255, mean_r=10.5, mean_g=20.25, mean_b=30.0)),
    "grey": ("train", {"data_shape": (1, 32, 32), "resize": 36}),
    "grey_norm": ("train", {"data_shape": (1, 28, 30), "mean_r": 127.5, "std_r": 33.3}),
    "nonsquare": ("train", {"data_shape": (3, 24, 40), "resize": 30}),
    "inter0": ("train", {"resize": 40, "inter_method": 0}),
    "inter2": ("train", {"resize": 40, "inter_method": 2}),
    "inter3": ("train", {"resize": 40, "inter_method": 3}),
    "inter4": ("train", {"resize": 40, "inter_method": 4}),
    "inter9_up": ("train", {"resize": 80, "inter_method": 9}),
    "inter9_down": ("train", {"resize": 24, "inter_method": 9}),
    "uint8": ("train", {"dtype": "uint8", "resize": 36}),
    "int8": ("train", {"dtype": "int8", "mean_r": 128, "mean_g": 100.5, "mean_b": 99.5}),
    "mirror": ("train", {"mirror": True, "resize": 40}),
    "pad": ("train", {"pad": 4, "fill_value": 0, "resize": 30}),
    "rotate": ("train", {"rotate": 30, "fill_value": 0}),
    "rotate77": ("train", {"rotate": 77, "fill_value": 200, "resize": 50}),
    "max_img_size": ("train", {"max_img_size": 40, "fill_value": 7}),
    "round_batch_false": ("train", {"round_batch": False}),
    "batch4": ("train", {"batch_size": 4}),
    "batch7": ("train", {"batch_size": 7}),
    "batch16": ("train", {"batch_size": 16}),
    "part1of2": ("train", {"num_parts": 2, "part_index": 1}),
    "part0of3_noidx": ("train", {"num_parts": 3, "part_index": 0, "path_imgidx": None}),
    "label_width2": ("multi", {"label_width": 2}),
    "imglist": ("train", {"label_width": 3, "path_imglist": "train.lst"}),
    "rgba": ("rgba", {"data_shape": (4, 32, 32), "mean_a": 10, "std_a": 2}),
    "uint8iter": ("train", {"_iter": "ImageRecordUInt8Iter", "resize": 40}),
    "mean_img": ("train", {"mean_img": "mean.nd", "resize": 40}),
}
PHOTO_CONFIGS = {
    "photos_val": ("photos", dict(resize=256, data_shape=(3, 224, 224), batch_size=3,
                                  **MEAN_STD)),
    "photos_uint8": ("photos", dict(resize=256, data_shape=(3, 224, 224), batch_size=3,
                                    dtype="uint8")),
    "photos_cubic": ("photos", dict(resize=300, data_shape=(3, 256, 256), batch_size=3,
                                    inter_method=2, dtype="uint8")),
}
# name -> (record file, arguments, epochs); each sample reduces to the numbers make_stats gives
STATS = {
    "random_resized_crop": ("grid200", dict(random_resized_crop=True, max_aspect_ratio=4 / 3,
                                            min_aspect_ratio=3 / 4, min_random_area=0.08,
                                            max_random_area=1, inter_method=0, dtype="uint8")),
    "rand_crop_mirror": ("grid60", dict(rand_crop=True, rand_mirror=True, dtype="uint8")),
    "crop_size": ("grid60", dict(max_crop_size=40, min_crop_size=20, rand_crop=True,
                                 inter_method=0, dtype="uint8")),
    "brightness": ("grey100", dict(brightness=0.4, dtype="uint8")),
    "contrast": ("halves", dict(contrast=0.4, dtype="uint8")),
    "saturation": ("colour", dict(saturation=0.4, dtype="uint8")),
    "jitter": ("colour", dict(brightness=0.3, contrast=0.3, saturation=0.3, dtype="uint8")),
    "pca_noise": ("grey128", dict(pca_noise=0.1, dtype="uint8")),
    "hsl": ("colour", dict(random_h=20, random_s=30, random_l=40, dtype="uint8")),
    "rotate": ("white", dict(max_rotate_angle=30, fill_value=0, dtype="uint8")),
    "scale_aspect": ("white", dict(max_random_scale=1.3, min_random_scale=0.7,
                                   max_aspect_ratio=0.3, fill_value=0, dtype="uint8")),
    "shear": ("white", dict(max_shear_ratio=0.3, fill_value=0, dtype="uint8")),
    "contrast_illumination": ("grey100", dict(max_random_contrast=0.3,
                                              max_random_illumination=20)),
}
STAT_EPOCHS = 10


def reduce_sample(name, img):
    """What one augmented sample (C, H, W) of STATS[name] says about its random draws."""
    img = img.astype(np.float64)
    if name in ("random_resized_crop", "crop_size"):
        return [img[0, 0, 0], img[1, 0, 0], img[0, 0, -1] - img[0, 0, 0],
                img[1, -1, 0] - img[1, 0, 0]]
    if name == "rand_crop_mirror":
        mirrored = img[0, 0, 0] > img[0, 0, -1]
        return [min(img[0, 0, 0], img[0, 0, -1]), img[1, 0, 0], float(mirrored)]
    if name in ("brightness", "pca_noise", "saturation", "hsl", "jitter",
                "contrast_illumination"):
        return list(img[:, 0, 0])
    if name == "contrast":
        return [img[0, 0, 0], img[0, -1, 0]]
    return [float((img[0] == 0).sum())]


def iterator(rec, kwargs):
    kwargs = dict(kwargs)
    kind = kwargs.pop("_iter", "ImageRecordIter")
    args = dict(BASE, path_imgrec=os.path.join(HERE, rec + ".rec"),
                path_imgidx=os.path.join(HERE, rec + ".idx"))
    args.update(kwargs)
    if args["path_imgidx"] is None:
        del args["path_imgidx"]
    for key in ("path_imglist", "mean_img"):
        if key in args:
            args[key] = os.path.join(HERE, args[key])
    return getattr(mx.io, kind)(**args)


def put(out, refs, key, data):
    """Store ``data`` once under its sha256 (uint8 when it is integral); ``refs[key]`` names
    it."""
    data = np.ascontiguousarray(data)
    sha = hashlib.sha256(data.tobytes() + str(data.dtype).encode()).hexdigest()
    refs[key] = sha
    if "data|" + sha not in out:
        integral = (data.dtype == np.float32 and np.all(data == np.round(data))
                    and data.size and data.min() >= 0 and data.max() <= 255)
        out["data|" + sha] = data.astype(np.uint8) if integral else data


def describe(descs):
    return [[d.name, list(d.shape), np.dtype(d.dtype).name, d.layout] for d in descs]


def run(name, rec, kwargs, out, meta, epochs=3, digest=False):
    it = iterator(rec, kwargs)
    info = {"rec": rec, "args": {k: v for k, v in kwargs.items()},
            "provide_data": describe(it.provide_data),
            "provide_label": describe(it.provide_label), "epochs": []}
    total = N if rec in ("train", "multi") and "num_parts" not in kwargs else None
    for epoch in range(epochs):
        pads, batches = [], 0
        for b, batch in enumerate(it):
            data = batch.data[0].asnumpy()
            label = batch.label[0].asnumpy()
            pads.append(int(batch.pad))
            real = len(data)
            if kwargs.get("round_batch") is False and total is not None:
                real = min(real, total - b * len(data))
            data, label = data[:real], label[:real]
            key = f"{name}|{epoch}|{b}"
            sha = hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest()
            info.setdefault("digests", {})[key] = sha
            if digest:
                out[key + "|sample"] = data[:, :, ::8, ::8]
            elif not epoch:
                put(out, info.setdefault("refs", {}), key, data)
            out[key + "|label"] = label
            info.setdefault("dtypes", {})[key] = [str(batch.data[0].dtype),
                                                   str(batch.label[0].dtype)]
            batches += 1
        info["epochs"].append({"pads": pads, "batches": batches})
        it.reset()
    meta[name] = info


def make_stats(out):
    for name, (image, kwargs) in STATS.items():
        args = dict(kwargs, batch_size=50, data_shape=(3, 32, 32))
        it = iterator("stats_" + image, args)
        rows = []
        for _ in range(STAT_EPOCHS):
            for batch in it:
                for sample in batch.data[0].asnumpy():
                    rows.append(reduce_sample(name, sample))
            it.reset()
        out["stats|" + name] = np.array(rows, np.float64)


# NDArrayIter(data, label, batch_size, shuffle=False, last_batch_handle) over these arrays
ND_X = np.arange(40, dtype=np.int64).reshape(10, 4)
ND_Y = np.arange(10, dtype=np.int64)
ND_CONFIGS = {
    "pad": lambda: mx.io.NDArrayIter(ND_X, ND_Y, 3, last_batch_handle="pad"),
    "discard": lambda: mx.io.NDArrayIter(ND_X, ND_Y, 3, last_batch_handle="discard"),
    "roll_over": lambda: mx.io.NDArrayIter(ND_X, ND_Y, 3, last_batch_handle="roll_over"),
    "big_batch": lambda: mx.io.NDArrayIter(ND_X, ND_Y, 25),
    "dicts": lambda: mx.io.NDArrayIter({"b": ND_X, "a": ND_X[:, :2]}, {"l2": ND_Y, "l1": ND_Y},
                                       4),
    "lists": lambda: mx.io.NDArrayIter([ND_X, ND_X * 2], None, 4, data_name="x"),
    "uint8_nd": lambda: mx.io.NDArrayIter(mx.nd.array(ND_X, dtype="uint8"), None, 5),
}
# mx.image.ImageIter(batch_size=5, data_shape=(3, 32, 32), path_imgrec=REC.rec, ...)
IMAGEITER_CONFIGS = {
    "default": ("train", {"path_imgidx": True}),
    "sequential": ("train", {}),
    "resize": ("train", {"path_imgidx": True, "resize": 40}),
    "normalize": ("train", {"path_imgidx": True, "resize": 36, "mean": True, "std": True}),
    "linear": ("train", {"path_imgidx": True, "resize": 40, "inter_method": 1}),
    "discard": ("train", {"path_imgidx": True, "last_batch_handle": "discard"}),
    "roll_over": ("train", {"path_imgidx": True, "last_batch_handle": "roll_over"}),
    "multi_label": ("multi", {"path_imgidx": True, "label_width": 2}),
    "random": ("train", {"path_imgidx": True, "seed": 7, "shuffle": True, "rand_crop": True,
                         "rand_mirror": True, "brightness": 0.3, "contrast": 0.3,
                         "saturation": 0.3, "pca_noise": 0.1, "rand_resize": True}),
}


def noise_image(h, w, c, seed):
    """Deterministic uint8 noise from integer hashing (the same bytes under any NumPy)."""
    i = np.arange(h * w * c, dtype=np.uint64).reshape(h, w, c)
    x = (i + np.uint64(seed) * np.uint64(1000003)) * np.uint64(2654435761)
    x ^= x >> np.uint64(13)
    x *= np.uint64(2246822519)
    return ((x >> np.uint64(24)) & np.uint64(255)).astype(np.uint8)


def resize_cases():
    """(height, width, channels, new height, new width) of the resize cases: shrinking and
    enlarging, exact halves, thin images, widths on both sides of multiples of 8."""
    cases = []
    for k in range(160):
        h, w = 1 + (k * 37) % 61, 1 + (k * 53) % 67
        c = (1, 3, 4)[k % 3]
        if k % 5 == 0:
            nh, nw = max(1, h // 2), max(1, w // 2)
        else:
            nh, nw = 1 + (k * 29) % 97, 1 + (k * 41) % 89
        cases.append((h, w, c, nh, nw))
    return cases


def run_resize(meta):
    """mx.image.imresize (the OpenCV 3.4.2 built into MXNet): sha256 of every output."""
    digests = {}
    for k, (h, w, c, nh, nw) in enumerate(resize_cases()):
        img = noise_image(h, w, c, k)
        for interp in range(5):
            out = mx.image.imresize(mx.nd.array(img, dtype="uint8"), nw, nh,
                                    interp=interp).asnumpy()
            if out.ndim == 2:
                out = out[:, :, None]
            digests[f"{k}|{interp}"] = hashlib.sha256(np.ascontiguousarray(out).tobytes()
                                                      ).hexdigest()
    meta["resize"] = digests


def get_data_rec(args, opt, mx):
    """GluonCV's scripts/classification/imagenet/train_imagenet.py ``get_data_rec``, verbatim
    but for ``opt`` and ``mx`` being arguments (they are globals there)."""
    rec_train = os.path.expanduser(args.rec_train)
    rec_train_idx = os.path.expanduser(args.rec_train_idx)
    rec_val = os.path.expanduser(args.rec_val)
    rec_val_idx = os.path.expanduser(args.rec_val_idx)
    num_gpus = args.num_gpus
    batch_size = args.batch_size * max(1, num_gpus)

    jitter_param = 0.4
    lighting_param = 0.1
    input_size = opt.input_size
    crop_ratio = opt.crop_ratio if opt.crop_ratio > 0 else 0.875
    resize = int(math.ceil(input_size / crop_ratio))

    train_data = mx.io.ImageRecordIter(
        path_imgrec         = rec_train,
        path_imgidx         = rec_train_idx,
        preprocess_threads  = args.num_workers,
        shuffle             = True,
        batch_size          = batch_size,
        data_shape          = (3, input_size, input_size),
        mean_r              = args.rgb_mean[0],
        mean_g              = args.rgb_mean[1],
        mean_b              = args.rgb_mean[2],
        std_r               = args.rgb_std[0],
        std_g               = args.rgb_std[1],
        std_b               = args.rgb_std[2],
        rand_mirror         = True,
        random_resized_crop = True,
        max_aspect_ratio    = 4. / 3.,
        min_aspect_ratio    = 3. / 4.,
        max_random_area     = 1,
        min_random_area     = 0.08,
        brightness          = jitter_param,
        saturation          = jitter_param,
        contrast            = jitter_param,
        pca_noise           = lighting_param,
    )
    val_data = mx.io.ImageRecordIter(
        path_imgrec         = rec_val,
        path_imgidx         = rec_val_idx,
        preprocess_threads  = args.num_workers,
        shuffle             = False,
        batch_size          = batch_size,

        resize              = resize,
        data_shape          = (3, input_size, input_size),
        mean_r              = args.rgb_mean[0],
        mean_g              = args.rgb_mean[1],
        mean_b              = args.rgb_mean[2],
        std_r               = args.rgb_std[0],
        std_g               = args.rgb_std[1],
        std_b               = args.rgb_std[2],
    )
    return train_data, val_data


def gluoncv_args(root):
    """train_imagenet.py's arguments for get_data_rec: its defaults, 32-pixel inputs, batch 5."""
    from types import SimpleNamespace
    rec = os.path.join(root, "train.rec")
    idx = os.path.join(root, "train.idx")
    args = SimpleNamespace(rec_train=rec, rec_train_idx=idx, rec_val=rec, rec_val_idx=idx,
                           num_gpus=0, batch_size=5, num_workers=1,
                           rgb_mean=[float(v) for v in "123.68,116.779,103.939".split(",")],
                           rgb_std=[float(v) for v in "58.393,57.12,57.375".split(",")])
    opt = SimpleNamespace(input_size=32, crop_ratio=0.875)
    return args, opt


def run_gluoncv(out, meta):
    """Both iterators of get_data_rec, three epochs each, the train loop's reset() first."""
    args, opt = gluoncv_args(HERE)
    train_data, val_data = get_data_rec(args, opt, mx)
    info = {}
    for name, it in (("train", train_data), ("val", val_data)):
        epochs = []
        for epoch in range(3):
            it.reset()
            batches = []
            for b, batch in enumerate(it):
                data = batch.data[0].asnumpy()
                label = batch.label[0].asnumpy()
                batches.append({"pad": int(batch.pad), "shape": list(data.shape),
                                "dtype": str(data.dtype), "labels": label.tolist(),
                                "sha": hashlib.sha256(data.tobytes()).hexdigest()})
                if name == "val" and epoch == 0:
                    out[f"gluoncv|val|{b}"] = data
            epochs.append(batches)
        info[name] = {"provide_data": describe(it.provide_data),
                      "provide_label": describe(it.provide_label), "epochs": epochs}
    meta["gluoncv"] = info


def run_ndarrayiter(out, meta):
    for name, make in ND_CONFIGS.items():
        it = make()
        info = {"provide_data": describe(it.provide_data),
                "provide_label": describe(it.provide_label), "epochs": []}
        for epoch in range(2):
            batches = []
            for b, batch in enumerate(it):
                key = f"nd|{name}|{epoch}|{b}"
                for k, arr in enumerate(batch.data):
                    out[f"{key}|data{k}"] = arr.asnumpy()
                for k, arr in enumerate(batch.label or []):
                    out[f"{key}|label{k}"] = arr.asnumpy()
                batches.append({"pad": int(batch.pad), "data": len(batch.data),
                                "label": len(batch.label or []),
                                "index": None if batch.index is None else list(batch.index)})
            info["epochs"].append(batches)
            it.reset()
        meta["nd|" + name] = info


def run_imageiter(out, meta):
    import random
    for name, (rec, kwargs) in IMAGEITER_CONFIGS.items():
        kwargs = dict(kwargs)
        seed = kwargs.pop("seed", None)
        if seed is not None:
            random.seed(seed)
            np.random.seed(seed)
        if kwargs.pop("path_imgidx", False):
            kwargs["path_imgidx"] = os.path.join(HERE, rec + ".idx")
        it = mx.image.ImageIter(batch_size=5, data_shape=(3, 32, 32),
                                path_imgrec=os.path.join(HERE, rec + ".rec"), **kwargs)
        info = {"provide_data": [list(map(str, d)) for d in it.provide_data],
                "provide_label": [list(map(str, d)) for d in it.provide_label], "epochs": []}
        for epoch in range(2):
            batches = []
            for b, batch in enumerate(it):
                key = f"imageiter|{name}|{epoch}|{b}"
                data = batch.data[0].asnumpy()
                info.setdefault("digests", {})[key] = hashlib.sha256(data.tobytes()).hexdigest()
                if not epoch:
                    put(out, info.setdefault("refs", {}), key, data)
                out[key + "|label"] = batch.label[0].asnumpy()
                batches.append({"pad": int(batch.pad), "dtype": str(batch.data[0].dtype),
                                "index": batch.index})
            info["epochs"].append(batches)
            it.reset()
        meta["imageiter|" + name] = info


def run_dataset(out, meta):
    rec = os.path.join(HERE, "train.rec")
    refs = meta.setdefault("dataset|refs", {})
    for flag in (1, 0):
        ds = mx.gluon.data.vision.ImageRecordDataset(rec, flag=flag)
        labels = []
        for i in range(len(ds)):
            img, label = ds[i]
            put(out, refs, f"dataset|{flag}|{i}", img.asnumpy())
            labels.append([type(label).__name__, float(label)])
        meta[f"dataset|{flag}"] = {"len": len(ds), "labels": labels}
    ds = mx.gluon.data.vision.ImageRecordDataset(
        rec, transform=lambda data, label: (data.astype("float32") / 255, label))
    loader = mx.gluon.data.DataLoader(ds.transform_first(lambda x: mx.image.imresize(
        (x * 255).astype("uint8"), 24, 20)), batch_size=5, last_batch="keep")
    batches = []
    for b, (data, label) in enumerate(loader):
        put(out, refs, f"loader|{b}|data", data.asnumpy())
        out[f"loader|{b}|label"] = label.asnumpy()
        batches.append([list(data.shape), str(data.dtype), list(label.shape), str(label.dtype)])
    meta["loader"] = batches


def main():
    write_data()
    mean_path = os.path.join(HERE, "mean.nd")
    if os.path.exists(mean_path):
        os.remove(mean_path)
    out, meta = {}, {}
    for name, (rec, kwargs) in CONFIGS.items():
        run(name, rec, kwargs, out, meta)
    for name, (rec, kwargs) in PHOTO_CONFIGS.items():
        run(name, rec, kwargs, out, meta, epochs=1, digest=True)
    make_stats(out)
    run_ndarrayiter(out, meta)
    run_imageiter(out, meta)
    run_dataset(out, meta)
    run_resize(meta)
    run_gluoncv(out, meta)
    meta["_versions"] = {"mxnet": mx.__version__, "numpy": np.__version__,
                         "python": sys.version.split()[0]}
    np.savez_compressed(os.path.join(HERE, "expected.npz"), **out)
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
