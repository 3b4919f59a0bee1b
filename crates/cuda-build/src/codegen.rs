//! bindgen over the shared C headers (placeholder).
