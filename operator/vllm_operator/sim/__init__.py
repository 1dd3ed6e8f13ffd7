"""vLLM simulator: an OpenAI-compatible stand-in for ``vllm serve`` (no GPU).

Why: tests, the demo and GPU-free clusters need something that starts, accepts flags,
streams, measures and fails like the vLLM version it emulates, with timing that reproduces
the published study (``shared/docs/published-study.md``) per profile.

Command line (also ``python -m vllm_operator.sim``, and ``vllm serve`` via
:func:`vllm_shim.write_vllm_shim`)::

    vllm-operator sim MODEL [vLLM flags of --sim-version] [--sim-* knobs]

It prints ``SIM LISTENING http://HOST:PORT`` on stdout (flushed) once it listens; with
``--port 0`` that line tells the bound port. Every ``--sim-X`` knob falls back to the
environment variable ``VLLMOP_SIM_X`` (e.g. ``VLLMOP_SIM_TIME_SCALE=0.01``; the old
``VLLM_SIM_X`` is still read); the version also to ``VLLMOP_VLLM_VERSION``, which the
operator renders into every vLLM pod.

Programmatic API:

* ``SimConfig.create(model, version="0.17.0", mode="default"|"eager"|"throughput",
  profile=None, time_scale=1.0, warmup_seconds=None, ttft_ms=None, itl_ms=None,
  answers_path=None, port=0, faults=Faults(...), api_key=None, ...)``;
* ``async with SimServer(config) as sim: sim.url`` (in the running loop; ``sim.state`` gives
  the engine, ledger and metrics), or ``await serve(config, ready=event, stop=event)``;
* ``with SimThread(config) as sim: sim.url`` (own loop in a background thread);
* ``SimProcess.start(["MODEL", "--port", "0", ...], env=..., prefix=["taskset", "-c", "0"])``
  (a child process; ``.url``, ``.stop()``).

Endpoints: ``/health``, ``/ping``, ``/version``, ``/metrics``, ``/v1/models``,
``/v1/completions``, ``/v1/chat/completions``; side channel (no API key):
``GET /sim/requests/{id}`` (id = the ``x-sim-request-id`` response header = the response
``id``) with wall-clock ``arrival``, ``first_token``, ``last_token``, token counts,
``intended_ttft`` and mean ``intended_itl`` (seconds); ``GET /sim/timing[?reset=1]`` (the
server's own scheduling error, p50/p99); ``GET /sim/config``; ``POST /sim/live-faults``
``{"errorRate", "delaySeconds", "streamErrorRate", "hangRate", "crashAfterSeconds",
"metricsStatus"}`` (faults only on requests with header ``x-sim-live``; a crash exits the
process; metricsStatus 5xx makes ``/metrics`` fail).

Tokenisation and the benchmark's prompt sizes: :mod:`vllm_operator.sim.tokens`.
Timing model: ``data/profiles.yaml``. Canned answers: :mod:`vllm_operator.sim.answers`.
"""

from vllm_operator.sim.config import Faults, SimConfig
from vllm_operator.sim.runner import SimProcess, SimServer, SimThread, serve

__all__ = ["Faults", "SimConfig", "SimProcess", "SimServer", "SimThread", "serve"]
