"""Every injected bug still applies to the code (a patch whose code moved would be reported
NOAPPLY only when someone runs inject.sh): re-make a patch in the change that moves its code."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PATCHES = sorted((ROOT / "tests" / "injected_bugs" / "patches").glob("*.patch"))


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs a git checkout")
@pytest.mark.parametrize("patch", PATCHES, ids=lambda path: path.stem)
def test_patch_applies(patch):
    result = subprocess.run(["git", "apply", "--check", str(patch)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, f"{patch.name} no longer applies:\n{result.stderr}"
