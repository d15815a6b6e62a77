"""``python -m skiff.server``: the same as the ``skiff`` command."""
import gc

if __name__ == "__main__":
    # No collector passes while the modules load and the stores recover: start-up allocates many long-lived objects
    # and next to no garbage (measured: importing the server 10-15 ms faster).  runner.run turns the collector back
    # on, after gc.freeze(), once the server is up.
    gc.disable()

from skiff.server.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
