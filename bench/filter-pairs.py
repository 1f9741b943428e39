#!/usr/bin/env python3
"""Generated filters beside jq: every filter of a list of ~180 everyday jq steps, and a
random sample of the pairs `A | B`, run over 32 values of every kind by jq and by jqjail;
prints each value where the answers differ and are not both errors.

    bench/filter-pairs.py [--seed N] [--pairs K] [--socket PATH] JQJAIL

Each filter F runs once per tool as `[.[] | try ([F] | tojson) catch ("ERR " + tostring)]`
over the array of values. A difference in an error's message is not printed; run the
filter by hand for those. What it found, and what is a listed difference, is in README
"Differences from jq".
"""

import itertools
import json
import random
import subprocess
import sys

STEPS = [
    '.', '.a', '.[0]', '.[]?', 'keys?', 'length', 'tostring', 'tojson', 'type', 'not', 'add',
    'first', 'last', 'reverse', 'sort', 'unique', 'min', 'max', 'flatten', 'to_entries',
    'from_entries', 'with_entries(.value |= tostring)', '[paths]', '[leaf_paths]', 'tostream',
    'ascii_downcase', 'ltrimstr("a")', 'rtrimstr("b")', 'split(",")', 'join(",")', 'test("a")',
    'explode', 'implode', 'floor', 'sqrt', '. * 2', '. + 1', '. - 1', '. / 3', '. % 3', '-(.)',
    'map(. * 10)', 'map_values(. + 1)', 'select(. != null)', 'objects', 'arrays', 'strings',
    'numbers', 'scalars', 'values', 'any', 'all', 'del(.a)', 'del(.[0])', '.[1:]', '.[:-1]',
    '.[-1]', 'has("a")', 'has(0)', 'in({"a":1})', 'contains("a")', 'inside("abc")',
    'startswith("a")', 'endswith("b")', 'tonumber?', 'splits(",")', '@csv?', '@tsv?', '@sh?',
    '@html', '@uri', '@base64', '@base64d?', '@json', '@text', 'getpath(["a","b"])',
    'setpath(["a"]; 1)', 'delpaths([["a"]])', 'indices(1)', 'index("a")', 'rindex("a")',
    'group_by(.)', 'unique_by(length)', 'min_by(.)', 'max_by(.)', 'limit(2; .[]?)',
    'first(.[]?)', 'until(. > 100; . * 2)?', 'range(3)', '[range(.)]?', 'sub("a"; "x")',
    'gsub("a"; "x")', 'ascii_upcase', '[..]', 'tojson | fromjson', 'isinfinite', 'isnormal',
    'round', 'ceil', 'fabs?', 'utf8bytelength?', '"\\(.)"', 'todate?', 'fromdate?',
    'combinations?', 'transpose?', 'walk(if type == "number" then . + 1 else . end)',
    '.a += 1', '.a |= . + 1', '.[0] = 5', '.a.b.c = 1', 'with_entries(select(.value))',
    '.. |= (numbers? + 1)?', '(.. | numbers) |= . + 1', '. |= empty', '(.a, .) |= 7',
    'getpath(["a"]) |= 3', 'paths(type == "number")', 'reduce .[]? as $x (0; . + 1)',
    '[foreach .[]? as $x (0; . + 1)]', 'map(tostring)? | join("-")', 'keys_unsorted?',
    'to_entries? | map(.value)', 'del(.[]?)', '.[]? |= empty', '[splits("")]?', 'gmtime?',
    'mktime?', 'strftime("%Y")?', 'ltrimstr(1)', 'any(. > 1)?', 'all(. > 1)?', 'bsearch(2)?',
    'map(select(. > 1))?', 'flatten(1)?', 'add / length?', 'length as $n | $n * 2',
    'tojson | length', 'error? // "e"', 'getpath([0,0])?', '@base32', 'input?', 'implode?',
]

VALUES = [
    None, True, False, 0, -1, 1.5, 3, 1e3, 100, -0.0, "abc", "a,b", "", "1",
    "2015-03-05T23:51:47Z", [], [1, 2, 3], [3, 1, 2], [1, [2, [3]]], ["a", "b"],
    [None, 1, "a"], {}, {"a": 1}, {"a": {"b": 2}}, {"a": [1, 2], "b": "x"},
    [{"a": 1}, {"a": 2}], [[1, 2], [3, 4]], {"b": 1, "a": 2}, 1e18, 123456789012, 0.1,
    [0.5, 2.5],
]


def run(command, f, text):
    prog = f'[.[] | try ([{f}] | tojson) catch ("ERR " + tostring)]'
    try:
        p = subprocess.run(command + ["-c", prog], input=text.encode(), capture_output=True,
                           timeout=20)
    except subprocess.TimeoutExpired:
        return None
    if p.returncode != 0:
        return None
    try:
        return json.loads(p.stdout)
    except ValueError:
        return None


def main(argv):
    seed, pairs, socket = 1, 1000, []
    while argv and argv[0].startswith("--"):
        flag, value, argv = argv[0], argv[1], argv[2:]
        if flag == "--seed":
            seed = int(value)
        elif flag == "--pairs":
            pairs = int(value)
        elif flag == "--socket":
            socket = ["--socket", value]
    jqjail = [argv[0]] + socket
    rng = random.Random(seed)
    combined = [f"{a} | {b}" for a, b in itertools.product(STEPS, STEPS)]
    rng.shuffle(combined)
    text = json.dumps(VALUES)
    differences = 0
    for f in STEPS + combined[:pairs]:
        jq = run(["jq"], f, text)
        if jq is None:
            continue
        ours = run(jqjail, f, text)
        if ours is None:
            print(f"{f}: jqjail failed as a whole")
            continue
        for x, y, v in zip(jq, ours, VALUES):
            if x == y or (x.startswith("ERR") and y.startswith("ERR")):
                continue
            try:
                if json.loads(x) == json.loads(y):
                    continue
            except ValueError:
                pass
            differences += 1
            print(f"{f} on {json.dumps(v)}: jq {x[:150]} | jqjail {y[:150]}")
    print(f"{differences} differences", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
