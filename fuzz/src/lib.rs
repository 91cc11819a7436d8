//! What the fuzz targets share: the window-math driver (two targets: a
//! monotone clock, and a clock that sometimes steps back) and the checks of
//! the path normaliser. Each target in `fuzz_targets/` is a few lines that
//! call in here.

pub mod path_normalise;
pub mod window_math;
