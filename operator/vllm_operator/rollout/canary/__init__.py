"""The canary: steps of live traffic on a candidate that passed its gate, a room of its own.

``phase`` is the state machine of the steps (what the planner calls), ``traffic`` how a
step's share is made (replica ratio or HTTPRoute weights), ``reads`` what the shell must
read for a step (pods' /metrics, Prometheus, the route), ``metrics`` vLLM's page -> per-pod
counts -> deltas over a step, ``record`` the step's record kept on the candidate's
Deployment, ``analysis`` the judgement of a step. The measurements (``metrics``,
``analysis``, ``record``) import nothing of the planner (a contract in pyproject.toml), so
the judge of a step can be read, tested and replaced on its own.
"""
