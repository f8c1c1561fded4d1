"""Provenance: the commit and dirtiness of the code that made a results folder."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from stabl_jax.experiment import provenance


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_code_version_in_this_checkout():
    info = provenance.code_version()
    git = ["git", "-C", str(provenance.PACKAGE_DIR.parent), "rev-parse", "HEAD"]
    inside = subprocess.run(git, capture_output=True, text=True, check=False)
    if inside.returncode != 0:  # an installed copy: no history beside it
        assert info["commit"] is None and info["dirty"] is None
    else:
        assert info["commit"] == inside.stdout.strip()
        assert isinstance(info["dirty"], bool)


def test_outside_a_checkout_records_no_commit(monkeypatch, tmp_path):
    monkeypatch.setattr(provenance, "PACKAGE_DIR", tmp_path / "stabl_jax")
    assert provenance.code_version()["commit"] is None


def test_cpu_reads_the_model_and_vector_extensions(tmp_path):
    """The first processor's ``model name`` and known vector extensions (``VECTOR_EXTENSIONS``
    order); without ``/proc/cpuinfo``, :mod:`platform`'s model and no extension."""
    cpuinfo = tmp_path / "cpuinfo"
    processor = "model name\t: Example CPU 9000\nflags\t\t: fpu avx2 sse4_2 fma avx512f foo\n"
    cpuinfo.write_text(processor + "\n" + processor.replace("9000", "1").replace("avx2", ""))
    extensions = ["sse4_2", "avx2", "fma", "avx512f"]
    assert provenance.cpu(cpuinfo) == {"model": "Example CPU 9000", "vector_extensions": extensions}
    missing = provenance.cpu(tmp_path / "absent")
    assert missing["vector_extensions"] == [] and isinstance(missing["model"], str)
