//! `/audience…`: lists, readers, imports and suppressions.

pub mod import;
pub mod imports;
pub mod overview;
pub mod reader;
pub mod readers;
pub mod suppressions;
