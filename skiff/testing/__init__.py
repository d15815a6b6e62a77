"""skiff.testing: the test author's kit (pytest plugin, faults, inspection)."""
