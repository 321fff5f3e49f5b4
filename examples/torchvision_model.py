#!/usr/bin/env python3
"""A torchvision classifier as people train it, exported to ONNX for gpuc.

    /usr/bin/python3 examples/torchvision_model.py --model resnet50 -o resnet50.onnx
    /usr/bin/python3 examples/torchvision_model.py --model resnet18 --classes 10 --size 64 -o r18.onnx

torchvision's own class (ResNet-50 by default: 25.6M parameters, 1000
classes) with its own initialization from --seed, exported in training
mode (batch norm's running statistics are updated by the step) with a
dynamic batch, for a square RGB input of --size. The weights are in the
file (about 100 MB for ResNet-50), written where --out says, never into
the repository. --state-dict saves the same weights (and batch norm's
running statistics) as the model's state_dict in safetensors, what
`train --init` reads into an artifact compiled with `--no-weights`.
"""
import argparse
import os
import sys
import warnings

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402


def build(name, classes=1000, seed=0):
    """torchvision's `name` with `classes` outputs, its dropout and
    stochastic depth off (their masks are random on each side of a
    comparison)."""
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(num_classes=classes)
    # Zeroed after construction, whatever each builder calls them (DenseNet's
    # drop_rate, EfficientNet's dropout, ConvNeXt's and Swin's
    # stochastic_depth_prob): the initialization from the seed is the same.
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        elif isinstance(module, torchvision.ops.StochasticDepth):
            module.p = 0.0
    for module in model.modules():
        if hasattr(module, "drop_rate") and isinstance(module.drop_rate,
                                                       float):
            module.drop_rate = 0.0
    return model


def export(model, size, path):
    # The exporter's warnings about training-mode export are expected.
    warnings.filterwarnings("ignore")
    export_models.export(model, torch.zeros(2, 3, size, size), path, "image",
                         17, quiet=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--out", help="the ONNX model to write")
    parser.add_argument("--state-dict", metavar="FILE.safetensors",
                        help="the weights to write, for train --init")
    args = parser.parse_args()
    if not args.out and not args.state_dict:
        parser.error("give -o FILE.onnx, --state-dict FILE.safetensors, "
                     "or both")
    if not hasattr(torchvision.models, args.model):
        parser.error("torchvision %s has no model '%s'" %
                     (torchvision.__version__, args.model))
    model = build(args.model, args.classes, args.seed)
    params = sum(p.numel() for p in model.parameters())
    for path in filter(None, (args.out, args.state_dict)):
        if path == args.out:
            export(model, args.size, path)
        else:
            export_models.save_state_dict(model, path)
        print("wrote %s: %s, %d classes, %dx%d input, %.1fM parameters" %
              (path, args.model, args.classes, args.size, args.size,
               params / 1e6))


if __name__ == "__main__":
    main()
