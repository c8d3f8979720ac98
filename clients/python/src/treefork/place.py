"""Where a run of an experiment or a bisect sees its fork, as
``src/command/place.rs`` does for the CLI: at the workspace's own absolute path
(``run_at="workspace"``, the default) or at the fork's mountpoint
(``run_at="fork"``, ``<parent>/<name>.experiments/<fork>``).

At the workspace's path a run starts under util-linux ``unshare``: a private
mount namespace (and, when not root, a user namespace mapping the caller to
itself), the fork bind-mounted recursively over the workspace's mountpoint, then
``cd`` into the same directory relative to the root, with ``PWD`` set. So
programs see the path the workspace has (no dot-directory, same depth and
basename); the host's view is untouched. Only programs of the system run here
(``unshare``, ``sh``, ``mount`` from fixed system directories), never one found
in a workspace.

Whether the kernel allows it is probed once per process (:func:`available`);
when it does not, runs see their forks at the fork's mountpoint, with one
warning saying why.
"""

import os
import shutil
import subprocess
import tempfile
import threading
import warnings
from typing import List, Optional, Tuple

# Only these directories are searched for the wrapper's programs.
_SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
# $1 fork, $2 workspace, $3 relative directory, $4 mount(8); then the command.
_SCRIPT = (
    '"$4" --rbind -- "$1" "$2" || exit 126; d="$2${3:+/$3}"; cd "$d" || exit 126; '
    'PWD="$d"; export PWD; shift 4; exec "$@"'
)

_probe_lock = threading.Lock()
_probed: Optional[Tuple[bool, str]] = None


def _programs() -> Optional[Tuple[str, str, str]]:
    found = [shutil.which(p, path=_SYSTEM_PATH) for p in ("unshare", "sh", "mount")]
    if any(f is None for f in found):
        return None
    return found[0], found[1], found[2]  # type: ignore[return-value]


def wrap(argv: List[str], fork: str, workspace: str, rel: str) -> List[str]:
    """``argv`` run with ``fork`` seen at ``workspace`` (cwd ``workspace/rel``)."""
    progs = _programs()
    if progs is None:
        raise OSError("unshare, sh or mount is missing from " + _SYSTEM_PATH)
    unshare, sh, mount = progs
    flags = ["--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        flags = ["--user", "--map-current-user"] + flags
    return [unshare, *flags, "--", sh, "-c", _SCRIPT, "treefork-place", fork, workspace, rel, mount, *argv]


def available() -> Tuple[bool, str]:
    """Whether runs can see their forks at the workspace's path here, and if not
    why (probed once: a bind of one scratch directory over another)."""
    global _probed
    with _probe_lock:
        if _probed is None:
            _probed = _probe()
        return _probed


def _probe() -> Tuple[bool, str]:
    if _programs() is None:
        return False, "unshare, sh or mount is missing from " + _SYSTEM_PATH
    with tempfile.TemporaryDirectory(prefix="treefork-place-") as d:
        a, b = os.path.join(d, "a"), os.path.join(d, "b")
        os.mkdir(a)
        os.mkdir(b)
        open(os.path.join(a, "seen"), "w").close()
        try:
            r = subprocess.run(
                wrap(["test", "-e", "seen"], a, b, ""),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, str(e)
        if r.returncode != 0:
            return False, r.stderr.decode(errors="replace").strip() or f"exit {r.returncode}"
    return True, ""


def resolve(run_at: str) -> bool:
    """Whether runs see forks at the workspace's path: ``run_at`` checked, and
    ``"workspace"`` falling back (with a warning) where the kernel refuses."""
    if run_at == "fork":
        return False
    if run_at != "workspace":
        raise ValueError(f"run_at must be 'workspace' or 'fork', not {run_at!r}")
    ok, why = available()
    if not ok:
        warnings.warn(f"runs see their forks at the fork's mountpoint: a private mount namespace is refused here ({why})")
    return ok
