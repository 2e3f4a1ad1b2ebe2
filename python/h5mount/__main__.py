"""``python -m h5mount ARGS``: run the ``h5mount`` command with ARGS (it replaces this
process, so its exit status and signals are the command's own)."""

import os
import sys

from . import H5mountError, binary


def main():
    try:
        exe = binary()
    except H5mountError as e:
        print(e.message, file=sys.stderr)
        return 1
    os.execv(exe, ["h5mount", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
