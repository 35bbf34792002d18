"""``python -m benchmarks.peers [NAME ...]``: build (or check) the peer venvs without running them."""

from . import main

main()
