"""The python-tests sandbox: code from a model's answer runs here, never in bench.

``executors`` is bench's side (refused, the Job's sandbox container through the exchange
directory, or a local helper process); ``exchange`` is the sandbox process's side (the
files it shares with bench, ``serve`` and ``run-one``; their command line is
``commands.sandbox``); ``run`` runs one job in a child (``child``) walled in by the kernel
(``kernel``, ``syscalls``), gives back what each call of the answer's function returned
or raised (no expected value enters this room: bench compares, ``bench.quality.cases``),
and measures, then removes, what it left in its scratch directory (``scratch``). ``run``,
``child``, ``kernel``, ``scratch`` and ``syscalls`` import only the standard library
(``pyseccomp``) and each other: the child loads ``kernel`` and ``syscalls`` by path from
beside itself, and the tests copy those files to run them as another uid
(tests/unit/bench/sandbox_identities.py). This room imports nothing of the HTTP client,
the quality suite, the load or the report page (a contract in pyproject.toml).
"""
