# Helpers shared by bench/compare_*.sh (sourced; bash). They set:
#   PY        the Python with PyTorch (/usr/bin/python3)
#   TCMALLOC  libtcmalloc_minimal.so.4 for LD_PRELOAD, or empty
#   isa       avx512, avx2 or baseline, from /proc/cpuinfo's flags
#   coretype  the OPENBLAS_CORETYPE that PyTorch's OpenBLAS needs, or empty
PY=/usr/bin/python3
TCMALLOC=$(ls /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | head -1 || true)
[ -n "$TCMALLOC" ] || echo "note: libtcmalloc-minimal4 not installed; PyTorch runs without it" >&2

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
field() { sed -n "s/.*\"$1\": *\([0-9.eE+-]*\).*/\1/p"; }

# Prints the CPU, its vector ISA, cores and load, and aneforge's version (stderr); sets isa.
cpu_banner() {
    local af=$1 cpu_model flags
    cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
    flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
    isa=baseline
    case " $flags " in *" avx512f "*) isa=avx512 ;; *" avx2 "*) isa=avx2 ;; esac
    echo "cpu: ${cpu_model:-unknown} (isa: $isa, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null))" >&2
    env -i "$af" --version | sed -n 2p | sed 's/^/aneforge /' >&2
}

# Which OpenBLAS kernels PyTorch gets; when OpenBLAS cannot name the CPU, name the ISA
# (it would fall back to SSE3 kernels). Sets coretype (an explicit OPENBLAS_CORETYPE wins).
torch_coretype() {
    local core
    coretype=${OPENBLAS_CORETYPE:-}
    [ -z "$coretype" ] || return 0
    core=$(OPENBLAS_VERBOSE=2 "$PY" -c 'import torch; torch.ones(64, 64) @ torch.ones(64, 64)' 2>&1 |
        sed -n 's/^Core: //p' | head -1 || true)
    case "$core" in
        ""|SkylakeX|Cooperlake|SapphireRapids|Haswell|Zen) ;; # named, or not OpenBLAS
        *) case $isa in avx512) coretype=SkylakeX ;; avx2) coretype=Haswell ;; esac ;;
    esac
    echo "pytorch's openblas core: ${core:-n/a}${coretype:+ -> OPENBLAS_CORETYPE=$coretype}" >&2
}

# Runs a command as PyTorch at its best: passive OpenMP waits, tcmalloc, the coretype,
# and THREADS threads in OpenBLAS too (torch.set_num_threads does not reach the OpenBLAS
# under Debian's PyTorch: with --threads 1 its products still ran on every core).
torch_best() {
    env OMP_WAIT_POLICY=PASSIVE LD_PRELOAD="$TCMALLOC" ${coretype:+OPENBLAS_CORETYPE=$coretype} \
        ${THREADS:+OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS} "$@"
}
