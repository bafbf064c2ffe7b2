//! Convolutions and pooling: Conv, ConvInteger, QLinearConv, ConvTranspose, DeformConv,
//! CausalConvWithState, AveragePool, MaxPool (values and indices), LpPool, the Global pools,
//! MaxUnpool, MaxRoiPool, RoiAlign.
//!
//! Spatial output dims follow the spec's formulas: `auto_pad` SAME_* gives `ceil(in / stride)`,
//! otherwise `floor((in + pads - ((k - 1) * dilation + 1)) / stride) + 1` (`ceil` with
//! `ceil_mode`). From the opset-22 pools on, a last window that would start inside the end
//! padding is dropped (the spec says so from 22 on; before, spec and onnx's inference keep it).
//! A symbolic input dim stays symbolic where the arithmetic is exact
//! (stride 1, or ConvTranspose's `stride * (in - 1) + ...`).
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{fixed, known, show, DimOf, InferCx, InferError, Shape};
use crate::sym::SymDim;
use crate::{bail, op, OpDef};
use tensor::DataType;

/// The window attributes of a conv or pool node, for `n` spatial dims.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Window {
    pub kernel: Vec<Option<i64>>,
    pub strides: Vec<i64>,
    pub dilations: Vec<i64>,
    /// `[begin_0, .., begin_n-1, end_0, .., end_n-1]`
    pub pads: Vec<i64>,
    pub auto_pad: String,
    pub ceil: bool,
    /// Drop a last window that starts in the end padding (the opset-22 pools).
    pub drop_padded_window: bool,
}

fn ints_attr(cx: &InferCx, name: &str, n: usize, default: i64) -> Result<Vec<i64>, InferError> {
    match cx.attr_ints(name) {
        Some(v) if !v.is_empty() => {
            if v.len() != n {
                bail!(
                    "attribute '{name}' {v:?} has {} values, expected {n}",
                    v.len()
                );
            }
            Ok(v.to_vec())
        }
        _ => Ok(vec![default; n]),
    }
}

impl Window {
    /// Reads kernel_shape (or `kernel` from the weight's shape), strides, dilations, pads,
    /// auto_pad and ceil_mode.
    pub(crate) fn read(
        cx: &InferCx,
        n: usize,
        weight: Option<&Shape>,
    ) -> Result<Window, InferError> {
        let kernel: Vec<Option<i64>> = match cx.attr_ints("kernel_shape") {
            Some(k) => {
                if k.len() != n {
                    bail!(
                        "kernel_shape {k:?} has {} dims, the input has {n} spatial dims",
                        k.len()
                    );
                }
                k.iter().map(|&v| Some(v)).collect()
            }
            None => match weight {
                Some(w) if w.len() == n + 2 => w[2..].iter().map(known).collect(),
                Some(w) => bail!(
                    "weight {} has rank {}, expected {}",
                    show(w),
                    w.len(),
                    n + 2
                ),
                None => vec![None; n],
            },
        };
        let strides = ints_attr(cx, "strides", n, 1)?;
        let dilations = ints_attr(cx, "dilations", n, 1)?;
        let pads = ints_attr(cx, "pads", 2 * n, 0)?;
        if strides.iter().chain(&dilations).any(|&v| v <= 0) {
            bail!("strides {strides:?} and dilations {dilations:?} must be positive");
        }
        if kernel.iter().flatten().any(|&k| k <= 0) {
            bail!("kernel shape {kernel:?} must be positive");
        }
        let auto_pad = cx.attr_s("auto_pad").unwrap_or("NOTSET").to_string();
        let ceil = cx.attr_i("ceil_mode").unwrap_or(0) != 0;
        Ok(Window {
            kernel,
            strides,
            dilations,
            pads,
            auto_pad,
            ceil,
            drop_padded_window: false,
        })
    }

    /// The output size of spatial dim `i` of a (forward) conv or pool.
    pub(crate) fn out_dim(&self, i: usize, input: &DimOf) -> DimOf {
        let n = self.strides.len();
        let s = self.strides[i];
        if self.auto_pad == "SAME_UPPER" || self.auto_pad == "SAME_LOWER" {
            if s == 1 {
                return input.clone();
            }
            return known(input).map(|x| SymDim::known((x + s - 1).div_euclid(s)));
        }
        let eff_k = (self.kernel[i]? - 1)
            .checked_mul(self.dilations[i])?
            .checked_add(1)?;
        let (pb, pe) = if self.auto_pad == "VALID" {
            (0, 0)
        } else {
            (self.pads[i], self.pads[i + n])
        };
        let Some(x) = known(input) else {
            // Exact only without division (and without a window starting in the end padding).
            let shift = pb.checked_add(pe)?.checked_sub(eff_k)?.checked_add(1)?;
            return (s == 1 && !(self.drop_padded_window && self.ceil && pe >= eff_k))
                .then(|| input.as_ref().map(|d| d.add(&SymDim::known(shift))))
                .flatten();
        };
        let total = x.checked_add(pb)?.checked_add(pe)?.checked_sub(eff_k)?;
        if total < 0 {
            return None;
        }
        let mut out = if self.ceil {
            total.checked_add(s - 1)?.div_euclid(s) + 1
        } else {
            total.div_euclid(s) + 1
        };
        if self.drop_padded_window && self.ceil && (out - 1).checked_mul(s)? >= x.checked_add(pb)? {
            out -= 1;
        }
        Some(SymDim::known(out))
    }
}

/// `[N, channels, spatial...]` of a conv/pool over input `x` with weight shape `w`.
fn conv_like(
    cx: &InferCx,
    ix: usize,
    iw: Option<usize>,
    pool: bool,
) -> Result<Option<Shape>, InferError> {
    let Some(x) = cx.shape(ix) else {
        return Ok(None);
    };
    if x.len() < 2 {
        bail!("input {} must have rank >= 2", show(x));
    }
    let n = x.len() - 2;
    let w = iw.and_then(|i| cx.shape(i));
    let mut win = Window::read(cx, n, w)?;
    if pool && cx.attr_ints("kernel_shape").is_none() {
        bail!("{} has no kernel_shape", cx.node.op_type());
    }
    win.drop_padded_window = pool && cx.opset >= 22;
    let channels = if pool {
        x[1].clone()
    } else {
        match w {
            Some(w) => w.first().cloned().flatten(),
            None => None,
        }
    };
    let mut out = vec![x[0].clone(), channels];
    out.extend((0..n).map(|i| win.out_dim(i, &x[i + 2])));
    Ok(Some(out))
}

fn conv(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = conv_like(cx, 0, Some(1), false)?;
    let dtype = cx.dtype(0);
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn conv_integer(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = conv_like(cx, 0, Some(1), false)?;
    cx.set_tensor(0, Some(DataType::Int32), shape);
    Ok(())
}

/// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
fn qlinear_conv(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = conv_like(cx, 0, Some(3), false)?;
    let dtype = cx.dtype(7);
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn conv_transpose(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(x) = cx.shape(0) else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    if x.len() < 2 {
        bail!("ConvTranspose input {} must have rank >= 2", show(x));
    }
    let n = x.len() - 2;
    let w = cx.shape(1);
    let win = Window::read(cx, n, w)?;
    let group = cx.attr_i("group").unwrap_or(1);
    let channels = w
        .and_then(|w| w.get(1).cloned().flatten())
        .map(|c| c.mul(&SymDim::known(group)));
    let output_padding = ints_attr(cx, "output_padding", n, 0)?;
    let mut out = vec![x[0].clone(), channels];
    if let Some(os) = cx.attr_ints("output_shape").filter(|v| !v.is_empty()) {
        if os.len() != n {
            bail!(
                "ConvTranspose output_shape {os:?} has {} dims, the input has {n} spatial dims",
                os.len()
            );
        }
        out.extend(os.iter().map(|&d| fixed(d)));
    } else {
        for i in 0..n {
            let s = win.strides[i];
            let d = if win.auto_pad == "SAME_UPPER" || win.auto_pad == "SAME_LOWER" {
                // The spec makes it `in * stride` (output_padding goes into the total padding);
                // onnx's own inference adds output_padding: unknown when they disagree.
                x[i + 2]
                    .as_ref()
                    .filter(|_| output_padding[i] == 0)
                    .map(|v| v.mul(&SymDim::known(s)))
            } else {
                let (pb, pe) = if win.auto_pad == "VALID" {
                    (0, 0)
                } else {
                    (win.pads[i], win.pads[i + n])
                };
                match (&x[i + 2], win.kernel[i]) {
                    (Some(v), Some(k)) => {
                        let shift = (|| {
                            (k - 1)
                                .checked_mul(win.dilations[i])?
                                .checked_add(1)?
                                .checked_sub(s)?
                                .checked_add(output_padding[i])?
                                .checked_sub(pb)?
                                .checked_sub(pe)
                        })();
                        let Some(shift) = shift else {
                            out.push(None);
                            continue;
                        };
                        let r = v.mul(&SymDim::known(s)).add(&SymDim::known(shift));
                        match r.as_known() {
                            Some(m) if m < 0 => None,
                            _ => Some(r),
                        }
                    }
                    _ => None,
                }
            };
            out.push(d);
        }
    }
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

/// Inputs: X, W, offset, B, mask.
fn deform_conv(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = conv_like(cx, 0, Some(1), false)?;
    let dtype = cx.dtype(0);
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn pool(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = conv_like(cx, 0, None, true)?;
    let dtype = cx.dtype(0);
    cx.set_tensor(0, dtype, shape.clone());
    if cx.outputs.len() > 1 {
        cx.set_tensor(1, Some(DataType::Int64), shape);
    }
    Ok(())
}

fn global_pool(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let shape = match cx.shape(0) {
        Some(x) if x.len() < 2 => bail!(
            "{} input {} must have rank >= 2",
            cx.node.op_type(),
            show(x)
        ),
        Some(x) => Some(
            x.iter()
                .enumerate()
                .map(|(i, d)| if i < 2 { d.clone() } else { fixed(1) })
                .collect(),
        ),
        None => None,
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

/// Inputs: X, I, output_shape (optional).
fn max_unpool(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    if cx.has_input(2) {
        let shape = match cx.dims_value(2) {
            Some(d) => Some(d),
            None => cx
                .shape(2)
                .and_then(|s| s.first().and_then(known))
                .map(|r| vec![None; r.max(0) as usize]),
        };
        cx.set_tensor(0, dtype, shape);
        return Ok(());
    }
    let Some(x) = cx.shape(0) else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    if x.len() < 2 {
        bail!("MaxUnpool input {} must have rank >= 2", show(x));
    }
    let n = x.len() - 2;
    if cx.attr_ints("kernel_shape").is_none() {
        bail!("MaxUnpool has no kernel_shape");
    }
    let win = Window::read(cx, n, None)?;
    let mut out = vec![x[0].clone(), x[1].clone()];
    for i in 0..n {
        let k = win.kernel[i].unwrap_or(1);
        let s = win.strides[i];
        let shift = k
            .checked_sub(s)
            .and_then(|v| v.checked_sub(win.pads[i]))
            .and_then(|v| v.checked_sub(win.pads[i + n]));
        out.push(
            x[i + 2]
                .as_ref()
                .zip(shift)
                .map(|(v, sh)| v.mul(&SymDim::known(s)).add(&SymDim::known(sh))),
        );
    }
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

/// Inputs: X (N, C, H, W), rois (num_rois, 5).
fn max_roi_pool(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(ps) = cx.attr_ints("pooled_shape") else {
        bail!("MaxRoiPool has no pooled_shape")
    };
    if ps.len() != 2 {
        bail!("MaxRoiPool pooled_shape {ps:?} must have 2 values");
    }
    let c = cx.shape(0).and_then(|x| x.get(1).cloned().flatten());
    let r = cx.shape(1).and_then(|x| x.first().cloned().flatten());
    cx.set_tensor(0, dtype, Some(vec![r, c, fixed(ps[0]), fixed(ps[1])]));
    Ok(())
}

/// Inputs: X (N, C, H, W), rois (num_rois, 4), batch_indices (num_rois).
fn roi_align(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    if let Some(x) = cx.shape(0).filter(|x| x.len() != 4) {
        bail!("RoiAlign input {} must have rank 4", show(x));
    }
    let c = cx.shape(0).and_then(|x| x[1].clone());
    let r1 = cx.shape(1).and_then(|x| x.first().cloned().flatten());
    let r2 = cx.shape(2).and_then(|x| x.first().cloned().flatten());
    let r = match (known(&r1), known(&r2)) {
        (Some(a), Some(b)) if a != b => {
            bail!("RoiAlign rois has {a} rows but batch_indices has {b}")
        }
        (Some(_), _) => r1,
        (_, Some(_)) => r2,
        _ => r1.or(r2),
    };
    let h = cx.attr_i("output_height").unwrap_or(1);
    let w = cx.attr_i("output_width").unwrap_or(1);
    cx.set_tensor(0, dtype, Some(vec![r, c, fixed(h), fixed(w)]));
    Ok(())
}

/// Inputs: input (B, C, L), weight (C, 1, k), bias, past_state (B, C, k - 1).
/// Outputs: output (same as input), present_state (B, C, k - 1).
fn causal_conv_with_state(cx: &mut InferCx) -> Result<(), InferError> {
    cx.pass_through(0, 0);
    let dtype = cx.dtype(0);
    if let Some(x) = cx.shape(0).filter(|x| x.len() != 3) {
        bail!("CausalConvWithState input {} must have rank 3", show(x));
    }
    let k = cx
        .shape(1)
        .filter(|w| w.len() == 3)
        .and_then(|w| known(&w[2]));
    let x = cx.shape(0);
    let state = match x {
        Some(x) => Some(vec![
            x[0].clone(),
            x[1].clone(),
            k.and_then(|k| k.checked_sub(1)).map(SymDim::known),
        ]),
        None => cx.shape(3).cloned(),
    };
    cx.set_tensor(1, dtype, state);
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("Conv", 1, conv),
    op("ConvInteger", 10, conv_integer),
    op("QLinearConv", 10, qlinear_conv),
    op("ConvTranspose", 1, conv_transpose),
    op("DeformConv", 19, deform_conv),
    op("CausalConvWithState", 27, causal_conv_with_state),
    op("AveragePool", 1, pool),
    op("MaxPool", 1, pool),
    op("LpPool", 1, pool),
    op("GlobalAveragePool", 1, global_pool),
    op("GlobalMaxPool", 1, global_pool),
    op("GlobalLpPool", 1, global_pool),
    op("MaxUnpool", 9, max_unpool),
    op("MaxRoiPool", 1, max_roi_pool),
    op("RoiAlign", 10, roi_align),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn win(k: i64, s: i64, pads: (i64, i64), ceil: bool, auto_pad: &str, drop: bool) -> Window {
        Window {
            kernel: vec![Some(k)],
            strides: vec![s],
            dilations: vec![1],
            pads: vec![pads.0, pads.1],
            auto_pad: auto_pad.into(),
            ceil,
            drop_padded_window: drop,
        }
    }

    #[test]
    fn pool_output_sizes() {
        assert_eq!(
            win(3, 2, (0, 0), false, "NOTSET", false).out_dim(0, &fixed(7)),
            fixed(3)
        );
        assert_eq!(
            win(3, 2, (0, 0), true, "NOTSET", false).out_dim(0, &fixed(8)),
            fixed(4)
        );
        assert_eq!(
            win(3, 2, (0, 0), true, "VALID", false).out_dim(0, &fixed(8)),
            fixed(4)
        );
        assert_eq!(
            win(3, 2, (0, 0), false, "SAME_UPPER", false).out_dim(0, &fixed(7)),
            fixed(4)
        );
        // The last window would start in the end padding: dropped from opset 22, kept before.
        assert_eq!(
            win(2, 2, (1, 1), true, "NOTSET", true).out_dim(0, &fixed(5)),
            fixed(3)
        );
        assert_eq!(
            win(2, 2, (1, 1), true, "NOTSET", false).out_dim(0, &fixed(5)),
            fixed(4)
        );
        // Kernel larger than the input.
        assert_eq!(
            win(3, 1, (0, 0), false, "NOTSET", false).out_dim(0, &fixed(2)),
            None
        );
    }

    #[test]
    fn conv_transpose_sizes() {
        use super::super::norm::test_util::*;
        let x = f32s(&[-2, 3, 4, 5]);
        let w = f32s(&[3, 2, 3, 3]);
        let attrs = || {
            vec![
                ("strides", A::Is(vec![2, 2])),
                ("output_padding", A::Is(vec![1, 1])),
                ("pads", A::Is(vec![1, 0, 1, 2])),
                ("dilations", A::Is(vec![2, 1])),
                ("group", A::I(3)),
            ]
        };
        let out = run(conv_transpose, 11, &[x.clone(), w.clone()], 1, attrs()).unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[-2, 6, 10, 10])));
        // SAME: the spec gives in * stride, onnx's inference adds output_padding: unknown.
        let out = run(
            conv_transpose,
            11,
            &[x.clone(), w.clone()],
            1,
            vec![
                ("strides", A::Is(vec![2, 2])),
                ("auto_pad", A::S("SAME_UPPER")),
                ("output_padding", A::Is(vec![1, 0])),
            ],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[-2, 2, -1, 10])));
        // A symbolic input dim stays symbolic: 2 * (n - 1) + 3.
        let out = run(
            conv_transpose,
            11,
            &[f32s(&[1, 3, -2, 5]), w.clone()],
            1,
            vec![("strides", A::Is(vec![2, 2]))],
        )
        .unwrap();
        assert_eq!(
            shape_of(&out[0]).unwrap()[2],
            Some(
                SymDim::sym("n")
                    .mul(&SymDim::known(2))
                    .add(&SymDim::known(1))
            )
        );
        assert!(run(
            conv_transpose,
            11,
            &[x, w],
            1,
            vec![("output_shape", A::Is(vec![1, 2, 10, 8]))]
        )
        .is_err());
    }

    #[test]
    fn symbolic_dims_stay_symbolic_only_without_division() {
        let h = Some(SymDim::sym("h"));
        assert_eq!(win(3, 1, (1, 1), false, "NOTSET", false).out_dim(0, &h), h);
        assert_eq!(
            win(3, 1, (0, 0), false, "NOTSET", false).out_dim(0, &h),
            Some(SymDim::sym("h").sub(&SymDim::known(2)))
        );
        assert_eq!(
            win(3, 2, (1, 1), false, "NOTSET", false).out_dim(0, &h),
            None
        );
        assert_eq!(
            win(3, 1, (0, 0), false, "SAME_LOWER", false).out_dim(0, &h),
            h
        );
    }
}
