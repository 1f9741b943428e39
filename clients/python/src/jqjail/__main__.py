"""`python -m jqjail ARGS…` runs the `jqjail` command line the wheel installed (or the one
on $PATH) with ARGS, in this process's place."""

import os
import sys

from ._private import executable
from ._wire import ConnectionFailed


def main() -> None:
    try:
        exe = executable("jqjail")
    except ConnectionFailed as e:
        sys.stderr.write(f"jqjail: UNAVAILABLE: {e}\n")
        sys.exit(8)
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
