//! Kernels declared by their definitions in the sources (codegen's
//! `sources`, no header written) are typed like a header's: a wrong argument
//! type does not compile. The expected diagnostics are in `tests/ui/*.stderr`
//! (refresh with `TRYBUILD=overwrite`, then review them).

#[test]
fn wrong_arguments_to_a_source_declared_kernel_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
