# Sourced by the other scripts: make ./.venv exist and hold lotline with its dev tools.
# Reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${LOTLINE_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "lotline needs Python 3.11 or newer")'
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
stamp="$venv/.lotline-installed"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "installing lotline and its dependencies into $venv ..." >&2
    "$venv/bin/python" -m pip install --quiet -e "$root[dev]"
    echo "$want" > "$stamp"
fi
# The web UI's front-end libraries (package.json), copied into the package; quick when up to date.
"$venv/bin/python" "$root/scripts/build_assets.py"
export PATH="$venv/bin:$PATH"
cd "$root"
