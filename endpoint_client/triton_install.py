"""The CPU `tritonserver` of the nvidia-pytriton wheel, installed in its own venv (.venv-triton).

Facts from ../shared/README.md ("Tooling facts"): the wheel bundles tritonserver 2.51 with the Python
backend only and the SageMaker service compiled in; it needs numpy<2 (hence its own venv). The wheel
ships one Python-backend stub per Python version (python_backend_stubs/<X.Y>/); like pytriton itself
we copy the one matching the venv's Python next to the backend, and the stub must find that same
Python: the venv's bin/ first on PATH and its libpython directory on LD_LIBRARY_PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from endpoint_client.errors import LocalEndpointError

DEFAULT_TRITON_ENV = Path(".venv-triton")
_INTERPRETER_FACTS = (
    "import json, sys, sysconfig; "
    "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], 'libdir': sysconfig.get_config_var('LIBDIR'), "
    "'shared': bool(sysconfig.get_config_var('Py_ENABLE_SHARED'))}))"
)


@dataclass(frozen=True)
class TritonInstall:
    venv: Path
    server_root: Path  # site-packages/pytriton/tritonserver
    libs: Path  # site-packages/nvidia_pytriton.libs
    python_version: str  # "3.11"
    libpython_dir: Path

    @property
    def binary(self) -> Path:
        return self.server_root / "bin" / "tritonserver"

    @classmethod
    def find(cls, venv: Path = DEFAULT_TRITON_ENV) -> TritonInstall:
        venv = venv.absolute()
        python = venv / "bin" / "python"
        roots = sorted(venv.glob("lib/python3*/site-packages/pytriton/tritonserver"))
        if not python.is_file() or not roots or not (roots[0] / "bin" / "tritonserver").is_file():
            raise LocalEndpointError(
                f"no Triton server in {venv}: create it with `make .venv-triton/.stamp` "
                "(installs nvidia-pytriton from requirements-triton.txt)"
            )
        facts = json.loads(
            subprocess.run([python, "-c", _INTERPRETER_FACTS], check=True, capture_output=True, text=True).stdout
        )
        if not facts["shared"]:
            raise LocalEndpointError(
                f"{python} is a Python built without a shared libpython; the Python backend stub needs "
                "libpython3.X.so: build the venv from a Python with --enable-shared (e.g. Debian's python3)"
            )
        install = cls(
            venv, roots[0], roots[0].parent.parent / "nvidia_pytriton.libs", facts["version"], Path(facts["libdir"])
        )
        if not install.stub.is_file():
            raise LocalEndpointError(
                f"nvidia-pytriton has no Python backend stub for Python {install.python_version} ({install.stub})"
            )
        return install

    @property
    def stub(self) -> Path:
        return self.server_root / "python_backend_stubs" / self.python_version / "triton_python_backend_stub"

    def prepare_backends(self, destination: Path) -> Path:
        """A backend directory holding the Python backend with the stub for this venv's Python."""
        python_backend = destination / "python"
        shutil.copytree(self.server_root / "backends" / "python", python_backend)
        shutil.copy2(self.stub, python_backend / "triton_python_backend_stub")
        return destination

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        env["PATH"] = os.pathsep.join([str(self.venv / "bin"), base.get("PATH", os.defpath)])
        library_path = [str(self.libpython_dir), str(self.libs)]
        if base.get("LD_LIBRARY_PATH"):
            library_path.append(base["LD_LIBRARY_PATH"])
        env["LD_LIBRARY_PATH"] = os.pathsep.join(library_path)
        env.pop("PYTHONHOME", None)
        env.pop("PYTHONPATH", None)  # the stub must import the venv's numpy<2, not the caller's packages
        return env
