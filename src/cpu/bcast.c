#include "cpu/bcast.h"

void cpu_bcast_init(cpu_bcast *b, af_shape out, int nops, const af_shape *ins) {
    int r = out.rank;
    int64_t dim[AF_MAX_RANK], st[CPU_BCAST_MAX_OPS][AF_MAX_RANK];
    for (int k = 0; k < nops; k++) {
        int64_t s = 1;
        for (int i = r - 1; i >= 0; i--) {
            int j = i - (r - ins[k].rank);
            int64_t d = j >= 0 ? ins[k].dim[j] : 1;
            st[k][i] = d == 1 ? 0 : s;
            s *= d;
        }
    }
    for (int i = 0; i < r; i++) dim[i] = out.dim[i];
    /* Drop size-1 axes, then merge axis i into i+1 when every operand is contiguous across them. */
    int n = 0;
    int64_t md[AF_MAX_RANK], ms[CPU_BCAST_MAX_OPS][AF_MAX_RANK];
    for (int i = 0; i < r; i++) {
        if (dim[i] == 1) continue;
        if (n > 0) {
            bool merge = true;
            for (int k = 0; k < nops; k++)
                if (ms[k][n - 1] != st[k][i] * dim[i]) merge = false;
            if (merge) {
                md[n - 1] *= dim[i];
                for (int k = 0; k < nops; k++) ms[k][n - 1] = st[k][i];
                continue;
            }
        }
        md[n] = dim[i];
        for (int k = 0; k < nops; k++) ms[k][n] = st[k][i];
        n++;
    }
    if (n == 0) {
        md[0] = 1;
        for (int k = 0; k < nops; k++) ms[k][0] = 0;
        n = 1;
    }
    b->rank = n;
    b->nops = nops;
    for (int i = 0; i < n; i++) {
        b->dim[i] = md[i];
        for (int k = 0; k < nops; k++) b->st[k][i] = ms[k][i];
    }
}

int64_t cpu_bcast_rows(const cpu_bcast *b) {
    int64_t rows = 1;
    for (int i = 0; i < b->rank - 1; i++) rows *= b->dim[i];
    return rows;
}

void cpu_bcast_row(const cpu_bcast *b, int64_t row, int64_t *off) {
    for (int k = 0; k < b->nops; k++) off[k] = 0;
    for (int i = b->rank - 2; i >= 0; i--) {
        int64_t idx = row % b->dim[i];
        row /= b->dim[i];
        for (int k = 0; k < b->nops; k++) off[k] += idx * b->st[k][i];
    }
}
