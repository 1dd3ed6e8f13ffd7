#!/usr/bin/env bash
# Mutation testing of the tail judge (gate/tails.py, binomial.py, tallies.py, tail_baseline.py,
# slo_tails.py) against the gate's unit tests, with mutmut 3 (the test extra).
#
# mutmut 3 names a mutant's module after its file's path, taking off only a leading "src.", and
# puts only mutants/, mutants/src and mutants/source on sys.path; this tree keeps its package
# in operator/. So the tree is staged in build/mutants-tail-judge/ with src/ -> operator/ (links,
# nothing copied but pyproject.toml), and mutmut runs there with [tool.mutmut] of pyproject.toml.
#
#   hack/mutants-tail-judge.sh             run (one worker; any mutmut run options pass through)
#   hack/mutants-tail-judge.sh results     the survivors (any mutmut command: show NAME, browse)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.venv}"
[[ -x "$venv/bin/mutmut" ]] || { echo "mutmut not found: pip install -e '.[test]'" >&2; exit 2; }
stage="$root/build/mutants-tail-judge"
mkdir -p "$stage"
for link in src:operator tests:tests benchmarks:benchmarks embedded-cluster:embedded-cluster; do
  ln -sfn "$root/${link#*:}" "$stage/${link%%:*}"
done
cp "$root/pyproject.toml" "$stage/pyproject.toml"
cd "$stage"
# mutants/src goes first on sys.path (mutmut); the tests' own helpers and the embedded
# cluster come from the tree
export PYTHONPATH="$stage/embedded-cluster:$stage/tests"
if [[ $# -eq 0 || "$1" == -* ]]; then
  exec "$venv/bin/mutmut" run --max-children 1 "$@"
fi
exec "$venv/bin/mutmut" "$@"
