//! Kernels declared from their definitions in candle's sources (`cargo kiln
//! codegen --sources`, no header written) are typed: a wrong argument type
//! does not compile. The expected diagnostics are in `tests/ui/*.stderr`
//! (refresh with `TRYBUILD=overwrite`, then review them).

#[test]
fn wrong_arguments_to_a_source_declared_kernel_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
