"""Writes Fashion-MNIST as an image folder: DIR/train/<class>/ and
DIR/val/<class>/, as PNG files or (--format mixed) every other image a JPEG
of quality 100, plus one file with an image's name that is not an image (a
damaged download), which the trainer must skip with a warning.

--npy DIR also writes the same images as train_x.npy, train_y.npy,
test_x.npy, test_y.npy (uint8) in the order an image folder is read (by
class, then by file name), so that a run on either trains on the same
samples in the same order.

    make_image_folder.py IDX_DIR OUT_DIR [--train N] [--val N] [--rgb]
                         [--format png|mixed] [--npy DIR]
"""
import argparse
import gzip
import os

import numpy as np
from PIL import Image

CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal",
           "shirt", "sneaker", "bag", "ankle-boot"]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
            for i in range(rank)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * rank).reshape(dims)


def write_split(images, labels, folder, rgb, mixed):
    """Writes the images; returns their indices in an image folder's order."""
    for c in CLASSES:
        os.makedirs(os.path.join(folder, c), exist_ok=True)
    for i, (image, label) in enumerate(zip(images, labels)):
        picture = Image.fromarray(image, "L")
        if rgb:
            picture = picture.convert("RGB")
        name = os.path.join(folder, CLASSES[label], "%05d" % i)
        if mixed and i % 2:
            picture.save(name + ".jpg", quality=100)
        else:
            picture.save(name + ".png")
    # Classes in name order, files in name order within each.
    order = sorted(range(len(labels)),
                   key=lambda i: (sorted(CLASSES).index(CLASSES[labels[i]]),
                                  i))
    return order


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("idx")
    parser.add_argument("out")
    parser.add_argument("--train", type=int, default=60000)
    parser.add_argument("--val", type=int, default=10000)
    parser.add_argument("--rgb", action="store_true")
    parser.add_argument("--format", choices=["png", "mixed"], default="png")
    parser.add_argument("--npy", default=None)
    args = parser.parse_args()
    x = read_idx(os.path.join(args.idx, "train-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(args.idx, "train-labels-idx1-ubyte.gz"))
    tx = read_idx(os.path.join(args.idx, "t10k-images-idx3-ubyte.gz"))
    ty = read_idx(os.path.join(args.idx, "t10k-labels-idx1-ubyte.gz"))
    mixed = args.format == "mixed"
    x, y, tx, ty = x[:args.train], y[:args.train], tx[:args.val], ty[:args.val]
    order = write_split(x, y, os.path.join(args.out, "train"), args.rgb, mixed)
    test_order = write_split(tx, ty, os.path.join(args.out, "val"), args.rgb,
                             mixed)
    if args.npy:
        os.makedirs(args.npy, exist_ok=True)
        # An image folder numbers its classes in name order.
        relabel = np.array([sorted(CLASSES).index(c) for c in CLASSES])
        for name, array in (("train_x", x[order]),
                            ("train_y", relabel[y[order]].astype(np.int64)),
                            ("test_x", tx[test_order]),
                            ("test_y", relabel[ty[test_order]].astype(np.int64))):
            np.save(os.path.join(args.npy, name + ".npy"), array)
    with open(os.path.join(args.out, "train", "bag", "damaged.jpg"),
              "wb") as f:
        f.write(b"\xff\xd8\xff\xe0 truncated download")
    with open(os.path.join(args.out, "train", "README.txt"), "w") as f:
        f.write("Fashion-MNIST as an image folder\n")
    print("wrote %d train and %d val images to %s" %
          (len(x), len(tx), args.out))


if __name__ == "__main__":
    main()
