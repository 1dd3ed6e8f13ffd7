#!/usr/bin/env bash
# Mutation testing of the judge issue 40 changed (gate/clustering.py; judge_share_fixed and
# across_at of gate/tails.py; judged_share, regression_limit and floor_source of
# gate/slo_tails.py) against the judge's fast unit tests only, with mutmut 3 (the test extra).
#
# Staged as hack/mutants-tail-judge.sh stages it (src/ -> operator/, links), in its own
# folder build/mutants-changed-judge/, with its own [tool.mutmut] written into the staged copy
# of pyproject.toml (the root one keeps the tail judge's). mutmut mutates the three files
# whole; only the mutants of the changed functions are run (names matched as globs).
#
#   hack/mutants-changed-judge.sh            run them (one worker, nice 10; NICE=N to change)
#   hack/mutants-changed-judge.sh results    what survived (any mutmut command: show NAME)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.venv}"
[[ -x "$venv/bin/mutmut" ]] || { echo "mutmut not found: pip install -e '.[test]'" >&2; exit 2; }
stage="$root/build/mutants-changed-judge"
mkdir -p "$stage"
for link in src:operator tests:tests benchmarks:benchmarks embedded-cluster:embedded-cluster; do
  ln -sfn "$root/${link#*:}" "$stage/${link%%:*}"
done
# the root pyproject.toml up to its [tool.mutmut] table, then this run's table
sed '/^\[tool\.mutmut\]/,/^\[/{/^\[tool\.mutmut\]/d;/^\[/!d}' "$root/pyproject.toml" \
  > "$stage/pyproject.toml"
cat >> "$stage/pyproject.toml" <<'EOF'

[tool.mutmut]
source_paths = ["src/vllm_operator"]
only_mutate = [
    "src/vllm_operator/gate/clustering.py",
    "src/vllm_operator/gate/tails.py",
    "src/vllm_operator/gate/slo_tails.py",
]
pytest_add_cli_args_test_selection = [
    "tests/unit/gate/test_clustering.py",
    "tests/unit/gate/test_clustering_mutants.py",
    "tests/unit/gate/test_slo_tails.py",
    "tests/unit/gate/test_slo_tails_pairs_mutants.py",
]
pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-x", "-q"]
EOF
cd "$stage"
export PYTHONPATH="$stage/embedded-cluster:$stage/tests"
changed=(
  "vllm_operator.gate.clustering.*"
  "vllm_operator.gate.tails.x_judge_share_fixed__mutmut_*"
  "vllm_operator.gate.tails.x_across_at__mutmut_*"
  "vllm_operator.gate.slo_tails.x_judged_share__mutmut_*"
  "vllm_operator.gate.slo_tails.x_regression_limit__mutmut_*"
  "vllm_operator.gate.slo_tails.x_floor_source__mutmut_*"
)
if [[ $# -eq 0 || "$1" == -* ]]; then
  exec nice -n "${NICE:-10}" "$venv/bin/mutmut" run --max-children 1 "$@" "${changed[@]}"
fi
exec "$venv/bin/mutmut" "$@"
