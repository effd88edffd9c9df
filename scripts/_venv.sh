# Sourced by the other scripts: make ./.venv exist and hold lotline with its dev tools.
# Reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${LOTLINE_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "lotline needs Python 3.11 or newer")'
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
# uv installs (from PyPI, through its cache) and compiles the installed modules on every core: 49 s
# where pip took 143 s. Compiled, because where PYTHONDONTWRITEBYTECODE is set nothing compiled at
# import is kept. pip puts uv into the venv first.
uv="$venv/bin/uv"
[[ -x "$uv" ]] || "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv>=0.9,<1"
stamp="$venv/.lotline-installed"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "installing lotline and its dependencies into $venv ..." >&2
    "$uv" pip install --quiet --python "$venv/bin/python" --compile-bytecode -e "$root[dev]"
    echo "$want" > "$stamp"
fi
# The web UI's front-end libraries (package.json), copied into the package; quick when up to date.
"$venv/bin/python" "$root/scripts/build_assets.py"
export PATH="$venv/bin:$PATH"
cd "$root"
