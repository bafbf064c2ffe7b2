//! Signal processing: DFT (axis an attribute in opset 17, an input from 20; RFFT and IRFFT
//! through `onesided`/`inverse`), STFT, the HannWindow/HammingWindow/BlackmanWindow generators and
//! MelWeightMatrix.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{fixed, known, show, InferCx, InferError, Shape};
use crate::sym::SymDim;
use crate::{bail, op, OpDef};
use tensor::DataType;

fn dft(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let onesided = cx.attr_i("onesided").unwrap_or(0) != 0;
    let inverse = cx.attr_i("inverse").unwrap_or(0) != 0;
    let irfft = onesided && inverse;
    let Some(s) = cx.shape(0).cloned() else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let r = s.len();
    if r < 2 {
        bail!("DFT needs an input of rank >= 2, got {}", show(&s));
    }
    if let Some(c) = known(&s[r - 1]).filter(|&c| c != 1 && c != 2) {
        bail!(
            "DFT input's last dim must be 1 (real) or 2 (complex), got {c} in {}",
            show(&s)
        );
    }
    let last = fixed(if irfft { 1 } else { 2 });
    let a = if cx.opset < 20 {
        Some(cx.attr_i("axis").unwrap_or(1))
    } else if cx.has_input(2) {
        cx.single_int(2)
    } else {
        Some(-2)
    };
    let Some(a) = a else {
        // Which axis is unknown: only a full-length two-sided transform keeps every signal dim.
        let mut out: Shape = if !onesided && !cx.has_input(1) {
            s.clone()
        } else {
            vec![None; r]
        };
        out[r - 1] = last;
        cx.set_tensor(0, dtype, Some(out));
        return Ok(());
    };
    let ri = r as i64;
    let norm = if a < 0 { a + ri } else { a };
    if !(0..=ri - 2).contains(&norm) {
        bail!("DFT axis {a} is out of range for an input of rank {r} (the last dim is not a signal axis)");
    }
    let a = norm as usize;
    let n: Option<SymDim> = if cx.has_input(1) {
        cx.single_int(1).map(SymDim::known)
    } else if irfft {
        s[a].as_ref()
            .map(|d| d.sub(&SymDim::known(1)).mul(&SymDim::known(2)))
    } else {
        s[a].clone()
    };
    if let Some(v) = n.as_ref().and_then(SymDim::as_known).filter(|&v| v < 1) {
        bail!("DFT length {v} must be positive");
    }
    let mut out = s.clone();
    out[a] = if onesided && !inverse {
        n.and_then(|n| n.as_known()).and_then(|n| fixed(n / 2 + 1))
    } else {
        n
    };
    out[r - 1] = last;
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

fn stft(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let onesided = cx.attr_i("onesided").unwrap_or(1) != 0;
    let s = cx.shape(0).cloned();
    if let Some(s) = &s {
        if s.len() != 3 {
            bail!(
                "STFT signal must have rank 3 ([batch, length, 1|2]), got {}",
                show(s)
            );
        }
        if let Some(c) = known(&s[2]).filter(|&c| c != 1 && c != 2) {
            bail!("STFT signal's last dim must be 1 or 2, got {c}");
        }
    }
    let window_len = if cx.has_input(2) {
        match cx.shape(2) {
            Some(w) if w.len() != 1 => bail!("STFT window must have rank 1, got {}", show(w)),
            Some(w) => known(&w[0]),
            None => None,
        }
    } else {
        None
    };
    let frame_length = if cx.has_input(3) {
        let fl = cx.single_int(3);
        if let (Some(f), Some(w)) = (fl, window_len) {
            if f != w {
                bail!("STFT frame_length {f} differs from the window length {w}");
            }
        }
        fl
    } else if cx.has_input(2) {
        window_len
    } else {
        s.as_ref().and_then(|s| known(&s[1]))
    };
    let step = cx.single_int(1);
    if let Some(st) = step.filter(|&st| st < 1) {
        bail!("STFT frame_step {st} must be positive");
    }
    let frames = match (s.as_ref().and_then(|s| known(&s[1])), frame_length, step) {
        (Some(len), Some(fl), Some(st)) => {
            let f = (len - fl).div_euclid(st) + 1;
            if f < 0 {
                bail!("STFT frame_length {fl} exceeds the signal length {len}");
            }
            fixed(f)
        }
        _ => None,
    };
    let bins = frame_length.and_then(|fl| fixed(if onesided { fl / 2 + 1 } else { fl }));
    let batch = s.as_ref().and_then(|s| s[0].clone());
    cx.set_tensor(0, dtype, Some(vec![batch, frames, bins, fixed(2)]));
    Ok(())
}

fn out_dtype(cx: &InferCx) -> Option<DataType> {
    DataType::from_onnx(cx.attr_i("output_datatype").unwrap_or(1) as i32)
}

fn window(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = out_dtype(cx);
    let size = cx
        .dims_value(0)
        .filter(|v| v.len() == 1)
        .and_then(|v| v[0].clone());
    if let Some(n) = size.as_ref().and_then(SymDim::as_known).filter(|&n| n < 0) {
        bail!("{} size {n} is negative", cx.node.op_type());
    }
    cx.set_tensor(0, dtype, Some(vec![size]));
    Ok(())
}

fn mel_weight_matrix(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = out_dtype(cx);
    let bins = cx.single_int(0);
    let dft_length = cx.single_int(1);
    cx.set_tensor(
        0,
        dtype,
        Some(vec![
            dft_length.and_then(|n| fixed(n / 2 + 1)),
            bins.and_then(fixed),
        ]),
    );
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("DFT", 17, dft),
    op("STFT", 17, stft),
    op("HannWindow", 17, window),
    op("HammingWindow", 17, window),
    op("BlackmanWindow", 17, window),
    op("MelWeightMatrix", 17, mel_weight_matrix),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::testing::{ai, int_scalar, node, run, t, try_run};
    use crate::infer::Info;

    #[test]
    fn dft_axis_and_onesided() {
        let x = Info::of(t(DataType::Float, &[3, 10, 1]));
        let n = node("DFT", &["x"], &["y"], vec![ai("onesided", 1)]);
        assert_eq!(
            run(dft, &n, 17, &[Some(&x)])[0].ty,
            t(DataType::Float, &[3, 6, 2])
        );
        // Opset 20: axis input, default -2.
        let n = node("DFT", &["x", "", "a"], &["y"], vec![]);
        let a = int_scalar(0);
        assert_eq!(
            run(dft, &n, 20, &[Some(&x), None, Some(&a)])[0].ty,
            t(DataType::Float, &[3, 10, 2])
        );
        let a = int_scalar(-1);
        assert!(try_run(dft, &n, 20, &[Some(&x), None, Some(&a)]).is_err());
        // An unknown axis still gives the shape of a full-length two-sided transform.
        let a = Info::of(t(DataType::Int64, &[]));
        assert_eq!(
            run(dft, &n, 20, &[Some(&x), None, Some(&a)])[0].ty,
            t(DataType::Float, &[3, 10, 2])
        );
        // IRFFT: real output of length 2*(n-1).
        let c = Info::of(t(DataType::Float, &[3, 6, 2]));
        let n = node(
            "DFT",
            &["x"],
            &["y"],
            vec![ai("onesided", 1), ai("inverse", 1)],
        );
        assert_eq!(
            run(dft, &n, 20, &[Some(&c)])[0].ty,
            t(DataType::Float, &[3, 10, 1])
        );
    }

    #[test]
    fn stft_frames_and_bins() {
        let x = Info::of(t(DataType::Float, &[1, 128, 1]));
        let step = int_scalar(8);
        let fl = int_scalar(16);
        let n = node("STFT", &["x", "s", "", "l"], &["y"], vec![]);
        assert_eq!(
            run(stft, &n, 17, &[Some(&x), Some(&step), None, Some(&fl)])[0].ty,
            t(DataType::Float, &[1, 15, 9, 2])
        );
    }
}
