#!/usr/bin/env bash
# A stand-in for nvcc, for cuda-build's rebuild tests (tests/rebuild.rs): it
# answers the queries toolkit discovery makes, and logs each step it is asked
# for to $FAKE_NVCC_LOG:
# - a compile (`-fatbin`, `-c`, `-dc`): `compile <source basename>`; writes
#   the output (naming the kernels it defines), a make-style depfile listing
#   the source and every header it includes (`#include "x.h"`, searched like
#   nvcc: the including file's dir, then the -I dirs, recursively), and, with
#   --resource-usage, ptxas's resource report on stderr;
# - a device link (`-dlink`): `dlink <output basename>`; writes the output and
#   nvlink's resource report for the kernels its objects define;
# - a library (`-lib`): `lib <output basename>`; writes an empty archive.
# A fat binary (`-fatbin`) is a well-formed container holding one SASS entry
# (an ELF payload) per `code=sm_X` and, for a compile, one PTX entry per
# `code=compute_X`, each payload carrying the text the old fake wrote.
# A source containing `--fail-on-purpose` fails like a compile error; a host
# compiler (`-ccbin X`) whose file contains `unsupported-host-compiler` is
# refused as nvcc refuses an unsupported GCC. With $FAKE_NVCC_COMMANDS set,
# every command line is appended to that file too. `--version` anywhere
# prints the version and writes nothing, as nvcc does. $FAKE_NVCC_VERSION
# (default 13.0.88) is the version it reports, as another toolkit would, and
# $FAKE_NVCC_RELEASE (default 13.0) the release (`release 13.5, V13.5.37`);
# where that is set, each output's text names it, so that another toolkit's
# bytes differ.
set -euo pipefail

archs="75 80 86 87 88 89 90 100 103 110 120 121"
first=${1-}
# nvcc answers --version wherever it stands, and writes nothing else.
case " $* " in *" --version "*) first=--version ;; esac
case "$first" in
--version)
    echo 'nvcc: NVIDIA (R) Cuda compiler driver'
    echo "Cuda compilation tools, release ${FAKE_NVCC_RELEASE:-13.0}, V${FAKE_NVCC_VERSION:-13.0.88}"
    echo 'Build cuda_13.0.r13.0/compiler.36424714_0 (fake)'
    exit 0
    ;;
--list-gpu-code)
    for a in $archs; do echo "sm_$a"; done
    exit 0
    ;;
--list-gpu-arch)
    for a in $archs; do echo "compute_$a"; done
    exit 0
    ;;
esac

command_line="$*"
if [ -n "${FAKE_NVCC_COMMANDS-}" ]; then
    echo "nvcc $command_line" >>"$FAKE_NVCC_COMMANDS"
fi
step=compile output='' depfile='' ccbin='' resources=no
inputs=() includes=() sass=() ptx=() fatbin=no
while [ $# -gt 0 ]; do
    case "$1" in
    -dlink) step=dlink ;;
    -fatbin) fatbin=yes ;;
    -lib) step=lib ;;
    -ccbin) ccbin=$2; shift ;;
    -Xcompiler) shift ;;
    -o) output=$2; shift ;;
    -MF) depfile=$2; shift ;;
    -I*) includes+=("${1#-I}") ;;
    -gencode=*,code=sm_*) sass+=("sm_${1##*,code=sm_}") ;;
    -gencode=*,code=compute_*) ptx+=("compute_${1##*,code=compute_}") ;;
    --resource-usage) resources=yes ;;
    -*) ;;
    *) inputs+=("$1") ;;
    esac
    shift
done
if [ -z "$output" ] || [ ${#inputs[@]} -eq 0 ]; then
    echo "fake nvcc: expected -o <output> <inputs>, got: $command_line" >&2
    exit 2
fi

if [ -n "$ccbin" ] && grep -q 'unsupported-host-compiler' "$ccbin"; then
    echo "/fake/cuda/include/crt/host_config.h:143:2: error: #error -- unsupported GNU version! gcc versions later than 13 are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check; however, using an unsupported host compiler may cause compilation failure or incorrect run time execution. Use at your own risk." >&2
    echo "  143 | #error -- unsupported GNU version! gcc versions later than 13 are not supported!" >&2
    exit 1
fi

# Prints $1 as $2 little-endian bytes.
le() {
    local i
    for ((i = 0; i < $2; i++)); do
        printf "\\x$(printf %02x $((($1 >> (8 * i)) & 255)))"
    done
}
# Prints one fat binary entry: kind $1 (1 PTX, 2 SASS), arch $2 (sm_90a,
# compute_90), payload $3 (padded to 8 bytes).
entry() {
    local number=${2#*_} flags=17
    case "$number" in
    *a) flags=$((flags | 0x100000)) number=${number%a} ;;
    *f) flags=$((flags | 0x200000)) number=${number%f} ;;
    esac
    local padded=$(((${#3} + 7) / 8 * 8))
    le "$1" 2; le 257 2; le 64 4; le "$padded" 8; le 0 4; le 0 4
    le 0 4; le "$number" 4; le 0 8; le "$flags" 8; le 0 16
    printf '%s' "$3"
    printf '%*s' $((padded - ${#3})) '' | tr ' ' '\0'
}
# Writes $output as a fat binary of SASS for every arch of sass and, with
# $2 = yes, PTX for every arch of ptx, each payload holding $1.
write_fatbin() {
    local body arch size
    body=$(mktemp)
    for arch in ${sass[@]+"${sass[@]}"}; do entry 2 "$arch" $'\x7fELF\n'"$1" >>"$body"; done
    if [ "$2" = yes ]; then
        for arch in ${ptx[@]+"${ptx[@]}"}; do entry 1 "$arch" "$1" >>"$body"; done
    fi
    size=$(wc -c <"$body")
    { printf '\x50\xed\x55\xba'; le 1 2; le 16 2; le "$size" 8; cat "$body"; } >"$output"
    rm -f "$body"
}

case "$step" in
dlink)
    echo "dlink $(basename "$output")" >>"$FAKE_NVCC_LOG"
    kernels=$(sed -n 's/^kernels: //p' "${inputs[@]}")
    text=$(printf 'fake device link of %s for %s%s\n' "${inputs[*]}" "${sass[*]-}" "${FAKE_NVCC_RELEASE:+ (release $FAKE_NVCC_RELEASE)}")
    if [ "$fatbin" = yes ]; then
        # The device link keeps SASS only.
        write_fatbin "$text" no
    else
        echo "$text" >"$output"
    fi
    if [ "$resources" = yes ]; then
        for arch in ${sass[@]+"${sass[@]}"}; do
            for kernel in $kernels; do
                echo "nvlink info    : Function properties for '$kernel': (target: $arch)" >&2
                echo "nvlink info    : used 8 registers, used 0 barriers, 0 stack, 0 bytes smem, 360 bytes cmem[0], 0 bytes lmem (target: $arch)" >&2
            done
        done
    fi
    exit 0
    ;;
lib)
    echo "lib $(basename "$output")" >>"$FAKE_NVCC_LOG"
    # An empty archive: rustc reads what it bundles into an rlib.
    printf '!<arch>\n' >"$output"
    exit 0
    ;;
esac

source=${inputs[${#inputs[@]}-1]}
if [ -z "$depfile" ]; then
    echo "fake nvcc: expected -MF <depfile> for a compile, got: $command_line" >&2
    exit 2
fi
echo "compile $(basename "$source")" >>"$FAKE_NVCC_LOG"

if grep -q -e '--fail-on-purpose' "$source"; then
    echo "$source(1): error: this source asks to fail (--fail-on-purpose)" >&2
    echo "1 error detected in the compilation of \"$source\"." >&2
    exit 1
fi

deps=()
# Prints where `#include "$1"` in a file of dir $2 resolves to, or nothing.
resolve() {
    local dir
    for dir in "$2" ${includes[@]+"${includes[@]}"}; do
        if [ -f "$dir/$1" ]; then
            echo "$dir/$1"
            return
        fi
    done
}
# Adds every header $1 includes, and theirs, to deps.
visit() {
    local name found
    for name in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1"); do
        found=$(resolve "$name" "$(dirname "$1")")
        if [ -z "$found" ]; then
            echo "$1(1): fatal error: $name: No such file or directory" >&2
            exit 1
        fi
        case " ${deps[*]-} " in *" $found "*) continue ;; esac
        deps+=("$found")
        visit "$found"
    done
}
visit "$source"

{
    printf '%s :' "${output// /\\ }"
    for file in "$source" ${deps[@]+"${deps[@]}"}; do
        printf ' \\\n    %s' "${file// /\\ }"
    done
    printf '\n'
} >"$depfile"

kernels=$(sed -n 's/.*__global__[[:space:]][[:space:]]*void[[:space:]][[:space:]]*\([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' "$source")
text=$(
    printf 'fake output of %s for %s%s\n' "$(basename "$source")" "${sass[*]-}" "${FAKE_NVCC_RELEASE:+ (release $FAKE_NVCC_RELEASE)}"
    echo "kernels: $(echo $kernels)"
)
if [ "$fatbin" = yes ]; then
    write_fatbin "$text"$'\n' yes
else
    echo "$text" >"$output"
fi

if [ "$resources" = yes ]; then
    for arch in ${sass[@]+"${sass[@]}"}; do
        echo "ptxas info    : 0 bytes gmem" >&2
        for kernel in $kernels; do
            echo "ptxas info    : Compiling entry function '$kernel' for '$arch'" >&2
            echo "ptxas info    : Function properties for $kernel" >&2
            echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" >&2
            echo "ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]" >&2
        done
    done
fi
exit 0
