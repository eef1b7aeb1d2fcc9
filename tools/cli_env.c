/* The environment variables the CLI understands. The library reads none: each is
 * mapped here onto the options it stands for.
 *   ANEFORGE_DATA             data directory (default ./data)
 *   ANEFORGE_TARGET           target when no --target is given ("ane-sim:m1", "ane")
 *   ANEFORGE_SIM_VIA_MIL=1    ane-sim runs every program through MIL
 *   ANEFORGE_PRECISION_CHECK=0  ane-sim's near-equal subtraction check off
 *   ANEFORGE_ANE_FRAMEWORK    the AppleNeuralEngine binary the ane target loads */
#include "cli_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

const char *cli_data_dir(void) {
    const char *d = env("ANEFORGE_DATA");
    return d ? d : "./data";
}

int cli_env_compile(af_compile_opts *o, bool target_given, char *err, size_t n) {
    const char *t = env("ANEFORGE_TARGET");
    if (t && !target_given && af_target_parse(t, &o->target, &o->family) != AF_OK) {
        snprintf(err, n, "ANEFORGE_TARGET='%s' is not a target: use cpu, ane-sim[:m1..m5] or ane[:FAM] (or unset it)", t);
        return 1;
    }
    const char *v = env("ANEFORGE_SIM_VIA_MIL");
    if (v && !strcmp(v, "1") && o->via_mil == AF_DEFAULT) o->via_mil = AF_ON;
    const char *p = env("ANEFORGE_PRECISION_CHECK");
    if (p && !strcmp(p, "0")) o->precision_check = AF_OFF;
    if (o->target == AF_TARGET_ANE && !o->ane_framework) o->ane_framework = env("ANEFORGE_ANE_FRAMEWORK");
    return 0;
}
