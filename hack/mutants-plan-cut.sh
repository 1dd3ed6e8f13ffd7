#!/usr/bin/env bash
# Mutation testing of the trial plan cut to its deadline (issue 40: gate/budget.py's
# reachable_plan; gate/decidable.py's gate_plan and _fix, the timeout a warning names under
# the cut) against their unit tests only, with mutmut 3 (the test extra).
#
# Staged as hack/mutants-changed-judge.sh stages it (src/ -> operator/, links), in its own
# folder build/mutants-plan-cut/, with its own [tool.mutmut]; only the mutants of the changed
# functions are run (names matched as globs).
#
#   hack/mutants-plan-cut.sh            run them (one worker, nice 10; NICE=N to change)
#   hack/mutants-plan-cut.sh results    what survived (any mutmut command: show NAME)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.venv}"
[[ -x "$venv/bin/mutmut" ]] || { echo "mutmut not found: pip install -e '.[test]'" >&2; exit 2; }
stage="$root/build/mutants-plan-cut"
mkdir -p "$stage"
for link in src:operator tests:tests benchmarks:benchmarks embedded-cluster:embedded-cluster; do
  ln -sfn "$root/${link#*:}" "$stage/${link%%:*}"
done
sed '/^\[tool\.mutmut\]/,/^\[/{/^\[tool\.mutmut\]/d;/^\[/!d}' "$root/pyproject.toml" \
  > "$stage/pyproject.toml"
cat >> "$stage/pyproject.toml" <<'EOF'

[tool.mutmut]
source_paths = ["src/vllm_operator"]
only_mutate = [
    "src/vllm_operator/gate/budget.py",
    "src/vllm_operator/gate/decidable.py",
]
pytest_add_cli_args_test_selection = [
    "tests/unit/gate/test_reachable_plan.py",
    "tests/unit/gate/test_decidable.py",
]
pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-x", "-q"]
EOF
cd "$stage"
export PYTHONPATH="$stage/embedded-cluster:$stage/tests"
changed=(
  "vllm_operator.gate.budget.x_reachable_plan__mutmut_*"
  "vllm_operator.gate.decidable.x_gate_plan__mutmut_*"
  "vllm_operator.gate.decidable.x__fix__mutmut_*"
)
if [[ $# -eq 0 || "$1" == -* ]]; then
  exec nice -n "${NICE:-10}" "$venv/bin/mutmut" run --max-children 1 "$@" "${changed[@]}"
fi
exec "$venv/bin/mutmut" "$@"
