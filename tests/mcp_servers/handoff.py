"""Imported first by a server script of this folder that imports ``mcp`` at its top: when the
script runs as a stdio server started by a pytest process with a fork server
(``forkserver.py``), this hands the process's stdio to a fork of it, which serves with the
script's module, and the import never returns (the process exits as that fork did). Otherwise,
and when the module is imported as a module (by the fork server, or a test), it does nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from forkserver import hand_off

_main = sys.modules["__main__"]
_script = getattr(_main, "__file__", None)
if _script is not None and getattr(_main, "__spec__", None) is None:
    _path = Path(_script).resolve()
    if _path.parent == Path(__file__).resolve().parent and _path.stem != "forkserver":
        hand_off(_path.stem)
