"""The quality suite: what to ask (``suite``, the built-in one under ``data/``), how each
answer is checked (``assertions``, ``jsonschema_lite``) and how a suite is run (``run``).

python-tests checks hand code to ``bench.sandbox.executors``; requests go through
``bench.http``. Nothing here knows the load sweep.
"""
