"""Skiff: a NATS server with JetStream, written in Python.

Installed, everything Skiff ships lives under this one name: ``skiff.server``, ``skiff.protocol``, ``skiff.storage``
and ``skiff.testing`` (the pytest plugin).  In the source repository those folders sit beside this one (the
repository's layout is ``server/``, ``protocol/``, ``storage/``); a wheel puts them inside it (pyproject.toml's
package-dir).  So in a checkout the parent folder is added to this package's search path, and only there: an
installed copy finds its subpackages in its own folder first and the extra entry is never consulted.
"""
import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
if not _os.path.isdir(_os.path.join(_here, "server")):
    __path__.append(_os.path.dirname(_here))  # a source checkout: skiff.server is ../server

from skiff.server.version import SKIFF_VERSION as __version__  # noqa: E402  (after __path__ is set up below)

