"""``python -m lutcore``: the same command as the ``lutcore`` script (lutcore.cli)."""
import sys

from lutcore.cli import main

if __name__ == "__main__":
    sys.exit(main())
