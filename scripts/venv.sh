# Sourced by run.sh and test.sh: `ensure_venv FILE...` makes .venv and installs the requirements FILEs into it,
# once: a stamp in .venv records the files' hash (and Python's version), and a later call with the same files
# installs nothing. `python3 -m venv` and pip's "already satisfied" check cost about 5 CPU s on every start
# before (2.8 + 1.9 s measured here), which a newcomer's cold start counted (bench/README.md, "As a newcomer").
ensure_venv() {
    local stamp=".venv/.lengen-requirements-$(echo "$*" | sha256sum | cut -c1-12)" want  # one a set of FILEs
    want="$(python3 --version 2>&1) $(cat "$@" | sha256sum | cut -d' ' -f1)"
    if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    python3 -m venv .venv
    local args=()
    for file in "$@"; do args+=(-r "$file"); done
    .venv/bin/python -m pip install -q --disable-pip-version-check "${args[@]}"
    echo "$want" > "$stamp"
}
