/* `mpirun -np 2 aneforge train mlp --distributed` over loopback (tools/train_dist.c,
 * src/train/dist_mpi.c): the parameters after 10 Adam steps equal one process's with the
 * doubled batch to 1e-6 relative; its checkpoint resumes in one process; a rank killed
 * mid-run stops the other within the timeout with a message, leaving a valid checkpoint.
 * Reports a skip (77) where the build has no MPI. */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "support/cli_run.h"
#include "train/ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#ifdef AF_MPIEXEC
/* Loopback only, oversubscribed on small machines, as root in CI; bounded by timeout. */
#define MPIRUN "timeout 120 " AF_MPIEXEC " -np 2 --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo " \
               "--mca oob_tcp_if_include lo "

static double max_rel(const char *a, const char *b) {
    ckpt *ca = NULL, *cb = NULL;
    double num = 0, den = 0;
    if (ckpt_load(a, &ca) || ckpt_load(b, &cb)) { ckpt_free(ca); return 1e9; }
    int64_t np = 0;
    ckpt_get_i64(ca, "trainer.nparams", &np);
    for (int i = 0; i < np; i++) {
        char name[32];
        snprintf(name, sizeof name, "param.%d", i);
        int64_t na = 0, nb = 0;
        const float *pa = ckpt_get(ca, name, &na), *pb = ckpt_get(cb, name, &nb);
        if (!pa || !pb || na != nb) { num = 1e9; break; }
        for (int64_t j = 0; j < na / 4; j++) {
            num += ((double)pa[j] - pb[j]) * ((double)pa[j] - pb[j]);
            den += (double)pb[j] * pb[j];
        }
    }
    ckpt_free(ca);
    ckpt_free(cb);
    return np ? sqrt(num / den) : 1e9;
}


/* Runs cmd with its output in a file (a long run's progress lines never fill a pipe);
 * out gets the output's last cap - 1 bytes; returns system()'s status. */
static int run_job(const char *cmd, char *out, size_t cap) {
    char full[2300];
    snprintf(full, sizeof full, "%s > dist_job.txt 2>&1", cmd);
    int rc = system(full);
    size_t len = 0;
    char *text = test_read_file("dist_job.txt", &len);
    size_t from = len >= cap ? len - cap + 1 : 0;
    snprintf(out, cap, "%s", text ? text + from : "");
    free(text);
    return rc;
}

int main(void) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    setenv("ANEFORGE_DATA", AF_SOURCE_DIR "/data", 1);
    static char out[1 << 16];
    char cmd[2048];
    const char *common = "train mlp --data mnist --limit 640 --epochs 1 --threads 1 --schedule constant --optimizer adam";
    remove("dist_one.ckpt"), remove("dist_two.ckpt"), remove("dist_kill.ckpt");
    snprintf(cmd, sizeof cmd, "%s --batch 64 --save dist_one.ckpt --json", common);
    int rc = cli_run(cmd, 1, out, sizeof out);
    CHECK(rc == 0, "one process: rc %d: %s", rc, out);
    CHECK(strstr(out, "\"steps\":10,"), "one process: 10 steps: %s", out);
    /* Two ranks of batch 32: the same global batches. */
    snprintf(cmd, sizeof cmd, "%s %s %s --batch 32 --save dist_two.ckpt --distributed --json", MPIRUN, AF_CLI, common);
    rc = run_job(cmd, out, sizeof out);
    CHECK(rc == 0, "mpirun -np 2: status %d: %s", rc, out);
    CHECK(strstr(out, "\"ranks\":2") && strstr(out, "gradients averaged before every step"), "rank 0's report: %s", out);
    double d = max_rel("dist_two.ckpt", "dist_one.ckpt");
    CHECK(d <= 1e-6, "2 ranks x batch 32 vs 1 process x batch 64 after 10 Adam steps: %.3g relative", d);
    /* The two ranks' checkpoint resumes in one process. */
    snprintf(cmd, sizeof cmd, "train mlp --data mnist --limit 640 --epochs 2 --threads 1 --batch 64 --resume dist_two.ckpt --json");
    rc = cli_run(cmd, 1, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "\"steps\":10,"), "resume on 1 rank: rc %d: %s", rc, out);
    /* llama on the host and pipeline plans: 2 ranks of 4 windows against one process of 8. */
    FILE *tf = fopen("dist_tok.bin", "wb");
    unsigned long long rs = 1;
    unsigned short tok = 0;
    for (int i = 0; tf && i < 20000; i++) {
        rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
        tok = (unsigned short)((tok * 5 + 1 + (rs >> 33) % 3) % 64);
        fwrite(&tok, 2, 1, tf);
    }
    CHECK(tf && fclose(tf) == 0, "token file");
    const char *plans[] = { "host", "pipeline" };
    for (int k = 0; k < 2; k++) {
        const char *lc = "train llama --config tiny --data dist_tok.bin --seq 16 --steps 10 --threads 1 --schedule constant --plan";
        snprintf(cmd, sizeof cmd, "%s %s --batch 8 --save dist_l1.ckpt", lc, plans[k]);
        rc = cli_run(cmd, 1, out, sizeof out);
        CHECK(rc == 0, "llama %s, one process: rc %d: %s", plans[k], rc, out);
        snprintf(cmd, sizeof cmd, "%s %s %s %s --batch 4 --save dist_l2.ckpt --distributed", MPIRUN, AF_CLI, lc, plans[k]);
        rc = run_job(cmd, out, sizeof out);
        CHECK(rc == 0, "llama %s, mpirun -np 2: status %d: %s", plans[k], rc, out);
        d = max_rel("dist_l2.ckpt", "dist_l1.ckpt");
        CHECK(d <= 1e-6, "llama %s: 2 ranks x 4 vs 1 process x 8 after 10 Adam steps: %.3g relative", plans[k], d);
    }
    /* Rank 1 killed (SIGKILL) once rank 0 has saved a checkpoint, in a long run: rank 0 stops (mpirun's
     * message or ours), well within the timeout, and the checkpoint is whole. */
    snprintf(cmd, sizeof cmd, "%s sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then (while [ ! -f dist_kill.ckpt ]; do sleep 0.2; done; sleep 0.5; kill -9 $$) & fi; exec %s train mlp "
             "--data mnist --limit 640 --epochs 100000 --threads 1 --batch 32 --save dist_kill.ckpt --distributed --dist-timeout 10'",
             MPIRUN, AF_CLI);
    rc = run_job(cmd, out, sizeof out);
    CHECK(rc != 0 && WEXITSTATUS(rc) != 124, "killed rank: the job must stop by itself, not by the test's timeout (status %d)", rc);
    CHECK(strstr(out, "signal 9") || strstr(out, "no answer from the other ranks"), "killed rank: a message naming it: %s", out);
    /* Rank 1 stopped (SIGSTOP: alive, silent): rank 0's own timeout (5 s) names it and
     * ends the job. */
    snprintf(cmd, sizeof cmd, "%s sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then (sleep 2; kill -STOP $$) & fi; exec %s train mlp "
             "--data mnist --limit 640 --epochs 100000 --threads 1 --batch 32 --distributed --dist-timeout 5'",
             MPIRUN, AF_CLI);
    rc = run_job(cmd, out, sizeof out);
    CHECK(rc != 0 && WEXITSTATUS(rc) != 124, "stopped rank: the job must end by itself (status %d)", rc);
    CHECK(strstr(out, "rank 0: ") && strstr(out, "no answer from the other ranks to ") && strstr(out, "within 5 s"),
          "stopped rank: rank 0 names it: %s", out);
    ckpt *c = NULL;
    CHECK(ckpt_load("dist_kill.ckpt", &c) == AF_OK, "the last checkpoint stays valid: %s", af_error_message());
    ckpt_free(c);
    return check_finish("dist_mpi");
}
#else
int main(void) {
    printf("skipped: this build has no MPI (install libopenmpi-dev openmpi-bin and reconfigure)\n");
    return 77;
}
#endif
