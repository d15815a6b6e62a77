"""Other projects' test suites, run against Skiff by the tests of this folder in a pytest process of their own:
never collected into Skiff's run (they start their own servers on fixed ports)."""
collect_ignore = ["natspy"]
