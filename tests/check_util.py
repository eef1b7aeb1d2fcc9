"""Shared by the Python checks (tests/check_*.py): failures counted by check(), the
result line and exit code from finish(), JSON-lines records read with Python's json."""
import json, sys

failures = 0


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", msg)


def finish(name):
    print("%s: %s" % (name, "all good" if not failures else "%d failures" % failures))
    sys.exit(1 if failures else 0)


def records(path):
    """The lines of a log that are JSON (others skipped)."""
    out = []
    for line in open(path, encoding="utf-8"):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out
