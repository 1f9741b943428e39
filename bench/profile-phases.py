#!/usr/bin/env python3
"""Sorts the samples of a whole-machine profile (inferno's folded stacks, `--all`) by process
and, inside the workers, by the step of their life each sample was taken in.

    bench/profile-phases.py FOLDED

Prints Markdown: each process's share of all samples, then each worker step's share of the
workers' samples. A sample counts for the first step (in the order of PHASES) whose frame is
on its stack; the steps follow a worker's life (`worker/src/enter.rs`, `serve.rs`).
"""

import collections
import sys

# (step, frames that mark it), in the order of a worker's life; the first match wins.
PHASES = [
    ("isolation: namespaces, empty root (unshare, mount, chroot)", ["isolate::isolate"]),
    ("the heap baseline (/proc/self/status)", ["data_baseline_bytes", "read_to_string"]),
    ("the rest of the confinement (rlimits, uid, capabilities, signals)", ["confine::confine"]),
    ("seccomp: the program built", ["seccomp::program", "Template::program"]),
    ("seccomp: the kernel's check and JIT", ["seccomp::install", "apply_filter"]),
    ("warm-up evaluation", ["enter::warm_up"]),
    ("the job: read", ["read_job"]),
    ("the job: compile, parse, run, write", ["evaluate::evaluate", "serve_job"]),
    ("exit: address space and namespaces torn down", ["do_exit", "do_group_exit"]),
]


def main(path):
    by_comm = collections.Counter()
    steps = collections.Counter()
    faults = 0
    total = 0
    for line in open(path, encoding="utf-8", errors="replace"):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        n = int(count)
        frames = stack.split(";")
        comm = frames[0]
        total += n
        by_comm[comm] += n
        if comm != "jqjail-worker":
            continue
        if any("page_fault" in f for f in frames):
            faults += n
        for name, marks in PHASES:
            if any(m in f for f in frames for m in marks):
                steps[name] += n
                break
        else:
            steps["other (scheduling, signals, the fork's return)"] += n
    print("| process | share of all samples |\n|---|---|")
    for comm, n in by_comm.most_common(12):
        print(f"| {comm} | {100 * n / total:.1f} % |")
    workers = by_comm["jqjail-worker"]
    if not workers:
        return
    print("\n| a worker's step | share of the workers' samples |\n|---|---|")
    for name, _ in PHASES:
        print(f"| {name} | {100 * steps[name] / workers:.1f} % |")
    other = "other (scheduling, signals, the fork's return)"
    print(f"| {other} | {100 * steps[other] / workers:.1f} % |")
    print(f"| (of all the above: page faults) | {100 * faults / workers:.1f} % |")


if __name__ == "__main__":
    main(sys.argv[1])
