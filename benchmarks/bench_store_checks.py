"""What the job store's safety checks cost on a long history, printed as figures.

Builds the store of ``benchmarks/bench_store.py`` (``--queued`` queued and ``--finished`` finished
jobs) and times, each ``--repeat`` times with the file in the page cache (and once after dropping
the cache, when run as root on Linux):

    open       SqliteJobStore(path): the checks at open (whole quick_check up to
               FULL_CHECK_MAX_BYTES, else the header and the small tables) and the marker
    open-full  SqliteJobStore(path, full_check_max_bytes=None): quick_check of every page
    check      check_store(path), what `autoscaler store check` runs
    backup     SqliteJobStore.backup (SQLite's backup API, then quick_check of the copy)
    restore    restore_store from that backup

Figures only; nothing is asserted. Usage::

    python benchmarks/bench_store_checks.py [--queued 100000] [--finished 1000000] [--repeat 3] [--keep PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import build  # noqa: E402

from autoscaler.adapters.sqlite_store import FULL_CHECK_MAX_BYTES, SqliteJobStore, check_store, restore_store  # noqa: E402


def drop_page_cache() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
        return True
    except OSError:
        return False


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="build (or reuse) the store here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-store-checks-") as folder:
        path = args.keep or Path(folder) / "jobs.db"
        if not path.exists():
            print(f"built {args.queued + args.finished:,} jobs in {build(path, args.queued, args.finished):.1f} s")
        size = path.stat().st_size
        print(
            f"store: {size / 1e6:,.0f} MB; FULL_CHECK_MAX_BYTES {FULL_CHECK_MAX_BYTES / 2**20:.0f} MiB: at open the check is "
            f"{'whole' if size <= FULL_CHECK_MAX_BYTES else 'header and small tables'}"
        )
        backup_path = Path(folder) / "backup.db"
        actions = {
            "open": lambda: SqliteJobStore(path).close(),
            "open-full": lambda: SqliteJobStore(path, full_check_max_bytes=None).close(),
            "check": lambda: check_store(path),
        }
        for name, action in actions.items():
            cold = f"{timed(action):6.2f} s" if drop_page_cache() else "   n/a"
            warm = [timed(action) for _ in range(args.repeat)]
            print(f"{name:10} cold {cold}   warm median {statistics.median(warm):6.3f} s (min {min(warm):.3f}, max {max(warm):.3f})")

        def backup() -> None:
            with SqliteJobStore(path) as store:
                store.backup(backup_path, force=True)

        print(f"{'backup':10} {timed(backup):6.2f} s")
        target = Path(folder) / "restored.db"
        print(f"{'restore':10} {timed(lambda: restore_store(backup_path, target)):6.2f} s")


if __name__ == "__main__":
    main()
