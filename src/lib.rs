//! h5mount: read HDF5 files without libhdf5 and serve them as a read-only filesystem.
//!
//! Layers, imports only downward: [`io`] → [`mod@format`] → [`filters`] and [`cache`] →
//! [`layout`] → [`model`] → [`views`] → [`fs`] → daemon/cli (in the binary). Nothing below
//! `fs` knows about FUSE; the library is usable on its own (see [`model::File`] and
//! [`inspect`]).

#![forbid(unsafe_code)]

pub mod cache;
pub mod error;
pub mod filters;
pub mod format;
pub mod fs;
pub mod inspect;
pub mod io;
pub mod layout;
pub mod model;
mod panic_guard;
#[cfg(test)]
mod peak;
mod sync;
pub mod views;

pub use error::{Error, Result};
