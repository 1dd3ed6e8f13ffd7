#!/bin/sh
# One throw-away Python environment in which the CLI of every vLLM release 0.10.2-0.33.0
# imports on a machine without a GPU (extract.py then puts one release's Python sources at
# a time on PYTHONPATH). Not for CI: it downloads a few hundred MB.
#
#   hack/vllm-flags/setup-env.sh /work/tmp/vllm-flags-env [TORCH]
#
# TORCH is what pip installs as torch, default "torch==2.13.0+cpu" (a CPU build: found in
# /opt/wheels on the project's machines; elsewhere add
# --extra-index-url https://download.pytorch.org/whl/cpu). One torch serves every release:
# only vLLM's Python code is imported, never its kernels. The rest is the union of the
# releases' Requires-Dist without torch*, xformers, flashinfer, ray and nvidia-* (their
# CLIs import without them), pinned by constraints.txt to the versions the committed
# tables were recorded with (pip freeze of that environment).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:?usage: setup-env.sh DIR [TORCH]}
torch=${2:-torch==2.13.0+cpu}
python3.11 -m venv "$venv"
"$venv/bin/pip" install -q "$torch"
"$venv/bin/pip" install -q -c "$here/constraints.txt" regex cachetools psutil sentencepiece numpy requests tqdm blake3 \
  py-cpuinfo transformers tokenizers protobuf 'fastapi[standard]' aiohttp openai pydantic \
  prometheus_client pillow prometheus-fastapi-instrumentator tiktoken lm-format-enforcer \
  llguidance outlines_core diskcache lark xgrammar typing_extensions filelock \
  partial-json-parser pyzmq msgspec gguf 'mistral_common[audio,image]' \
  opencv-python-headless pyyaml einops compressed-tensors depyf cloudpickle watchfiles \
  python-json-logger scipy ninja pybase64 cbor2 setproctitle openai-harmony anthropic ijson \
  jsonschema mcp model-hosting-container-standards multidict opentelemetry-api \
  opentelemetry-sdk opentelemetry-exporter-otlp opentelemetry-semantic-conventions-ai \
  orjson oss-harmony safetensors starlette grpcio grpcio-reflection huggingface-hub \
  kaldi-native-fbank
"$venv/bin/python" -c "import torch; print('torch', torch.__version__)"
