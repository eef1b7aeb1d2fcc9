#define _POSIX_C_SOURCE 200809L
/* The MPI transport for dist.h (AF_HAVE_MPI: CMake's -DAF_MPI=ON found an MPI). Every
 * collective is nonblocking and polled against a deadline: a rank that died leaves the
 * others with an error that says so instead of a hang (Open MPI's launcher usually ends
 * them first). Without MPI, af_dist_mpi says how to get it. */
#include "train/dist.h"

#ifdef AF_HAVE_MPI
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

static int owns_init; /* MPI_Init was ours, so MPI_Finalize is too */

/* Polls req until done or timeout_s: sleeps a little between tests after the first
 * millisecond, so a waiting rank leaves the core to the one it waits for. */
static af_status wait_req(MPI_Request *req, double timeout_s, const char *what) {
    double t0 = tr_now_s();
    for (long polls = 0;; polls++) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return ir_fail(AF_ERR_IO, "dist: MPI %s failed; a rank has probably stopped", what);
        if (done) return AF_OK;
        double el = tr_now_s() - t0;
        if (el > timeout_s)
            return ir_fail(AF_ERR_IO, "dist: no answer from the other ranks to %s within %.0f s; a rank has stopped or hangs. "
                           "The last checkpoint is valid: resume it with --resume on the ranks that remain", what, timeout_s);
        if (el > 1e-3) nanosleep(&(struct timespec){ 0, polls & 1 ? 20000 : 5000 }, NULL);
    }
}

static af_status mpi_allreduce_f32(void *ctx, float *buf, int64_t n, double timeout_s) {
    (void)ctx;
    for (int64_t off = 0; off < n;) { /* MPI counts are int */
        int c = n - off > (1 << 30) ? 1 << 30 : (int)(n - off);
        MPI_Request r;
        if (MPI_Iallreduce(MPI_IN_PLACE, buf + off, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r) != MPI_SUCCESS)
            return ir_fail(AF_ERR_IO, "dist: MPI_Iallreduce failed");
        af_status st = wait_req(&r, timeout_s, "the gradient all-reduce");
        if (st) return st;
        off += c;
    }
    return AF_OK;
}

static af_status mpi_allreduce_f64(void *ctx, double *buf, int n, af_dist_op op, double timeout_s) {
    (void)ctx;
    MPI_Op mop = op == AF_DIST_MIN ? MPI_MIN : op == AF_DIST_MAX ? MPI_MAX : MPI_SUM;
    MPI_Request r;
    if (MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, mop, MPI_COMM_WORLD, &r) != MPI_SUCCESS)
        return ir_fail(AF_ERR_IO, "dist: MPI_Iallreduce failed");
    return wait_req(&r, timeout_s, "an all-reduce");
}

static af_status mpi_bcast_f32(void *ctx, float *buf, int64_t n, double timeout_s) {
    (void)ctx;
    for (int64_t off = 0; off < n;) {
        int c = n - off > (1 << 30) ? 1 << 30 : (int)(n - off);
        MPI_Request r;
        if (MPI_Ibcast(buf + off, c, MPI_FLOAT, 0, MPI_COMM_WORLD, &r) != MPI_SUCCESS) return ir_fail(AF_ERR_IO, "dist: MPI_Ibcast failed");
        af_status st = wait_req(&r, timeout_s, "the broadcast of rank 0's state");
        if (st) return st;
        off += c;
    }
    return AF_OK;
}

static af_status mpi_start_f32(void *ctx, float *buf, int64_t n, void **req) {
    (void)ctx;
    MPI_Request *r = malloc(sizeof *r);
    if (!r) return ir_fail(AF_ERR_NOMEM, "dist: out of memory");
    if (n > INT_MAX || MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, r) != MPI_SUCCESS) {
        free(r);
        return ir_fail(AF_ERR_IO, "dist: MPI_Iallreduce failed"); /* also past INT_MAX: the caller sums it in pieces */
    }
    *req = r;
    return AF_OK;
}

static int mpi_test(void *ctx, void *req) {
    (void)ctx;
    int done = 0;
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    return done;
}

static af_status mpi_wait(void *ctx, void *req, double timeout_s) {
    (void)ctx;
    af_status st = wait_req(req, timeout_s, "the gradient all-reduce");
    free(req);
    return st;
}

static void mpi_abort(void *ctx, int code) {
    (void)ctx;
    MPI_Abort(MPI_COMM_WORLD, code);
}

static void mpi_free(void *ctx) {
    (void)ctx;
    int fin = 0;
    MPI_Finalized(&fin);
    if (owns_init && !fin) MPI_Finalize();
}

static const tr_dist_ops mpi_ops = { mpi_allreduce_f32, mpi_allreduce_f64, mpi_bcast_f32, mpi_start_f32, mpi_test, mpi_wait, mpi_abort, mpi_free };

af_dist *af_dist_mpi(double timeout_s) {
    int inited = 0, rank = 0, size = 1;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
            ir_fail(AF_ERR_IO, "af_dist_mpi: MPI_Init failed; start the ranks with mpirun");
            return NULL;
        }
        owns_init = 1;
    }
    /* Errors come back as codes (then messages from us), not as MPI's own abort. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return tr_dist_new(&mpi_ops, NULL, rank, size, timeout_s);
}
#else
af_dist *af_dist_mpi(double timeout_s) {
    (void)timeout_s;
    ir_fail(AF_ERR_UNSUPPORTED, "af_dist_mpi: this aneforge was built without MPI; install an MPI (Debian: libopenmpi-dev "
            "openmpi-bin; macOS: brew install open-mpi) and rebuild with cmake -DAF_MPI=ON");
    return NULL;
}
#endif
