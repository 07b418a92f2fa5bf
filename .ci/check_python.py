"""`make check-python`: refuse, in one line, an interpreter recio cannot be installed into.

That is one older than Python 3.9, or one pip refuses to install into (PEP 668: an
"externally managed" system Python such as Debian's /usr/bin/python3, outside a virtualenv,
unless pip is told to install there anyway), where pip would otherwise end in a long error.
"""
import os
import subprocess
import sys
import sysconfig

VENV_HINT = "create a virtualenv: python3 -m venv .venv && . .venv/bin/activate"
YES = ("1", "true", "yes", "on")


def pip_allows_system_installs() -> bool:
    """PIP_BREAK_SYSTEM_PACKAGES or a pip configuration's break-system-packages."""
    if os.environ.get("PIP_BREAK_SYSTEM_PACKAGES", "").lower() in YES:
        return True
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                             capture_output=True, text=True).stdout
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("break-system-packages") and value.strip("'\"").lower() in YES:
            return True
    return False


def main() -> str:
    if sys.version_info < (3, 9):
        return f"recio needs Python 3.9 or newer; {sys.executable} is %d.%d" % sys.version_info[:2]
    managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
    inside_venv = sys.prefix != sys.base_prefix
    if managed and not inside_venv and not pip_allows_system_installs():
        return f"{sys.executable} is managed by the system (PEP 668): {VENV_HINT}"
    return ""


if __name__ == "__main__":
    sys.exit(main() or None)
