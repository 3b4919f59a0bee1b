//! What must not compile: kernel arguments of a wrong count, type or
//! mutability for the kernel's C declaration (`tests/ui/wrong_*.rs`), and
//! buffers touched, moved or dropped while an asynchronous copy's guard
//! borrows them (`tests/ui/*_while_*.rs`). The expected diagnostics are in
//! `tests/ui/*.stderr` (refresh with `TRYBUILD=overwrite`, then review them).

#[test]
fn wrong_kernel_arguments_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/wrong_*.rs");
}

#[test]
fn buffers_cannot_be_touched_while_a_copy_uses_them() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*_while_*.rs");
}
