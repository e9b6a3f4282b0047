"""Workspace checkpoint save/restore of a ~100 MiB mixed workspace:
``python -m tests.bench.bench_workspace_checkpoint [--mib 100] [--rounds 3]``.

The workspace: source-like text files in nested dirs, many 1 KiB random files (git objects),
a few multi-MiB random binaries and one large log; symlinks and a hard link. Baseline in the
same run: GNU ``tar`` with ``zstd -3 -T0`` (save) and ``zstd -d`` (restore) on the same tree.
The page cache is warm (the workspace was just written); the checkpoint dir is on local disk.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from session_supervisor.infra.workspace_checkpoint import restore, save

MIB = 2**20
WORDS = [b"def", b"return", b"import", b"self", b"class", b"value", b"config", b"session", b"  ", b"\n"]


def text(rng: random.Random, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        out += b" ".join(rng.choice(WORDS) for _ in range(12)) + b"\n"
    return bytes(out[:size])


def build(sandbox: Path, total_mib: int) -> dict:
    rng = random.Random(15)
    ws, tmp = sandbox / "workspace", sandbox / "tmp"
    tmp.mkdir(parents=True)
    tmp.chmod(0o1777)
    budget = {"text": 0.25, "objects": 0.08, "binaries": 0.30, "log": 0.37}
    counts = {}
    n = int(total_mib * MIB * budget["text"] // 8192)
    for i in range(n):
        d = ws / "src" / f"pkg{i % 40}" / f"sub{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_bytes(text(rng, 8192))
    counts["text files (8 KiB)"] = n
    n = int(total_mib * MIB * budget["objects"] // 1024)
    for i in range(n):
        d = ws / ".git" / "objects" / f"{i % 256:02x}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{i:038x}").write_bytes(os.urandom(1024))
    counts["random files (1 KiB)"] = n
    n = 10
    for i in range(n):
        (ws / "bin").mkdir(exist_ok=True)
        (ws / "bin" / f"tool{i}").write_bytes(os.urandom(int(total_mib * MIB * budget["binaries"] / n)))
    counts["random binaries"] = n
    (ws / "build.log").write_bytes(text(rng, int(total_mib * MIB * budget["log"])))
    (ws / "latest").symlink_to("build.log")
    (ws / "bin" / "tool-link").symlink_to("/usr/bin/env")
    os.link(ws / "bin" / "tool0", ws / "bin" / "tool0.hard")
    (tmp / "scratch").write_bytes(b"x" * 4096)
    return counts


def du(path: Path) -> int:
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(path) for f in fs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tar_ok = shutil.which("tar") and shutil.which("zstd")
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as base:
        base = Path(base)
        sandbox = base / "sandboxes" / "sb-bench"
        counts = build(sandbox, args.mib)
        print(f"workspace: {du(sandbox) / MIB:.1f} MiB in {sum(1 for _ in sandbox.rglob('*'))} entries; {counts}")
        times = {k: [] for k in ("save", "restore", "tar save", "tar restore")}
        sizes = {}
        for r in range(args.rounds):
            ckpt, out = base / f"ckpt{r}", base / f"restored{r}"
            t = time.perf_counter()
            manifest = save(sandbox, ckpt, "sb-bench", generation=r + 1)
            times["save"].append(time.perf_counter() - t)
            sizes["ours"] = manifest["size"]
            t = time.perf_counter()
            restore(ckpt, "sb-bench", out)
            times["restore"].append(time.perf_counter() - t)
            shutil.rmtree(out)
            shutil.rmtree(ckpt)
            if tar_ok:
                archive, out = base / f"tar{r}.tar.zst", base / f"tarout{r}"
                t = time.perf_counter()
                subprocess.run(["tar", "-I", "zstd -3 -T0", "--numeric-owner", "-cf", str(archive),
                                "-C", str(sandbox), "workspace", "tmp"], check=True)
                with open(archive, "rb") as f:
                    os.fsync(f.fileno())  # as durable as ours before the timer stops
                times["tar save"].append(time.perf_counter() - t)
                sizes["tar"] = archive.stat().st_size
                out.mkdir()
                t = time.perf_counter()
                subprocess.run(["tar", "-I", "zstd -d", "--numeric-owner", "-xpf", str(archive), "-C", str(out)],
                               check=True)
                times["tar restore"].append(time.perf_counter() - t)
                shutil.rmtree(out)
                archive.unlink()
        raw = du(sandbox)
        for key, values in times.items():
            if values:
                med = statistics.median(values)
                print(f"  {key:12s} median {med:6.2f} s  ({raw / MIB / med:6.1f} MiB/s)  runs "
                      + ", ".join(f"{v:.2f}" for v in values))
        for key, size in sizes.items():
            print(f"  archive size ({key}): {size / MIB:.1f} MiB ({size / raw:.0%} of the files)")


if __name__ == "__main__":
    main()
