#!/usr/bin/env python
"""Django's command-line utility (``config.cli.main``: a bad setting is one line, no traceback)."""

import sys

from config.cli import main

if __name__ == "__main__":
    main(sys.argv, prog="manage.py")
