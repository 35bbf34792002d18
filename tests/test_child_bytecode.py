"""The processes tests start keep their bytecode in ``conftest.CHILD_PYCACHE``, not the checkout
(conftest.py's ``pytest_configure``), when the environment says not to write it in place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import conftest

_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import helper_module
print(sys.pycache_prefix)
print(sys.dont_write_bytecode)
"""


def test_a_child_process_writes_its_bytecode_outside_the_checkout(tmp_path: Path) -> None:
    (tmp_path / "helper_module.py").write_text("VALUE = 1\n")
    child = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path)],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    prefix, dont_write = child.stdout.splitlines()
    if conftest._SAVED_ENVIRONMENT:  # the session was started with PYTHONDONTWRITEBYTECODE
        folder = str(conftest.CHILD_PYCACHE)
        assert (prefix, dont_write) == (folder, "False")
        tag = sys.implementation.cache_tag
        written = Path(folder, *tmp_path.parts[1:], f"helper_module.{tag}.pyc")
        assert written.is_file()
        written.unlink()  # the folder is kept between sessions; this test's tmp_path is not
        assert not (tmp_path / "__pycache__").exists()  # never next to the source
        assert sys.dont_write_bytecode  # this process writes none, as it started
    else:  # bytecode written in place or to the environment's own prefix: left as it was
        assert (prefix, dont_write) == (str(sys.pycache_prefix), str(sys.dont_write_bytecode))
