//! The one helper through which every file this crate writes reaches the disk.
//!
//! Invariant: a reader (another process included) sees either the old file or
//! the whole new one, never a prefix, and once [`write_atomic`] returns the new
//! content survives a power cut: temp file in the same directory, `fsync`,
//! `rename`, then `fsync` of the directory that holds the new name.

mod files;
pub mod group;
pub mod lock;
mod path_error;

pub use files::*;
pub use path_error::{AtPath, os_error, with_path};
