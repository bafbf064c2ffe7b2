//! Operator families. Each module exports `OPS`, its registry entries; [`ALL`] lists the modules.

pub mod elementwise;
pub mod shape;

use crate::OpDef;

/// Every family's registry entries.
pub const ALL: &[&[OpDef]] = &[elementwise::OPS, shape::OPS];
