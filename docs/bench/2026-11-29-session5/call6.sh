# Session 5, call 6: encode_gpu with the split test reading the first
# progress report, six times with parallel test threads, once on one.
(cd .gpu && python3 -c "import tarfile; tarfile.open('e6.tar.xz').extractall()")
for i in 1 2 3 4 5 6; do KILN_REQUIRE_GPU=1 .gpu/e6/t_encode_gpu 2>&1 | grep -E "^test result|panicked" -A2; done
KILN_REQUIRE_GPU=1 .gpu/e6/t_encode_gpu --test-threads=1 2>&1 | grep -E "^test result|panicked" -A2
