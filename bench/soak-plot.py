#!/usr/bin/env python3
"""Plots the soak's series (tests/floods/soak.rs writes them to target/soak.csv, or to
$JQJAIL_SOAK_CSV) as one small chart per series, with its floor per twelfth of the run, into a
PNG for RELIABILITY.md.

    python3 -m venv target/plot-venv && target/plot-venv/bin/pip install matplotlib
    target/plot-venv/bin/python bench/soak-plot.py target/soak.csv docs/soak.png
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {
    "rss_mib": "daemon RSS (MiB)",
    "fds": "daemon descriptors\n(but worker cgroups')",
    "worker_cgroups": "worker cgroups",
    "threads": "daemon threads",
    "workers": "workers",
    "temp_files": "store temp files",
    "store_mib": "store bytes (MiB)",
    "wal_mib": "index WAL (MiB)",
}


def main(src, dst):
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    t = [float(r["t_s"]) / 60 for r in rows]
    names = [n for n in rows[0] if n != "t_s"]
    fig, axes = plt.subplots(len(names), 1, figsize=(8, 1.6 * len(names)), sharex=True)
    per = max(1, -(-len(rows) // 12))
    for ax, name in zip(axes, names):
        ys = [float(r[name]) for r in rows]
        ax.plot(t, ys, linewidth=0.6, color="#4477aa")
        floors = [
            (t[i + len(ys[i : i + per]) // 2], min(ys[i : i + per])) for i in range(0, len(ys), per)
        ]
        ax.plot([x for x, _ in floors], [y for _, y in floors], "o-", markersize=3, color="#cc3311")
        ax.set_ylabel(LABELS.get(name, name), fontsize=7, rotation=0, ha="right", va="center")
        ax.tick_params(labelsize=7)
        ax.set_ylim(bottom=0, top=max(max(ys) * 1.15, 1))
    axes[-1].set_xlabel("minutes (blue: every second; red: floor per twelfth of the run)", fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
