#!/usr/bin/env bash
# Resolve the project's dependencies (with the test extras) as `make venv` would, on each
# Python that requires-python admits beyond the one CI runs on, without installing anything:
#   pip install --dry-run --report  (resolution only; fast-deps reads each wheel's metadata
#   by range requests instead of downloading it: torch's CUDA wheel alone is 0.5 GB)
# It resolves against the public index alone (PIP_CONFIG_FILE=/dev/null: no local wheel
# folders, no machine constraints), as on a user's machine. Fails when pip does not resolve,
# backtracks ("pip is looking at multiple versions": the 11-minute walk through transformers
# releases of issue 26), or takes longer than RESOLVE_LIMIT_S seconds (default 90: 33-67 s
# were measured on a 2-core machine under a load of 7). A Python that is not installed
# (python3.X on PATH, or under pyenv) or an index that cannot be reached is a skip, said so.
#   scripts/check-resolve.sh [3.12 3.13]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
limit=${RESOLVE_LIMIT_S:-90}
export PIP_CONFIG_FILE=/dev/null
versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || versions=(3.12 3.13)
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

interpreter() { # interpreter 3.12: the path of one that runs, or nothing
  local v=$1 p root
  root=$(pyenv root 2>/dev/null || echo "${HOME}/.pyenv")
  for p in "$(command -v "python${v}" 2>/dev/null || true)" "${root}"/versions/"${v}".*/bin/python; do
    # a pyenv shim is on PATH for every version it knows, and fails for the others
    if [[ -n ${p} && -x ${p} ]] && "${p}" -c 'import sys' >/dev/null 2>&1; then
      echo "${p}"
      return
    fi
  done
}

# one recent pip (fast-deps needs one), run for each Python with `pip --python`
tool="${work}/tool"
python3 -m venv "${tool}"
if ! timeout 120 "${tool}/bin/python" -m pip install --quiet --disable-pip-version-check \
    'pip>=25' >"${work}/pip.log" 2>&1; then
  echo "  skipped: pip could not be updated from the index ($(tail -n 1 "${work}/pip.log"))"
  exit 0
fi

failed=0
for v in "${versions[@]}"; do
  py=$(interpreter "${v}")
  if [[ -z ${py} ]]; then
    echo "  python ${v}: skipped (no python${v} on PATH or under pyenv)"
    continue
  fi
  log="${work}/resolve-${v}.log"
  start=${SECONDS}
  rc=0
  timeout $((limit + 60)) "${tool}/bin/python" -m pip --python "${py}" install --dry-run \
    --ignore-installed --disable-pip-version-check --use-feature=fast-deps --report "${work}/report-${v}.json" \
    '.[test]' >"${log}" 2>&1 || rc=$?
  took=$((SECONDS - start))
  if [[ ${rc} -ne 0 ]]; then
    echo "  python ${v}: FAILED to resolve in ${took}s (exit ${rc}):"
    grep -E "ERROR|error" "${log}" | head -n 5 | sed 's/^/    /'
    failed=1
  elif grep -q "pip is looking at multiple versions" "${log}"; then
    echo "  python ${v}: FAILED: pip backtracked ($(grep -c "looking at multiple" "${log}")" \
      "times) in ${took}s:"
    grep "looking at multiple" "${log}" | head -n 3 | sed 's/^/    /'
    failed=1
  elif [[ ${took} -gt ${limit} ]]; then
    echo "  python ${v}: FAILED: resolved in ${took}s, over the ${limit}s limit" \
      "(load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'))"
    failed=1
  else
    picked=$(python3 - "${work}/report-${v}.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
names = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in r["install"]}
print(f"Python {r['environment']['python_full_version']}: {len(names)} packages; " + ", ".join(f"{n} {names[n]}" for n in
      ("torch", "transformers", "tokenizers", "numpy") if n in names))
EOF
)
    echo "  python ${v}: resolved at once in ${took}s (${picked})"
  fi
done
exit "${failed}"
