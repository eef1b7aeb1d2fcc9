"""The simulated Neural Engine's budgets and cost model (ane-sim)."""
import ctypes

from . import _cdefs
from ._lib import Handle, check, lib, parse_target


class SimEngine(Handle):
    """One simulated engine as one process sees it: its own program cache and compile
    budget (af_sim_engine). Pass it to af.compile(..., sim_engine=e) or a Trainer."""
    _free = "af_sim_engine_free"
    _kind = "sim engine"

    def __init__(self):
        super().__init__(lib.af_sim_engine_new())

    def budget(self):
        """compiles, compile_limit, cache_hits, cached, loaded, load_limit, loads, evictions."""
        b = _cdefs.af_ane_budget_info()
        lib.af_ane_budget(self.ptr, ctypes.byref(b))
        return {f: getattr(b, f) for f, _ in b._fields_}

    def set_limits(self, compile_limit=0, load_limit=0):
        """Sets the compile and load limits (<= 0 restores 119 / 128)."""
        lib.af_ane_budget_set_limits(self.ptr, int(compile_limit), int(load_limit))

    def reset(self):
        """Forgets every cached program and zeroes the counters, as a process restart would."""
        lib.af_ane_budget_reset(self.ptr)


def precision_flags():
    """Near-equal user subtractions flagged so far by ane-sim's precision check."""
    return lib.af_ane_precision_flags()


def estimate_us(target, stats):
    """Estimated on-device microseconds for a Stats (af_ane_estimate_us), e.g. "ane-sim:m1"."""
    fam = parse_target(target)[1] if isinstance(target, str) else int(target)
    s = _cdefs.af_stats()
    d = stats.as_dict() if hasattr(stats, "as_dict") else dict(stats)
    for k, v in d.items():
        setattr(s, k, int(v))
    return lib.af_ane_estimate_us(fam, ctypes.byref(s))
