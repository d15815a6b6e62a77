"""The build backend: setuptools' own (``setuptools.build_meta``), plus one path file in editable wheels.

Why: PySpark finds Python data sources by itself only through ``pkgutil.iter_modules()``, which lists the modules
of each ``sys.path`` entry (and of meta path finders that have an ``iter_modules`` method): every ``pyspark_*`` name
with a ``DefaultSource`` becomes a format of every session of the JVM (pyspark/sql/worker/lookup_data_sources.py,
run once per JVM in a Python worker).  A wheel install puts ``pyspark_jetstream/`` in site-packages, so it is
listed.  An editable install of this project is not: ``package-dir`` maps folders to other names (``server/`` ->
``skiff.server``), so setuptools serves the editable packages through a meta path finder of its own
(``__editable___skiff_*_finder.py``), which imports them but cannot list them, and setuptools offers no option to
add a path entry next to it (its static ``.pth`` mode needs one source root for every package).

So ``build_editable`` adds ``pyspark_jetstream-editable.pth`` to the wheel setuptools built: one line, the absolute
path of the checkout's ``spark/`` folder, which holds the ``pyspark_jetstream`` package and no other importable
name.  Every interpreter of the environment (the Spark workers included) then has ``spark/`` on ``sys.path`` and
``iter_modules()`` lists the package; plain ``pip install -e .`` is enough, and ``pip uninstall`` removes the file
with the rest (it is in the wheel's RECORD).  Only the PEP 517/660 hooks and the wheel format are relied on, not
setuptools internals.  Every other hook is setuptools' unchanged.
"""
from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 - every PEP 517/660 hook, unchanged but build_editable

PTH_NAME = "pyspark_jetstream-editable.pth"
SPARK_DIR = Path(__file__).resolve().parents[1]  # spark/, the folder holding pyspark_jetstream/


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    name = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    add_file(Path(wheel_directory, name), PTH_NAME, f"{SPARK_DIR}\n".encode())
    return name


def add_file(wheel: Path, arcname: str, data: bytes) -> None:
    """Rewrite ``wheel`` with one more file at its root, listed in its RECORD (PEP 376/427: path,
    sha256=<urlsafe base64 without padding>,size)."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        (record,) = (i for i in src.infolist() if i.filename.endswith(".dist-info/RECORD"))
        for info in src.infolist():
            if info is not record:
                dst.writestr(info, src.read(info))
        dst.writestr(arcname, data)
        # the order of RECORD's lines means nothing; RECORD itself goes last, as wheel tools write it
        lines = src.read(record).decode().splitlines()
        lines.append(f"{arcname},sha256={digest},{len(data)}")
        dst.writestr(record, "\n".join(lines) + "\n")
    os.replace(tmp, wheel)
