"""Install size and time: `pip install <project>` into a fresh venv.

    python benchmarks/install_size.py [PROJECT] [--extra litellm] [--top 12] [--keep]

Creates a venv in a temporary directory (with the running interpreter), upgrades nothing, runs
``pip install PROJECT[EXTRA]`` (pip's own configuration applies: index, find-links, cache), and
prints the wall time of that install, the size of site-packages in MB (pip, setuptools and wheel
that come with a fresh venv are left out of the total), the whole venv as ``du -sh`` counts it
(MiB on disk, pip included: what a person measuring the venv sees) and the biggest packages. A warm pip cache
makes the time lower than a first install on a new machine: compare runs made the same way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = ("pip", "setuptools", "wheel", "_distutils_hack", "pkg_resources", "distutils-precedence.pth")


def dir_size(path: Path) -> int:
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() or p.is_symlink())


def disk_usage(path: Path) -> int:
    """Bytes the tree takes on disk, as ``du -s`` counts them (allocated blocks, a hard link once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for p in [path, *path.rglob("*")]:
        st = p.lstat()
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def package_sizes(site: Path) -> dict[str, int]:
    """Bytes per distribution-ish name: each top-level entry, with its .dist-info folded into it."""
    sizes: dict[str, int] = {}
    for entry in site.iterdir():
        name = entry.name
        if name.endswith((".dist-info", ".egg-info")):
            name = name.split("-")[0]
        name = name.lower().replace("-", "_").removesuffix(".libs")
        if name.split("-")[0] in BASE or name.startswith(("pip", "setuptools", "_distutils_hack", "pkg_resources")):
            continue
        sizes[name] = sizes.get(name, 0) + dir_size(entry)
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("project", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--extra", help="install PROJECT[EXTRA]")
    ap.add_argument("--top", type=int, default=12, help="biggest packages to list")
    ap.add_argument("--keep", action="store_true", help="keep the venv and print its path")
    args = ap.parse_args()
    target = f"{args.project}[{args.extra}]" if args.extra else args.project
    tmp = Path(tempfile.mkdtemp(prefix="memwire-install-"))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True)
        py = tmp / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
        start = time.perf_counter()
        done = subprocess.run([str(py), "-m", "pip", "install", "-q", target], capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if done.returncode:
            sys.exit(f"pip install {target} failed:\n{done.stdout}{done.stderr}")
        site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        sizes = package_sizes(site)
        total = sum(sizes.values())
        print(f"pip install {target}")
        print(f"  time: {elapsed:.1f} s   site-packages: {total / 1e6:.1f} MB (without pip/setuptools)")
        # what a person measuring the venv sees: `du -sh venv` (MiB of allocated blocks, pip included)
        print(f"  the whole venv on disk: {disk_usage(tmp / 'venv') / 2**20:.0f} MiB (du -sh; pip included)")
        for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[: args.top]:
            print(f"  {size / 1e6:8.1f} MB  {name}")
        if args.keep:
            print(f"  venv kept: {tmp / 'venv'}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
