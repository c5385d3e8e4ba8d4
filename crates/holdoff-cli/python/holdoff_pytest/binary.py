"""Where the ``holdoff`` binary is: the one the wheel installed beside this package."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

#: Names a ``holdoff`` binary to use instead of the wheel's.
ENV_OVERRIDE = "HOLDOFF_BIN"

_NAME = "holdoff.exe" if os.name == "nt" else "holdoff"


class HoldoffNotFound(Exception):
    """No ``holdoff`` binary was found; the message says where it was looked for and what to do."""


def find_holdoff() -> str:
    """The path of the ``holdoff`` binary: ``$HOLDOFF_BIN`` if set, else the one in the scripts
    folder of the environment this package is installed in (where ``pip install holdoff`` puts
    it, user installs included), else the first on ``PATH``.

    Raises :class:`HoldoffNotFound` when there is none.
    """
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise HoldoffNotFound(
            f"{ENV_OVERRIDE}={override} is not an executable file: point it at a holdoff "
            f"binary, or unset it to use the one installed with this package"
        )
    folders = [sysconfig.get_path("scripts")]
    try:
        folders.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    # The interpreter's own folder: a venv's bin/ even when sysconfig looks elsewhere.
    folders.append(os.path.dirname(sys.executable))
    folders = [folder for n, folder in enumerate(folders) if folder and folder not in folders[:n]]
    for folder in folders:
        candidate = os.path.join(folder, _NAME)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which(_NAME)
    if on_path:
        return on_path
    raise HoldoffNotFound(
        f"found no holdoff binary in {', '.join(folders)} or on PATH: install the wheel that "
        f"carries it (pip install holdoff), or point {ENV_OVERRIDE} at a holdoff binary"
    )
