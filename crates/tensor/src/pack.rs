//! Packing of sub-byte element codes, as ONNX `raw_data` stores them.
//!
//! All of ONNX's packings (4-bit pairs with the first element in the low nibble, 2-bit quads from
//! bit 0 up, 6-bit quads in three bytes) are one rule: element `i` occupies bits
//! `i*w .. i*w + w` of a little-endian (LSB-first) bit stream, zero-padded to whole bytes.

/// Packs one code per byte (only the low `width` bits are used) into an LSB-first bit stream.
pub(crate) fn pack(width: u32, codes: &[u8]) -> Vec<u8> {
    let width = width as usize;
    let mask = (1u16 << width) - 1;
    let mut out = vec![0u8; (codes.len() * width).div_ceil(8)];
    for (i, &code) in codes.iter().enumerate() {
        let bit = i * width;
        let v = (u16::from(code) & mask) << (bit % 8);
        out[bit / 8] |= v as u8;
        if let Some(next) = out.get_mut(bit / 8 + 1) {
            *next |= (v >> 8) as u8;
        }
    }
    out
}

/// Unpacks `n` codes of `width` bits; `packed` must hold at least `ceil(n * width / 8)` bytes.
pub(crate) fn unpack(width: u32, packed: &[u8], n: usize) -> Vec<u8> {
    let width = width as usize;
    let mask = (1u16 << width) - 1;
    (0..n)
        .map(|i| {
            let bit = i * width;
            let lo = u16::from(packed[bit / 8]);
            let hi = packed.get(bit / 8 + 1).map_or(0, |&b| u16::from(b));
            (((hi << 8 | lo) >> (bit % 8)) & mask) as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_onnx_spec_examples() {
        // 4-bit: first element in the low nibble; odd counts pad the last high nibble with 0.
        assert_eq!(pack(4, &[1, 2, 0xF]), [0x21, 0x0F]);
        // 2-bit: x0 | x1 << 2 | x2 << 4 | x3 << 6.
        assert_eq!(pack(2, &[1, 2, 3, 0, 3]), [0b00_11_10_01, 0b11]);
        // 6-bit: byte0 = x0 | (x1 & 3) << 6; byte1 = x1 >> 2 | (x2 & 0xF) << 4; byte2 = x2 >> 4 | x3 << 2.
        let (x0, x1, x2, x3) = (0x15u8, 0x2A, 0x3F, 0x01);
        assert_eq!(
            pack(6, &[x0, x1, x2, x3]),
            [
                x0 | (x1 & 3) << 6,
                x1 >> 2 | (x2 & 0xF) << 4,
                x2 >> 4 | x3 << 2
            ]
        );
        assert_eq!(pack(6, &[x0]).len(), 1);
    }

    #[test]
    fn round_trips() {
        let codes: Vec<u8> = (0..=255).collect();
        for width in [2, 4, 6, 8] {
            let mask = ((1u16 << width) - 1) as u8;
            for n in [0, 1, 2, 3, 4, 5, 7, 255] {
                let packed = pack(width, &codes[..n]);
                let expected: Vec<u8> = codes[..n].iter().map(|c| c & mask).collect();
                assert_eq!(unpack(width, &packed, n), expected, "width {width} n {n}");
            }
        }
    }
}
