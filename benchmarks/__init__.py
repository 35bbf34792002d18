"""pyadk's benchmarks: ``python -m benchmarks`` (see ``benchmarks/__main__.py`` and
docs/performance.md).

Imports nothing: the peer SDK scripts run this package's harness in venvs without pyadk.
"""
