"""Issue 38's forgeries: wrong answers that try to make their own python-tests check pass.

Both are as hostile as the issue's: they read whatever the process that runs them keeps
(every frame's locals, through ``_ctypes`` reached past the audit hook with a ``str``
subclass as the module name, or from C in an extension module), print the old runner's
pass marker when they find it and exit 0 (that passed the check on 953c1d3), and otherwise
forge outcomes ("returned true" for every call) on every descriptor the child might
report on, then exit 0 before a single honest call. The answer's function itself is wrong
(``WRONG``). With the verdict decided in bench, nothing they find or forge can pass.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

WRONG = "def is_palindrome(text):\n    return len(text) < 2  # wrong for 'racecar'\n"
FORGED = "".join(f'{{"i": {i}, "returned": true}}\n' for i in range(6))

PYTHON_FORGERY = (
    WRONG
    + '''
import os
FORGED = FORGED_LINES

class Name(str):
    """The module name the hook sees: "json", whatever the import machinery uses."""

    def __str__(self):
        return "json"

    def split(self, *args, **kwargs):
        return ["json"]

def frames():
    try:
        _c = __import__(Name("_ctypes"))
    except ImportError:
        import sys
        frame = sys._getframe()  # the hook refuses it too; the kernel-alone walls do not
    else:
        class PyObj(_c._SimpleCData):
            _type_ = "O"

        class Word(_c._SimpleCData):
            _type_ = "L"

        class Ref(_c._Pointer):
            _type_ = PyObj

        class Peek(_c.Union):
            _fields_ = [("address", Word), ("ref", Ref)]

        try:
            raise ZeroDivisionError
        except ZeroDivisionError as exc:
            tb = exc.__traceback__
        peek = Peek()
        peek.address = id(tb) + 24  # PyTracebackObject.tb_frame, read without an audit event
        frame = peek.ref[0].f_back  # this function's caller, the answer's module frame
    while frame is not None:
        yield frame
        frame = frame.f_back

loot = {}
try:
    for f in frames():
        for key, value in list(f.f_locals.items()):
            loot.setdefault(key, value)
except Exception as exc:
    print("forgery: reading frames failed:", type(exc).__name__, exc)
print("forgery: found", sorted(loot))
if "marker" in loot:
    print(loot["marker"], flush=True)
    os._exit(0)
for fd in range(3, 64):
    try:
        os.write(fd, FORGED.encode())
    except OSError:
        pass
print("ALL TESTS PASSED", flush=True)
os._exit(0)
'''.replace("FORGED_LINES", repr(FORGED))
)


def build_native(out: Path) -> bytes | str:
    """``unit/bench/data/forge_verdict.c`` as an extension module (or why it cannot be)."""
    if shutil.which("cc") is None:
        return "no C compiler (cc): hack/ci-tools.sh installs gcc"
    source = Path(__file__).parent / "unit" / "bench" / "data" / "forge_verdict.c"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O1", "-s", "-o", str(out), str(source)],
        check=True,
        timeout=120,
    )
    return out.read_bytes()


def native_forgery(so: bytes) -> str:
    """The wrong answer that writes the extension into scratch and loads it."""
    return WRONG + (
        "import base64, importlib.machinery, importlib.util\n"
        f"open('forge.so', 'wb').write(base64.b64decode({base64.b64encode(so).decode()!r}))\n"
        "loader = importlib.machinery.ExtensionFileLoader('forge', './forge.so')\n"
        "spec = importlib.util.spec_from_file_location('forge', './forge.so', loader=loader)\n"
        "importlib.util.module_from_spec(spec)  # PyInit_forge never returns\n"
    )
