"""The wheel build copies the web UI's front-end libraries in (scripts/build_assets.py) first, so
that the wheel carries them and its users need no Node.js; everything else is in pyproject.toml."""

import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithAssets(build_py):
    def run(self) -> None:
        script = Path(__file__).parent / "scripts" / "build_assets.py"
        if script.exists():  # absent when building from an sdist, which already holds the copies
            subprocess.run([sys.executable, str(script)], check=True)
        super().run()


setup(cmdclass={"build_py": BuildWithAssets})
