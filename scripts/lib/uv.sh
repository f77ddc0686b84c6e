# Sourced by scripts/serve and scripts/test: puts uv (the Python package manager) on PATH,
# installing it with pip when missing. A Python the OS manages (PEP 668: Debian's, Ubuntu's)
# refuses pip installs, so there uv goes into a virtual environment of its own, .tools/uv.
ensure_uv() {
  export PATH="$HOME/.local/bin:$PWD/.tools/uv/bin:$PATH"
  command -v uv >/dev/null 2>&1 && return 0
  echo "Installing uv (the Python package manager) with pip..." >&2
  python3 -m pip install --quiet --disable-pip-version-check uv 2>/dev/null && command -v uv >/dev/null 2>&1 \
    && return 0
  python3 -m venv .tools/uv && .tools/uv/bin/pip install --quiet --disable-pip-version-check uv && return 0
  echo "could not install uv with pip, nor into a virtual environment (python3 -m venv): install" \
    "uv (https://docs.astral.sh/uv/), or the package python3-venv, and run this again" >&2
  return 1
}
