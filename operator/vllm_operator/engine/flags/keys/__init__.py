"""Per-release keys of JSON-valued flags, with vLLM's verdicts: hack/vllm-flags/keys_stage.py."""
