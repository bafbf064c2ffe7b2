//! Operator families. Each module exports `OPS`, its registry entries; [`ALL`] lists the modules.

pub mod attention;
pub mod control;
pub mod conv;
pub mod elementwise;
pub mod indexing;
pub mod linalg;
pub mod ml;
pub mod norm;
pub mod quant;
pub mod random;
pub mod reduce;
pub mod resize;
pub mod rnn;
pub mod sequence;
pub mod shape;
pub mod signal;
#[cfg(test)]
pub(crate) mod testing;
pub mod text;
pub mod training;

use crate::OpDef;

/// Every family's registry entries.
pub const ALL: &[&[OpDef]] = &[
    elementwise::OPS,
    shape::OPS,
    reduce::OPS,
    indexing::OPS,
    control::OPS,
    sequence::OPS,
    signal::OPS,
    random::OPS,
    text::OPS,
    ml::OPS,
    training::OPS,
    linalg::OPS,
    conv::OPS,
    norm::OPS,
    resize::OPS,
    rnn::OPS,
    attention::OPS,
    quant::OPS,
];
