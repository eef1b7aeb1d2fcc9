/* The Neural Engine runtime's diagnostics as public calls (aneforge.h): what `aneforge
 * doctor` reports, without the runtime's internal interface. */
#include "ane/darwin/ane_runtime.h"
#include "engine/family.h"
#include "ir/ir.h"

#include <string.h>

const char *af_ane_system_framework(void) { return ANE_RT_SYSTEM_FRAMEWORK; }

af_status af_ane_open(const char *framework_path) { return ane_rt_open(framework_path); }

af_status af_ane_device_info(af_ane_device *out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "af_ane_device_info: out is NULL");
    ane_rt_device d;
    af_status st = ane_rt_device_info(&d);
    memset(out, 0, sizeof *out);
    _Static_assert(sizeof out->chip == sizeof d.chip && sizeof out->model == sizeof d.model &&
                       sizeof out->subtype == sizeof d.subtype,
                   "the public device fields hold what the runtime reports");
    memcpy(out->chip, d.chip, sizeof out->chip);
    memcpy(out->model, d.model, sizeof out->model);
    memcpy(out->subtype, d.subtype, sizeof out->subtype);
    out->family = d.family;
    const ane_family_info *fi = ane_family_info_of(d.family);
    out->family_chips = fi ? fi->chips : NULL;
    out->compiles = ane_rt_compile_count();
    out->compile_budget = ane_rt_compile_budget();
    out->compile_entry = ane_rt_compile_entry();
    return st;
}
