"""Opening a file a person named on the command line: regular files only, never blocking.

Every input file of ``bench``, ``judge`` and ``report`` (a dataset, a summary, a report, a
workload, an ``@FILE`` option) is named by someone who may be careless or hostile. A FIFO
would block the open (and the Job) forever, ``/dev/zero`` never ends and a directory is not
text, so the file is opened without blocking (``O_NONBLOCK``: a FIFO opens at once) and
refused unless ``fstat`` says it is a regular file; the size it reports lets the caller
refuse an oversized file before reading it. Standard input ('-') is the caller's business.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from vllm_operator.errors import VLLMOperatorError


class NotRegularFile(VLLMOperatorError, OSError):
    """The path names a FIFO, device, socket or directory: nothing a command reads."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str) -> BinaryIO:
    """``path`` opened for binary reading; ``NotRegularFile`` (an ``OSError``) unless it
    is a regular file, other ``OSError`` when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path`` (one more than allowed tells
    an oversized file apart without reading it all); raises ``OSError``."""
    with open_regular(path) as handle:
        return handle.read(limit + 1)
