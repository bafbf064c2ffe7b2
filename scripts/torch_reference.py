#!/usr/bin/env python3
"""Save PyTorch's outputs (and, optionally, every submodule's output) to an .npz that
`onnx-doctor compare MODEL --reference REF.npz` reads.

Library use, next to your export call:

    from torch_reference import save_reference
    torch.onnx.export(model, (x, mask), "model.onnx", input_names=["x", "mask"],
                      output_names=["logits"])
    save_reference(model, (x, mask), "ref.npz", input_names=["x", "mask"],
                   output_names=["logits"], intermediates=True)

    onnx-doctor compare model.onnx --reference ref.npz --layerwise

Keys written: each output under its ONNX output name; each input as `input:NAME` (so `compare`
runs the model on exactly these inputs); with `intermediates=True`, each submodule's (first
tensor) output under its module path (`encoder.layers.0.self_attn`), which `compare --layerwise`
maps to the last ONNX node of the matching name scope (`/encoder/layers.0/self_attn/...`).

Command-line use for a module defined in a Python file:

    python3 scripts/torch_reference.py my_model.py:build_model --input x=x.npy \
        --output-names logits -o ref.npz [--intermediates]

where `build_model()` returns the module (put in eval mode here).
"""
import argparse
import importlib.util
import sys

import numpy as np


def _to_numpy(t):
    import torch

    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    return None


def _first_tensor(out):
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (list, tuple)):
        for o in out:
            t = _first_tensor(o)
            if t is not None:
                return t
    if isinstance(out, dict):
        for o in out.values():
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


def _flatten(out):
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _flatten(o)]
    return []


def save_reference(model, args, path, input_names=None, output_names=None, intermediates=False):
    """Runs `model(*args)` under no_grad in eval mode and writes the .npz described above."""
    import torch

    if not isinstance(args, (list, tuple)):
        args = (args,)
    model.eval()
    captured = {}
    hooks = []
    if intermediates:
        for name, module in model.named_modules():
            if not name:
                continue

            def hook(_m, _inp, out, name=name):
                t = _first_tensor(out)
                if t is not None and name not in captured:
                    captured[name] = _to_numpy(t)

            hooks.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            out = model(*args)
    finally:
        for h in hooks:
            h.remove()
    outs = _flatten(out)
    if output_names is None:
        output_names = [f"output_{i}" for i in range(len(outs))]
    if len(output_names) != len(outs):
        raise ValueError(f"the model returned {len(outs)} tensors but {len(output_names)} output names were given")
    arrays = {}
    if input_names is not None:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if len(input_names) != len(tensors):
            raise ValueError(f"{len(tensors)} tensor inputs but {len(input_names)} input names were given")
        for n, t in zip(input_names, tensors):
            arrays[f"input:{n}"] = _to_numpy(t)
    for n, t in zip(output_names, outs):
        arrays[n] = _to_numpy(t)
    for n, a in captured.items():
        arrays.setdefault(n, a)
    np.savez(path, **arrays)
    return arrays


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("factory", help="FILE.py:FUNCTION returning the module")
    ap.add_argument("--input", action="append", default=[], help="NAME=FILE.npy, in forward() order")
    ap.add_argument("--output-names", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--intermediates", action="store_true")
    a = ap.parse_args()
    import torch

    file, func = a.factory.rsplit(":", 1)
    spec = importlib.util.spec_from_file_location("user_model", file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = getattr(mod, func)()
    names, tensors = [], []
    for item in a.input:
        n, f = item.split("=", 1)
        names.append(n)
        tensors.append(torch.from_numpy(np.load(f)))
    arrays = save_reference(model, tuple(tensors), a.output, names, a.output_names, a.intermediates)
    print(f"wrote {a.output}: {len(arrays)} arrays", file=sys.stderr)


if __name__ == "__main__":
    main()
