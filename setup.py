"""Build hook: ship the site files (``templates/``, ``static/``, ``samples/``) in the wheel.

The design card keeps them at the top of the repository, outside every package, where
``package-data`` cannot reach. A regular build copies them to ``config/site/`` in the wheel;
``config/settings.py`` uses that copy when it exists (an installed package) and the
checkout's own folders otherwise. An editable install needs no copy: it runs from the
checkout. Metadata, dependencies and the rest of the configuration are in ``pyproject.toml``.
"""

from __future__ import annotations

import os

from setuptools import setup
from setuptools.command.build_py import build_py

SITE_DIRS = ("templates", "static", "samples")


class BuildPyWithSite(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in SITE_DIRS:
            self.copy_tree(name, os.path.join(self.build_lib, "config", "site", name))


setup(cmdclass={"build_py": BuildPyWithSite})
