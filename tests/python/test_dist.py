"""Data-parallel training from Python (Dist, Trainer.set_distributed): bad input, and
mpirun -np 2 over loopback against one process with the doubled batch (skipped where
there is no mpirun or the library has no MPI)."""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import aneforge as af

SCRIPT = textwrap.dedent("""
    import sys, numpy as np, aneforge as af
    n = int(sys.argv[1])
    try:
        d = af.Dist(timeout_s=30) if n > 1 else None
    except af.Error as e:
        print("nompi", e); sys.exit(0)
    g = af.Graph()
    w0 = np.random.default_rng(3).standard_normal((6, 3)).astype(np.float32) * 0.3
    tr = af.Trainer(lambda P, xb: xb @ P[0], [g.parameter("w", w0)], sample=(6,), out_dim=3, batch=8 // n,
                    lr=1e-2, threads=1, precision="fp32")
    if d is not None:
        tr.set_distributed(d)
    rng = np.random.default_rng(7)
    for s in range(10):
        x = rng.standard_normal((8, 6)).astype(np.float32)
        y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
        tr.step(d.shard(x) if d else x, d.shard(y) if d else y)
    if d is None or d.rank == 0:
        np.save(sys.argv[2], tr.params()[0])
    tr.close()
    if d is not None:
        d.close()
""")


def test_sync_every_zero_is_refused():
    g = af.Graph()
    tr = af.Trainer(lambda P, xb: xb @ P[0], [g.parameter("w", np.ones((4, 2), np.float32))], sample=(4,), out_dim=2, batch=2)
    with pytest.raises(af.InvalidError, match="sync_every is 0"):
        tr.set_distributed(None, sync_every=0)
    tr.set_distributed(None)  # alone: fine


def test_two_ranks_equal_one_process_with_the_doubled_batch(tmp_path):
    mpirun = shutil.which("mpirun")
    if not mpirun:
        pytest.skip("no mpirun (apt-get install openmpi-bin libopenmpi-dev)")
    script = tmp_path / "dist.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run([sys.executable, str(script), "1", str(tmp_path / "one.npy")], check=True, env=env, timeout=120)
    r = subprocess.run([mpirun, "-np", "2", "--oversubscribe", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
                        "--mca", "oob_tcp_if_include", "lo", sys.executable, str(script), "2", str(tmp_path / "two.npy")],
                       env=env, timeout=120, capture_output=True, text=True)
    if "nompi" in r.stdout:
        pytest.skip("this libaneforge was built without MPI")
    assert r.returncode == 0, r.stdout + r.stderr
    one, two = np.load(tmp_path / "one.npy"), np.load(tmp_path / "two.npy")
    assert np.linalg.norm(two - one) <= 1e-6 * np.linalg.norm(one)
