"""The HTTP client of the server under test: transport, one request, SSE, bounded reads.

``transport`` is the seam (aiohttp behind it, a scripted transport in tests), ``request``
sends one streamed completion and keeps its record, ``sse`` parses the stream and
``bounded`` caps what any answer may cost in memory. The measured side may be hostile, so
everything here is bounded; none of it knows what a suite, a load level or a gate is (a
contract in pyproject.toml: this room imports nothing of quality, load, sandbox or page).
"""
