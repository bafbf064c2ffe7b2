#!/usr/bin/env python3
"""Generate the tensor crate's cross-check fixtures with onnx, numpy and ml_dtypes.

Writes crates/tensor/tests/fixtures/:
  proto/<dtype>_raw.pb    onnx.numpy_helper.from_array(...)            (raw_data)
  proto/<dtype>_typed.pb  onnx.helper.make_tensor(..., raw=False)      (typed fields)
  npy/*.npy, npz/*.npz    numpy.save / numpy.lib.format.write_array / numpy.savez(_compressed)
  manifest.json           expected dtype, shape, canonical raw bytes (hex, little-endian, sub-byte
                          types packed as ONNX raw_data) and per-element bit codes

Run from anywhere:  python3 scripts/gen_tensor_fixtures.py   (onnx 1.23.2, numpy 2.x, ml_dtypes)
"""

from __future__ import annotations

import json
import math
import pathlib
import shutil

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

OUT = pathlib.Path(__file__).resolve().parent.parent / "crates/tensor/tests/fixtures"
NAME = {code: helper.tensor_dtype_to_string(code).removeprefix("TensorProto.").lower() for code in range(1, 29)}
INF, NAN = math.inf, math.nan


def arr(code: int, values, shape=None) -> np.ndarray:
    a = np.array(values, dtype=helper.tensor_dtype_to_np_dtype(code))
    return a.reshape(shape) if shape else a


CASES: dict[int, np.ndarray] = {
    TP.FLOAT: arr(TP.FLOAT, [1.5, -2.0, 0.0, INF, -0.0, NAN], (2, 3)),
    TP.UINT8: arr(TP.UINT8, [0, 1, 127, 128, 255]),
    TP.INT8: arr(TP.INT8, [-128, -1, 0, 1, 127]),
    TP.UINT16: arr(TP.UINT16, [0, 1, 65535, 32768, 7]),
    TP.INT16: arr(TP.INT16, [-32768, -1, 0, 1, 32767]),
    TP.INT32: arr(TP.INT32, [-(2**31), -1, 0, 1, 2**31 - 1, 5], (3, 2)),
    TP.INT64: arr(TP.INT64, [-(2**63), -1, 0, 1, 2**63 - 1]),
    TP.STRING: np.array(["", "a", "héllo"], dtype=object),
    TP.BOOL: arr(TP.BOOL, [True, False, False, True], (2, 2)),
    TP.FLOAT16: arr(TP.FLOAT16, [1.0, -2.5, INF, 65504.0, 6e-8]),
    TP.DOUBLE: arr(TP.DOUBLE, [math.pi, -0.0, 1e300, -INF, 5e-324]),
    TP.UINT32: arr(TP.UINT32, [0, 1, 2**32 - 1, 2**31]),
    TP.UINT64: arr(TP.UINT64, [0, 1, 2**64 - 1, 2**63]),
    TP.COMPLEX64: arr(TP.COMPLEX64, [1 + 2j, -3.5 - 0j, 1j]),
    TP.COMPLEX128: arr(TP.COMPLEX128, [1e100 + 1j, -1 - 1j]),
    TP.BFLOAT16: arr(TP.BFLOAT16, [1.0, -2.0, 3.140625, INF, 1e-3]),
    TP.FLOAT8E4M3FN: arr(TP.FLOAT8E4M3FN, [0, 1, -2, 0.5, 448]),
    TP.FLOAT8E4M3FNUZ: arr(TP.FLOAT8E4M3FNUZ, [0, 1, -2, 0.5, 240]),
    TP.FLOAT8E5M2: arr(TP.FLOAT8E5M2, [0, 1, -2, 0.5, 57344]),
    TP.FLOAT8E5M2FNUZ: arr(TP.FLOAT8E5M2FNUZ, [0, 1, -2, 0.5, 57344]),
    TP.UINT4: arr(TP.UINT4, [0, 1, 7, 8, 15]),
    TP.INT4: arr(TP.INT4, [-8, -1, 0, 1, 7]),
    TP.FLOAT4E2M1: arr(TP.FLOAT4E2M1, [0, 0.5, -1, 6, -6]),
    TP.FLOAT8E8M0: arr(TP.FLOAT8E8M0, [1, 2, 0.5, 1024, 2.0**-20]),
    TP.UINT2: arr(TP.UINT2, [0, 1, 2, 3, 1]),
    TP.INT2: arr(TP.INT2, [-2, -1, 0, 1, -2]),
    TP.FLOAT6E2M3: arr(TP.FLOAT6E2M3, [0, 0.125, -1, 7.5, 3], (5, 1)),
    TP.FLOAT6E3M2: arr(TP.FLOAT6E3M2, [0, 0.25, -1, 28, 3], (1, 5)),
}


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype == object:
        return a.shape == b.shape and list(a.ravel()) == list(b.ravel())
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def codes(a: np.ndarray) -> list[int] | None:
    """One bit pattern per element for types at most 8 bits wide (ml_dtypes keeps the low bits)."""
    if a.dtype.itemsize != 1:
        return None
    bits = {TP.UINT4: 4, TP.INT4: 4, TP.FLOAT4E2M1: 4, TP.UINT2: 2, TP.INT2: 2,
            TP.FLOAT6E2M3: 6, TP.FLOAT6E3M2: 6}.get(helper.np_dtype_to_tensor_dtype(a.dtype), 8)
    return [int(c) & ((1 << bits) - 1) for c in a.ravel().view(np.uint8)]


def expect(a: np.ndarray) -> dict:
    """What the Rust side should find for array `a`."""
    code = TP.STRING if a.dtype == object else helper.np_dtype_to_tensor_dtype(a.dtype)
    out = {"dtype": NAME[code], "shape": list(a.shape)}
    if code == TP.STRING:
        out["strings"] = [s.encode().hex() for s in a.ravel()]
    else:
        out["raw_hex"] = numpy_helper.from_array(a).raw_data.hex()
        if (c := codes(a)) is not None:
            out["codes"] = c
    return out


def write(rel: str, data: bytes) -> str:
    path = OUT / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return rel


def proto_fixtures() -> list[dict]:
    entries = []
    for code, a in CASES.items():
        name = NAME[code]
        raw = numpy_helper.from_array(a, name)
        typed = helper.make_tensor(name, code, a.shape, a, raw=False)
        assert not typed.HasField("raw_data")
        assert same_bits(numpy_helper.to_array(raw), a), name
        assert same_bits(numpy_helper.to_array(typed), a), name
        entry = expect(a)
        entry["name"] = name
        entry["code"] = code
        entry["raw_pb"] = write(f"proto/{name}_raw.pb", raw.SerializeToString())
        entry["typed_pb"] = write(f"proto/{name}_typed.pb", typed.SerializeToString())
        entries.append(entry)
    return entries


def save(rel: str, a: np.ndarray, version=None) -> str:
    path = OUT / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=version, allow_pickle=False)
    return rel


def npy_fixtures() -> list[dict]:
    f32 = CASES[TP.FLOAT]
    cases = [
        # (file, array, version, read_as, our writer reproduces the file byte for byte)
        ("f32.npy", f32, None, None, True),
        ("f64_fortran.npy", np.asfortranarray(np.arange(12.0).reshape(2, 3, 2)), None, None, False),
        ("i32_big_endian.npy", np.arange(-3, 3, dtype=">i4").reshape(3, 2), None, None, False),
        ("c64_big_endian_fortran.npy",
         np.asfortranarray(np.array([[1 + 2j, 3 - 4j], [-5j, 6]], dtype=">c8")), None, None, False),
        ("i64_scalar.npy", np.array(-5, dtype=np.int64), None, None, True),
        ("bool.npy", CASES[TP.BOOL], None, None, True),
        ("u8_empty.npy", np.zeros((0, 3), dtype=np.uint8), None, None, True),
        ("f16_v2.npy", CASES[TP.FLOAT16], (2, 0), None, False),
        ("u16_v3.npy", CASES[TP.UINT16], (3, 0), None, False),
        ("c128.npy", CASES[TP.COMPLEX128], None, None, True),
        ("bf16.npy", CASES[TP.BFLOAT16], None, "bfloat16", True),
        ("f8e4m3fn.npy", CASES[TP.FLOAT8E4M3FN], None, "float8e4m3fn", True),
        ("f8e5m2.npy", CASES[TP.FLOAT8E5M2], None, "float8e5m2", False),
        ("int4.npy", CASES[TP.INT4], None, "int4", True),
        ("f6e2m3.npy", CASES[TP.FLOAT6E2M3], None, "float6e2m3", True),
    ]
    entries = []
    for rel, a, version, read_as, identical in cases:
        entry = expect(a.astype(a.dtype.newbyteorder("<"), order="C"))
        entry.update(file=save(f"npy/{rel}", a, version), read_as=read_as, identical=identical)
        entries.append(entry)
    # Strings are refused.
    np.save(OUT / "npy/str.npy", np.array(["ab", "c"]))
    entries.append({"file": "npy/str.npy", "error": "string and object arrays are not supported"})
    return entries


def npz_fixtures() -> list[dict]:
    members = {
        "a": CASES[TP.FLOAT],
        "b": CASES[TP.INT64],
        "c": CASES[TP.BOOL],
        "empty": np.zeros((2, 0), dtype=np.float64),
    }
    entries = []
    for rel, save_fn in [("npz/stored.npz", np.savez), ("npz/deflated.npz", np.savez_compressed)]:
        save_fn(OUT / rel, **members)
        entries.append({"file": rel, "members": [dict(key=k, **expect(v)) for k, v in members.items()]})
    return entries


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    (OUT / "npz").mkdir()
    (OUT / ".gitattributes").write_text("*.pb binary\n*.npy binary\n*.npz binary\n")
    manifest = {
        "generator": f"scripts/gen_tensor_fixtures.py (onnx {onnx.__version__}, numpy {np.__version__}, "
        f"ml_dtypes {ml_dtypes.__version__})",
        "proto": proto_fixtures(),
        "npy": npy_fixtures(),
        "npz": npz_fixtures(),
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()
