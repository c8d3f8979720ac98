"""Installing the package as the README says writes nothing into the source tree
(issue 39: setuptools left build/ and src/treefork.egg-info/ there)."""

import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent


def listed(repo: Path) -> list:
    """Every untracked or ignored file under clients/python, as git lists them."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "--", str(PKG)],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # Bytecode the interpreter itself writes beside imported modules is not the
    # installer's doing.
    return sorted(l for l in out.splitlines() if "__pycache__" not in l)


def test_pip_install_leaves_the_source_tree_clean(tmp_path):
    repo = Path(
        subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=PKG, capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    before = listed(repo)
    # Into a directory of its own: the venv under test keeps its installed copy.
    p = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-deps", "--target", str(tmp_path / "site"), str(PKG)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "site" / "treefork" / "py.typed").exists(), "py.typed is installed"
    after = listed(repo)
    assert after == before, f"pip install wrote into {PKG}: {sorted(set(after) - set(before))}"
    assert not [l for l in after if "egg-info" in l or "/build/" in l], after
