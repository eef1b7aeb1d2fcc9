/* The training plans, one line each: X(name) stands for the tr_plan `tr_plan_<name>` that
 * the plan's own file (plan_<name>.c) defines. Adding a plan: its file and one line here;
 * its name then reaches af_plan_parse, af_plan_name and the CLI's --plan. */
#include "train/core.h"
#include "train/registry.h"

#include <stdio.h>
#include <string.h>

#define TR_PLANS(X) \
    X(host)         \
    X(device)       \
    X(resident)     \
    X(unrolled)     \
    X(pipeline)     \
    TR_TEST_PLANS(X)

#ifndef TR_TEST_PLANS /* tests/test_plan_registry.c adds its own plan's line through it */
#define TR_TEST_PLANS(X)
#endif
#define TR_DECLARE(name) extern const tr_plan tr_plan_##name;
#define TR_ENTRY(name) &tr_plan_##name,
TR_PLANS(TR_DECLARE)
static const tr_plan *const plans[] = { TR_PLANS(TR_ENTRY) };
enum { NPLANS = sizeof plans / sizeof plans[0] };

const tr_plan *tr_plan_for(af_plan id) {
    for (int i = 0; i < NPLANS; i++)
        if (plans[i]->id == id) return plans[i];
    return NULL;
}

const char *af_plan_name(af_plan p) {
    const tr_plan *pl = tr_plan_for(p);
    return pl ? pl->name : "?";
}

int af_plan_steps_per_call(const af_train_opts *opts) {
    const tr_plan *pl = opts ? tr_plan_for(opts->plan) : NULL;
    return !pl ? 0 : pl->caps & TR_UNROLLS ? opts->unroll : 1;
}

int af_plan_host_optimizer(af_plan p) {
    const tr_plan *pl = tr_plan_for(p);
    return pl && (pl->caps & TR_HOST_OPTIMIZER);
}

af_status af_plan_parse(const char *name, af_plan *out) {
    for (int i = 0; name && i < NPLANS; i++)
        if (!strcmp(name, plans[i]->name)) {
            if (out) *out = plans[i]->id;
            return AF_OK;
        }
    char names[256] = "";
    for (int i = 0; i < NPLANS; i++) {
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", i ? (i + 1 < NPLANS ? ", " : " or ") : "", plans[i]->name);
    }
    return ir_fail(AF_ERR_INVALID, "unknown plan '%s'; the plans are %s", name ? name : "(null)", names);
}
