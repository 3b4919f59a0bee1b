//! Every kernel family of the fixture launched typed on the GPU against the
//! CPU references (`typed_*`, each kernel's marker generated from its
//! source), then by name (`by_name_*`: every kernel resolves, wrong lists
//! are refused), one binary (each test binary embeds every image, so one
//! binary keeps the GPU bundle small). The bundle runs it under memcheck
//! with API reports on: the typed tests in the main step, the by-name ones
//! in the step of launches by name.

mod elementwise;
mod families;
mod indexing;
mod quantized;
