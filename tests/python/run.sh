#!/bin/sh
# ctest's python_tests: the pytest suite of the Python package against this build's
# libaneforge (ANEFORGE_LIBRARY) and the package's sources (PYTHONPATH), no install.
# Exits 77 (ctest reports SKIPPED) when python3, NumPy or pytest is missing.
# usage: run.sh SOURCE_DIR LIBANEFORGE PYTHON [CLI]
src=$1 lib=$2 py=${3:-python3} cli=$4
if ! command -v "$py" >/dev/null 2>&1; then echo "python_tests: skipped: no python3"; exit 77; fi
for m in numpy pytest; do
  if ! "$py" -c "import $m" >/dev/null 2>&1; then
    echo "python_tests: skipped: $py has no $m (apt-get install python3-$m, or pip install $m)"; exit 77
  fi
done
AF_CLI=$cli ANEFORGE_LIBRARY=$lib PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH} OPENBLAS_NUM_THREADS=1 \
  exec "$py" -m pytest -p no:cacheprovider -ra "$src/tests/python"
