# Skiff's addition (SOURCE.md): test_js.py uses unittest.mock without importing it.
import unittest.mock  # noqa: F401
