"""The entrypoint script, run for real by /bin/sh (dash here) and bash --posix.

A fake ``vllm`` on PATH records the argv it received (NUL-separated, so newlines and
spaces survive) and the LD_LIBRARY_PATH it saw. That is the whole contract of the script:
the library-path fix, then ``exec vllm serve "$@"`` with every item untouched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_operator.engine import entrypoint
from vllm_operator.sim import startup

FAKE_VLLM = """#!/bin/sh
printf '%s\\0' "$@" > "$FAKE_OUT.argv"
if [ "${LD_LIBRARY_PATH+set}" = set ]; then
  printf 'set:%s' "$LD_LIBRARY_PATH" > "$FAKE_OUT.ld"
else
  printf 'unset' > "$FAKE_OUT.ld"
fi
"""

SHELLS = [["/bin/sh"]]
if shutil.which("bash"):
    SHELLS.append([str(shutil.which("bash")), "--posix"])

GKE_IMAGE_PATH = "/usr/local/nvidia/lib64:/usr/local/cuda/lib64:"


class Result:
    def __init__(self, rc: int, argv: list[str] | None, ld: str | None, stderr: str) -> None:
        self.rc = rc
        self.argv = argv
        self.ld = ld
        self.stderr = stderr


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bin_dir = tmp_path_factory.mktemp("bin")
    vllm = bin_dir / "vllm"
    vllm.write_text(FAKE_VLLM)
    vllm.chmod(0o755)
    return bin_dir


def run_script(
    fake_bin: Path,
    args: list[str],
    fix: str | None,
    ld: str | None,
    shell: list[str] | None = None,
) -> Result:
    out = fake_bin / f"out-{os.getpid()}"
    for suffix in (".argv", ".ld"):
        Path(f"{out}{suffix}").unlink(missing_ok=True)
    env = {"PATH": f"{fake_bin}:/usr/bin:/bin", "FAKE_OUT": str(out)}
    if fix is not None:
        env[entrypoint.FIX_ENV] = fix
    if ld is not None:
        env["LD_LIBRARY_PATH"] = ld
    cmd = [*(shell or ["/bin/sh"]), "-c", entrypoint.SCRIPT, entrypoint.ARGV0, *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, check=False, timeout=10)
    argv_file, ld_file = Path(f"{out}.argv"), Path(f"{out}.ld")
    argv = argv_file.read_bytes().decode().split("\0")[:-1] if argv_file.exists() else None
    seen = ld_file.read_text() if ld_file.exists() else None
    return Result(proc.returncode, argv, seen, proc.stderr.decode())


# Each path the strip-cuda rule decides on, and whether it is the toolkit (stripped).
TOOLKIT_DIRS = [
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/lib64/",
    "/usr/local/cuda-12/lib64",
    "/usr/local/cuda-12.9/lib64",
    "/usr/local/cuda-12.9/lib64/",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda-12.9/targets/sbsa-linux/lib/",
]
KEPT_DIRS = [
    "/usr/local/nvidia/lib64",  # GKE's driver mount
    "/usr/local/nvidia/lib",
    "/usr/local/cuda/compat",  # forward-compatibility driver libraries
    "/usr/local/cuda/compat/lib64",
    "/usr/local/cuda-12.9/compat/lib64",
    "/usr/local/cuda/extras/CUPTI/lib64",  # profiler libraries, no cuBLAS
    "/usr/local/cuda/lib64/stubs",
    "/usr/local/cuda/lib",  # not a toolkit directory on Linux
    "/usr/local/cuda/targets/x86_64-linux/lib/stubs",
    "/usr/local/cuda/targets/a/b/lib",
    "/usr/local/cuda/targets//lib",
    "/usr/local/cudax/lib64",
    "/usr/local/cuda-/lib64",
    "/usr/local/cuda-12.x/lib64",
    "/usr/local/cuda-.12/lib64",
    "/opt/cuda/lib64",
    "usr/local/cuda/lib64",
]


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0].rsplit("/", 1)[-1])
@pytest.mark.parametrize("entry", TOOLKIT_DIRS + KEPT_DIRS)
def test_strip_cuda_decides_each_path(fake_bin: Path, shell: list[str], entry: str) -> None:
    before = f"/opt/first:{entry}:/opt/last"
    result = run_script(fake_bin, ["m"], "strip-cuda", before, shell)
    assert result.rc == 0, result.stderr
    expected = "set:/opt/first:/opt/last" if entry in TOOLKIT_DIRS else f"set:{before}"
    assert result.ld == expected
    # The simulator fails a 0.16/0.17 start on exactly the entries the script strips.
    assert startup.toolkit_entries(entry) == ([entry] if entry in TOOLKIT_DIRS else [])


SEGMENTS = st.sampled_from(
    [
        "usr",
        "local",
        "cuda",
        "cuda-12",
        "cuda-12.9",
        "cuda-1..2",
        "cuda-",
        "lib64",
        "lib",
        "targets",
        "x86_64-linux",
        "compat",
        "",
        "12.9",
        "-1",
        "a b",
        "*",
    ]
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(SEGMENTS, min_size=1, max_size=6), st.booleans(), st.booleans())
def test_strip_cuda_and_simulator_agree(
    fake_bin: Path, segments: list[str], prefix: bool, trailing_slash: bool
) -> None:
    entry = (
        ("/usr/local/" if prefix else "/") + "/".join(segments) + ("/" if trailing_slash else "")
    )
    result = run_script(fake_bin, ["m"], "strip-cuda", f"/keep:{entry}")
    assert result.rc == 0, result.stderr
    stripped = result.ld == "set:/keep"
    assert stripped == bool(startup.toolkit_entries(entry)), entry


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0].rsplit("/", 1)[-1])
@pytest.mark.parametrize(
    ("fix", "before", "after"),
    [
        # The 0.16/0.17 image's value: toolkit out, GKE driver path and nothing else kept.
        ("strip-cuda", GKE_IMAGE_PATH, "set:/usr/local/nvidia/lib64"),
        (
            "strip-cuda",
            "/opt/a:/usr/local/cuda-12.9/lib64:/usr/local/cuda/targets/x86_64-linux/lib:"
            "/usr/local/nvidia/lib:/usr/local/cuda/compat/lib64:/opt/b",
            "set:/opt/a:/usr/local/nvidia/lib:/usr/local/cuda/compat/lib64:/opt/b",
        ),
        # Spaces and glob characters inside entries survive untouched, in order.
        ("strip-cuda", "/opt/my libs:/usr/local/cuda/lib64:/opt/*", "set:/opt/my libs:/opt/*"),
        ("strip-cuda", "/usr/local/cuda/lib64", "unset"),
        ("strip-cuda", "::/usr/local/cuda/lib64::", "unset"),
        ("strip-cuda", None, "unset"),
        ("unset", GKE_IMAGE_PATH, "unset"),
        ("none", GKE_IMAGE_PATH, f"set:{GKE_IMAGE_PATH}"),
        (None, GKE_IMAGE_PATH, f"set:{GKE_IMAGE_PATH}"),
    ],
)
def test_library_path_fix(
    fake_bin: Path, shell: list[str], fix: str | None, before: str | None, after: str
) -> None:
    result = run_script(fake_bin, ["m", "--port", "8000"], fix, before, shell)
    assert result.rc == 0, result.stderr
    assert result.ld == after
    assert result.argv == ["serve", "m", "--port", "8000"]


def test_unknown_fix_refuses_to_start(fake_bin: Path) -> None:
    result = run_script(fake_bin, ["m"], "auto", GKE_IMAGE_PATH)
    assert result.rc == 64
    assert result.argv is None  # vllm never ran
    assert "unknown VLLMOP_LIBRARY_PATH_FIX" in result.stderr


TRICKY = [
    "a b",
    "'single' \"double\"",
    "$(touch /tmp/pwned)",
    "`id`",
    "line1\nline2",
    "--",
    "",
    "$HOME ${IFS} $@ $* $0",
    "*",
    "; exec true #",
    "\\",
    "-",
]


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0].rsplit("/", 1)[-1])
def test_tricky_argv_reaches_vllm_verbatim(fake_bin: Path, shell: list[str]) -> None:
    args = ["Qwen/Qwen3", *TRICKY, "--served-model-name", "x y"]
    result = run_script(fake_bin, args, "strip-cuda", GKE_IMAGE_PATH, shell)
    assert result.rc == 0, result.stderr
    assert result.argv == ["serve", *args]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0")), max_size=5
    )
)
def test_any_argv_reaches_vllm_verbatim(fake_bin: Path, args: list[str]) -> None:
    result = run_script(fake_bin, args, "strip-cuda", GKE_IMAGE_PATH)
    assert result.rc == 0, result.stderr
    assert result.argv == ["serve", *args]


def test_script_is_safe_from_kubelet_expansion() -> None:
    # The kubelet expands $(VAR) and turns $$ into $ in container commands.
    assert "$(" not in entrypoint.SCRIPT
    assert "$$" not in entrypoint.SCRIPT
    assert entrypoint.SCRIPT.rstrip().endswith('exec vllm serve "$@"')


def test_environment_refuses_unresolved_fix() -> None:
    assert entrypoint.environment("strip-cuda") == {entrypoint.FIX_ENV: "strip-cuda"}
    with pytest.raises(ValueError, match="auto"):
        entrypoint.environment("auto")
