"""Results that take seconds to compute, kept on disk for other processes asking the same question.

Off unless the environment variable ``PERWATT_STORE`` names a folder. The test suite turns it on
for one run (``tests/conftest.py``), so that the two builds, the handouts, the kernels and the
test workers compute the fleet's plans, the serving sweeps and each figure's grid once between
them rather than once each. A workshop machine may turn it on too, so that students' kernels
share one computation.

A result is filed under a SHA-256 digest of everything it can depend on: the source of every
module of the package, every file of the data folder, the versions of Python and of the
numerical libraries, the function's module and name, and its arguments. Editing any of them
files results anew, so a stored answer is only ever one the same code gave for the same
question. Results are pickles: point ``PERWATT_STORE`` only at a folder of your own.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no locks; two processes may then compute one result twice
    fcntl = None

#: The environment variable that turns the store on and names its folder.
VARIABLE = "PERWATT_STORE"
#: The libraries whose version can change a result (the solver is SciPy's HiGHS).
LIBRARIES = ("numpy", "pandas", "scipy")
_PACKAGE = Path(__file__).resolve().parent


def folder() -> Path | None:
    """The store's folder, or None when the store is off."""
    value = os.environ.get(VARIABLE, "")
    return Path(value) if value else None


def digest_files(digest: "hashlib._Hash", root: Path, pattern: str) -> None:
    """Add to ``digest`` the name and content of every file under ``root`` matching ``pattern``."""
    for path in sorted(p for p in root.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())


@functools.cache
def fingerprint(data_dir: str) -> str:
    """A digest of the package's source, the data folder's files and the library versions."""
    digest = hashlib.sha256(sys.version.encode())
    for name in LIBRARIES:
        digest.update(f"{name}=={metadata.version(name)}".encode())
    digest_files(digest, _PACKAGE, "*.py")
    digest_files(digest, Path(data_dir), "*")
    return digest.hexdigest()


def key(data_dir: str, name: str, arguments: Any) -> str | None:
    """The digest a result is filed under; None for arguments that cannot be pickled (not stored)."""
    try:
        asked = pickle.dumps((name, arguments), protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    return hashlib.sha256(fingerprint(data_dir).encode() + asked).hexdigest()


def _read(path: Path) -> tuple[bool, Any]:
    try:
        with open(path, "rb") as handle:
            return True, pickle.load(handle)
    except FileNotFoundError:
        return False, None
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return False, None  # unreadable: computed again and written over


def remembered(compute: Callable[[], Any], data_dir: str, name: str, arguments: Any = ()) -> Any:
    """``compute()``, or the result it gave for the same ``name`` and ``arguments`` under the same
    code and data. One process computes a result while others asking for it wait, then read it."""
    where = folder()
    digest = key(data_dir, name, arguments) if where is not None else None
    if digest is None:
        return compute()
    path = where / digest[:2] / f"{digest}.pickle"
    found, value = _read(path)
    if found:
        return value
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        found, value = _read(path)  # another process may have written it while this one waited
        if found:
            return value
        value = compute()
        try:
            payload = pickle.dumps(value, protocol=5)
        except (pickle.PicklingError, TypeError, AttributeError):
            return value  # a result that cannot be pickled is simply not stored
        write_bytes_whole(path, payload)
        return value


def write_bytes_whole(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` so that a reader, in this process or another, finds the whole
    file or none (a temporary file beside it, then renamed)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".part")
    with os.fdopen(handle, "wb") as out:
        out.write(payload)
    os.replace(temporary, path)


def clear() -> None:
    """Forget the fingerprints computed in this process (after editing source or data)."""
    fingerprint.cache_clear()
