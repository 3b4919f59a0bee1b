//! kiln apps
fn main() {}
