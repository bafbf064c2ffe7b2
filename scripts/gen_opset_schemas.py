#!/usr/bin/env python3
"""Generate crates/opset/data/schemas.json from the installed `onnx` package.

Usage: python3 scripts/gen_opset_schemas.py   (from anywhere; writes into the repository)

Every schema `onnx.defs.get_all_schemas_with_history()` returns is written, for every domain and
every since_version, sorted by (domain, name, since_version). Doc strings are dropped; names,
types, arities, attribute defaults, type constraints and static function bodies are kept.
Binary payloads (function bodies, tensor defaults) are hex-encoded serialized protobuf messages.

The output is deterministic: running the script twice with the same onnx gives identical bytes.
The file is one JSON object with one schema per line, so regenerations diff readably.
"""

import json
import math
import struct
import sys
from pathlib import Path

import onnx
import onnx.defs
from onnx.defs import OpSchema

OUT = Path(__file__).resolve().parent.parent / "crates" / "opset" / "data" / "schemas.json"

# OpSchema stores "unbounded" arity as INT_MAX.
UNBOUNDED = 2**31 - 1


def short_float(x: float):
    """The shortest decimal that reads back as the same float32 (0.01, not 0.009999999776)."""
    if not math.isfinite(x):
        raise ValueError(f"non-finite attribute default {x!r} is not representable in JSON")
    bits = struct.pack("<f", x)
    for digits in range(1, 10):
        text = f"{x:.{digits}g}"
        try:
            same = struct.pack("<f", float(text)) == bits
        except OverflowError:  # rounded past FLT_MAX
            continue
        if same:
            return float(text)
    return x


def decode_default(attr: OpSchema.Attribute):
    """The attribute's default as {"<ATTR TYPE>": value}, or None when it has none."""
    value = attr.default_value
    if not value.name and value.type == onnx.AttributeProto.UNDEFINED:
        return None
    kind = onnx.AttributeProto.AttributeType.Name(value.type)
    if kind == "FLOAT":
        return {kind: short_float(value.f)}
    if kind == "INT":
        return {kind: value.i}
    if kind == "STRING":
        return {kind: value.s.decode("utf-8")}
    if kind == "FLOATS":
        return {kind: [short_float(f) for f in value.floats]}
    if kind == "INTS":
        return {kind: list(value.ints)}
    if kind == "STRINGS":
        return {kind: [s.decode("utf-8") for s in value.strings]}
    if kind == "TENSOR":
        return {kind: value.t.SerializeToString(deterministic=True).hex()}
    raise ValueError(f"attribute {attr.name}: default of type {kind} is not supported; "
                     "extend decode_default and the Rust AttributeValue enum")


def arity(n: int):
    return None if n == UNBOUNDED else n


def formal_parameter(p: OpSchema.FormalParameter) -> dict:
    return {
        "name": p.name,
        "type_str": p.type_str,
        "option": p.option.name,
        "is_homogeneous": p.is_homogeneous,
        "min_arity": p.min_arity,
        "differentiation": p.differentiation_category.name,
    }


def attribute(a: OpSchema.Attribute) -> dict:
    out = {"name": a.name, "type": a.type.name, "required": a.required}
    default = decode_default(a)
    if default is not None:
        out["default"] = default
    return out


def schema(s: OpSchema) -> dict:
    functions = [[v, s.get_function_with_opset_version(v).hex()]
                 for v in sorted(s.function_opset_versions)]
    return {
        "name": s.name,
        "domain": s.domain,
        "since_version": s.since_version,
        "deprecated": s.deprecated,
        "support_level": s.support_level.name,
        "determinism": s.node_determinism.name,
        "min_inputs": s.min_input,
        "max_inputs": arity(s.max_input),
        "min_outputs": s.min_output,
        "max_outputs": arity(s.max_output),
        "inputs": [formal_parameter(p) for p in s.inputs],
        "outputs": [formal_parameter(p) for p in s.outputs],
        "attributes": [attribute(a) for _, a in sorted(s.attributes.items())],
        "type_constraints": [
            {"type_param_str": c.type_param_str, "allowed_type_strs": list(c.allowed_type_strs)}
            for c in s.type_constraints
        ],
        "functions": functions,
        "has_context_dependent_function": s.has_context_dependent_function,
    }


def main() -> None:
    schemas = sorted(onnx.defs.get_all_schemas_with_history(),
                     key=lambda s: (s.domain, s.name, s.since_version))
    header = {
        "generator": "scripts/gen_opset_schemas.py",
        "onnx_version": onnx.__version__,
        "released_opsets": {
            "": onnx.defs.onnx_opset_version(),
            "ai.onnx.ml": onnx.defs.onnx_ml_opset_version(),
        },
        "schema_count": len(schemas),
    }

    def dumps(value) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    lines = [dumps(header)[:-1] + ',"schemas":[']
    lines += [dumps(schema(s)) + "," for s in schemas]
    lines[-1] = lines[-1].rstrip(",")
    lines.append("]}")
    text = "\n".join(lines) + "\n"
    json.loads(text)  # the file must stay one valid JSON document

    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {len(schemas)} schemas from onnx {onnx.__version__} to {OUT} "
          f"({len(text.encode()) / 1024:.0f} KiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
