//! Ops that resample or rearrange spatial dims: Resize, Upsample, GridSample, AffineGrid,
//! Col2Im, DepthToSpace, SpaceToDepth, Pad, CenterCropPad.
//!
//! Resize/Upsample scale a dim as `floor(in * scale)` computed in float32, as onnx does; a
//! symbolic dim stays symbolic only under a whole-number scale. With `sizes` and a
//! `keep_aspect_ratio_policy`, the one scale is the min (`not_larger`) or max (`not_smaller`) of
//! `sizes / in`, and each dim becomes `round(scale * in)`.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{axis, fixed, known, show, DimOf, InferCx, InferError, Shape};
use crate::sym::SymDim;
use crate::{bail, op, OpDef};

/// `floor(in * scale)` in float32; exact for a symbolic dim under a whole-number scale.
fn scale_dim(d: &DimOf, scale: f32) -> DimOf {
    if let Some(x) = known(d) {
        let v = (x as f32 * scale).floor();
        return (v >= 0.0 && v < i64::MAX as f32).then(|| SymDim::known(v as i64));
    }
    if scale >= 1.0 && scale.fract() == 0.0 {
        return d.as_ref().map(|v| v.mul(&SymDim::known(scale as i64)));
    }
    None
}

fn normalized_axes(cx: &InferCx, rank: usize) -> Result<Option<Vec<usize>>, InferError> {
    match cx.attr_ints("axes") {
        Some(a) if cx.opset >= 18 => {
            let v: Vec<usize> = a.iter().map(|&x| axis(x, rank)).collect::<Result<_, _>>()?;
            Ok(Some(v))
        }
        _ => Ok(None),
    }
}

/// Whether input `i` is given and not known to be empty (Resize treats an empty `scales` or
/// `sizes` as absent).
fn maybe_given(cx: &InferCx, i: usize) -> bool {
    cx.has_input(i)
        && !cx
            .shape(i)
            .is_some_and(|s| s.len() == 1 && known(&s[0]) == Some(0))
}

/// Whether input `i` is given with a known non-zero length.
fn surely_given(cx: &InferCx, i: usize) -> bool {
    cx.has_input(i)
        && cx
            .shape(i)
            .is_some_and(|s| s.len() == 1 && known(&s[0]).is_some_and(|n| n > 0))
}

fn resize(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(x) = cx.shape(0).cloned() else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = x.len();
    let (scales_at, sizes_at) = if cx.opset < 11 {
        (1, None)
    } else {
        (2, Some(3))
    };
    let axes = normalized_axes(cx, rank)?;
    let targets: Vec<usize> = axes.clone().unwrap_or_else(|| (0..rank).collect());
    let sizes = sizes_at
        .filter(|&i| cx.has_input(i))
        .and_then(|i| cx.dims_value(i))
        .filter(|v| !v.is_empty());
    let scales = Some(scales_at)
        .filter(|&i| cx.has_input(i))
        .and_then(|i| cx.floats(i))
        .filter(|v| !v.is_empty());
    let sizes_given = sizes.is_some() || sizes_at.is_some_and(|i| surely_given(cx, i));
    let scales_given = scales.is_some() || surely_given(cx, scales_at);
    if sizes_given && scales_given {
        bail!("Resize has both scales and sizes");
    }
    let mut out = x.clone();
    if let Some(sizes) = sizes {
        if sizes.len() != targets.len() {
            bail!(
                "Resize sizes {} has {} values for {} axes of input {}",
                show(&sizes),
                sizes.len(),
                targets.len(),
                show(&x)
            );
        }
        let policy = if cx.opset >= 18 {
            cx.attr_s("keep_aspect_ratio_policy").unwrap_or("stretch")
        } else {
            "stretch"
        };
        match policy {
            "stretch" => {
                for (k, &a) in targets.iter().enumerate() {
                    out[a] = sizes[k].clone();
                }
            }
            "not_larger" | "not_smaller" => {
                let ratios: Option<Vec<f32>> = targets
                    .iter()
                    .enumerate()
                    .map(|(k, &a)| Some(known(&sizes[k])? as f32 / known(&x[a])? as f32))
                    .collect();
                let scale = ratios.map(|r| {
                    if policy == "not_larger" {
                        r.into_iter().fold(f32::INFINITY, f32::min)
                    } else {
                        r.into_iter().fold(f32::NEG_INFINITY, f32::max)
                    }
                });
                for &a in &targets {
                    out[a] = match (scale, known(&x[a])) {
                        (Some(s), Some(n)) => Some((s * n as f32).round())
                            .filter(|v| *v >= 0.0 && *v < i64::MAX as f32)
                            .map(|v| SymDim::known(v as i64)),
                        _ => None,
                    };
                }
            }
            p => bail!(
                "Resize keep_aspect_ratio_policy '{p}' is not stretch, not_larger or not_smaller"
            ),
        }
    } else if let Some(scales) = scales {
        if scales.len() != targets.len() {
            bail!(
                "Resize scales {scales:?} has {} values for {} axes of input {}",
                scales.len(),
                targets.len(),
                show(&x)
            );
        }
        for (k, &a) in targets.iter().enumerate() {
            out[a] = scale_dim(&x[a], scales[k] as f32);
        }
    } else if cx.opset >= 11
        && !maybe_given(cx, scales_at)
        && !sizes_at.is_some_and(|i| maybe_given(cx, i))
    {
        bail!("Resize has neither scales nor sizes");
    } else {
        for &a in &targets {
            out[a] = None;
        }
    }
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

fn upsample(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(x) = cx.shape(0).cloned() else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let scales: Option<Vec<f32>> = if cx.opset >= 9 {
        cx.floats(1)
            .map(|v| v.into_iter().map(|f| f as f32).collect())
    } else if cx.opset >= 7 {
        cx.attr_floats("scales").map(<[f32]>::to_vec)
    } else {
        if x.len() != 4 {
            bail!("Upsample-1 input {} must have rank 4", show(&x));
        }
        let h = cx.attr_f("height_scale").unwrap_or(1.0);
        let w = cx.attr_f("width_scale").unwrap_or(1.0);
        Some(vec![1.0, 1.0, h, w])
    };
    let out = match scales {
        Some(s) => {
            if s.len() != x.len() {
                bail!("Upsample scales {s:?} do not match input {}", show(&x));
            }
            x.iter().zip(&s).map(|(d, &f)| scale_dim(d, f)).collect()
        }
        None => vec![None; x.len()],
    };
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

/// Y = [N, C] + grid's spatial dims (grid is [N, *out_spatial, r]).
fn grid_sample(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let (x, g) = (cx.shape(0), cx.shape(1));
    if let (Some(x), Some(g)) = (x, g) {
        if x.len() != g.len() || x.len() < 3 {
            bail!(
                "GridSample input {} and grid {} must have the same rank >= 3",
                show(x),
                show(g)
            );
        }
    }
    let shape = match (x, g) {
        (_, Some(g)) if g.len() >= 2 => {
            let n = x.and_then(|x| x[0].clone()).or_else(|| g[0].clone());
            let c = x.and_then(|x| x[1].clone());
            let mut v = vec![n, c];
            v.extend(g[1..g.len() - 1].iter().cloned());
            Some(v)
        }
        (Some(x), _) if x.len() >= 3 => Some(
            [x[0].clone(), x[1].clone()]
                .into_iter()
                .chain(std::iter::repeat_n(None, x.len() - 2))
                .collect(),
        ),
        (Some(x), _) => bail!("GridSample input {} must have rank >= 3", show(x)),
        _ => None,
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

/// theta (N, 2, 3) or (N, 3, 4), size [N, C, H, W] or [N, C, D, H, W] → (N, H, W, 2) or
/// (N, D, H, W, 3).
fn affine_grid(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let shape = match cx.dims_value(1) {
        Some(size) => {
            if size.len() != 4 && size.len() != 5 {
                bail!("AffineGrid size {} must have 4 or 5 values", show(&size));
            }
            let mut v = vec![size[0].clone()];
            v.extend(size[2..].iter().cloned());
            v.push(fixed(size.len() as i64 - 2));
            Some(v)
        }
        None => match cx.shape(1).and_then(|s| s.first().and_then(known)) {
            Some(n @ (4 | 5)) => {
                let mut v = vec![cx.shape(0).and_then(|t| t.first().cloned().flatten())];
                v.extend(std::iter::repeat_n(None, n as usize - 2));
                v.push(fixed(n - 2));
                Some(v)
            }
            _ => None,
        },
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

/// input (N, C * prod(block_shape), L), image_shape, block_shape → (N, C, *image_shape).
fn col2im(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let x = cx.shape(0);
    if let Some(x) = x.filter(|x| x.len() != 3) {
        bail!("Col2Im input {} must have rank 3", show(x));
    }
    let image = cx.dims_value(1);
    let block = cx.ints(2);
    if let (Some(i), Some(b)) = (&image, &block) {
        if i.len() != b.len() {
            bail!(
                "Col2Im image_shape {} and block_shape {b:?} differ in length",
                show(i)
            );
        }
    }
    let n = x.and_then(|x| x[0].clone());
    let c = match (x.and_then(|x| x[1].clone()), &block) {
        (Some(d), Some(b)) => {
            let Some(p) = b.iter().try_fold(1i64, |acc, &v| acc.checked_mul(v)) else {
                bail!("Col2Im block_shape {b:?} overflows")
            };
            match d.as_known() {
                Some(v) if p > 0 && v % p != 0 => {
                    bail!("Col2Im input channels {v} are not a multiple of prod(block_shape) {p}")
                }
                _ => d.div_exact(&SymDim::known(p)),
            }
        }
        _ => None,
    };
    let spatial: Option<Shape> = image.or_else(|| {
        let len = cx
            .shape(1)
            .and_then(|s| s.first().and_then(known))
            .or_else(|| block.as_ref().map(|b| b.len() as i64))?;
        Some(vec![None; len.max(0) as usize])
    });
    let shape = spatial.map(|s| [n, c].into_iter().chain(s).collect());
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn depth_space(cx: &mut InferCx, to_space: bool) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(x) = cx.shape(0) else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let op = cx.node.op_type();
    if x.len() != 4 {
        bail!("{op} input {} must have rank 4", show(x));
    }
    let Some(b) = cx.attr_i("blocksize") else {
        bail!("{op} has no blocksize")
    };
    if b <= 0 {
        bail!("{op} blocksize {b} must be positive");
    }
    let Some(bb) = b.checked_mul(b) else {
        bail!("{op} blocksize {b} is too large")
    };
    let b1 = SymDim::known(b);
    let b2 = SymDim::known(bb);
    let div = |d: &DimOf, by: &SymDim, what: &str| -> Result<DimOf, InferError> {
        match known(d) {
            Some(v) if v % by.as_known().unwrap_or(1) != 0 => {
                bail!("{op} {what} {v} is not a multiple of {by}")
            }
            _ => Ok(d.as_ref().and_then(|v| v.div_exact(by))),
        }
    };
    let mul = |d: &DimOf, by: &SymDim| d.as_ref().map(|v| v.mul(by));
    let out = if to_space {
        vec![
            x[0].clone(),
            div(&x[1], &b2, "channels")?,
            mul(&x[2], &b1),
            mul(&x[3], &b1),
        ]
    } else {
        vec![
            x[0].clone(),
            mul(&x[1], &b2),
            div(&x[2], &b1, "height")?,
            div(&x[3], &b1, "width")?,
        ]
    };
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

fn depth_to_space(cx: &mut InferCx) -> Result<(), InferError> {
    depth_space(cx, true)
}

fn space_to_depth(cx: &mut InferCx) -> Result<(), InferError> {
    depth_space(cx, false)
}

fn pad(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(x) = cx.shape(0).cloned() else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = x.len();
    let pads = if cx.opset < 2 {
        cx.attr_ints("paddings").map(<[i64]>::to_vec)
    } else if cx.opset < 11 {
        cx.attr_ints("pads").map(<[i64]>::to_vec)
    } else {
        cx.ints(1)
    };
    let axes: Option<Vec<usize>> = if cx.opset >= 18 && cx.has_input(3) {
        match cx.ints(3) {
            Some(a) => Some(a.iter().map(|&v| axis(v, rank)).collect::<Result<_, _>>()?),
            None => {
                cx.set_tensor(0, dtype, Some(vec![None; rank]));
                return Ok(());
            }
        }
    } else {
        None
    };
    let targets = axes.unwrap_or_else(|| (0..rank).collect());
    let mut out = x.clone();
    match pads {
        Some(p) => {
            if p.len() != 2 * targets.len() {
                bail!(
                    "Pad pads {p:?} has {} values for {} axes of input {}",
                    p.len(),
                    targets.len(),
                    show(&x)
                );
            }
            let n = targets.len();
            for (k, &a) in targets.iter().enumerate() {
                out[a] = x[a]
                    .as_ref()
                    .zip(p[k].checked_add(p[k + n]))
                    .map(|(d, q)| d.add(&SymDim::known(q)))
                    .filter(|d| d.as_known().is_none_or(|v| v >= 0));
            }
        }
        None => {
            for &a in &targets {
                out[a] = None;
            }
        }
    }
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

fn center_crop_pad(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(x) = cx.shape(0).cloned() else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let targets: Vec<usize> = match cx.attr_ints("axes") {
        Some(a) => a
            .iter()
            .map(|&v| axis(v, x.len()))
            .collect::<Result<_, _>>()?,
        None => (0..x.len()).collect(),
    };
    let mut out = x.clone();
    match cx.dims_value(1) {
        Some(s) => {
            if s.len() != targets.len() {
                bail!(
                    "CenterCropPad shape {} has {} values for {} axes",
                    show(&s),
                    s.len(),
                    targets.len()
                );
            }
            for (k, &a) in targets.iter().enumerate() {
                out[a] = s[k].clone();
            }
        }
        None => {
            for &a in &targets {
                out[a] = None;
            }
        }
    }
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("Resize", 10, resize),
    op("Upsample", 1, upsample),
    op("GridSample", 16, grid_sample),
    op("AffineGrid", 20, affine_grid),
    op("Col2Im", 18, col2im),
    op("DepthToSpace", 1, depth_to_space),
    op("SpaceToDepth", 1, space_to_depth),
    op("Pad", 1, pad),
    op("CenterCropPad", 18, center_crop_pad),
];

#[cfg(test)]
mod tests {
    use super::super::norm::test_util::*;
    use super::*;

    #[test]
    fn resize_scales_floor_in_float32() {
        let out = run(
            resize,
            13,
            &[f32s(&[-2, 1, 5, 7]), None, known_f32(&[1.0, 2.0, 0.6, 1.5])],
            1,
            vec![],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[-2, 2, 3, 10])));
    }

    #[test]
    fn resize_sizes_with_aspect_policy() {
        let x = f32s(&[-1, 1, 5, 7]);
        let sizes = known_i64(&[3, 3]);
        let out = run(
            resize,
            19,
            &[x.clone(), None, None, sizes.clone()],
            1,
            vec![
                ("axes", A::Is(vec![2, 3])),
                ("keep_aspect_ratio_policy", A::S("not_larger")),
            ],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[-1, 1, 2, 3])));
        let out = run(
            resize,
            19,
            &[x.clone(), None, None, sizes.clone()],
            1,
            vec![
                ("axes", A::Is(vec![2, 3])),
                ("keep_aspect_ratio_policy", A::S("not_smaller")),
            ],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[-1, 1, 3, 4])));
        assert!(run(resize, 19, &[x, None, None, sizes], 1, vec![]).is_err());
    }

    #[test]
    fn pad_and_depth_to_space() {
        let out = run(
            pad,
            13,
            &[f32s(&[-2, 3]), known_i64(&[0, 1, 0, 2])],
            1,
            vec![],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[-2, 6])));
        let out = run(
            depth_to_space,
            13,
            &[f32s(&[1, 8, 2, 3])],
            1,
            vec![("blocksize", A::I(2))],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[1, 2, 4, 6])));
        assert!(run(
            space_to_depth,
            13,
            &[f32s(&[1, 8, 3, 4])],
            1,
            vec![("blocksize", A::I(2))]
        )
        .is_err());
    }
}
