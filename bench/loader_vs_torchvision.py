#!/usr/bin/env python3
"""The trainer's image loader against PyTorch's DataLoader with torchvision
transforms, on the same JPEG folder and machine, in interleaved rounds.

    LD_LIBRARY_PATH=... /opt/torchpeer/bin/python bench/loader_vs_torchvision.py
        [--images 2000] [--size 500x375] [--workers 1,2,4] [--rounds 2]

(scripts/torch-peer.sh prints the LD_LIBRARY_PATH.) The folder is made
once: `--images` JPEG photos-like files (smooth color fields with edges and
noise, quality 90) in 10 class folders, and a tenth as many for `val/`.
Two pipelines, each at every worker count:

- evaluation: decode, resize (antialiased bilinear, shorter side to 256)
  and center crop to 224x224. gpuc: an epoch of `train --bench-loader`,
  which decodes each batch's files on its workers (the trainer's default
  for an image folder); torchvision: an epoch of `ImageFolder` with
  `Resize(256), CenterCrop(224), ToTensor(), Normalize(...)`.
- training: a random resized crop to 224x224 and a horizontal flip, each
  file decoded every epoch on both sides (`train --bench-loader --augment
  crop,flip`; `RandomResizedCrop(224), RandomHorizontalFlip()`). gpuc's
  `--cache-decoded` decodes once and crops the kept images each epoch: its
  steady epoch and its first epoch (decoding included) are reported too.

gpuc's workers are threads of the trainer; torchvision's `num_workers`
processes (batch 64, `pin_memory` off: no GPU). Best images/s of the rounds
and the ratio gpuc / torchvision; the load average is printed per round.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = """input image: f32[B, 3, 224, 224]
input label: i64[B]
param fc.weight: f32[10, 150528] = normal(0, 0.001)
param fc.bias: f32[10] = zeros
logits = matmul(flatten(image), fc.weight, transpose_b=1) + fc.bias
loss = cross_entropy(logits, label)
output logits, loss
"""


def load_average():
    return "%.2f %.2f %.2f" % os.getloadavg()


def make_folder(root, images, width, height):
    """JPEG files that compress like photographs: smooth color fields, a
    few edges, fine noise."""
    rng = np.random.default_rng(0)
    for split, count in (("train", images), ("val", max(images // 10, 10))):
        for i in range(count):
            label = i % 10
            folder = os.path.join(root, split, "class%d" % label)
            os.makedirs(folder, exist_ok=True)
            small = rng.uniform(0, 255, (6, 8, 3)).astype(np.uint8)
            field = np.asarray(Image.fromarray(small).resize(
                (width, height), Image.BICUBIC), dtype=np.float32)
            y0, x0 = rng.integers(0, height), rng.integers(0, width)
            field[y0:y0 + height // 3, x0:x0 + width // 4] *= 0.5
            field += rng.normal(0, 6, field.shape)
            Image.fromarray(np.clip(field, 0, 255).astype(np.uint8)).save(
                os.path.join(folder, "%05d.jpg" % i), quality=90)


def gpuc_loader(train, data, workers, augment, cache=False):
    """train --bench-loader's figures."""
    args = [train, "--data", data, "--bench-loader", "--workers",
            str(workers), "--quiet"]
    if augment:
        args += ["--augment", "crop,flip", "--epochs", "2"]
    if cache:
        args += ["--cache-decoded"]
    out = subprocess.run(args, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def torchvision_epoch(data, workers, augment, batch):
    """Images per second of one epoch of torchvision's pipeline."""
    import torch
    from torchvision import datasets, transforms
    normalize = transforms.Normalize([0.485, 0.456, 0.406],
                                     [0.229, 0.224, 0.225])
    if augment:
        steps = [transforms.RandomResizedCrop(224),
                 transforms.RandomHorizontalFlip()]
    else:
        steps = [transforms.Resize(256), transforms.CenterCrop(224)]
    folder = datasets.ImageFolder(
        os.path.join(data, "train"),
        transforms.Compose(steps + [transforms.ToTensor(), normalize]))
    loader = torch.utils.data.DataLoader(folder, batch_size=batch,
                                         shuffle=True, num_workers=workers,
                                         drop_last=True)
    start = time.perf_counter()
    images = 0
    for x, _ in loader:
        images += x.shape[0]
    return images / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--size", default="500x375",
                        help="the JPEG files' width x height")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gpuc", default=os.path.join(
        HERE, "..", "build", "bin", "gpuc"))
    parser.add_argument("--work", help="keep the folder and model here")
    args = parser.parse_args()
    import torch
    import torchvision
    workers = [int(w) for w in args.workers.split(",")]
    width, height = (int(v) for v in args.size.split("x"))
    work = args.work or tempfile.mkdtemp(prefix="gpuc-loader-bench-")
    data = os.path.join(work, "images")
    if not os.path.isdir(os.path.join(data, "val")):
        make_folder(data, args.images, width, height)
    with open(os.path.join(work, "model.gdsl"), "w") as f:
        f.write(MODEL)
    model = os.path.join(work, "model")
    subprocess.run([args.gpuc, "compile", os.path.join(work, "model.gdsl"),
                    "--batch", "64", "--target", "cpu", "-o", model],
                   check=True, stdout=subprocess.DEVNULL)
    train = os.path.join(model, "train")
    print("%d JPEG files of %dx%d (+%d val) to 224x224, batch 64; %d cores; "
          "PyTorch %s, torchvision %s" %
          (args.images, width, height, max(args.images // 10, 10),
           os.cpu_count(), torch.__version__, torchvision.__version__),
          flush=True)
    best = {}

    def keep(key, value):
        best[key] = max(best.get(key, 0), value)

    for r in range(args.rounds):
        print("round %d, load average %s" % (r + 1, load_average()),
              flush=True)
        for w in workers:
            plain = gpuc_loader(train, data, w, False)
            keep(("eval", "gpuc", w), plain["images_per_s"])
            keep(("eval", "torchvision", w),
                 torchvision_epoch(data, w, False, 64))
            aug = gpuc_loader(train, data, w, True)
            keep(("train", "gpuc", w), aug["images_per_s"])
            cached = gpuc_loader(train, data, w, True, cache=True)
            keep(("steady", "gpuc", w), cached["images_per_s"])
            per_epoch = cached["images"] / cached["loader_epochs"]
            first = per_epoch / (
                cached["decode_s"] * per_epoch / cached["decoded"] +
                per_epoch / cached["images_per_s"])
            keep(("first", "gpuc", w), first)
            keep(("train", "torchvision", w),
                 torchvision_epoch(data, w, True, 64))
    print("\nbest images/s over %d rounds (load average now %s)" %
          (args.rounds, load_average()))
    print("%-8s %-38s %10s %12s %7s" %
          ("workers", "pipeline", "gpuc", "torchvision", "ratio"))
    for w in workers:
        for key, name in (("eval", "decode, resize, center crop"),
                          ("train", "decode, random crop + flip"),
                          ("steady", "cached: crop + flip, steady epoch"),
                          ("first", "cached: crop + flip, first epoch")):
            ours = best[(key, "gpuc", w)]
            theirs = best[("eval" if key == "eval" else "train",
                           "torchvision", w)]
            print("%-8d %-38s %10.0f %12.0f %6.2fx" %
                  (w, name, ours, theirs, ours / theirs))


if __name__ == "__main__":
    sys.exit(main())
