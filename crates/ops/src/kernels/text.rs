//! Kernels of the text family (inference: `families/text.rs`): string tensors.

use crate::exec::util::{broadcast_offsets, broadcast_shapes, broadcast_strides, to_i64s};
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use bytes::Bytes;
use std::collections::HashMap;
use tensor::{DataType, Tensor};

/// Input `i` as a string tensor's elements.
fn strings<'a>(cx: &RunCx<'a>, i: usize) -> KResult<(&'a Tensor, &'a [Bytes])> {
    let t = cx.input(i)?;
    match t.strings() {
        Some(s) => Ok((t, s)),
        None => Err(cx.unsupported(t.dtype())),
    }
}

/// StringConcat: elementwise concatenation of two string tensors, with broadcasting.
fn string_concat(cx: &RunCx) -> KResult<Vec<Value>> {
    let (a, av) = strings(cx, 0)?;
    let (b, bv) = strings(cx, 1)?;
    let out = broadcast_shapes(&[a.shape(), b.shape()])?;
    let ao = broadcast_offsets(&out, &broadcast_strides(a.shape(), &out));
    let bo = broadcast_offsets(&out, &broadcast_strides(b.shape(), &out));
    let data: Vec<Bytes> = ao
        .into_iter()
        .zip(bo)
        .map(|(i, j)| {
            let mut v = Vec::with_capacity(av[i].len() + bv[j].len());
            v.extend_from_slice(&av[i]);
            v.extend_from_slice(&bv[j]);
            Bytes::from(v)
        })
        .collect();
    Ok(vec![Tensor::from_strings(out, data)?.into()])
}

/// StringSplit: splits each string by `delimiter` (runs of whitespace when empty or absent)
/// at most `maxsplit` times; outputs the pieces padded with "" to the longest split, and the
/// number of pieces per string.
fn string_split(cx: &RunCx) -> KResult<Vec<Value>> {
    let (x, xv) = strings(cx, 0)?;
    let delim = cx.attr_s("delimiter")?.unwrap_or_default();
    let maxsplit = cx.attr_i("maxsplit")?;
    if let Some(m) = maxsplit {
        if m < 0 {
            return Err(cx.invalid(format!("StringSplit maxsplit must be >= 0, got {m}")));
        }
    }
    let limit = maxsplit.map(|m| m as usize).unwrap_or(usize::MAX);
    let mut pieces: Vec<Vec<Bytes>> = Vec::with_capacity(xv.len());
    for s in xv {
        let text = std::str::from_utf8(s)
            .map_err(|_| cx.invalid("StringSplit input holds a string that is not valid UTF-8"))?;
        let parts: Vec<&str> = if delim.is_empty() {
            split_whitespace(text, limit)
        } else {
            text.splitn(limit.saturating_add(1), delim.as_str())
                .collect()
        };
        pieces.push(
            parts
                .into_iter()
                .map(|p| Bytes::copy_from_slice(p.as_bytes()))
                .collect(),
        );
    }
    let width = pieces.iter().map(Vec::len).max().unwrap_or(0);
    let mut shape = x.shape().to_vec();
    shape.push(width);
    let mut flat = Vec::with_capacity(pieces.len() * width);
    let mut counts = Vec::with_capacity(pieces.len());
    for p in pieces {
        counts.push(p.len() as i64);
        let pad = width - p.len();
        flat.extend(p);
        flat.extend(std::iter::repeat_n(Bytes::new(), pad));
    }
    Ok(vec![
        Tensor::from_strings(shape, flat)?.into(),
        Tensor::from_vec(x.shape().to_vec(), counts)?.into(),
    ])
}

/// Python's `str.split(None, maxsplit)`: runs of whitespace separate, leading whitespace is
/// dropped, and after `limit` splits the remainder (trailing whitespace included) is one piece.
fn split_whitespace(text: &str, limit: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        if out.len() == limit {
            out.push(rest);
            break;
        }
        match rest.find(char::is_whitespace) {
            Some(e) => {
                out.push(&rest[..e]);
                rest = rest[e..].trim_start();
            }
            None => {
                out.push(rest);
                break;
            }
        }
    }
    out
}

/// StringNormalizer: removes stopwords (whole elements) and changes case, on a `[C]` or
/// `[1, C]` string tensor; if every element is removed the output is a single "".
fn string_normalizer(cx: &RunCx) -> KResult<Vec<Value>> {
    let (x, xv) = strings(cx, 0)?;
    let action = cx.string("case_change_action", "NONE")?;
    if !matches!(action.as_str(), "NONE" | "LOWER" | "UPPER") {
        return Err(cx.invalid(format!(
            "StringNormalizer case_change_action must be NONE, LOWER or UPPER, got '{action}'"
        )));
    }
    let sensitive = cx.int("is_case_sensitive", 0)? != 0;
    let stop: Vec<String> = cx.attr_strings("stopwords")?.unwrap_or_default();
    let two_d = match x.shape() {
        [_] => false,
        [1, _] => true,
        s => {
            return Err(cx.invalid(format!(
                "StringNormalizer input must have shape [C] or [1, C], got {s:?}"
            )))
        }
    };
    let stop_cmp: Vec<String> = if sensitive {
        stop
    } else {
        stop.iter().map(|w| w.to_lowercase()).collect()
    };
    let mut out: Vec<Bytes> = Vec::with_capacity(xv.len());
    for s in xv {
        let text = String::from_utf8_lossy(s);
        let key = if sensitive {
            text.to_string()
        } else {
            text.to_lowercase()
        };
        if stop_cmp.contains(&key) {
            continue;
        }
        let changed = match action.as_str() {
            "LOWER" => text.to_lowercase(),
            "UPPER" => text.to_uppercase(),
            _ => text.into_owned(),
        };
        out.push(Bytes::from(changed));
    }
    if out.is_empty() {
        out.push(Bytes::new());
    }
    let shape = if two_d {
        vec![1, out.len()]
    } else {
        vec![out.len()]
    };
    Ok(vec![Tensor::from_strings(shape, out)?.into()])
}

/// RegexFullMatch: whether each string matches `pattern` entirely (a Pike-VM matcher
/// for the common RE2 subset; other syntax is reported unsupported).
fn regex_full_match(cx: &RunCx) -> KResult<Vec<Value>> {
    let (x, xv) = strings(cx, 0)?;
    let pattern = cx
        .attr_s("pattern")?
        .ok_or_else(|| cx.invalid("RegexFullMatch needs the 'pattern' attribute"))?;
    let re = match regex::Regex::parse(&pattern) {
        Ok(r) => r,
        Err(regex::ParseError::Unsupported(what)) => {
            return Err(cx.unsupported(format!("pattern syntax {what}")))
        }
        Err(regex::ParseError::Invalid(what)) => {
            return Err(cx.invalid(format!("RegexFullMatch pattern '{pattern}': {what}")))
        }
    };
    let out: Vec<bool> = xv
        .iter()
        .map(|s| {
            let text: Vec<char> = String::from_utf8_lossy(s).chars().collect();
            re.full_match(&text)
        })
        .collect();
    Ok(vec![Tensor::from_vec(x.shape().to_vec(), out)?.into()])
}

/// ImageDecoder: decodes uncompressed BMP (24/32-bit) and binary or ASCII PNM (P2/P3/P5/P6,
/// maxval 255) into `[H, W, C]` uint8 in RGB, BGR or Grayscale; compressed formats (JPEG,
/// PNG, TIFF, WebP, JPEG 2000) need codecs this build does not have and are unsupported.
fn image_decoder(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    if x.dtype() != DataType::Uint8 {
        return Err(cx.unsupported(x.dtype()));
    }
    let data = x.bytes().map(|b| &b[..]).unwrap_or(&[]);
    let format = cx.string("pixel_format", "RGB")?;
    if !matches!(format.as_str(), "RGB" | "BGR" | "Grayscale") {
        return Err(cx.invalid(format!(
            "ImageDecoder pixel_format must be RGB, BGR or Grayscale, got '{format}'"
        )));
    }
    let (h, w, rgb) = if data.starts_with(b"BM") {
        image::bmp(data).map_err(|e| image_error(cx, e))?
    } else if data.len() >= 2 && data[0] == b'P' && matches!(data[1], b'2' | b'3' | b'5' | b'6') {
        image::pnm(data).map_err(|e| image_error(cx, e))?
    } else {
        return Err(cx.unsupported(
            "this image format (only BMP and PNM decode without codecs; JPEG/PNG/TIFF/WebP/JPEG 2000 need codecs this build does not have)",
        ));
    };
    let (c, out): (usize, Vec<u8>) = match format.as_str() {
        "RGB" => (3, rgb),
        "BGR" => (3, rgb.chunks(3).flat_map(|p| [p[2], p[1], p[0]]).collect()),
        _ => (
            1,
            rgb.chunks(3)
                .map(|p| {
                    // Pillow's ITU-R 601-2 luma: L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16.
                    ((p[0] as u32 * 19595 + p[1] as u32 * 38470 + p[2] as u32 * 7471 + 0x8000)
                        >> 16) as u8
                })
                .collect(),
        ),
    };
    Ok(vec![Tensor::from_vec(vec![h, w, c], out)?.into()])
}

/// An image decoding failure: unsupported variants are reported as such, the rest as invalid.
fn image_error(cx: &RunCx, e: image::Error) -> crate::exec::KernelError {
    match e {
        image::Error::Unsupported(what) => cx.unsupported(what),
        image::Error::Invalid(what) => cx.invalid(format!("ImageDecoder: {what}")),
    }
}

/// Minimal decoders for the uncompressed image formats.
mod image {
    /// Why an image cannot be decoded.
    pub enum Error {
        Unsupported(String),
        Invalid(String),
    }

    /// Largest pixel count we agree to decode.
    const MAX_PIXELS: usize = 1 << 28;

    fn invalid(msg: &str) -> Error {
        Error::Invalid(msg.to_string())
    }

    fn u16le(d: &[u8], o: usize) -> Result<u32, Error> {
        d.get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as u32)
            .ok_or_else(|| invalid("truncated BMP header"))
    }

    fn u32le(d: &[u8], o: usize) -> Result<u32, Error> {
        d.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| invalid("truncated BMP header"))
    }

    /// An uncompressed 24- or 32-bit BMP as (height, width, RGB bytes).
    pub fn bmp(d: &[u8]) -> Result<(usize, usize, Vec<u8>), Error> {
        let offset = u32le(d, 10)? as usize;
        let header = u32le(d, 14)?;
        if header < 40 {
            return Err(Error::Unsupported("BMP with an OS/2 core header".into()));
        }
        let w = u32le(d, 18)? as i32;
        let h = u32le(d, 22)? as i32;
        let bpp = u16le(d, 28)?;
        let compression = u32le(d, 30)?;
        if w <= 0 || h == 0 {
            return Err(invalid("BMP with a non-positive size"));
        }
        if compression != 0 || (bpp != 24 && bpp != 32) {
            return Err(Error::Unsupported(format!(
                "BMP of {bpp} bits per pixel, compression {compression}"
            )));
        }
        let (w, top_down, h) = (w as usize, h < 0, h.unsigned_abs() as usize);
        if w.saturating_mul(h) > MAX_PIXELS {
            return Err(invalid("BMP too large"));
        }
        let bytes = (bpp / 8) as usize;
        let stride = (w * bytes).div_ceil(4) * 4;
        if d.len() < offset + stride * (h - 1) + w * bytes {
            return Err(invalid("truncated BMP pixel data"));
        }
        let mut out = Vec::with_capacity(w * h * 3);
        for y in 0..h {
            let row = if top_down { y } else { h - 1 - y };
            let base = offset + row * stride;
            for x in 0..w {
                let p = &d[base + x * bytes..base + x * bytes + 3];
                out.extend_from_slice(&[p[2], p[1], p[0]]);
            }
        }
        Ok((h, w, out))
    }

    /// The next whitespace-separated PNM header token (skipping `#` comments).
    fn token(d: &[u8], pos: &mut usize) -> Result<usize, Error> {
        loop {
            while *pos < d.len() && d[*pos].is_ascii_whitespace() {
                *pos += 1;
            }
            if *pos < d.len() && d[*pos] == b'#' {
                while *pos < d.len() && d[*pos] != b'\n' {
                    *pos += 1;
                }
                continue;
            }
            break;
        }
        let start = *pos;
        while *pos < d.len() && d[*pos].is_ascii_digit() {
            *pos += 1;
        }
        std::str::from_utf8(&d[start..*pos])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid("bad PNM header"))
    }

    /// A P2/P3/P5/P6 image of maxval 255 as (height, width, RGB bytes); gray is replicated.
    pub fn pnm(d: &[u8]) -> Result<(usize, usize, Vec<u8>), Error> {
        let kind = d[1];
        let mut pos = 2;
        let w = token(d, &mut pos)?;
        let h = token(d, &mut pos)?;
        let maxval = token(d, &mut pos)?;
        if maxval != 255 {
            return Err(Error::Unsupported(format!("PNM with maxval {maxval}")));
        }
        if w.saturating_mul(h) > MAX_PIXELS {
            return Err(invalid("PNM too large"));
        }
        let channels = if matches!(kind, b'3' | b'6') { 3 } else { 1 };
        let n = w * h * channels;
        let samples: Vec<u8> = if matches!(kind, b'5' | b'6') {
            pos += 1; // the single whitespace byte after maxval
            d.get(pos..pos + n)
                .ok_or_else(|| invalid("truncated PNM pixel data"))?
                .to_vec()
        } else {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                let t = token(d, &mut pos)?;
                if t > 255 {
                    return Err(invalid("PNM sample above maxval"));
                }
                v.push(t as u8);
            }
            v
        };
        let rgb = if channels == 3 {
            samples
        } else {
            samples.iter().flat_map(|&g| [g, g, g]).collect()
        };
        Ok((h, w, rgb))
    }
}

/// An n-gram pool key.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    I(i64),
    S(Bytes),
}

/// A trie node of the n-gram pool: `id` 0 means no n-gram ends here.
#[derive(Default)]
struct Gram {
    id: usize,
    children: HashMap<Key, usize>,
}

/// TfIdfVectorizer: counts the pool's n-grams (with skips) in each row of `[C]` or `[B, C]`
/// input and weighs them by `mode` (TF, IDF, TFIDF).
fn tfidf_vectorizer(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let mode = cx.string("mode", "TF")?;
    if !matches!(mode.as_str(), "TF" | "IDF" | "TFIDF") {
        return Err(cx.invalid(format!(
            "TfIdfVectorizer mode must be TF, IDF or TFIDF, got '{mode}'"
        )));
    }
    let min_n = cx.int("min_gram_length", 1)?;
    let max_n = cx.int("max_gram_length", 1)?;
    let max_skip = cx.int("max_skip_count", 0)?;
    if min_n < 1 || max_n < min_n || max_skip < 0 {
        return Err(cx.invalid(format!(
            "TfIdfVectorizer needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, got {min_n}, {max_n}, {max_skip}"
        )));
    }
    let (min_n, max_n, max_skip) = (min_n as usize, max_n as usize, max_skip as usize);
    let counts = cx.attr_ints("ngram_counts")?.unwrap_or(&[]);
    let indexes = cx.attr_ints("ngram_indexes")?.unwrap_or(&[]);
    let weights = cx.attr_floats("weights")?.unwrap_or(&[]);
    let pool: Vec<Key> = if let Some(p) = cx.attr_ints("pool_int64s")? {
        p.iter().map(|&v| Key::I(v)).collect()
    } else if let Some(a) = cx.attr("pool_strings") {
        a.strings.iter().map(|s| Key::S(s.clone())).collect()
    } else {
        return Err(cx.invalid("TfIdfVectorizer needs pool_int64s or pool_strings"));
    };
    if indexes.iter().any(|&i| i < 0) {
        return Err(cx.invalid("TfIdfVectorizer ngram_indexes must be >= 0"));
    }
    let out_size = indexes.iter().map(|&i| i as usize + 1).max().unwrap_or(0);
    if !weights.is_empty() && weights.len() < out_size {
        return Err(cx.invalid(format!(
            "TfIdfVectorizer has {} weights for an output of size {out_size}",
            weights.len()
        )));
    }
    // Build the trie of the pool's n-grams.
    let mut trie: Vec<Gram> = vec![Gram::default()];
    let mut gram_id = 1usize;
    for (i, &start) in counts.iter().enumerate() {
        let n = i + 1;
        let end = counts.get(i + 1).copied().unwrap_or(pool.len() as i64);
        if start < 0 || end < start || end as usize > pool.len() {
            return Err(cx.invalid(format!(
                "TfIdfVectorizer ngram_counts {counts:?} do not fit a pool of {}",
                pool.len()
            )));
        }
        let (start, end) = (start as usize, end as usize);
        let grams = (end - start) / n;
        if n < min_n || n > max_n {
            gram_id += grams;
            continue;
        }
        for g in 0..grams {
            let mut node = 0usize;
            for k in 0..n {
                let key = pool[start + g * n + k].clone();
                let next = match trie[node].children.get(&key) {
                    Some(&c) => c,
                    None => {
                        trie.push(Gram::default());
                        let c = trie.len() - 1;
                        trie[node].children.insert(key, c);
                        c
                    }
                };
                node = next;
            }
            trie[node].id = gram_id;
            gram_id += 1;
        }
    }
    let keys: Vec<Key> = match x.dtype() {
        DataType::String => x
            .strings()
            .unwrap_or(&[])
            .iter()
            .map(|s| Key::S(s.clone()))
            .collect(),
        DataType::Int32 | DataType::Int64 => to_i64s(x)?.into_iter().map(Key::I).collect(),
        d => return Err(cx.unsupported(d)),
    };
    let (rows, c, out_shape) = match x.shape() {
        [] => (1, 1, vec![out_size]),
        [c] => (1, *c, vec![out_size]),
        [b, c] => (*b, *c, vec![*b, out_size]),
        s => {
            return Err(cx.invalid(format!(
                "TfIdfVectorizer input must have shape [C] or [B, C], got {s:?}"
            )))
        }
    };
    if rows.saturating_mul(out_size) > 1 << 28 {
        return Err(cx.invalid(format!(
            "TfIdfVectorizer output of {rows} × {out_size} is too large"
        )));
    }
    let mut freq = vec![0i64; rows * out_size];
    for r in 0..rows {
        let row = &keys[r * c..(r + 1) * c];
        let mut start_n = min_n;
        for skip in 1..=max_skip + 1 {
            for s in 0..c {
                if s + skip * (start_n - 1) >= c {
                    break;
                }
                let mut node = 0usize;
                let mut item = s;
                let mut n = 1;
                while !trie[node].children.is_empty() && n <= max_n && item < c {
                    let Some(&next) = trie[node].children.get(&row[item]) else {
                        break;
                    };
                    let id = trie[next].id;
                    if n >= start_n && id != 0 {
                        let slot = indexes.get(id - 1).copied().ok_or_else(|| {
                            cx.invalid(format!(
                                "TfIdfVectorizer has {} ngram_indexes, n-gram {id} needs more",
                                indexes.len()
                            ))
                        })?;
                        freq[r * out_size + slot as usize] += 1;
                    }
                    node = next;
                    n += 1;
                    item += skip;
                }
            }
            if start_n == 1 {
                start_n += 1;
                if start_n > max_n {
                    break;
                }
            }
        }
    }
    let y: Vec<f32> = freq
        .iter()
        .enumerate()
        .map(|(p, &f)| {
            let w = weights.get(p % out_size.max(1)).copied();
            match (mode.as_str(), w) {
                ("TF", _) => f as f32,
                ("IDF", Some(w)) => {
                    if f > 0 {
                        w
                    } else {
                        0.0
                    }
                }
                ("IDF", None) => {
                    if f > 0 {
                        1.0
                    } else {
                        0.0
                    }
                }
                (_, Some(w)) => w * f as f32,
                (_, None) => f as f32,
            }
        })
        .collect();
    Ok(vec![Tensor::from_vec(out_shape, y)?.into()])
}

/// A small Pike-VM (Thompson NFA) matcher for the RE2 subset RegexFullMatch patterns commonly use:
/// literals, `.`, classes `[...]` (ranges, negation, `\w\d\s` and their negations), escapes,
/// `^ $ \b \B`, groups `(...)` / `(?:...)`, `|`, and greedy or lazy `* + ? {n} {n,} {n,m}`.
/// `\w`, `\d`, `\s` and `\b` are ASCII, as in RE2. Matching is linear in the input.
mod regex {
    /// Why a pattern cannot be used.
    pub enum ParseError {
        /// Valid RE2 this matcher does not implement.
        Unsupported(String),
        /// Not a valid pattern.
        Invalid(String),
    }

    #[derive(Debug, Clone)]
    enum ClassItem {
        Range(char, char),
        Word(bool),
        Digit(bool),
        Space(bool),
    }

    #[derive(Debug, Clone)]
    enum Node {
        Char(char),
        Any,
        Class(Vec<ClassItem>, bool),
        Start,
        End,
        WordBoundary(bool),
        Concat(Vec<Node>),
        Alt(Vec<Node>),
        /// The operand, min and max (`usize::MAX`: unbounded) counts; laziness does not
        /// change whether a full match exists.
        Repeat(Box<Node>, usize, usize),
    }

    pub struct Regex {
        prog: Vec<Inst>,
    }

    fn is_word(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_'
    }

    fn is_space(c: char) -> bool {
        matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
    }

    impl ClassItem {
        fn matches(&self, c: char) -> bool {
            match *self {
                ClassItem::Range(a, b) => a <= c && c <= b,
                ClassItem::Word(neg) => is_word(c) != neg,
                ClassItem::Digit(neg) => c.is_ascii_digit() != neg,
                ClassItem::Space(neg) => is_space(c) != neg,
            }
        }
    }

    struct Parser<'a> {
        s: &'a [char],
        i: usize,
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<char> {
            self.s.get(self.i).copied()
        }

        fn alt(&mut self) -> Result<Node, ParseError> {
            let mut branches = vec![self.concat()?];
            while self.peek() == Some('|') {
                self.i += 1;
                branches.push(self.concat()?);
            }
            Ok(if branches.len() == 1 {
                branches.pop().unwrap_or(Node::Concat(vec![]))
            } else {
                Node::Alt(branches)
            })
        }

        fn concat(&mut self) -> Result<Node, ParseError> {
            let mut items = Vec::new();
            while let Some(c) = self.peek() {
                if c == '|' || c == ')' {
                    break;
                }
                let atom = self.atom()?;
                let atom = self.quantifier(atom)?;
                items.push(atom);
            }
            Ok(Node::Concat(items))
        }

        fn number(&mut self) -> Option<usize> {
            let start = self.i;
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.i += 1;
            }
            if self.i == start {
                return None;
            }
            self.s[start..self.i]
                .iter()
                .collect::<String>()
                .parse()
                .ok()
        }

        fn quantifier(&mut self, atom: Node) -> Result<Node, ParseError> {
            let (min, max) = match self.peek() {
                Some('*') => {
                    self.i += 1;
                    (0, usize::MAX)
                }
                Some('+') => {
                    self.i += 1;
                    (1, usize::MAX)
                }
                Some('?') => {
                    self.i += 1;
                    (0, 1)
                }
                Some('{') => {
                    let save = self.i;
                    self.i += 1;
                    let Some(lo) = self.number() else {
                        // RE2 treats a '{' that starts no repetition as a literal.
                        self.i = save;
                        return Ok(atom);
                    };
                    let hi = if self.peek() == Some(',') {
                        self.i += 1;
                        self.number().unwrap_or(usize::MAX)
                    } else {
                        lo
                    };
                    if self.peek() != Some('}') {
                        self.i = save;
                        return Ok(atom);
                    }
                    self.i += 1;
                    if hi < lo || lo > 1000 || (hi != usize::MAX && hi > 1000) {
                        return Err(ParseError::Invalid(format!("bad repetition {{{lo},{hi}}}")));
                    }
                    (lo, hi)
                }
                _ => return Ok(atom),
            };
            if matches!(
                atom,
                Node::Start | Node::End | Node::WordBoundary(_) | Node::Repeat(..)
            ) {
                return Err(ParseError::Invalid(
                    "repetition of an anchor or repetition".into(),
                ));
            }
            if self.peek() == Some('?') {
                self.i += 1; // lazy: same full-match result
            }
            Ok(Node::Repeat(Box::new(atom), min, max))
        }

        fn escape_class(c: char) -> Option<ClassItem> {
            Some(match c {
                'w' => ClassItem::Word(false),
                'W' => ClassItem::Word(true),
                'd' => ClassItem::Digit(false),
                'D' => ClassItem::Digit(true),
                's' => ClassItem::Space(false),
                'S' => ClassItem::Space(true),
                _ => return None,
            })
        }

        fn escape_char(c: char) -> Result<char, ParseError> {
            match c {
                'n' => Ok('\n'),
                't' => Ok('\t'),
                'r' => Ok('\r'),
                'f' => Ok('\x0c'),
                'v' => Ok('\x0b'),
                c if c.is_ascii_punctuation() => Ok(c),
                c => Err(ParseError::Unsupported(format!("escape \\{c}"))),
            }
        }

        fn atom(&mut self) -> Result<Node, ParseError> {
            let c = self
                .peek()
                .ok_or_else(|| ParseError::Invalid("unexpected end".into()))?;
            self.i += 1;
            match c {
                '.' => Ok(Node::Any),
                '^' => Ok(Node::Start),
                '$' => Ok(Node::End),
                '*' | '+' | '?' => Err(ParseError::Invalid(format!("nothing to repeat at '{c}'"))),
                '(' => {
                    if self.peek() == Some('?') {
                        if self.s.get(self.i + 1) == Some(&':') {
                            self.i += 2;
                        } else {
                            return Err(ParseError::Unsupported(
                                "group flags or names (?...)".into(),
                            ));
                        }
                    }
                    let inner = self.alt()?;
                    if self.peek() != Some(')') {
                        return Err(ParseError::Invalid("missing ')'".into()));
                    }
                    self.i += 1;
                    Ok(inner)
                }
                ')' => Err(ParseError::Invalid("unmatched ')'".into())),
                '[' => self.class(),
                '\\' => {
                    let e = self
                        .peek()
                        .ok_or_else(|| ParseError::Invalid("trailing backslash".into()))?;
                    self.i += 1;
                    if let Some(item) = Self::escape_class(e) {
                        return Ok(Node::Class(vec![item], false));
                    }
                    match e {
                        'b' => Ok(Node::WordBoundary(true)),
                        'B' => Ok(Node::WordBoundary(false)),
                        'A' => Ok(Node::Start),
                        'z' => Ok(Node::End),
                        _ => Ok(Node::Char(Self::escape_char(e)?)),
                    }
                }
                c => Ok(Node::Char(c)),
            }
        }

        fn class(&mut self) -> Result<Node, ParseError> {
            let mut neg = false;
            if self.peek() == Some('^') {
                neg = true;
                self.i += 1;
            }
            let mut items = Vec::new();
            let mut first = true;
            loop {
                let c = self
                    .peek()
                    .ok_or_else(|| ParseError::Invalid("missing ']'".into()))?;
                self.i += 1;
                if c == ']' && !first {
                    break;
                }
                first = false;
                if c == '[' && self.peek() == Some(':') {
                    return Err(ParseError::Unsupported("POSIX class [:name:]".into()));
                }
                let lo = if c == '\\' {
                    let e = self
                        .peek()
                        .ok_or_else(|| ParseError::Invalid("trailing backslash".into()))?;
                    self.i += 1;
                    if let Some(item) = Self::escape_class(e) {
                        items.push(item);
                        continue;
                    }
                    Self::escape_char(e)?
                } else {
                    c
                };
                if self.peek() == Some('-') && self.s.get(self.i + 1).is_some_and(|&n| n != ']') {
                    self.i += 1;
                    let h = self.peek().unwrap_or(']');
                    self.i += 1;
                    let hi = if h == '\\' {
                        let e = self
                            .peek()
                            .ok_or_else(|| ParseError::Invalid("trailing backslash".into()))?;
                        self.i += 1;
                        Self::escape_char(e)?
                    } else {
                        h
                    };
                    if hi < lo {
                        return Err(ParseError::Invalid(format!("bad range {lo}-{hi}")));
                    }
                    items.push(ClassItem::Range(lo, hi));
                } else {
                    items.push(ClassItem::Range(lo, lo));
                }
            }
            Ok(Node::Class(items, neg))
        }
    }

    /// One instruction of the compiled automaton.
    #[derive(Debug, Clone)]
    enum Inst {
        Char(char),
        Any,
        Class(Vec<ClassItem>, bool),
        Start,
        End,
        WordBoundary(bool),
        /// Continue at both targets.
        Split(usize, usize),
        Jmp(usize),
        Match,
    }

    /// Largest compiled program (counted repetitions expand their operand).
    const MAX_PROGRAM: usize = 100_000;

    fn emit(prog: &mut Vec<Inst>, n: &Node) -> Result<(), ParseError> {
        if prog.len() > MAX_PROGRAM {
            return Err(ParseError::Unsupported(
                "a pattern this large after expanding repetitions".into(),
            ));
        }
        match n {
            Node::Char(c) => prog.push(Inst::Char(*c)),
            Node::Any => prog.push(Inst::Any),
            Node::Class(items, neg) => prog.push(Inst::Class(items.clone(), *neg)),
            Node::Start => prog.push(Inst::Start),
            Node::End => prog.push(Inst::End),
            Node::WordBoundary(w) => prog.push(Inst::WordBoundary(*w)),
            Node::Concat(items) => {
                for it in items {
                    emit(prog, it)?;
                }
            }
            Node::Alt(branches) => {
                // split L1, next; L1: b0; jmp end; next: split L2, ...; last branch
                let mut jumps = Vec::new();
                for (i, br) in branches.iter().enumerate() {
                    if i + 1 < branches.len() {
                        let split = prog.len();
                        prog.push(Inst::Split(split + 1, 0));
                        emit(prog, br)?;
                        jumps.push(prog.len());
                        prog.push(Inst::Jmp(0));
                        let next = prog.len();
                        prog[split] = Inst::Split(split + 1, next);
                    } else {
                        emit(prog, br)?;
                    }
                }
                let end = prog.len();
                for j in jumps {
                    prog[j] = Inst::Jmp(end);
                }
            }
            Node::Repeat(inner, min, max) => {
                for _ in 0..*min {
                    emit(prog, inner)?;
                }
                if *max == usize::MAX {
                    // L: split body, out; body; jmp L
                    let l = prog.len();
                    prog.push(Inst::Split(l + 1, 0));
                    emit(prog, inner)?;
                    prog.push(Inst::Jmp(l));
                    let out = prog.len();
                    prog[l] = Inst::Split(l + 1, out);
                } else {
                    let mut splits = Vec::new();
                    for _ in *min..*max {
                        splits.push(prog.len());
                        prog.push(Inst::Split(0, 0));
                        emit(prog, inner)?;
                    }
                    let out = prog.len();
                    for sp in splits {
                        prog[sp] = Inst::Split(sp + 1, out);
                    }
                }
            }
        }
        Ok(())
    }

    impl Regex {
        pub fn parse(pattern: &str) -> Result<Regex, ParseError> {
            let chars: Vec<char> = pattern.chars().collect();
            let mut p = Parser { s: &chars, i: 0 };
            let root = p.alt()?;
            if p.i != chars.len() {
                return Err(ParseError::Invalid("unmatched ')'".into()));
            }
            let mut prog = Vec::new();
            emit(&mut prog, &root)?;
            prog.push(Inst::Match);
            if prog.len() > MAX_PROGRAM {
                return Err(ParseError::Unsupported(
                    "a pattern this large after expanding repetitions".into(),
                ));
            }
            Ok(Regex { prog })
        }

        /// Adds `pc`'s epsilon closure at position `i` of `s` to `list` (iteratively).
        fn add(
            &self,
            list: &mut Vec<usize>,
            seen: &mut [usize],
            gen: usize,
            pc: usize,
            s: &[char],
            i: usize,
        ) {
            let mut stack = vec![pc];
            while let Some(pc) = stack.pop() {
                if seen[pc] == gen {
                    continue;
                }
                seen[pc] = gen;
                match &self.prog[pc] {
                    Inst::Jmp(t) => stack.push(*t),
                    Inst::Split(a, b) => {
                        stack.push(*b);
                        stack.push(*a);
                    }
                    Inst::Start => {
                        if i == 0 {
                            stack.push(pc + 1);
                        }
                    }
                    Inst::End => {
                        if i == s.len() {
                            stack.push(pc + 1);
                        }
                    }
                    Inst::WordBoundary(want) => {
                        let before = i > 0 && is_word(s[i - 1]);
                        let after = i < s.len() && is_word(s[i]);
                        if (before != after) == *want {
                            stack.push(pc + 1);
                        }
                    }
                    _ => list.push(pc),
                }
            }
        }

        /// Whether `text` matches entirely (a Pike VM: linear in the text, no recursion).
        pub fn full_match(&self, text: &[char]) -> bool {
            let n = self.prog.len();
            let mut seen = vec![usize::MAX; n];
            let mut clist = Vec::with_capacity(n);
            let mut nlist = Vec::with_capacity(n);
            self.add(&mut clist, &mut seen, 0, 0, text, 0);
            for (i, &c) in text.iter().enumerate() {
                if clist.is_empty() {
                    return false;
                }
                nlist.clear();
                for &pc in &clist {
                    let ok = match &self.prog[pc] {
                        Inst::Char(x) => *x == c,
                        Inst::Any => c != '\n',
                        Inst::Class(items, neg) => items.iter().any(|it| it.matches(c)) != *neg,
                        _ => false,
                    };
                    if ok {
                        self.add(&mut nlist, &mut seen, i + 1, pc + 1, text, i + 1);
                    }
                }
                std::mem::swap(&mut clist, &mut nlist);
            }
            clist.iter().any(|&pc| matches!(self.prog[pc], Inst::Match))
        }
    }
}

pub const KERNELS: &[KernelDef] = &[
    kernel("StringConcat", 20, string_concat),
    kernel("StringNormalizer", 10, string_normalizer),
    kernel("StringSplit", 20, string_split),
    kernel("RegexFullMatch", 20, regex_full_match),
    kernel("TfIdfVectorizer", 9, tfidf_vectorizer),
    kernel("ImageDecoder", 20, image_decoder),
];

#[cfg(test)]
mod tests {
    use super::regex::Regex;

    fn m(p: &str, t: &str) -> bool {
        let Ok(re) = Regex::parse(p) else {
            panic!("pattern {p} did not parse")
        };
        re.full_match(&t.chars().collect::<Vec<_>>())
    }

    #[test]
    fn regex_subset_matches_like_re2() {
        assert!(m(r"www\.[\w.-]+\.\bcom\b", "www.google.com"));
        assert!(!m(r"www\.[\w.-]+\.\bcom\b", "www.bbc.co.uk"));
        assert!(m(
            r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)",
            "account@gmail.com"
        ));
        assert!(!m(
            r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)",
            "a@hotmail.com"
        ));
        assert!(m("a{2,3}b?", "aaa") && !m("a{2,3}b?", "aaaa") && m("a{2,}", "aaaaa"));
        assert!(m("(?:ab)*c", "ababc") && !m("(?:ab)*c", "abac"));
        assert!(m("[^0-9]+", "abc") && !m("[^0-9]+", "a1"));
        assert!(m("x*?y", "xxy") && m("", "") && !m("", "a"));
        assert!(m(r"\d+\s\D", "12 x") && m("a|b|c", "c") && !m("a|b|c", "d"));
        assert!(
            m("a{,2}", "a{,2}"),
            "a brace that starts no repetition is literal"
        );
    }

    #[test]
    fn regex_is_linear_and_does_not_recurse_on_long_inputs() {
        let long = "a".repeat(200_000);
        assert!(m("(a*)*", &long));
        assert!(!m("(a*)*b", &long));
        assert!(!m("(a|aa)*c", &"a".repeat(5_000)));
    }

    #[test]
    fn regex_reports_unsupported_syntax() {
        assert!(Regex::parse(r"(?P<x>a)").is_err());
        assert!(Regex::parse(r"\1").is_err());
        assert!(Regex::parse("[[:alpha:]]").is_err());
        assert!(Regex::parse("a{2000}").is_err());
    }
}
