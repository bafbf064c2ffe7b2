//! Cross-checks against files written by onnx, numpy and ml_dtypes
//! (`scripts/gen_tensor_fixtures.py`; expected values in `fixtures/manifest.json`).

use std::fs;
use std::path::PathBuf;

use bytes::Bytes;
use half::{bf16, f16};
use serde_json::Value;
use tensor::{npy, npz, pb, Complex, DataType, Element, Tensor};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn manifest() -> Value {
    serde_json::from_slice(&fs::read(fixture("manifest.json")).unwrap()).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// `to_vec` decodes every element, and re-encoding gives the same tensor back.
fn typed_round_trip<T: Element>(t: &Tensor) {
    let values = t.to_vec::<T>().unwrap();
    assert_eq!(Tensor::from_vec(t.shape().to_vec(), values).unwrap(), *t);
    if let Some(slice) = t.as_slice::<T>() {
        assert_eq!(slice.len(), t.len());
    }
}

fn check(t: &Tensor, expected: &Value, context: &str) {
    assert_eq!(t.dtype().name(), str_of(&expected["dtype"]), "{context}");
    let shape: Vec<usize> = expected["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(t.shape(), shape, "{context}");
    if let Some(strings) = expected.get("strings") {
        let got: Vec<String> = t.strings().unwrap().iter().map(|s| hex(s)).collect();
        let want: Vec<&str> = strings.as_array().unwrap().iter().map(str_of).collect();
        assert_eq!(got, want, "{context}");
        return;
    }
    assert_eq!(
        hex(t.bytes().unwrap()),
        str_of(&expected["raw_hex"]),
        "{context}"
    );
    if let Some(codes) = expected.get("codes") {
        let want: Vec<u8> = codes
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap() as u8)
            .collect();
        assert_eq!(t.codes().unwrap(), want, "{context}");
    }
    match t.dtype() {
        DataType::Float => typed_round_trip::<f32>(t),
        DataType::Double => typed_round_trip::<f64>(t),
        DataType::Float16 => typed_round_trip::<f16>(t),
        DataType::Bfloat16 => typed_round_trip::<bf16>(t),
        DataType::Uint8 => typed_round_trip::<u8>(t),
        DataType::Int8 => typed_round_trip::<i8>(t),
        DataType::Uint16 => typed_round_trip::<u16>(t),
        DataType::Int16 => typed_round_trip::<i16>(t),
        DataType::Uint32 => typed_round_trip::<u32>(t),
        DataType::Int32 => typed_round_trip::<i32>(t),
        DataType::Uint64 => typed_round_trip::<u64>(t),
        DataType::Int64 => typed_round_trip::<i64>(t),
        DataType::Bool => typed_round_trip::<bool>(t),
        DataType::Complex64 => typed_round_trip::<Complex<f32>>(t),
        DataType::Complex128 => typed_round_trip::<Complex<f64>>(t),
        _ => {}
    }
}

#[test]
fn every_dtype_decodes_from_raw_and_typed_protos() {
    let manifest = manifest();
    let entries = manifest["proto"].as_array().unwrap();
    assert_eq!(entries.len(), DataType::ALL.len());
    for e in entries {
        let name = str_of(&e["name"]);
        assert_eq!(
            DataType::from_onnx(e["code"].as_i64().unwrap() as i32).map(DataType::name),
            Some(name)
        );
        let raw_file = fixture(str_of(&e["raw_pb"]));
        let (raw_name, raw) = pb::read(&raw_file).unwrap();
        let (typed_name, typed) = pb::read(fixture(str_of(&e["typed_pb"]))).unwrap();
        assert_eq!((raw_name.as_str(), typed_name.as_str()), (name, name));
        check(&raw, e, &format!("{name} raw"));
        check(&typed, e, &format!("{name} typed"));
        // Our encoding is byte for byte what onnx.numpy_helper.from_array serializes.
        assert_eq!(
            pb::encode(&raw, name),
            fs::read(&raw_file).unwrap(),
            "{name}"
        );
        assert_eq!(Tensor::from_proto(&typed.to_proto(name)).unwrap(), raw);
    }
}

#[test]
fn npy_files_from_numpy() {
    let dir = tempfile::tempdir().unwrap();
    for e in manifest()["npy"].as_array().unwrap() {
        let file = fixture(str_of(&e["file"]));
        if let Some(error) = e.get("error") {
            let got = npy::read(&file).unwrap_err().to_string();
            assert!(got.contains(str_of(error)), "{got}");
            continue;
        }
        let t = match e["read_as"].as_str() {
            Some(dtype) => {
                let err = npy::read(&file).unwrap_err().to_string();
                assert!(err.contains("read_as"), "{err}");
                npy::read_as(&file, DataType::from_name(dtype).unwrap()).unwrap()
            }
            None => npy::read(&file).unwrap(),
        };
        check(&t, e, &file.display().to_string());
        if e["identical"].as_bool().unwrap() {
            assert_eq!(
                npy::encode(&t).unwrap(),
                fs::read(&file).unwrap(),
                "{}",
                file.display()
            );
        }
        let out = dir.path().join("out.npy");
        npy::write(&out, &t).unwrap();
        let back = match e["read_as"].as_str() {
            Some(_) => npy::read_as(&out, t.dtype()).unwrap(),
            None => npy::read(&out).unwrap(),
        };
        assert_eq!(back, t);
    }
}

#[test]
fn npz_files_from_savez_and_savez_compressed() {
    let dir = tempfile::tempdir().unwrap();
    for e in manifest()["npz"].as_array().unwrap() {
        let file = fixture(str_of(&e["file"]));
        let tensors = npz::read(&file).unwrap();
        let members = e["members"].as_array().unwrap();
        assert_eq!(tensors.len(), members.len());
        for ((key, t), m) in tensors.iter().zip(members) {
            assert_eq!(key, str_of(&m["key"]));
            check(t, m, &format!("{}[{key}]", file.display()));
        }
        let out = dir.path().join("out.npz");
        npz::write(&out, tensors.iter().map(|(k, t)| (k.as_str(), t))).unwrap();
        assert_eq!(npz::read(&out).unwrap(), tensors);
    }
}

#[test]
fn truncated_and_garbled_files_are_errors_not_panics() {
    let m = manifest();
    let mut files: Vec<(&str, String)> = Vec::new();
    for e in m["npy"].as_array().unwrap() {
        files.push(("npy", str_of(&e["file"]).to_owned()));
    }
    for e in m["npz"].as_array().unwrap() {
        files.push(("npz", str_of(&e["file"]).to_owned()));
    }
    for e in m["proto"].as_array().unwrap() {
        files.push(("pb", str_of(&e["raw_pb"]).to_owned()));
        files.push(("pb", str_of(&e["typed_pb"]).to_owned()));
    }
    let decode = |kind: &str, bytes: Vec<u8>| -> bool {
        let bytes = Bytes::from(bytes);
        match kind {
            "npy" => {
                npy::decode(bytes.clone(), Some(DataType::Uint8)).is_ok()
                    | npy::decode(bytes, None).is_ok()
            }
            "npz" => npz::decode(bytes, |_| None).is_ok(),
            _ => pb::decode(bytes).is_ok(),
        }
    };
    for (kind, rel) in &files {
        let image = fs::read(fixture(rel)).unwrap();
        for len in 0..image.len() {
            let ok = decode(kind, image[..len].to_vec());
            // A truncated .pb can still be a valid, shorter message (e.g. without its name);
            // .npy and .npz can not.
            assert!(
                !ok || *kind == "pb",
                "{rel} truncated to {len} bytes decoded"
            );
        }
        for i in 0..image.len() {
            for flip in [0x01, 0x80, 0xFF] {
                let mut bad = image.clone();
                bad[i] ^= flip;
                decode(kind, bad);
            }
        }
    }
}

#[test]
fn absurd_npy_shapes_do_not_allocate() {
    let f32_file = fs::read(fixture("npy/f32.npy")).unwrap();
    let header = String::from_utf8_lossy(&f32_file[10..128]).into_owned();
    for shape in [
        "(4611686018427387904,)",
        "(4294967296, 4294967296, 2)",
        "(1, 4611686018427387903)",
    ] {
        let patched = header.replacen("(2, 3)", shape, 1);
        let mut image = f32_file[..8].to_vec();
        image.extend_from_slice(&(patched.len() as u16).to_le_bytes());
        image.extend_from_slice(patched.as_bytes());
        image.extend_from_slice(&f32_file[128..]);
        let err = npy::decode(image.into(), None).unwrap_err().to_string();
        assert!(
            err.contains("too large") || err.contains("needs"),
            "{shape}: {err}"
        );
    }
}
