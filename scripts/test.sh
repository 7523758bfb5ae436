#!/usr/bin/env bash
# Sets up a fresh machine and runs the tests (the README's test command; CI runs `--all`). docs/testing.md.
#
#   bash scripts/test.sh                          the fast tier: every test not marked `slow` (minutes)
#   bash scripts/test.sh --all                    every test, `slow` included (what CI runs, .ci/run)
#   bash scripts/test.sh tests/unit/test_fit.py   extra arguments go to pytest: here one file (fast tier)
#
# Two passes, each printing its slowest tests (--durations): first the tests on both cores (pytest-xdist,
# one process per core, `--dist loadscope`: each module on one of them, in order), then the `serial`
# tests alone (they measure memory or time, or cannot share the machine). A `-m` of yours replaces the
# tier's selection and runs in a single pass. LENGEN_TEST_WORKERS sets the number of processes (2).
# Ray (requirements-ray.txt, optional for the app) is installed so the sweep tests run on a real cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's chromium drives the browser tests (Playwright cannot download browsers here); Debian's nginx is
# the proxy in front of two app replicas in tests/e2e/test_replicas.py (deploy/nginx.conf, docs/scale.md).
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "${LENGEN_TEST_NO_SETUP:-0}" != 1 ]; then  # 1: the venv is set up already (a rerun); skip even the check
    source scripts/venv.sh
    ensure_venv requirements.txt requirements-dev.txt requirements-ray.txt  # installs nothing when they are in
fi

tier="not slow"
args=()
for arg in "$@"; do
    if [ "$arg" = "--all" ]; then tier=""; else args+=("$arg"); fi
done
workers="${LENGEN_TEST_WORKERS:-2}"
pytest=(.venv/bin/python -m pytest --durations=25)

# pytest exits 5 when a pass selects no test (one file with no serial test in it): not a failure unless
# neither pass ran anything. Any other non-zero status is the run's.
status() {
    local first=$1 second=$2
    if [ "$first" -ne 0 ] && [ "$first" -ne 5 ]; then return "$first"; fi
    if [ "$second" -ne 0 ] && [ "$second" -ne 5 ]; then return "$second"; fi
    if [ "$first" -eq 5 ] && [ "$second" -eq 5 ]; then return 5; fi
    return 0
}

for arg in ${args[@]+"${args[@]}"}; do
    case "$arg" in -m|-m*) exec "${pytest[@]}" -n "$workers" --dist loadscope ${args[@]+"${args[@]}"} ;; esac
done

both="not serial${tier:+ and $tier}"
alone="serial${tier:+ and $tier}"
echo "== on $workers processes: -m \"$both\""
parallel=0
"${pytest[@]}" -n "$workers" --dist loadscope -m "$both" ${args[@]+"${args[@]}"} || parallel=$?
echo "== alone: -m \"$alone\""
serial=0
"${pytest[@]}" -n 0 -m "$alone" ${args[@]+"${args[@]}"} || serial=$?
echo "== exit statuses: on $workers processes $parallel, alone $serial (5: no test selected)"
status "$parallel" "$serial"
