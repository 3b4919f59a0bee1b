//! Kernel arguments are typed by the kernel's C declaration: a wrong count,
//! type or mutability does not compile. The expected diagnostics are in
//! `tests/ui/*.stderr` (refresh with `TRYBUILD=overwrite`, then review them).

#[test]
fn wrong_kernel_arguments_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
