"""One error hierarchy for the whole project.

Every exception class the product defines derives from ``VLLMOperatorError`` (a class that a
library's protocol wants as a ``ValueError`` or ``RuntimeError`` takes that as a second base);
the few that cannot are listed with their reason in ``docs/architecture.md``, and
``tests/unit/test_error_tree.py`` walks the package to hold both claims.
Every failure the operator, the benchmark or the simulator can explain is one of these.
Nothing translates them in the shell: the pure planner returns ``SpecErrors`` as a value and
turns them into an ``InvalidSpec`` status and Event itself (``rollout.stopped``); the API client
raises ``KubeTransientError`` (a ``TransientError``) for what a retry may fix; the CLIs print
a ``SpecError`` as ``field: message (fix: ...)`` and exit 2 (usage).
"""

from __future__ import annotations


class VLLMOperatorError(Exception):
    """Base class of every error this project raises on purpose."""


class SpecError(VLLMOperatorError):
    """A VLLMDeployment spec (or a CLI input) that cannot be run as written.

    ``field`` is the dotted path of the offending field (``spec.engine.performanceMode``),
    ``fix`` says what to write instead. Both are shown to the user verbatim.
    """

    def __init__(self, field: str, message: str, fix: str = "") -> None:
        self.field = field
        self.message = message
        self.fix = fix
        text = f"{field}: {message}"
        if fix:
            text += f" (fix: {fix})"
        super().__init__(text)


class DatasetError(SpecError):
    """A workload dataset (``bench --dataset``) that cannot be sent as written.

    ``line`` is the 1-based line of the file where the problem is (None when it concerns the
    whole file, e.g. its size); the message starts with it so a person finds the line.
    """

    def __init__(self, line: int | None, message: str, fix: str = "") -> None:
        self.line = line
        where = f"line {line}: " if line is not None else ""
        super().__init__("--dataset", f"{where}{message}", fix)


class SpecErrors(VLLMOperatorError):
    """Several ``SpecError`` found at once: users fix them all in one edit."""

    def __init__(self, errors: list[SpecError]) -> None:
        if not errors:
            raise ValueError("SpecErrors needs at least one error")
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


class TransientError(VLLMOperatorError):
    """Something that may succeed when retried (API conflict, timeout, not yet Ready)."""
