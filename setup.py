"""Only the compiled accelerator is declared here; everything else about the package is in pyproject.toml.

setuptools has no pyproject.toml table for C extensions before 74.1 (and there only as experimental), so the one
extension lives in this file, which setuptools' build backend (spark/_packaging/skiff_build_backend.py wraps it)
reads together with pyproject.toml.  ``optional=True``: when it cannot be compiled (no compiler, no Python.h) the
build says so and goes on, and Skiff runs on the pure-Python parser (protocol/_speedups.c, docs/architecture.md).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("skiff.protocol._speedups", ["protocol/_speedups.c"], optional=True)])
