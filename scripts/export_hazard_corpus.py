#!/usr/bin/env python3
"""Exports the deployment-hazard corpus (tests/hazards/): small real PyTorch models, each carrying
exactly one export hazard, plus clean controls, with the findings onnx-doctor must report.

    python3 scripts/export_hazard_corpus.py [--out tests/hazards] [--only CASE ...] [--list]
    python3 scripts/export_hazard_corpus.py --report-only target/release/onnx-doctor   # REPORT.md

Run once by hand (needs torch, torchvision, onnxscript, onnx, onnxruntime); the results are
committed. Not run in CI. For every case it writes

    tests/hazards/<case>/model.onnx    the exported model (single file, < 100 KB)
    tests/hazards/<case>/expect.toml   what the model is, the PyTorch line that causes the hazard,
                                       and the findings that must be reported

The expectations are written here by hand from the hazard, the ONNX spec and the target profiles
(crates/analysis/targets/*.toml: which target implements which op at which opset), never from
onnx-doctor's output. Only the exact node names are read from the exported model (the exporter
chooses them): each expectation names the op it is about and a predicate picking the node.

Target lists: for a target-specific rule the script computes the targets from the profiles:
  "impl"  -> every target whose profile lists the op at the model's opset (ODT020 / ODT021 are
             reported "once per target that implements the op"),
  "lack"  -> every target whose profile does not list it (those get ODT001 instead),
  "all"   -> every profile,
  []      -> a target-independent rule (target is null in the JSON).

Each case is also run on onnxruntime (CPU) where that shows the hazard is real (e.g. a baked batch
size failing at batch 3, a clean dynamic model agreeing with PyTorch at batch 3); the outcome goes
into the case's `notes`.
"""
import argparse
import io
import os
import shutil
import sys
import tomllib
import traceback
import warnings

import numpy as np
import onnx
import onnx.helper as oh
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision  # before any trace: importing it inside one records torchvision::_cuda_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILES_DIR = os.path.join(ROOT, "crates", "analysis", "targets")
MAX_BYTES = 100 * 1024
OPSET = 17

warnings.filterwarnings("ignore")

# ---------------------------------------------------------------------------------------------
# Target profiles (the facts the expectations are computed from)
# ---------------------------------------------------------------------------------------------


def load_profiles():
    profiles = {}
    for f in sorted(os.listdir(PROFILES_DIR)):
        if f.endswith(".toml"):
            with open(os.path.join(PROFILES_DIR, f), "rb") as fh:
                d = tomllib.load(fh)
            profiles[d["name"]] = d
    return profiles


PROFILES = load_profiles()
ALL_TARGETS = sorted(PROFILES)


def target_has_op(target, op, opset):
    if target == "onnxruntime-cpu" and op == "Constant":
        # ONNX Runtime has no Constant kernel because it needs none: the graph loader turns every
        # Constant node into an initializer (onnxruntime/core/graph/graph.cc). The profile lists
        # kernels, so it does not name Constant; a Constant node is no deployment problem there.
        return True
    for entry in PROFILES[target].get("ops", []):
        if op in entry["ops"]:
            since = entry.get("since", 1)
            until = entry.get("until")
            if since <= opset and (until is None or opset <= until):
                return True
    return False


def target_accepts_opset(target, opset):
    p = PROFILES[target]
    return p.get("opset_min", 0) <= opset <= p.get("opset_max", 10**6)


def impl_targets(op, opset, domain=""):
    if domain not in ("", "ai.onnx"):
        return []
    return [t for t in ALL_TARGETS if target_has_op(t, op, opset)]


def lack_targets(op, opset, domain=""):
    return [t for t in ALL_TARGETS if t not in impl_targets(op, opset, domain)]


# ---------------------------------------------------------------------------------------------
# Export helpers
# ---------------------------------------------------------------------------------------------


def export_ts(model, args, opset=OPSET, **kw):
    f = io.BytesIO()
    torch.onnx.export(model, args, f, dynamo=False, opset_version=opset, **kw)
    return onnx.load_from_string(f.getvalue())


def export_dynamo(model, args, opset=OPSET, **kw):
    prog = torch.onnx.export(model, args, dynamo=True, opset_version=opset, external_data=False,
                             verbose=False, **kw)
    return prog.model_proto


def model_opset(m):
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 1


def all_nodes(graph):
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from all_nodes(g)


def find_node(m, op, pred=None, domain=None):
    """The one node of type `op` (main graph first, then subgraphs) matching `pred`."""
    main = [n for n in m.graph.node if n.op_type == op and (domain is None or n.domain == domain)
            and (pred is None or pred(m, n))]
    cands = main or [n for n in all_nodes(m.graph) if n.op_type == op
                     and (domain is None or n.domain == domain) and (pred is None or pred(m, n))]
    if len(cands) != 1:
        raise RuntimeError(f"expected one {op} node, found {[n.name for n in cands]}")
    return cands[0]


def constant_value(m, name):
    for i in m.graph.initializer:
        if i.name == name:
            return onnx.numpy_helper.to_array(i)
    for n in all_nodes(m.graph):
        if n.op_type == "Constant" and n.output[0] == name:
            for a in n.attribute:
                if a.name == "value":
                    return onnx.numpy_helper.to_array(a.t)
    return None


def strip_node_metadata(m):
    for n in all_nodes(m.graph):
        del n.metadata_props[:]


def ort_run(m, feeds):
    import onnxruntime as ort
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def ort_compare(m, model, inputs, names):
    """Runs PyTorch and onnxruntime on `inputs`; returns a one-line verdict."""
    try:
        with torch.no_grad():
            ref = model(*inputs)
        ref = ref if isinstance(ref, (tuple, list)) else (ref,)
        got = ort_run(m, {n: t.numpy() for n, t in zip(names, inputs)})
    except Exception as e:  # noqa: BLE001
        return f"onnxruntime fails: {str(e).splitlines()[0][:200]}"
    for r, g in zip(ref, got):
        r = r.detach().numpy()
        if r.shape != g.shape:
            return f"onnxruntime runs but the output shape is {list(g.shape)}, PyTorch gives {list(r.shape)}"
        if not np.allclose(r, g, rtol=1e-3, atol=1e-4):
            return "onnxruntime runs but the values differ from PyTorch"
    return "onnxruntime agrees with PyTorch"


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------


class F_:
    """One expected finding. targets: "impl" | "lack" | "all" | [] | explicit list."""

    def __init__(self, code, op=None, targets=(), pred=None, domain=None, value=None, note=None,
                 equivalent=(), max_severity=None):
        self.code, self.op, self.targets, self.pred = code, op, targets, pred
        self.domain, self.value, self.note = domain, value, note
        self.equivalent, self.max_severity = list(equivalent), max_severity


CASES = {}


def case(name, exporter, description, pytorch, clean=False, **extra):
    def deco(fn):
        CASES[name] = dict(fn=fn, exporter=exporter, description=description, pytorch=pytorch,
                           clean=clean, **extra)
        return fn
    return deco


def seeded(model):
    torch.manual_seed(0)
    return model


# --- data-dependent output shapes (ODT020) ----------------------------------------------------


class NonZeroM(nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0)


@case("nonzero_ts", "torchscript", "torch.nonzero: the number of rows of the output depends on the values.",
      "torch.nonzero(x > 0)")
def _():
    m = NonZeroM()
    x = torch.randn(4, 5)
    model = export_ts(m, (x,), input_names=["x"], output_names=["idx"],
                      dynamic_axes={"x": {0: "batch"}, "idx": {0: "n"}})
    return model, [F_("ODT020", "NonZero", "impl"), F_("ODT001", "NonZero", "lack")], ""


@case("nonzero_dynamo", "dynamo", "torch.nonzero through the dynamo exporter (an unbacked size).",
      "torch.nonzero(x > 0)")
def _():
    m = NonZeroM()
    x = torch.randn(4, 5)
    model = export_dynamo(m, (x,), input_names=["x"], output_names=["idx"],
                          dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    return model, [F_("ODT020", "NonZero", "impl"), F_("ODT001", "NonZero", "lack")], ""


class BoolIndexM(nn.Module):
    def forward(self, x):
        return x[x > 0]


@case("bool_mask_index_ts", "torchscript", "Boolean-mask indexing x[mask]: exported as NonZero + GatherND.",
      "x[x > 0]")
def _():
    x = torch.randn(3, 4)
    model = export_ts(BoolIndexM(), (x,), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "n"}})
    return model, [F_("ODT020", "NonZero", "impl"), F_("ODT001", "NonZero", "lack")], ""


@case("bool_mask_index_dynamo", "dynamo", "Boolean-mask indexing x[mask] through the dynamo exporter.",
      "x[x > 0]")
def _():
    x = torch.randn(3, 4)
    model = export_dynamo(BoolIndexM(), (x,), input_names=["x"], output_names=["y"],
                          dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    return model, [F_("ODT020", "NonZero", "impl"), F_("ODT001", "NonZero", "lack")], ""


class MaskedSelectM(nn.Module):
    def forward(self, x):
        return torch.masked_select(x, x > 0.5)


@case("masked_select_ts", "torchscript", "torch.masked_select: output length = number of true mask entries.",
      "torch.masked_select(x, x > 0.5)")
def _():
    x = torch.randn(3, 4)
    model = export_ts(MaskedSelectM(), (x,), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "n"}})
    return model, [F_("ODT020", "NonZero", "impl"), F_("ODT001", "NonZero", "lack")], ""


class UniqueM(nn.Module):
    def forward(self, x):
        return torch.unique(x, sorted=True)


@case("unique_ts", "torchscript", "torch.unique: output length = number of distinct values.",
      "torch.unique(x, sorted=True)")
def _():
    x = torch.randint(0, 5, (8,))
    model = export_ts(UniqueM(), (x,), input_names=["x"], output_names=["u"],
                      dynamic_axes={"x": {0: "n"}, "u": {0: "k"}})
    return model, [F_("ODT020", "Unique", "impl"), F_("ODT001", "Unique", "lack")], ""


@case("unique_dynamo", "dynamo", "torch.unique through the dynamo exporter.",
      "torch.unique(x, sorted=True)")
def _():
    x = torch.randint(0, 5, (8,))
    model = export_dynamo(UniqueM(), (x,), input_names=["x"], output_names=["u"],
                          dynamic_shapes={"x": {0: torch.export.Dim("n")}})
    return model, [F_("ODT020", "Unique", "impl"), F_("ODT001", "Unique", "lack")], ""


class NmsM(nn.Module):
    def forward(self, boxes, scores):
        return torchvision.ops.nms(boxes, scores, 0.5)


def nms_inputs():
    g = torch.Generator().manual_seed(0)
    xy = torch.rand(10, 2, generator=g) * 50
    wh = torch.rand(10, 2, generator=g) * 20 + 5
    return torch.cat([xy, xy + wh], 1), torch.rand(10, generator=g)


@case("nms_ts", "torchscript", "torchvision.ops.nms: the number of kept boxes depends on the values.",
      "torchvision.ops.nms(boxes, scores, 0.5)")
def _():
    boxes, scores = nms_inputs()
    model = export_ts(NmsM(), (boxes, scores), input_names=["boxes", "scores"], output_names=["keep"],
                      dynamic_axes={"boxes": {0: "n"}, "scores": {0: "n"}, "keep": {0: "k"}})
    return model, [F_("ODT020", "NonMaxSuppression", "impl"),
                   F_("ODT001", "NonMaxSuppression", "lack")], ""


@case("nms_dynamo", "dynamo", "torchvision.ops.nms through the dynamo exporter.",
      "torchvision.ops.nms(boxes, scores, 0.5)")
def _():
    boxes, scores = nms_inputs()
    n = torch.export.Dim("n")
    model = export_dynamo(NmsM(), (boxes, scores), input_names=["boxes", "scores"],
                          output_names=["keep"], dynamic_shapes={"boxes": {0: n}, "scores": {0: n}})
    return model, [F_("ODT020", "NonMaxSuppression", "impl"),
                   F_("ODT001", "NonMaxSuppression", "lack")], ""


def assert_computed_k(model):
    k = find_node(model, "TopK").input[1]
    if constant_value(model, k) is not None:
        raise RuntimeError("TopK's K was folded to a constant")


class TopKM(nn.Module):
    def forward(self, x):
        return x.topk(x.shape[0] // 2, dim=0).values


@case("topk_computed_k_ts", "torchscript",
      "TopK whose k is computed from the (dynamic) input size: the output length depends on a runtime value.",
      "x.topk(x.shape[0] // 2, dim=0)")
def _():
    x = torch.randn(8, 3)
    model = export_ts(TopKM(), (x,), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "n"}, "y": {0: "k"}})
    assert_computed_k(model)
    return model, [F_("ODT020", "TopK", "impl"), F_("ODT001", "TopK", "lack")], ""


@case("topk_computed_k_dynamo", "dynamo", "TopK with a k computed from a dynamic size, dynamo exporter.",
      "x.topk(x.shape[0] // 2, dim=0)")
def _():
    x = torch.randn(8, 3)
    model = export_dynamo(TopKM(), (x,), input_names=["x"], output_names=["y"],
                          dynamic_shapes={"x": {0: torch.export.Dim("n", min=2)}})
    assert_computed_k(model)
    return model, [F_("ODT020", "TopK", "impl"), F_("ODT001", "TopK", "lack")], ""


# --- control flow (ODT021) --------------------------------------------------------------------


class IfM(nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            return x * 2.0
        else:
            return x - 1.0


@case("if_scripted_ts", "torchscript", "A data-dependent Python `if` in a torch.jit.script module exports an If node.",
      "if bool(x.sum() > 0): ...  (module passed through torch.jit.script)")
def _():
    x = torch.randn(2, 3)
    model = export_ts(torch.jit.script(IfM()), (x,), input_names=["x"], output_names=["y"])
    return model, [F_("ODT021", "If", "impl"), F_("ODT001", "If", "lack")], ""


class CondM(nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: t * 2.0, lambda t: t - 1.0, (x,))


@case("if_cond_dynamo", "dynamo", "torch.cond (the dynamo way to keep a data-dependent branch) exports an If node.",
      "torch.cond(x.sum() > 0, lambda t: t * 2.0, lambda t: t - 1.0, (x,))")
def _():
    x = torch.randn(2, 3)
    model = export_dynamo(CondM(), (x,), input_names=["x"], output_names=["y"])
    return model, [F_("ODT021", "If", "impl"), F_("ODT001", "If", "lack")], ""


class LoopM(nn.Module):
    def forward(self, x, n: torch.Tensor):
        y = x
        for _ in range(int(n)):
            y = y * 0.5 + 1.0
        return y


@case("loop_scripted_ts", "torchscript", "A loop with a data-dependent trip count in a scripted module exports a Loop node.",
      "for _ in range(int(n)): y = y * 0.5 + 1.0  (module passed through torch.jit.script)")
def _():
    x = torch.randn(2, 3)
    n = torch.tensor(3)
    model = export_ts(torch.jit.script(LoopM()), (x, n), input_names=["x", "n"], output_names=["y"])
    return model, [F_("ODT021", "Loop", "impl"), F_("ODT001", "Loop", "lack")], ""


# --- training-mode export (ODT031) ------------------------------------------------------------


class DropM(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        return self.drop(self.fc(x))


@case("dropout_training_ts", "torchscript", "Dropout exported with training=TrainingMode.TRAINING: Dropout(training_mode=true) stays in the graph.",
      "torch.onnx.export(model, x, f, training=torch.onnx.TrainingMode.TRAINING)")
def _():
    m = seeded(DropM)()
    model = export_ts(m, (torch.randn(2, 8),), input_names=["x"], output_names=["y"],
                      training=torch.onnx.TrainingMode.TRAINING)
    return model, [F_("ODT031", "Dropout", [])], ""


@case("dropout_train_dynamo", "dynamo", "Dropout module left in train mode, exported with the dynamo exporter.",
      "model.train(); torch.onnx.export(model, (x,), dynamo=True)")
def _():
    m = seeded(DropM)().train()
    model = export_dynamo(m, (torch.randn(2, 8),), input_names=["x"], output_names=["y"])
    return model, [F_("ODT031", "Dropout", [])], ""


class BnM(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


@case("batchnorm_preserve_train_ts", "torchscript",
      "BatchNorm of a module left in train mode, exported with training=TrainingMode.PRESERVE: BatchNormalization(training_mode=1).",
      "model.train(); torch.onnx.export(model, x, f, training=torch.onnx.TrainingMode.PRESERVE)")
def _():
    m = seeded(BnM)().train()
    model = export_ts(m, (torch.randn(2, 3, 8, 8),), input_names=["x"], output_names=["y"],
                      training=torch.onnx.TrainingMode.PRESERVE)
    return model, [F_("ODT031", "BatchNormalization", [])], ""


# --- dynamic axis declared, size baked (ODT033) -----------------------------------------------


class ViewIntM(nn.Module):
    def forward(self, x):
        return x.view(int(x.shape[0]), -1)


@case("view_int_baked_ts", "torchscript",
      "Dynamic batch declared, but int(x.shape[0]) is traced as the constant 2: Reshape(x, [2, -1]).",
      "x.view(int(x.shape[0]), -1)", dyn_check=((torch.randn(3, 3, 4),), ["x"]))
def _():
    model = export_ts(ViewIntM(), (torch.randn(2, 3, 4),), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return model, [F_("ODT033", "Reshape", [])], ""


class ArangeIntM(nn.Module):
    def forward(self, x):
        return x + torch.arange(int(x.size(1)))


@case("arange_int_baked_ts", "torchscript",
      "Dynamic seq declared, torch.arange(int(x.size(1))) traced with seq=5; constant folding turns the Range into a Constant [0..4] added to x.",
      "x + torch.arange(int(x.size(1)))", dyn_check=((torch.randn(2, 7),), ["x"]))
def _():
    model = export_ts(ArangeIntM(), (torch.randn(2, 5),), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})
    return model, [F_("ODT033", "Add", [], note="the folded arange constant meets the symbolic seq dim here")], ""


class ZerosIntM(nn.Module):
    def forward(self, x):
        return torch.cat([x, torch.zeros(int(x.shape[0]), 4)], 1)


@case("zeros_int_baked_ts", "torchscript",
      "Dynamic batch declared, torch.zeros(int(x.shape[0]), 4) folded to a [2, 4] constant concatenated with x[batch, 5].",
      "torch.cat([x, torch.zeros(int(x.shape[0]), 4)], 1)", dyn_check=((torch.randn(3, 5),), ["x"]))
def _():
    model = export_ts(ZerosIntM(), (torch.randn(2, 5),), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return model, [F_("ODT033", "Concat", [], note="the folded zeros constant [2,4] meets x's symbolic batch dim here")], ""


class ExpandIntM(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, 8))

    def forward(self, x):
        return torch.cat([self.cls.expand(int(x.shape[0]), -1, -1), x], 1)


@case("expand_int_baked_ts", "torchscript",
      "ViT-style class token expanded with an int batch size: Expand(cls, [2,1,8]) then Concat with x[batch, 3, 8].",
      "torch.cat([self.cls.expand(int(x.shape[0]), -1, -1), x], 1)",
      dyn_check=((torch.randn(3, 3, 8),), ["x"]))
def _():
    m = seeded(ExpandIntM)()
    model = export_ts(m, (torch.randn(2, 3, 8),), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return model, [F_("ODT033", "Expand", [])], ""


class SmallCnnFixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(x.flatten(1))


@case("fixed_batch_ts", "torchscript",
      "Batch meant to be dynamic (input named batch_images) but exported without dynamic_axes: every dim is fixed to the example's 1.",
      "torch.onnx.export(model, torch.randn(1, 3, 8, 8), f, input_names=['batch_images'])  # no dynamic_axes",
      dyn_check=((torch.randn(3, 3, 8, 8),), ["batch_images"]))
def _():
    m = seeded(SmallCnnFixed)().eval()
    model = export_ts(m, (torch.randn(1, 3, 8, 8),), input_names=["batch_images"], output_names=["logits"])
    note = ("ODT036 (info): the input's name says batch, its dim 0 is fixed; a static input with another name "
            "(clean_cnn_ts, clean_gru_ts) is not reported")
    return model, [F_("ODT036", None, [], value="batch_images", note=note)], ""


# --- initializers as inputs (ODT030) ----------------------------------------------------------


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@case("keep_initializers_ts", "torchscript", "Weights also listed as graph inputs.",
      "torch.onnx.export(model, x, f, keep_initializers_as_inputs=True)")
def _():
    m = seeded(Mlp)().eval()
    model = export_ts(m, (torch.randn(2, 16),), input_names=["x"], output_names=["y"],
                      keep_initializers_as_inputs=True)
    return model, [F_("ODT030", None, [])], ""


# --- mixed dtypes (ODT035) --------------------------------------------------------------------


class OnesLongM(nn.Module):
    def forward(self, x):
        return x * torch.ones(x.shape, dtype=torch.long)


@case("mixed_dtype_mul_edited_ts", "torchscript",
      "x * torch.ones(x.shape, dtype=torch.long) exported correctly (ConstantOfShape int64 -> Cast -> Mul), then the "
      "Cast removed with onnx.helper: Mul(float, int64), where only shape inference knows the int64 "
      "(ConstantOfShape's type comes from its value attribute).",
      "x * torch.ones(x.shape, dtype=torch.long)  # graph then edited, see notes")
def _():
    model = export_ts(OnesLongM(), (torch.randn(2, 3),), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    cast = find_node(model, "Cast")
    mul = find_node(model, "Mul")
    mul.input[1] = cast.input[0]
    model.graph.node.remove(cast)
    return model, [F_("ODT035", "Mul", [])], (
        "The TorchScript exporter casts mixed operands itself (it did so for this line, for torch.where with an int "
        "tensor, for x / x.shape[-1] + torch.arange(n), and even for an int64 Constant emitted by a custom "
        "autograd.Function.symbolic, which its scalar-type pass retypes to float), so no exported model had the "
        "mismatch: the Cast between ConstantOfShape and Mul was removed with onnx.helper.")


class WhereMaskM(nn.Module):
    def forward(self, x, mask):
        return torch.where(mask, x, torch.zeros_like(x))


@case("mixed_dtype_where_edited_ts", "torchscript",
      "Where(mask, x, zeros) exported correctly, then the graph was edited (onnx.helper) so the else branch is an int64 constant.",
      "torch.where(mask, x, torch.zeros_like(x))  # graph then edited, see notes")
def _():
    model = export_ts(WhereMaskM(), (torch.randn(2, 3), torch.rand(2, 3) > 0.5),
                      input_names=["x", "mask"], output_names=["y"])
    where = find_node(model, "Where")
    const = oh.make_node("Constant", [], ["zero_i64"], name="/ZeroInt64",
                         value=oh.make_tensor("v", onnx.TensorProto.INT64, [], [0]))
    where.input[2] = "zero_i64"
    model.graph.node.insert(0, const)
    # drop nodes that no longer feed anything
    used = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
    keep = [n for n in model.graph.node if any(o in used for o in n.output)]
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return model, [F_("ODT035", "Where", [], equivalent=["ODC040"],
                      note="the Constant's type is visible to the spec check, which reports ODC040; ODT035 does not repeat it")], (
        "The TorchScript exporter inserts the Casts itself for torch.where, so the else input of Where was "
        "replaced with onnx.helper by an int64 Constant '/ZeroInt64'.")


# --- INT64 outside INT32 on TensorRT 8.6 (ODT010) ---------------------------------------------


class HashM(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.tensor([2**40], dtype=torch.int64))

    def forward(self, ids):
        return ids + self.offset


@case("int64_large_buffer_ts", "torchscript",
      "An int64 buffer with a value above INT32_MAX added to an index tensor: TensorRT 8.6 clamps it to 2147483647.",
      "self.register_buffer('offset', torch.tensor([2**40])); ids + self.offset")
def _():
    model = export_ts(HashM(), (torch.tensor([[1, 2, 3]]),), input_names=["ids"], output_names=["y"])
    v = constant_value(model, "offset")
    if v is None or v.dtype != np.int64 or int(v.max()) <= 2**31 - 1:
        raise RuntimeError("no INT64 initializer 'offset' outside INT32")
    return model, [F_("ODT010", None, ["tensorrt-8.6"], value="offset")], ""


class SliceTailM(nn.Module):
    def forward(self, x):
        return x[:, 1:] * 2.0


@case("slice_int64max_ts", "torchscript",
      "x[:, 1:] exports Slice with ends=INT64_MAX. TensorRT 8.6 casts INT64 to INT32 and clamps it to INT32_MAX, "
      "which still means 'to the end' (Slice clamps ends to the dim): the model runs unchanged. Expected: reported "
      "for tensorrt-8.6, but at most as info (not the error a value-changing clamp is).",
      "x[:, 1:]")
def _():
    model = export_ts(SliceTailM(), (torch.randn(2, 5),), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq_m1"}})
    sl = find_node(model, "Slice")
    ends = sl.input[2]
    if int(constant_value(model, ends).reshape(-1)[0]) != 2**63 - 1:
        raise RuntimeError("Slice ends is not INT64_MAX")
    note = ("a Slice starts/ends sentinel: clamping INT64_MAX to INT32_MAX does not change the result, so info; "
            "the Constant node or the tensor it outputs: either location matches")
    producer = [n for n in model.graph.node if ends in n.output]
    if producer:
        return model, [F_("ODT010", "Constant", ["tensorrt-8.6"], pred=lambda m, n: ends in n.output,
                          value=ends, max_severity="info", note=note)], ""
    return model, [F_("ODT010", None, ["tensorrt-8.6"], value=ends, max_severity="info", note=note)], ""


# --- op / opset outside a target's range (ODT001 / ODT002) ------------------------------------


class GridM(nn.Module):
    def forward(self, x, grid):
        return F.grid_sample(x, grid, align_corners=False)


@case("grid_sample_opset16_ts", "torchscript",
      "F.grid_sample exports GridSample (ONNX opset 16+): targets without it (ncnn's onnx2ncnn, tract's registry) cannot load the model.",
      "F.grid_sample(x, grid, align_corners=False)  # opset_version=16")
def _():
    model = export_ts(GridM(), (torch.randn(1, 2, 4, 4), torch.rand(1, 3, 3, 2) * 2 - 1), opset=16,
                      input_names=["x", "grid"], output_names=["y"])
    return model, [F_("ODT001", "GridSample", "lack")], ""


class SdpaM(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


@case("sdpa_opset23_dynamo", "dynamo",
      "F.scaled_dot_product_attention exported at opset 23 becomes one Attention node: outside TensorRT 8.6's opset range "
      "(..17), and Attention is unknown to targets whose profiles lack it.",
      "F.scaled_dot_product_attention(q, k, v)  # torch.onnx.export(..., dynamo=True, opset_version=23)")
def _():
    q = torch.randn(1, 2, 4, 8)
    model = export_dynamo(SdpaM(), (q, q.clone(), q.clone()), opset=23, input_names=["q", "k", "v"],
                          output_names=["y"])
    opset = model_opset(model)
    strip_node_metadata(model)
    exp = [F_("ODT002", None, [t for t in ALL_TARGETS if not target_accepts_opset(t, opset)]),
           F_("ODT001", "Attention", "lack")]
    return model, exp, ("Node metadata_props (pkg.torch.onnx.stack_trace with this machine's paths, name_scopes, ...) "
                        "removed after export so the case carries one hazard: at opset 23 the exporter does not "
                        "down-convert, which is what drops them in the opset-17 dynamo cases.")


# --- custom domain op without function (ODC013 + ODT001) --------------------------------------


class FancyActFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * torch.sigmoid(1.702 * x)

    @staticmethod
    def symbolic(g, x):
        return g.op("mydomain::FancyAct", x, alpha_f=1.702)


class FancyActM(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return FancyActFn.apply(self.fc(x))


@case("custom_op_no_function_ts", "torchscript",
      "An autograd.Function with a custom symbolic exports mydomain::FancyAct with no model-local function: no backend can run it.",
      "g.op('mydomain::FancyAct', x, alpha_f=1.702)  # FancyActFn.symbolic",
      )
def _():
    m = seeded(FancyActM)().eval()
    model = export_ts(m, (torch.randn(2, 4),), input_names=["x"], output_names=["y"],
                      custom_opsets={"mydomain": 1})
    return model, [F_("ODC013", "FancyAct", [], domain="mydomain"),
                   F_("ODT001", "FancyAct", "all", domain="mydomain",
                      note="no target implements mydomain::FancyAct; ODT001's doc says other domains are not checked")], ""


# --- metadata leaking absolute paths (ODT032) -------------------------------------------------


class LinReluM(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


@case("metadata_stack_trace_dynamo", "dynamo",
      "The dynamo exporter writes pkg.torch.onnx.stack_trace on every node, with the absolute paths of the exporting "
      "machine's script and of torch's files. Opset 18 (the exporter's native opset) so the metadata survives.",
      "torch.onnx.export(model, (x,), dynamo=True, opset_version=18)")
def _():
    m = seeded(LinReluM)().eval()
    model = export_dynamo(m, (torch.randn(2, 4),), opset=18, input_names=["x"], output_names=["y"])
    opset = model_opset(model)

    def has_path(_m, n):
        return any(p.key == "pkg.torch.onnx.stack_trace" and 'File "/' in p.value for p in n.metadata_props)
    exp = [F_("ODT032", n.op_type, [], pred=lambda _m, x, name=n.name: x.name == name)
           for n in model.graph.node if has_path(model, n)]
    exp.append(F_("ODT002", None, [t for t in ALL_TARGETS if not target_accepts_opset(t, opset)],
                  note="side effect of opset 18, not the hazard under test"))
    return model, exp, ""


@case("metadata_doc_string_ts", "torchscript",
      "torch.onnx.export(verbose=True) keeps each node's doc_string: the Python stack with absolute paths.",
      "torch.onnx.export(model, x, f, verbose=True)")
def _():
    m = seeded(LinReluM)().eval()
    model = export_ts(m, (torch.randn(2, 4),), input_names=["x"], output_names=["y"], verbose=True)
    exp = [F_("ODT032", n.op_type, [], pred=lambda _m, x, name=n.name: x.name == name)
           for n in model.graph.node if "/" in n.doc_string]
    return model, exp, ""


# --- unused inputs / dead nodes (ODC101 / ODC103) ---------------------------------------------


class UnusedInputM(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, attention_mask):
        return self.fc(x)


@case("unused_input_dynamo", "dynamo",
      "forward() takes an argument it never uses; the dynamo exporter keeps it as a graph input (the TorchScript exporter drops it).",
      "def forward(self, x, attention_mask): return self.fc(x)")
def _():
    m = seeded(UnusedInputM)().eval()
    model = export_dynamo(m, (torch.randn(2, 4), torch.ones(2, 4)), input_names=["x", "attention_mask"],
                          output_names=["y"])
    if "attention_mask" not in [i.name for i in model.graph.input]:
        raise RuntimeError("exporter dropped the unused input")
    return model, [F_("ODC101", None, [], value="attention_mask")], ""


class TwoHeadM(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.aux = nn.Linear(4, 2)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        return h, torch.sigmoid(self.aux(h))


@case("dead_nodes_ts", "torchscript",
      "A two-headed model exported, then the aux output removed from graph.output (onnx.helper): its Gemm and Sigmoid are dead.",
      "return h, torch.sigmoid(self.aux(h))  # graph then edited, see notes")
def _():
    m = seeded(TwoHeadM)().eval()
    model = export_ts(m, (torch.randn(2, 4),), input_names=["x"], output_names=["y", "aux"])
    keep = [o for o in model.graph.output if o.name != "aux"]
    del model.graph.output[:]
    model.graph.output.extend(keep)
    return model, [F_("ODC103", "Sigmoid", []),
                   F_("ODC103", "Gemm", [], pred=lambda _m, n: n.name.startswith("/aux")),
                   ], ("The exporters drop dead code themselves, so the dead nodes were made by editing: the 'aux' "
                       "graph output was removed with onnx.helper after a normal export (as a pruning script would do). "
                       "The aux weights become unused initializers too (ODC102, not asserted).")


# --- clean controls ---------------------------------------------------------------------------


class CleanCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        x = F.max_pool2d(torch.relu(self.c2(x)), 2)
        return self.fc(torch.flatten(x, 1))


@case("clean_cnn_ts", "torchscript", "Clean control: small CNN (Conv/BN/ReLU/MaxPool/Flatten/Gemm), eval mode, static shapes.",
      "", clean=True)
def _():
    m = seeded(CleanCnn)().eval()
    model = export_ts(m, (torch.randn(1, 3, 16, 16),), input_names=["x"], output_names=["logits"])
    return model, [], ""


@case("clean_cnn_dynbatch_dynamo", "dynamo", "Clean control: the same CNN, dynamo exporter, dynamic batch done right.",
      "", clean=True, dyn_check=((torch.randn(3, 3, 16, 16),), ["x"]))
def _():
    m = seeded(CleanCnn)().eval()
    model = export_dynamo(m, (torch.randn(2, 3, 16, 16),), input_names=["x"], output_names=["logits"],
                          dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    return model, [], ""


@case("clean_mlp_ts", "torchscript", "Clean control: 2-layer MLP, dynamic batch.", "", clean=True,
      dyn_check=((torch.randn(5, 16),), ["x"]))
def _():
    m = seeded(Mlp)().eval()
    model = export_ts(m, (torch.randn(2, 16),), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return model, [], ""


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.1,
                                                batch_first=True)

    def forward(self, x):
        return self.layer(x)


@case("clean_transformer_ts", "torchscript",
      "Clean control: one nn.TransformerEncoderLayer (eval, batch_first), batch dynamic, seq fixed at 5.",
      "", clean=True, dyn_check=((torch.randn(3, 5, 16),), ["x"]))
def _():
    m = seeded(Encoder)().eval()
    model = export_ts(m, (torch.randn(2, 5, 16),), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return model, [], ""


@case("transformer_seq_baked_ts", "torchscript",
      "nn.TransformerEncoderLayer exported with batch AND seq dynamic: the TorchScript trace of "
      "F.multi_head_attention_forward bakes the example seq length (5) into the shapes of the k/v "
      "reshapes (Concat([5], bsz*heads, head_dim) -> Reshape). Found while building the clean transformer control.",
      "k = k.view(k.shape[0], bsz * num_heads, head_dim)  # and v.view(...), torch/nn/functional.py multi_head_attention_forward (torch 2.15)",
      dyn_check=((torch.randn(2, 7, 16),), ["x"]))
def _():
    m = seeded(Encoder)().eval()
    model = export_ts(m, (torch.randn(2, 5, 16),), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})
    prod = {o: n for n in model.graph.node for o in n.output}

    def baked(_m, n):
        c = prod.get(n.input[1])
        if c is None or c.op_type != "Concat":
            return False
        vals = [constant_value(model, i) for i in c.input]
        return any(v is not None and v.size == 1 and int(v.reshape(-1)[0]) == 5 for v in vals)
    hits = [n for n in model.graph.node if n.op_type == "Reshape" and baked(model, n)]
    if not hits:
        raise RuntimeError("no Reshape with a baked seq length")
    return model, [F_("ODT033", "Reshape", [], pred=lambda _m, x, name=n.name: x.name == name,
                      note="shape = Concat(Constant [5], computed, computed): the seq length 5 is baked")
                   for n in hits], ""


class GruM(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 12, batch_first=True)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.fc(out[:, -1])


@case("clean_gru_ts", "torchscript", "Clean control: GRU + Linear on the last step, static shapes.", "", clean=True)
def _():
    m = seeded(GruM)().eval()
    model = export_ts(m, (torch.randn(2, 6, 8),), input_names=["x"], output_names=["y"])
    return model, [], ""


class ViewOkM(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 4)

    def forward(self, x):
        return self.fc(x.view(x.shape[0], -1))


@case("clean_view_ts", "torchscript",
      "Clean control: x.view(x.shape[0], -1) with a dynamic batch: the size stays a tensor (Shape -> Gather -> Concat).",
      "", clean=True, dyn_check=((torch.randn(5, 3, 4),), ["x"]))
def _():
    m = seeded(ViewOkM)().eval()
    model = export_ts(m, (torch.randn(2, 3, 4),), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return model, [], ""


@case("clean_view_dynamo", "dynamo", "Clean control: x.view(x.shape[0], -1), dynamo exporter, dynamic batch.",
      "", clean=True, dyn_check=((torch.randn(5, 3, 4),), ["x"]))
def _():
    m = seeded(ViewOkM)().eval()
    model = export_dynamo(m, (torch.randn(2, 3, 4),), input_names=["x"], output_names=["y"],
                          dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    return model, [], ""


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def toml_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def toml_list(xs):
    return "[" + ", ".join(toml_str(x) for x in xs) + "]"


def resolve(model, f):
    opset = model_opset(model)
    out = {"code": f.code}
    if f.op is not None:
        n = find_node(model, f.op, f.pred, f.domain)
        out["op_type"] = n.op_type
        out["node"] = n.name
        dom = n.domain
    else:
        dom = ""
    if f.value is not None:
        out["value"] = f.value
    t = f.targets
    if t == "impl":
        t = impl_targets(f.op, opset, dom)
    elif t == "lack":
        t = lack_targets(f.op, opset, dom)
    elif t == "all":
        t = list(ALL_TARGETS)
    out["targets"] = list(t)
    if f.equivalent:
        out["equivalent_codes"] = f.equivalent
    if f.max_severity:
        out["max_severity"] = f.max_severity
    if f.note:
        out["note"] = f.note
    return out


def clean_targets(model):
    """Targets on which a clean control must be silent: the profile lists every op at the model's
    opset and accepts the opset."""
    opset = model_opset(model)
    ops = {(n.domain, n.op_type) for n in all_nodes(model.graph)}
    res = []
    for t in ALL_TARGETS:
        if not target_accepts_opset(t, opset):
            continue
        if all(d in ("", "ai.onnx") and target_has_op(t, op, opset) for d, op in ops):
            res.append(t)
    return res


def write_case(out_dir, name, spec, model, findings, notes):
    d = os.path.join(out_dir, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # noqa: BLE001  (some hazards are invalid models on purpose)
        first = str(e).strip().splitlines()[0][:200]
        notes = (notes + " " if notes else "") + f"onnx.checker.check_model(full_check=True) rejects it: {first}"
    data = model.SerializeToString()
    if len(data) > MAX_BYTES:
        raise RuntimeError(f"{name}: {len(data)} bytes > {MAX_BYTES}")
    with open(os.path.join(d, "model.onnx"), "wb") as fh:
        fh.write(data)

    resolved = [resolve(model, f) for f in findings]
    dyn = spec.get("dyn_check")
    if dyn is not None:
        inputs, names = dyn
        verdict = ort_compare(model, spec["module"], inputs, names) if spec.get("module") else None
        if verdict:
            shapes = ", ".join(f"{n}{list(t.shape)}" for n, t in zip(names, inputs))
            notes = (notes + " " if notes else "") + f"Run at {shapes}: {verdict}."
    lines = [
        f"description = {toml_str(spec['description'])}",
        f"pytorch = {toml_str(spec['pytorch'])}",
        f"exporter = {toml_str(spec['exporter'])}",
        f"opset = {model_opset(model)}",
        f"clean = {'true' if spec['clean'] else 'false'}",
    ]
    if spec["clean"]:
        lines.append(f"clean_targets = {toml_list(clean_targets(model))}")
    if spec.get("uncovered"):
        lines.append(f"uncovered = {toml_str(spec['uncovered'])}")
    if notes:
        lines.append(f"notes = {toml_str(notes)}")
    for r in resolved:
        lines.append("")
        lines.append("[[finding]]")
        for k in ("code", "op_type", "node", "value"):
            if k in r:
                lines.append(f"{k} = {toml_str(r[k])}")
        lines.append(f"targets = {toml_list(r['targets'])}")
        if "equivalent_codes" in r:
            lines.append(f"equivalent_codes = {toml_list(r['equivalent_codes'])}")
        if "max_severity" in r:
            lines.append(f"max_severity = {toml_str(r['max_severity'])}")
        if "note" in r:
            lines.append(f"note = {toml_str(r['note'])}")
    with open(os.path.join(d, "expect.toml"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return len(data)


# ---------------------------------------------------------------------------------------------
# Report: expected vs what a given onnx-doctor binary reports (--report BIN)
# ---------------------------------------------------------------------------------------------


def run_check(binary, path):
    import json
    import subprocess
    p = subprocess.run([binary, "check", path, "--target", "all", "--format", "json"],
                       capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{binary} check {path}: exit {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def diag_where(d):
    loc = d.get("location", {})
    return loc.get("kind"), loc.get("node") or d.get("node"), loc.get("op") or d.get("op_type"), loc.get("value")


SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


def matches(d, f, target):
    if d["code"] not in [f["code"]] + f.get("equivalent_codes", []) or d.get("target") != target:
        return False
    kind, node, op, value = diag_where(d)
    at_node = "node" in f and node == f["node"] and op == f.get("op_type")
    at_value = "value" in f and (value == f["value"] or (kind == "file" and f["value"] in d.get("message", "")))
    if "node" in f and "value" in f:
        return at_node or at_value
    if "node" in f:
        return at_node
    if "value" in f:
        return at_value
    return True


def binary_capabilities(binary):
    """The targets the binary knows (`targets --format json`) and the finding codes compiled into it
    (a byte search of the executable: a build without a rule has no string of its code)."""
    import json
    import subprocess
    p = subprocess.run([binary, "targets", "--format", "json"], capture_output=True, text=True)
    targets = {t["name"] for t in json.loads(p.stdout)}
    with open(binary, "rb") as fh:
        data = fh.read()
    codes = {c for c in {f"ODT{n:03d}" for n in range(1, 100)} | {f"ODC{n:03d}" for n in range(1, 200)}
             if c.encode() in data}
    return targets, codes


CAPS = {}
ANALYSIS_MARK = "## Gaps (hand-written analysis)"
GENERATED_MARK = "## Expected vs reported (generated)"


def compare_case(case_dir, binary):
    with open(os.path.join(case_dir, "expect.toml"), "rb") as fh:
        exp = tomllib.load(fh)
    rel = os.path.relpath(os.path.join(case_dir, "model.onnx"), os.path.dirname(case_dir))
    doc = run_check(binary, os.path.join(case_dir, "model.onnx"))
    diags = doc["diagnostics"]
    used = set()
    rows = []
    known_targets, known_codes = CAPS[binary]
    for f in exp.get("finding", []):
        targets = f["targets"] or [None]
        hit, miss, elsewhere, na, too_severe = [], [], [], [], []
        for t in targets:
            codes = [f["code"]] + f.get("equivalent_codes", [])
            if not any(c in known_codes for c in codes) or (t is not None and t not in known_targets):
                na.append(t)
                continue
            found = [i for i, d in enumerate(diags) if matches(d, f, t)]
            if found and f.get("max_severity") and any(
                    SEVERITY_RANK[diags[i]["severity"]] > SEVERITY_RANK[f["max_severity"]] for i in found):
                too_severe.append((t, sorted({diags[i]["severity"] for i in found})))
                used.update(found)
            elif found:
                hit.append(t)
                used.update(found)
            else:
                miss.append(t)
                other = [d for d in diags if d["code"] == f["code"] and d.get("target") == t]
                if other:
                    elsewhere.append((t, sorted({str(diag_where(d)[1] or diag_where(d)[3]) for d in other})))
        miss += [t for t, _ in too_severe]
        rows.append(dict(f=f, hit=hit, miss=miss, elsewhere=elsewhere, na=na, too_severe=too_severe))
    clean_targets = set(exp.get("clean_targets", []))
    extras, fps = [], []
    for i, d in enumerate(diags):
        if i in used or d["severity"] not in ("warning", "error"):
            continue
        t = d.get("target")
        if exp.get("clean") and (t is None or t in clean_targets):
            fps.append(d)
        else:
            extras.append(d)
    return exp, doc, rows, extras, fps


def fmt_t(ts):
    return ", ".join("(none)" if t is None else t for t in ts)


def fmt_d(d):
    kind, node, op, value = diag_where(d)
    where = f"{op} `{node}`" if kind == "node" else (f"value `{value}`" if kind == "value" else "model")
    return f"{d['code']} {d['severity']} [{d.get('target') or 'all'}] {where}"


def row_status(r):
    if not r["hit"] and not r["miss"]:
        return "n/a"
    if not r["miss"]:
        return "hit"
    return "partial" if r["hit"] else "missed"


def write_report(out_dir, binary):
    CAPS[binary] = binary_capabilities(binary)
    known_targets, known_codes = CAPS[binary]
    lines = []
    totals = dict(exp=0, hit=0, partial=0, miss=0, na=0, fp_cases=0, fp=0)
    per_case = []
    for name in sorted(os.listdir(out_dir)):
        case_dir = os.path.join(out_dir, name)
        if not os.path.isfile(os.path.join(case_dir, "expect.toml")):
            continue
        exp, doc, rows, extras, fps = compare_case(case_dir, binary)
        per_case.append((name, exp, doc, rows, extras, fps))
        for r in rows:
            totals["exp"] += 1
            totals[{"n/a": "na", "hit": "hit", "partial": "partial", "missed": "miss"}[row_status(r)]] += 1
        if exp.get("clean"):
            totals["fp"] += len(fps)
            totals["fp_cases"] += bool(fps)
    lines.append("# Hazard corpus: expected vs reported")
    lines.append("")
    import datetime
    built = datetime.datetime.fromtimestamp(os.path.getmtime(binary), datetime.timezone.utc)
    lines.append(f"Binary: `{binary}` (file dated {built:%Y-%m-%d %H:%M} UTC; `check MODEL --target all --format json`). Generated by "
                 "`python3 scripts/export_hazard_corpus.py --report-only BIN`; expectations come from "
                 "`expect.toml` (see README.md), not from the binary.")
    lines.append("")
    n_clean = sum(1 for c in per_case if c[1].get("clean"))
    missing_t = sorted(set(ALL_TARGETS) - known_targets)
    lines.append(f"This build knows the targets {', '.join(sorted(known_targets))}"
                 + (f" (not {', '.join(missing_t)})" if missing_t else "")
                 + "; expected findings whose code is not compiled into it, or for a target it does not know, "
                 "count as n/a, not as misses (codes missing from this build: "
                 + ", ".join(sorted({f['code'] for c in per_case for r in c[3] for f in [r['f']]} - known_codes))
                 + ").")
    lines.append("")
    lines.append(f"Expected findings: {totals['exp']} — reported on the right node/op for every expected target "
                 f"(that the build knows): {totals['hit']}, for some targets only: {totals['partial']}, "
                 f"missed: {totals['miss']}, n/a in this build: {totals['na']}. Clean controls: {n_clean}, with false positives: "
                 f"{totals['fp_cases']} ({totals['fp']} warning/error findings on the null target or a "
                 "clean target).")
    lines.append("")
    lines.append("| case | clean | expected findings | result |")
    lines.append("|---|---|---|---|")
    for name, exp, doc, rows, extras, fps in per_case:
        if exp.get("clean"):
            res = "clean" if not fps else f"**{len(fps)} false positive(s)**"
            lines.append(f"| {name} | yes | - | {res} |")
            continue
        parts = []
        for r in rows:
            f = r["f"]
            what = f["code"] + (f" {f['op_type']}" if "op_type" in f else "")
            st = row_status(r)
            na = f" (n/a: {fmt_t(r['na'])})" if r["na"] and st != "n/a" else ""
            if st == "hit":
                parts.append(f"{what}: hit{na}")
            elif st == "partial":
                parts.append(f"{what}: **partial** (missing {fmt_t(r['miss'])}){na}")
            elif st == "missed" and r["too_severe"] and len(r["too_severe"]) == len(r["miss"]):
                parts.append(f"{what}: **too severe** ({'/'.join(r['too_severe'][0][1])}, expected <= {f['max_severity']}){na}")
            elif st == "missed":
                parts.append(f"{what}: **MISSED**{na}")
            else:
                parts.append(f"{what}: n/a in this build")
        if exp.get("uncovered"):
            parts.append("**no rule** (uncovered)")
        lines.append(f"| {name} | no | {len(rows)} | {'; '.join(parts)} |")
    lines.append("")
    lines.append("## Per case")
    for name, exp, doc, rows, extras, fps in per_case:
        lines.append("")
        lines.append(f"### {name}")
        lines.append("")
        lines.append(f"{exp['description']} (`{exp['exporter']}`, opset {exp.get('opset')})")
        lines.append("")
        if exp.get("uncovered"):
            lines.append(f"- uncovered by any rule: {exp['uncovered']}")
        for r in rows:
            f = r["f"]
            where = (f"{f.get('op_type')} `{f['node']}`" if "node" in f
                     else (f"value `{f['value']}`" if "value" in f else "model"))
            tg = fmt_t(f["targets"]) if f["targets"] else "target-independent"
            status = row_status(r).upper() if row_status(r) in ("partial", "missed") else row_status(r)
            line = f"- expected {f['code']} on {where} for {tg}: **{status}**"
            if r["miss"] and r["hit"]:
                line += f"; reported for {fmt_t(r['hit'])}, not for {fmt_t(r['miss'])}"
            if r["na"] and status != "n/a":
                line += f"; n/a in this build for {fmt_t(r['na'])}"
            for t, sev in r["too_severe"]:
                line += f"; [{t or 'all'}] reported at the right place but as {'/'.join(sev)} (expected at most {f['max_severity']})"
            for t, where2 in r["elsewhere"]:
                line += f"; {f['code']} [{t or 'all'}] reported elsewhere: {', '.join(where2)}"
            lines.append(line)
        if exp.get("clean"):
            lines.append(f"- clean targets: {', '.join(exp.get('clean_targets', []))}")
            if fps:
                for d in fps:
                    lines.append(f"- **false positive**: {fmt_d(d)} — {d['message'][:200]}")
            else:
                lines.append("- no warning/error on the null target or a clean target")
        if extras:
            lines.append(f"- other warnings/errors ({len(extras)}):")
            seen = {}
            for d in extras:
                key = (d["code"], d["severity"], d.get("target"))
                seen.setdefault(key, []).append(d)
            for (code, sev, t), ds in sorted(seen.items(), key=lambda kv: (kv[0][0], str(kv[0][2]))):
                nodes = sorted({str(diag_where(d)[1] or diag_where(d)[3] or "model") for d in ds})
                lines.append(f"  - {code} {sev} [{t or 'all'}] x{len(ds)}: {', '.join(nodes[:6])}"
                             + (" ..." if len(nodes) > 6 else "") + f" — {ds[0]['message'][:160]}")
    path = os.path.join(out_dir, "REPORT.md")
    analysis = ""
    if os.path.exists(path):
        with open(path) as fh:
            old = fh.read()
        if ANALYSIS_MARK in old:
            analysis = old[old.index(ANALYSIS_MARK):]
    # the hand-written analysis goes first; the generated part follows it
    with open(path, "w") as fh:
        head = lines[:2]
        fh.write("\n".join(head) + "\n")
        if analysis:
            fh.write(analysis.split(GENERATED_MARK)[0].rstrip() + "\n\n")
        fh.write(GENERATED_MARK + "\n\n" + "\n".join(lines[2:]) + "\n")
    print(f"wrote {os.path.join(out_dir, 'REPORT.md')}: {totals}")




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "hazards"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--report-only", metavar="BIN",
                    help="do not export; run BIN check on every case and write REPORT.md")
    a = ap.parse_args()
    if a.list:
        print("\n".join(CASES))
        return 0
    if a.report_only:
        write_report(a.out, a.report_only)
        return 0
    os.makedirs(a.out, exist_ok=True)
    failed = []
    for name, spec in CASES.items():
        if a.only and name not in a.only:
            continue
        torch.manual_seed(0)
        try:
            model, findings, notes = spec["fn"]()
            spec = dict(spec)
            spec["module"] = LAST_MODULE.get("m")
            size = write_case(a.out, name, spec, model, findings, notes)
            print(f"ok    {name} ({size} bytes, opset {model_opset(model)})")
        except Exception as e:  # noqa: BLE001
            failed.append(name)
            print(f"FAIL  {name}: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
            if os.environ.get("HAZ_DEBUG"):
                traceback.print_exc()
        LAST_MODULE.clear()
    if failed:
        print("failed (not written):", " ".join(failed))
    return 0


# The module each export saw, for the onnxruntime check (set by the export helpers).
LAST_MODULE = {}
_export_ts, _export_dynamo = export_ts, export_dynamo


def export_ts(model, args, opset=OPSET, **kw):  # noqa: F811
    LAST_MODULE["m"] = model
    return _export_ts(model, args, opset, **kw)


def export_dynamo(model, args, opset=OPSET, **kw):  # noqa: F811
    LAST_MODULE["m"] = model
    return _export_dynamo(model, args, opset, **kw)


if __name__ == "__main__":
    sys.exit(main())
