"""Generated `vllm serve` option tables, one per vLLM release (see hack/vllm-flags)."""
