# Session 7, call 12: gpu-core's local-buffer tests with the untyped and
# by-name launches added, plain and under memcheck.
set -u
(cd .gpu/s7 && python3 -c "import tarfile; tarfile.open('lt.tar.xz').extractall()")
KILN_REQUIRE_GPU=1 .gpu/s7/lt/t_local --test-threads 1 2>&1 | grep -E "^test |test result|panicked"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
KILN_REQUIRE_GPU=1 $CS --tool memcheck --error-exitcode 9 .gpu/s7/lt/t_local --test-threads 1 2>&1 | grep -E "ERROR SUMMARY|test result"; echo "memcheck rc=$?"
