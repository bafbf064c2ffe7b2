//! Kernels of the signal family (inference: `families/signal.rs`): DFT, STFT, window functions
//! and MelWeightMatrix. Complex values use ONNX's real layout: a trailing dim of 2 (real,
//! imaginary), or 1 for a real signal.

use crate::exec::util::{scalar_i64, to_f64s, FloatConv};
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use crate::{for_float, for_int};
use tensor::{DataType, Tensor};

/// Largest transform length or window we agree to build (guards allocations from data).
const MAX_LEN: i64 = 1 << 26;

/// Largest number of output values we agree to allocate.
const MAX_VALUES: usize = 1 << 28;

/// A float tensor's elements as f64, or unsupported.
fn floats(cx: &RunCx, t: &Tensor) -> KResult<Vec<f64>> {
    for_float!(t.dtype(), T => {
        Ok(t.to_vec::<T>()?.into_iter().map(FloatConv::to_f64).collect())
    } else {
        Err(cx.unsupported(t.dtype()))
    })
}

/// A float tensor of `dtype` from f64 values.
fn float_tensor(cx: &RunCx, dtype: DataType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    for_float!(dtype, T => {
        Ok(Tensor::from_vec(shape, v.into_iter().map(T::from_f64).collect::<Vec<T>>())?)
    } else {
        Err(cx.unsupported(dtype))
    })
}

/// Any numeric tensor of `dtype` from f64 values (`as` casts for integers).
fn numeric_tensor(cx: &RunCx, dtype: DataType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    if dtype.is_float() {
        return float_tensor(cx, dtype, shape, v);
    }
    for_int!(dtype, T => {
        Ok(Tensor::from_vec(shape, v.into_iter().map(|x| x as T).collect::<Vec<T>>())?)
    } else {
        Err(cx.unsupported(dtype))
    })
}

/// Transforms of one length `n`: radix-2 FFT for powers of two, Bluestein's chirp-z through a
/// power-of-two FFT for other lengths above a few dozen, the direct sum below that.
struct Plan {
    n: usize,
    /// `(cos, sin)(2πj/n)` for the direct sum.
    tw: Vec<(f64, f64)>,
    chirp: Option<Chirp>,
}

/// Bluestein's precomputation: the chirp `e^{-iπk²/n}` and the FFT (length `m`, a power of
/// two) of its conjugate, zero-padded.
struct Chirp {
    m: usize,
    w: Vec<(f64, f64)>,
    br: Vec<f64>,
    bi: Vec<f64>,
}

impl Plan {
    fn new(n: usize) -> Plan {
        let tw = if n.is_power_of_two() || n > 64 {
            vec![]
        } else {
            (0..n)
                .map(|j| {
                    let a = 2.0 * std::f64::consts::PI * j as f64 / n as f64;
                    (a.cos(), a.sin())
                })
                .collect()
        };
        let chirp = (!n.is_power_of_two() && n > 64).then(|| {
            let m = (2 * n - 1).next_power_of_two();
            let w: Vec<(f64, f64)> = (0..n)
                .map(|k| {
                    let k2 = ((k as u128 * k as u128) % (2 * n as u128)) as f64;
                    let a = -std::f64::consts::PI * k2 / n as f64;
                    (a.cos(), a.sin())
                })
                .collect();
            let mut br = vec![0.0; m];
            let mut bi = vec![0.0; m];
            for k in 0..n {
                br[k] = w[k].0;
                bi[k] = -w[k].1;
                if k > 0 {
                    br[m - k] = w[k].0;
                    bi[m - k] = -w[k].1;
                }
            }
            fft_pow2(&mut br, &mut bi, -1.0);
            Chirp { m, w, br, bi }
        });
        Plan { n, tw, chirp }
    }

    /// The DFT (`sign` -1) or unscaled inverse (`sign` +1) of `(re, im)`, zero-padded or
    /// truncated to `n`, keeping the first `keep` bins.
    fn run(&self, re: &[f64], im: &[f64], keep: usize, sign: f64) -> (Vec<f64>, Vec<f64>) {
        let n = self.n;
        let m = re.len().min(n);
        let mut xr = vec![0.0; n];
        let mut xi = vec![0.0; n];
        xr[..m].copy_from_slice(&re[..m]);
        xi[..m].copy_from_slice(&im[..m]);
        if n.is_power_of_two() {
            fft_pow2(&mut xr, &mut xi, sign);
        } else if let Some(Chirp { m: mm, w, br, bi }) = &self.chirp {
            // Inverse through the forward chirp: conj(DFT(conj(x))).
            if sign > 0.0 {
                xi.iter_mut().for_each(|v| *v = -*v);
            }
            let mut ar = vec![0.0; *mm];
            let mut ai = vec![0.0; *mm];
            for k in 0..n {
                ar[k] = xr[k] * w[k].0 - xi[k] * w[k].1;
                ai[k] = xr[k] * w[k].1 + xi[k] * w[k].0;
            }
            fft_pow2(&mut ar, &mut ai, -1.0);
            for k in 0..*mm {
                let (a, b) = (ar[k], ai[k]);
                ar[k] = a * br[k] - b * bi[k];
                ai[k] = a * bi[k] + b * br[k];
            }
            fft_pow2(&mut ar, &mut ai, 1.0);
            let scale = 1.0 / *mm as f64;
            for k in 0..n {
                let (cr, ci) = (ar[k] * scale, ai[k] * scale);
                xr[k] = cr * w[k].0 - ci * w[k].1;
                xi[k] = cr * w[k].1 + ci * w[k].0;
            }
            if sign > 0.0 {
                xi.iter_mut().for_each(|v| *v = -*v);
            }
        } else {
            let mut out_re = vec![0.0; n];
            let mut out_im = vec![0.0; n];
            for k in 0..keep.min(n) {
                let (mut sr, mut si) = (0.0, 0.0);
                for t in 0..m {
                    let (c, s) = self.tw[(k * t) % n];
                    let s = sign * s;
                    sr += xr[t] * c - xi[t] * s;
                    si += xr[t] * s + xi[t] * c;
                }
                out_re[k] = sr;
                out_im[k] = si;
            }
            xr = out_re;
            xi = out_im;
        }
        xr.truncate(keep);
        xi.truncate(keep);
        (xr, xi)
    }
}

/// In-place radix-2 FFT of a power-of-two length (`sign` -1 forward, +1 unscaled inverse).
fn fft_pow2(re: &mut [f64], im: &mut [f64], sign: f64) {
    let n = re.len();
    if n <= 1 {
        return;
    }
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if j > i {
            re.swap(i, j);
            im.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let a = sign * 2.0 * std::f64::consts::PI / len as f64;
        let half = len / 2;
        let tw: Vec<(f64, f64)> = (0..half)
            .map(|k| ((a * k as f64).cos(), (a * k as f64).sin()))
            .collect();
        for start in (0..n).step_by(len) {
            for (k, &(c, s)) in tw.iter().enumerate() {
                let (i, j) = (start + k, start + k + half);
                let tr = re[j] * c - im[j] * s;
                let ti = re[j] * s + im[j] * c;
                re[j] = re[i] - tr;
                im[j] = im[i] - ti;
                re[i] += tr;
                im[i] += ti;
            }
        }
        len <<= 1;
    }
}

/// DFT: the discrete Fourier transform along one signal axis (v17: `axis` attribute; v20:
/// `axis` input), forward or inverse, optionally one-sided (inverse one-sided: real output).
fn dft(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let r = x.rank();
    if r < 2 {
        return Err(cx.invalid(format!(
            "DFT input must have rank >= 2 ([..., signal, 1|2]), got {:?}",
            x.shape()
        )));
    }
    let c = x.shape()[r - 1];
    if c != 1 && c != 2 {
        return Err(cx.invalid(format!(
            "DFT input's last dim must be 1 (real) or 2 (complex), got {c}"
        )));
    }
    let axis = if cx.opset >= 20 {
        match cx.opt_input(2)? {
            Some(t) => scalar_i64(t, "DFT axis")?,
            None => -2,
        }
    } else {
        cx.int("axis", 1)?
    };
    let a = if axis < 0 { axis + r as i64 } else { axis };
    if a < 0 || a > r as i64 - 2 {
        return Err(cx.invalid(format!(
            "DFT axis {axis} is out of range for rank {r} (expected {}..=-2 or 0..={})",
            -(r as i64),
            r as i64 - 2
        )));
    }
    let a = a as usize;
    let inverse = cx.int("inverse", 0)? != 0;
    let onesided = cx.int("onesided", 0)? != 0;
    let len_in = x.shape()[a];
    let n = match cx.opt_input(1)? {
        Some(t) => {
            let v = scalar_i64(t, "DFT dft_length")?;
            if !(1..=MAX_LEN).contains(&v) {
                return Err(cx.invalid(format!("DFT dft_length must be in 1..={MAX_LEN}, got {v}")));
            }
            v as usize
        }
        None if inverse && onesided => 2 * len_in.saturating_sub(1),
        None => len_in,
    };
    if n == 0 {
        return Err(cx.invalid("DFT of an empty signal"));
    }
    let data = floats(cx, x)?;
    let outer: usize = x.shape()[..a].iter().product();
    let inner: usize = x.shape()[a + 1..r - 1].iter().product();
    let (out_len, out_c) = match (inverse, onesided) {
        (false, true) => (n / 2 + 1, 2),
        (true, true) => (n, 1),
        _ => (n, 2),
    };
    let plan = Plan::new(n);
    let total = [outer, out_len, inner, out_c]
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&t| t <= MAX_VALUES)
        .ok_or_else(|| cx.invalid(format!("DFT output of length {out_len} is too large")))?;
    let mut out = vec![0.0f64; total];
    let mut re = vec![0.0; len_in];
    let mut im = vec![0.0; len_in];
    for o in 0..outer {
        for i in 0..inner {
            for t in 0..len_in {
                let base = ((o * len_in + t) * inner + i) * c;
                re[t] = data[base];
                im[t] = if c == 2 { data[base + 1] } else { 0.0 };
            }
            let (yr, yi) = if inverse && onesided {
                // Hermitian extension of the first n/2+1 bins, then a real inverse.
                let half = n / 2 + 1;
                let mut fr = vec![0.0; n];
                let mut fi = vec![0.0; n];
                for k in 0..n {
                    let (src, conj) = if k < half { (k, false) } else { (n - k, true) };
                    if src < len_in {
                        fr[k] = re[src];
                        fi[k] = if conj { -im[src] } else { im[src] };
                    }
                }
                let (yr, _) = plan.run(&fr, &fi, n, 1.0);
                (yr.into_iter().map(|v| v / n as f64).collect(), vec![])
            } else if inverse {
                let (yr, yi) = plan.run(&re, &im, n, 1.0);
                (
                    yr.into_iter().map(|v| v / n as f64).collect(),
                    yi.into_iter().map(|v| v / n as f64).collect(),
                )
            } else {
                plan.run(&re, &im, out_len, -1.0)
            };
            for k in 0..out_len {
                let base = ((o * out_len + k) * inner + i) * out_c;
                out[base] = yr[k];
                if out_c == 2 {
                    out[base + 1] = yi[k];
                }
            }
        }
    }
    let mut shape = x.shape().to_vec();
    shape[a] = out_len;
    shape[r - 1] = out_c;
    Ok(vec![float_tensor(cx, x.dtype(), shape, out)?.into()])
}

/// STFT: windowed DFTs of frames of a `[batch, length, 1|2]` signal, giving
/// `[batch, frames, bins, 2]` (`bins` = frame_length/2+1 when one-sided).
fn stft(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let [batch, len, c] = *x.shape() else {
        return Err(cx.invalid(format!(
            "STFT signal must have shape [batch, length, 1|2], got {:?}",
            x.shape()
        )));
    };
    if c != 1 && c != 2 {
        return Err(cx.invalid(format!(
            "STFT signal's last dim must be 1 (real) or 2 (complex), got {c}"
        )));
    }
    let step = scalar_i64(cx.input(1)?, "STFT frame_step")?;
    if step < 1 {
        return Err(cx.invalid(format!("STFT frame_step must be >= 1, got {step}")));
    }
    let window = match cx.opt_input(2)? {
        Some(w) => {
            if w.rank() != 1 {
                return Err(cx.invalid(format!("STFT window must be 1-D, got {:?}", w.shape())));
            }
            Some(floats(cx, w)?)
        }
        None => None,
    };
    let frame_len = match cx.opt_input(3)? {
        Some(t) => scalar_i64(t, "STFT frame_length")?,
        None => match &window {
            Some(w) => w.len() as i64,
            None => {
                return Err(cx.invalid("STFT needs a window or a frame_length"));
            }
        },
    };
    if frame_len < 1 || frame_len > len as i64 || frame_len > MAX_LEN {
        return Err(cx.invalid(format!(
            "STFT frame_length must be in 1..={len} (the signal length), got {frame_len}"
        )));
    }
    let n = frame_len as usize;
    if let Some(w) = &window {
        if w.len() != n {
            return Err(cx.invalid(format!(
                "STFT window has {} values, frame_length is {n}",
                w.len()
            )));
        }
    }
    let onesided = cx.int("onesided", 1)? != 0;
    let frames = 1 + (len - n) / step as usize;
    let bins = if onesided { n / 2 + 1 } else { n };
    let data = floats(cx, x)?;
    let plan = Plan::new(n);
    let mut out = Vec::with_capacity(batch * frames * bins * 2);
    let mut re = vec![0.0; n];
    let mut im = vec![0.0; n];
    for b in 0..batch {
        for f in 0..frames {
            let start = f * step as usize;
            for t in 0..n {
                let base = (b * len + start + t) * c;
                let w = window.as_ref().map_or(1.0, |w| w[t]);
                re[t] = data[base] * w;
                im[t] = if c == 2 { data[base + 1] * w } else { 0.0 };
            }
            let (yr, yi) = plan.run(&re, &im, bins, -1.0);
            for k in 0..bins {
                out.push(yr[k]);
                out.push(yi[k]);
            }
        }
    }
    Ok(vec![float_tensor(
        cx,
        x.dtype(),
        vec![batch, frames, bins, 2],
        out,
    )?
    .into()])
}

/// The window kinds.
#[derive(Clone, Copy)]
enum Window {
    Hann,
    Hamming,
    Blackman,
}

/// Hann/Hamming/Blackman windows of length `size` (periodic by default), as
/// `output_datatype` (default float).
fn window(cx: &RunCx, kind: Window) -> KResult<Vec<Value>> {
    let size = scalar_i64(cx.input(0)?, "window size")?;
    if !(0..=MAX_LEN).contains(&size) {
        return Err(cx.invalid(format!("window size must be in 0..={MAX_LEN}, got {size}")));
    }
    let periodic = cx.int("periodic", 1)? != 0;
    let code = cx.int("output_datatype", DataType::Float as i64)?;
    let dtype = DataType::from_onnx(code as i32)
        .ok_or_else(|| cx.invalid(format!("output_datatype {code} is not a type")))?;
    let n = size as usize;
    let denom = if periodic {
        size as f64
    } else {
        size as f64 - 1.0
    };
    let pi = std::f64::consts::PI;
    let v: Vec<f64> = (0..n)
        .map(|i| {
            let i = i as f64;
            match kind {
                Window::Hann => (i * pi / denom).sin().powi(2),
                Window::Hamming => {
                    let alpha = 25.0 / 46.0;
                    alpha - (i * pi * 2.0 / denom).cos() * (1.0 - alpha)
                }
                Window::Blackman => {
                    0.42 - 0.5 * (i * pi * 2.0 / denom).cos() + 0.08 * (i * pi * 4.0 / denom).cos()
                }
            }
        })
        .collect();
    Ok(vec![numeric_tensor(cx, dtype, vec![n], v)?.into()])
}

/// HannWindow.
fn hann_window(cx: &RunCx) -> KResult<Vec<Value>> {
    window(cx, Window::Hann)
}

/// HammingWindow (alpha 25/46).
fn hamming_window(cx: &RunCx) -> KResult<Vec<Value>> {
    window(cx, Window::Hamming)
}

/// BlackmanWindow.
fn blackman_window(cx: &RunCx) -> KResult<Vec<Value>> {
    window(cx, Window::Blackman)
}

/// MelWeightMatrix: `[dft_length/2+1, num_mel_bins]` triangular mel filters, computed as the
/// ONNX reference does.
fn mel_weight_matrix(cx: &RunCx) -> KResult<Vec<Value>> {
    let bins = scalar_i64(cx.input(0)?, "num_mel_bins")?;
    let dft_len = scalar_i64(cx.input(1)?, "dft_length")?;
    let rate = scalar_i64(cx.input(2)?, "sample_rate")?;
    let one_f = |i: usize, what: &str| -> KResult<f64> {
        let v = to_f64s(cx.input(i)?)?;
        match v.as_slice() {
            [x] => Ok(*x),
            _ => Err(cx.invalid(format!("{what} must hold one value"))),
        }
    };
    let lower = one_f(3, "lower_edge_hertz")?;
    let upper = one_f(4, "upper_edge_hertz")?;
    if bins < 1 || dft_len < 1 || rate < 1 || bins > MAX_LEN || dft_len > MAX_LEN {
        return Err(cx.invalid(format!(
            "MelWeightMatrix needs num_mel_bins, dft_length and sample_rate >= 1, got {bins}, {dft_len}, {rate}"
        )));
    }
    let code = cx.int("output_datatype", DataType::Float as i64)?;
    let dtype = DataType::from_onnx(code as i32)
        .ok_or_else(|| cx.invalid(format!("output_datatype {code} is not a type")))?;
    let nb = bins as usize;
    let spec_bins = dft_len as usize / 2 + 1;
    let low_mel = 2595.0 * (lower / 700.0).ln_1p() / std::f64::consts::LN_10;
    let high_mel = 2595.0 * (upper / 700.0).ln_1p() / std::f64::consts::LN_10;
    let step = (high_mel - low_mel) / (nb + 2) as f64;
    let freq: Vec<i64> = (0..nb + 2)
        .map(|i| {
            let mel = i as f64 * step + low_mel;
            let hz = 700.0 * (mel / 2595.0 * std::f64::consts::LN_10).exp_m1();
            (((dft_len + 1) as f64 * hz) / rate as f64).floor() as i64
        })
        .collect();
    if freq.iter().any(|&f| f < 0 || f as usize >= spec_bins) {
        return Err(cx.invalid(format!(
            "MelWeightMatrix edges {lower}..{upper} Hz fall outside the {spec_bins} spectrogram bins"
        )));
    }
    if spec_bins.saturating_mul(nb) > MAX_VALUES {
        return Err(cx.invalid(format!(
            "MelWeightMatrix of {spec_bins} × {nb} is too large"
        )));
    }
    let mut out = vec![0.0f64; spec_bins * nb];
    for i in 0..nb {
        let (lo, center, hi) = (freq[i], freq[i + 1], freq[i + 2]);
        let up = center - lo;
        if up == 0 {
            out[center as usize * nb + i] = 1.0;
        } else {
            for j in lo..=center {
                out[j as usize * nb + i] = (j - lo) as f64 / up as f64;
            }
        }
        let down = hi - center;
        if down > 0 {
            for j in center..hi {
                out[j as usize * nb + i] = (hi - j) as f64 / down as f64;
            }
        }
    }
    Ok(vec![
        numeric_tensor(cx, dtype, vec![spec_bins, nb], out)?.into()
    ])
}

pub const KERNELS: &[KernelDef] = &[
    kernel("DFT", 17, dft),
    kernel("STFT", 17, stft),
    kernel("HannWindow", 17, hann_window),
    kernel("HammingWindow", 17, hamming_window),
    kernel("BlackmanWindow", 17, blackman_window),
    kernel("MelWeightMatrix", 17, mel_weight_matrix),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct O(n²) sum, for reference.
    fn naive(re: &[f64], im: &[f64], sign: f64) -> (Vec<f64>, Vec<f64>) {
        let n = re.len();
        let mut o = (vec![0.0; n], vec![0.0; n]);
        for k in 0..n {
            for t in 0..n {
                let a = sign * 2.0 * std::f64::consts::PI * ((k * t) % n) as f64 / n as f64;
                o.0[k] += re[t] * a.cos() - im[t] * a.sin();
                o.1[k] += re[t] * a.sin() + im[t] * a.cos();
            }
        }
        o
    }

    #[test]
    fn fast_transforms_agree_with_the_direct_sum() {
        for n in [1, 2, 3, 5, 8, 10, 16, 63, 64, 65, 100, 128, 400, 1000] {
            let re: Vec<f64> = (0..n).map(|i| ((i * 7 + 3) % 11) as f64 - 5.0).collect();
            let im: Vec<f64> = (0..n).map(|i| ((i * 5 + 1) % 13) as f64 * 0.5).collect();
            let plan = Plan::new(n);
            for sign in [-1.0, 1.0] {
                let (er, ei) = naive(&re, &im, sign);
                let (gr, gi) = plan.run(&re, &im, n, sign);
                for k in 0..n {
                    assert!(
                        (er[k] - gr[k]).abs() < 1e-8 * n as f64
                            && (ei[k] - gi[k]).abs() < 1e-8 * n as f64,
                        "n={n} sign={sign} k={k}: {} {} vs {} {}",
                        gr[k],
                        gi[k],
                        er[k],
                        ei[k]
                    );
                }
            }
        }
    }
}
