# Session 7, call 8: this session's last build (`fin`, 74ba94f) against main
# before the session (`base`): the encode of 4 x 1M x 768 f32 beside the
# read rate and encode_anchor.py; the anneal's setup at 1M x 768 x 4096; the
# encode and library GPU tests of fin.
set -u
(cd .gpu/s7 && for t in base fin; do python3 -c "import tarfile; tarfile.open('$t.tar.xz').extractall()"; done)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in t_encode_gpu t_kiln_anneal; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 120 .gpu/s7/fin/$t --test-threads 1 2>&1 | grep -E "^test result|panicked|FAILED" | head -6; done 2>&1 | tee $OUT/tests.log
E=/tmp/enc; python3 .gpu/encgen.py $E 4 1000000 768 >/dev/null
X="$E/x0.npy $E/x1.npy $E/x2.npy $E/x3.npy"
.gpu/s7/fin/apps anneal --npy $E/x0.npy --m 4422 --iters 2 --tol 0 --backend cuda --out $E/idx 2>&1 | tail -1
cat $X > /dev/null
python3 .gpu/bw.py $X 2>&1 | tee $OUT/bw.log
for rep in 1 2 3; do for b in base fin; do
  echo "ENC $b $rep $( /usr/bin/time -f 'rss %M KB' .gpu/s7/$b/apps encode $E/idx --npy $X --out $E/o_$b.npy --force --backend cuda 2>&1 | grep -E 'points in|stages|rss' | tr '\n' ' ')"
done; cmp -s $E/o_base.npy $E/o_fin.npy && echo "SAME encode $rep" || echo "DIFF encode $rep"
  python3 .gpu/anchors/encode_anchor.py $E/idx/anchors.npy $X 2>&1 | tail -1
done 2>&1 | tee $OUT/enc.log
python3 .gpu/bw.py $X 2>&1 | tee -a $OUT/bw.log
for rep in 1 2 3; do for b in base fin; do
  echo "SETUP $b $rep $(.gpu/s7/$b/apps anneal --npy $E/x1.npy --m 4096 --iters 10 --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E '^whole run')"
done; cmp -s /tmp/o_base/assignments.npy /tmp/o_fin/assignments.npy && cmp -s /tmp/o_base/anchors.npy /tmp/o_fin/anchors.npy && echo "SAME anneal $rep" || echo "DIFF anneal $rep"; done 2>&1 | tee $OUT/setup.log
