#!/usr/bin/env python3
"""Runs a build's test programs on another x86-64 CPU model under qemu-x86_64 (user mode).

The kernels are chosen from the CPU's features at run time (AVX-512, AVX2+FMA, plain C,
and the target_clones copies of the hot loops), so a machine only ever tests its own
path. qemu can present an older CPU: Haswell (AVX2+FMA, x86-64-v3) or Nehalem (no AVX,
the baseline paths). Every ctest case whose command is one of the build's programs runs
under `qemu-x86_64 -cpu MODEL` with the case's environment and directory; cases that are
scripts are left out (the CLI they start would run on the real CPU). Programs the tests
start themselves (the CLI) also run on the real CPU.

  python3 tests/qemu_cpu.py BUILD_DIR MODEL [JOBS]     e.g. build Haswell 2
Needs qemu-user (apt-get install -y qemu-user). Exit status 1 when a case fails.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import time


def cases(build):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True, capture_output=True).stdout
    for t in json.loads(out)["tests"]:
        cmd = t.get("command") or []
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        if not props.get("DISABLED") and cmd and os.path.realpath(cmd[0]).startswith(os.path.realpath(build) + os.sep):
            yield t["name"], cmd, props


def run(model, name, cmd, props):
    env = dict(os.environ)
    for kv in props.get("ENVIRONMENT", []):
        k, _, v = kv.partition("=")
        env[k] = v
    limit = 10 * float(props.get("TIMEOUT", 300))  # emulated: 10-30x slower
    t0 = time.time()
    try:
        p = subprocess.run(["qemu-x86_64", "-cpu", model] + cmd, cwd=props.get("WORKING_DIRECTORY"), env=env,
                           capture_output=True, timeout=limit)
        out = (p.stdout + p.stderr).decode("utf-8", "replace")
        lines = [l for l in out.splitlines() if "TCG doesn't support" not in l]
        skipped = any(s in out for s in props.get("SKIP_REGULAR_EXPRESSION", []) or []) if p.returncode == 0 else False
        status = "skipped" if skipped else "passed" if p.returncode == 0 else f"FAILED (exit {p.returncode})"
        return name, status, time.time() - t0, "\n".join(lines[-30:])
    except subprocess.TimeoutExpired:
        return name, f"FAILED (over {limit:.0f} s)", time.time() - t0, ""


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, model = sys.argv[1], sys.argv[2]
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count() or 1
    probe = subprocess.run(["qemu-x86_64", "-cpu", model, os.path.join(build, "aneforge"), "--version"],
                           capture_output=True, text=True)
    if probe.returncode:
        sys.exit(f"qemu-x86_64 -cpu {model} cannot run {build}/aneforge: {probe.stderr.strip()}")
    print(f"{model}: {probe.stdout.strip().splitlines()[-1]}", flush=True)
    todo = list(cases(build))
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for name, status, secs, tail in pool.map(lambda c: run(model, *c), todo):
            print(f"{model}: {name:32s} {status} ({secs:.0f} s)", flush=True)
            if status.startswith("FAILED"):
                failed += 1
                print(tail, flush=True)
    print(f"{model}: {len(todo) - failed} of {len(todo)} cases passed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
