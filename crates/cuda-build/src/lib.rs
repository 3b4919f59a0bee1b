//! cuda-build
