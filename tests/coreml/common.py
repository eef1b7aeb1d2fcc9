"""What the Core ML checks share: running aneforge's CLI and a fresh work folder."""
import shutil
import subprocess


def runner(cli):
    """run(*args, ok=True): the CLI with args, its CompletedProcess; raises when ok and it failed."""
    def run(*args, ok=True):
        p = subprocess.run([cli, *args], capture_output=True, text=True)
        if ok and p.returncode:
            raise RuntimeError(f"aneforge {' '.join(args)}: {p.stderr.strip()}")
        return p
    return run


def fresh(path):
    """path, emptied (removed if it exists)."""
    shutil.rmtree(path, ignore_errors=True)
    return path
