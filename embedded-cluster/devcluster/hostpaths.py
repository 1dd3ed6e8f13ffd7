"""Keep what a pod spec says inside the pod's own directory on the host (demo kubelet only).

The local kubelet writes ConfigMap and Secret keys as files, creates mount and working
directories, writes and reads termination messages and logs, and starts host processes
with the pod's environment. Every one of those is driven by a pod spec (and through the
operator, by a VLLMDeployment): a key ``/etc/cron.d/x``, a ``subPath`` of ``../..``, a
termination file replaced by a symlink to ``/etc/shadow``, or ``PYTHONPATH`` pointing at
a ConfigMap the pod wrote would reach the host as the kubelet's user. So:

- ``inside(base, rel)`` is the only way a spec-derived path is joined: absolute paths and
  ``..`` elements are refused, and the result is resolved (symlinks followed) and must
  still be under ``base``;
- ``write_text``/``read_text``/``open_append`` open files with ``O_NOFOLLOW``, so a symlink
  the pod's process planted at a path the kubelet uses is refused, not followed;
- ``host_env`` scrubs variables that make the host's interpreters or loader run code or
  write elsewhere (``PYTHONPATH``, ``PYTHONSTARTUP``, ``PYTHONHOME``, ``LD_PRELOAD``,
  ``BASH_ENV``, ``GCONV_PATH``...), disables Python's user site and script-directory
  path entries, and keeps ``HOME``/``TMPDIR`` inside the pod.

What it does not do: the container's command itself runs as a host process with the
kubelet's user. The operator renders that command (a constant entrypoint, the ``vllm``
shim, ``vllm-operator bench``), so a VLLMDeployment cannot choose it; a raw Pod created
directly in the demo's API runs whatever it names, as a real kubelet would in a container.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import BinaryIO

READ_LIMIT = 1024 * 1024


class HostPathError(ValueError):
    """A spec-derived path that would leave its pod's directory."""


def within(path: Path, base: Path) -> bool:
    """True when ``path`` resolves (symlinks followed) to ``base`` or below it."""
    return path.resolve().is_relative_to(base.resolve())


def inside(base: Path, rel: str, what: str = "path") -> Path:
    """``base / rel`` for a relative ``rel`` without ``..`` that stays under ``base``."""
    pure = PurePosixPath(rel)
    if pure.is_absolute():
        raise HostPathError(f"{what} {rel!r} is absolute; it must be relative")
    if ".." in pure.parts:
        raise HostPathError(f"{what} {rel!r} contains '..'")
    if "\x00" in rel:
        raise HostPathError(f"{what} {rel!r} contains a NUL byte")
    target = base / pure
    if not within(target, base):
        raise HostPathError(f"{what} {rel!r} leaves {base} (through a symlink)")
    return target


def _open(path: Path, flags: int) -> int:
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if path.is_symlink():
            raise HostPathError(f"{path} is a symlink; refusing to follow it") from None
        raise exc


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (created or truncated) unless it is a symlink."""
    fd = _open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
        fh.write(text)


def read_text(path: Path, limit: int = READ_LIMIT) -> str:
    """The last ``limit`` bytes of ``path`` as text, refusing a symlink."""
    fd = _open(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            fh.seek(size - limit)
        return fh.read(limit).decode(errors="replace")


def open_append(path: Path) -> BinaryIO:
    """``path`` opened for appending (created if absent), refusing a symlink."""
    fd = _open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    return os.fdopen(fd, "ab")


# Python variables that only tune output; every other PYTHON* can load or run code
# (PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, PYTHONBREAKPOINT, ...) or write files elsewhere
# (PYTHONPYCACHEPREFIX).
_PYTHON_KEEP = frozenset(
    {
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING",
        "PYTHONHASHSEED",
        "PYTHONUTF8",
        "PYTHONFAULTHANDLER",
    }
)
# Read by the shell, the C library or the loader to run code or load modules.
_DROPPED = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "IFS",
        "CDPATH",
        "GCONV_PATH",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "RESOLV_HOST_CONF",
        "TZDIR",
    }
)


def scrubbed(name: str) -> bool:
    """True for a variable a pod may not pass to a host process."""
    if name.startswith("PYTHON"):
        return name not in _PYTHON_KEEP
    if name.startswith("LD_"):
        return name != "LD_LIBRARY_PATH"
    return name in _DROPPED or name.startswith("BASH_FUNC_")


def _library_path(value: str, workdir: Path) -> str | None:
    """LD_LIBRARY_PATH without entries a pod could have written (or relative ones)."""
    kept = [
        entry
        for entry in value.split(":")
        if entry.startswith("/") and not within(Path(entry), workdir)
    ]
    return ":".join(kept) or None


def host_env(
    env: Mapping[str, str], *, workdir: Path, home: Path, tmp: Path, roots: Iterable[Path]
) -> dict[str, str]:
    """The environment a host process of this pod may get.

    ``workdir`` is the kubelet's directory (everything pods can write is below it),
    ``home``/``tmp`` the pod's defaults, ``roots`` the pod's own directories (its ``fs``
    and mounts) where HOME and TMPDIR may point.
    """
    out = {k: v for k, v in env.items() if not scrubbed(k)}
    if "LD_LIBRARY_PATH" in out:
        library_path = _library_path(out.pop("LD_LIBRARY_PATH"), workdir)
        if library_path is not None:
            out["LD_LIBRARY_PATH"] = library_path
    allowed = list(roots)
    for name, default in (("HOME", home), ("TMPDIR", tmp)):
        value = out.get(name) or ""
        inside_pod = value.startswith("/") and any(within(Path(value), r) for r in allowed)
        if not inside_pod:
            out[name] = str(default)
    out["PYTHONNOUSERSITE"] = "1"  # no ~/.local site-packages (.pth files run code)
    out["PYTHONSAFEPATH"] = "1"  # `python -m` does not put the working directory first
    return out
