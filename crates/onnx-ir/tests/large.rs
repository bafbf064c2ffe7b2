//! Big models: loading maps instead of reading (peak RSS stays far below the file size), and a
//! model past the 2 GiB protobuf limit is saved with external data automatically and loads back.

use bytes::Bytes;
use onnx_ir::{Model, SaveOptions, PROTOBUF_LIMIT};
use onnx_proto::{GraphProto, Message, ModelProto, OperatorSetIdProto, TensorProto};

const MB: usize = 1 << 20;

fn model(tensors: &[(&str, usize)]) -> ModelProto {
    let initializer = tensors
        .iter()
        .map(|&(name, bytes)| TensorProto {
            name: Some(name.into()),
            dims: vec![(bytes / 4) as i64],
            data_type: Some(1),
            // calloc'd zeros: no page is touched until written out.
            raw_data: Some(Bytes::from(vec![0u8; bytes])),
            ..Default::default()
        })
        .collect();
    ModelProto {
        ir_version: Some(10),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(21),
        }],
        graph: Some(GraphProto {
            name: Some("big".into()),
            initializer,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Resets the peak-RSS mark of this process (Linux: writing 5 to clear_refs).
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

#[test]
fn loading_maps_the_file_and_saving_past_2gib_goes_external() {
    // One test, so no other test of this binary allocates while the peak is measured.
    let dir = tempfile::tempdir().unwrap();

    // 1. A 320 MiB model, everything inline.
    let path = dir.path().join("inline.onnx");
    std::fs::write(
        &path,
        model(&[("w0", 160 * MB), ("w1", 160 * MB)]).encode_to_vec(),
    )
    .unwrap();
    reset_peak();
    let before = status_kib("VmHWM:");
    let loaded = Model::load(&path).unwrap();
    let grown = status_kib("VmHWM:").saturating_sub(before);
    assert_eq!(loaded.graph().initializer.len(), 2);
    assert!(
        grown < 32 * 1024,
        "loading a 320 MiB model raised peak RSS by {grown} KiB"
    );
    drop(loaded);

    // 2. Past the protobuf limit: Auto must move tensors to external data.
    let big = model(&[("a", 800 * MB), ("b", 800 * MB), ("c", 700 * MB)]);
    assert!(big.encoded_len() as u64 > PROTOBUF_LIMIT);
    let path = dir.path().join("big.onnx");
    let report = Model::from_proto(big)
        .save(&path, &SaveOptions::default())
        .unwrap();
    let (data, count, bytes) = report.external.expect("saved with external data");
    assert_eq!(
        (count, data.file_name().unwrap().to_str().unwrap()),
        (3, "big.onnx.data")
    );
    assert!(bytes >= 2300 * MB as u64);
    assert!(std::fs::metadata(&path).unwrap().len() < 4096);
    reset_peak();
    let before = status_kib("VmHWM:");
    let loaded = Model::load(&path).unwrap();
    let grown = status_kib("VmHWM:").saturating_sub(before);
    assert!(
        grown < 32 * 1024,
        "loading 2.3 GiB of external data raised peak RSS by {grown} KiB"
    );
    let sizes: Vec<usize> = loaded
        .graph()
        .initializer
        .iter()
        .map(|t| t.raw_data.as_ref().unwrap().len())
        .collect();
    assert_eq!(sizes, [800 * MB, 800 * MB, 700 * MB]);
    assert_eq!(loaded.external.len(), 3);
    assert!(loaded.external.iter().all(|e| e.offset % 4096 == 0));
}
