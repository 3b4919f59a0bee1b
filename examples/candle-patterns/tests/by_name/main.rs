//! Every kernel family of the fixture launched by name on the GPU against
//! the CPU references, one binary (each test binary embeds every image, so
//! one binary keeps the GPU bundle small). Every GPU test is named
//! `by_name_*`: the bundle runs this binary under memcheck with API reports
//! on, in the step of launches by name.

mod elementwise;
mod families;
mod indexing;
