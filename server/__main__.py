"""``python -m server``: the same as the ``skiff`` command."""
from server.cli import main

if __name__ == "__main__":
    main()
