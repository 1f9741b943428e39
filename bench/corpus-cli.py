#!/usr/bin/env python3
"""jq's own test corpus through each tool's command line, side by side.

Runs every case of tests/conformance/{jq.test,man.test} as `TOOL -c PROGRAM` with the
case's input on stdin, for jq and for each other tool named, and counts, on the cases jq
itself answers as the corpus expects, how often each tool gives the same answer, fails
(exits non-zero without it), or prints something else: a silently different answer.
Outputs are compared as JSON values, numbers by value (as jq's test runner compares them).

    bench/corpus-cli.py [--show] [--jq jq] NAME=COMMAND ...
    bench/corpus-cli.py gojq=gojq jaq=/opt/jaq/bin/jaq jqjail=target/release/jqjail

`--show` lists each tool's errors and differences. A case is given 10 s per tool.
"""

import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "conformance")
TIMEOUT_S = 10


def parse(text):
    """(line, program, input, expected lines) for each case; %%FAIL groups are skipped."""
    cases = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            i += 1
            continue
        if line.startswith("%%FAIL"):
            while i < len(lines) and lines[i].strip():
                i += 1
            continue
        if i + 1 >= len(lines):
            break
        prog, inp = line, lines[i + 1]
        j = i + 2
        expected = []
        while j < len(lines) and lines[j].strip():
            expected.append(lines[j])
            j += 1
        cases.append((i + 1, prog, inp, expected))
        i = j
    return cases


def normalise(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        f = float(v)
        return None if math.isnan(f) else f
    if isinstance(v, list):
        return [normalise(x) for x in v]
    return {k: normalise(x) for k, x in v.items()}


def values(lines):
    """The lines as normalised JSON values, or None where one is not JSON."""
    out = []
    for line in lines:
        try:
            out.append(normalise(json.loads(line)))
        except ValueError:
            return None
    return out


def run(command, prog, inp):
    """(exit status, None on a timeout; the non-empty lines of stdout)."""
    try:
        p = subprocess.run(
            command + ["-c", prog],
            input=inp.encode(),
            capture_output=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return (None, [])
    text = p.stdout.decode("utf-8", "replace")
    return (p.returncode, [l for l in text.split("\n") if l.strip()])


def verdict(expected, answer):
    status, lines = answer
    got = values(lines)
    if status == 0 and got is not None and got == values(expected):
        return "same"
    if status != 0:
        return "error"
    return "different"


def main(argv):
    show = "--show" in argv
    argv = [a for a in argv if a != "--show"]
    jq = ["jq"]
    if argv[:1] == ["--jq"]:
        jq, argv = [argv[1]], argv[2:]
    tools = [(a.split("=", 1)[0], a.split("=", 1)[1].split()) for a in argv]
    print(f"{'corpus':<10} {'tool':<8} {'cases':>5} {'same':>5} {'errors':>6} {'different':>9}")
    for name in ["jq.test", "man.test"]:
        with open(os.path.join(CORPUS, name), encoding="utf-8") as f:
            cases = parse(f.read())
        passed = [c for c in cases if verdict(c[3], run(jq, c[1], c[2])) == "same"]
        print(f"{name:<10} {'jq':<8} {len(cases):>5} {len(passed):>5}")
        for tool, command in tools:
            counts = {"same": 0, "error": 0, "different": 0}
            for line, prog, inp, expected in passed:
                answer = run(command, prog, inp)
                v = verdict(expected, answer)
                counts[v] += 1
                if show and v != "same":
                    print(f"  {tool} {v} {name}:{line} {prog!r} on {inp!r}: "
                          f"want {expected}, got {answer[1][:4]} (exit {answer[0]})")
            print(f"{name:<10} {tool:<8} {len(passed):>5} {counts['same']:>5} "
                  f"{counts['error']:>6} {counts['different']:>9}")


if __name__ == "__main__":
    main(sys.argv[1:])
