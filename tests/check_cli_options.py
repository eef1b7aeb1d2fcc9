#!/usr/bin/env python3
"""The CLI's option errors say what is wrong: an option the command does not have is
"unknown option", one it has but given last with no value "needs a value" (before, both
said "needs a value"); both exit 2. And `--target ane` where no Neural Engine framework
loads names the way out (ane-sim, or a framework binary).
usage: check_cli_options.py ANEFORGE"""
import os
import subprocess
import sys
import tempfile

cli = sys.argv[1]
fails = []


def run(args, env=None):
    e = dict(os.environ)
    e.pop("ANEFORGE_ANE_FRAMEWORK", None)
    e.update(env or {})
    p = subprocess.run([cli] + args, capture_output=True, text=True, env=e, timeout=120)
    return p.returncode, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""


CASES = [  # (command words, an option it has that takes a value)
    (["train", "mlp"], "--epochs"), (["train", "llama"], "--seq"), (["eval", "llama"], "--model"),
    (["generate"], "--model"), (["export"], "--out"), (["report"], "--out"), (["dashboard"], "--size"),
    (["op", "relu"], "--attr"),
]
for words, known in CASES:
    for opt, want in ((known, f"{known} needs a value"), ("--no-such-option", "unknown option --no-such-option")):
        rc, line = run(words + [opt])
        if rc != 2 or want not in line:
            fails.append(f"{' '.join(words)} {opt}: exit {rc}, {line!r}; wanted exit 2 and {want!r}")

with tempfile.TemporaryDirectory() as d:
    rc, line = run(["train", "mlp", "--data", "mnist", "--target", "ane", "--plan", "resident", "--epochs", "1"],
                   env={"ANEFORGE_ANE_FRAMEWORK": os.path.join(d, "no-such-framework.so")})
    for want in ("cannot use the Neural Engine", "ane-sim", "ANEFORGE_ANE_FRAMEWORK"):
        if want not in line:
            fails.append(f"--target ane without a framework: {line!r} lacks {want!r}")
    if rc != 1:
        fails.append(f"--target ane without a framework: exit {rc}, wanted 1")

for f in fails:
    print("FAIL:", f)
print(f"cli_options: {len(CASES) * 2 + 1 - len(fails)} passed, {len(fails)} failed")
sys.exit(1 if fails else 0)
