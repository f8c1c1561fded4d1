"""``experiments/gpu_compile.py``: kernels per round counted from a compiled chunk program, on a
hand-written module and on the CPU's compiled chunk (the GPU's needs JAX's CUDA plugin)."""

from __future__ import annotations

import jax
import pytest

from tests.scripts.load import ROOT, load_script

gpu_compile = load_script(ROOT / "experiments" / "gpu_compile.py")

# A chunk of 64 rounds: the round launches a fusion, a copy and a custom call with a tuple
# shape, and runs a loop of 3 iterations (2 kernels in its body, 1 in its condition).
MODULE = """HloModule jit_run_chunk, is_scheduled=true

%inner_body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]{0}) parameter(0)
  %a = f32[8]{0} fusion(%p), kind=kLoop, calls=%f1
  %b = s32[] fusion(%p), kind=kLoop, calls=%f2
  ROOT %t = (s32[], f32[8]{0}) tuple(%b, %a)
}

%inner_cond (p: (s32[], f32[8])) -> pred[] {
  %p = (s32[], f32[8]{0}) parameter(0)
  ROOT %c = pred[] fusion(%p), kind=kLoop, calls=%f3
}

%round (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]{0}) parameter(0)
  %g = f32[8]{0} get-tuple-element(%p), index=1
  %x = f32[8]{0} fusion(%g), kind=kLoop, calls=%f4
  %y = f32[8]{0} copy(%x)
  %z = (f32[8]{0}, /*index=1*/s32[]) custom-call(%y), custom_call_target="foo"
  %w = (s32[], f32[8]{0}) while(%p), condition=%inner_cond, body=%inner_body, @TRIP3@
  %k = f32[8]{0} bitcast(%y)
  ROOT %r = (s32[], f32[8]{0}) tuple(%g, %k)
}

%rounds_cond (p: (s32[], f32[8])) -> pred[] {
  %p = (s32[], f32[8]{0}) parameter(0)
  ROOT %c = pred[] fusion(%p), kind=kLoop, calls=%f5
}

ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  %i = (s32[], f32[8]{0}) fusion(%a), kind=kLoop, calls=%f6
  %l = (s32[], f32[8]{0}) while(%i), condition=%rounds_cond, body=%round, @TRIP64@
  ROOT %o = f32[8]{0} get-tuple-element(%l), index=1
}
"""
for _n in (3, 64):
    _trip = '{"known_trip_count":{"n":"' + str(_n) + '"}}'
    MODULE = MODULE.replace(f"@TRIP{_n}@", "backend_config=" + _trip)


def test_counts_the_round_its_nested_loops_and_the_chunk():
    counts = gpu_compile.count_kernels(MODULE, rounds=64)
    assert counts["round_kernels"] == 3  # fusion, copy, custom call; not gte/bitcast/tuple
    assert counts["round_ops"] == ["copy", "custom-call", "fusion"]
    assert counts["loops_in_round"] == 1
    assert counts["loop_kernels_per_round"] == 3 * (2 + 1)
    assert counts["chunk_kernels"] == 1  # the entry's fusion; its while is the rounds loop
    counts = gpu_compile.count_kernels(MODULE, rounds=32)  # no loop of that length
    assert counts["round_kernels"] == counts["loops_in_round"] == 0
    assert counts["loop_kernels_per_round"] == 0  # nothing counts per round


def test_a_compiled_chunk_has_no_loop_inside_its_round():
    """On the CPU: the chunk's loop over rounds is found and nothing loops inside it."""
    row = {"kind": "bandit", "learner": "stabl", "n": 8, "R": 16, "L": 8}
    row |= {"traces": ["played", "loss"], "kernel": "xla"}
    counts = gpu_compile.compile_row(jax.devices()[0], row)
    assert counts["round_kernels"] > 5
    assert counts["loops_in_round"] == 0
    table = gpu_compile.to_markdown({"rows": [counts]}).splitlines()
    first = f"| stabl | 8 | 16 | played, loss | xla | {counts['round_kernels']} |"
    assert table[2].startswith(first)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--target-config", "MISSING"], "--target-config MISSING: cannot read it ("),
        (["--local", "--target-config", "MISSING"], "not allowed with argument --local"),
        ([], "a deviceless GPU compile needs JAX's CUDA plugin (topology not implemented"),
    ],
)
def test_what_it_cannot_compile_for_is_named(tmp_path, monkeypatch, capsys, argv, message):
    """A missing target config, ``--local`` with it, or a JAX without its CUDA plugin: exit 2."""
    from jax.experimental import topologies

    def no_plugin(**kwargs):
        raise NotImplementedError("topology not implemented for cuda")  # what JAX raises

    monkeypatch.setattr(topologies, "get_topology_desc", no_plugin)
    missing = str(tmp_path / "missing.txt")
    with pytest.raises(SystemExit) as stop:
        gpu_compile.main([a.replace("MISSING", missing) for a in argv])
    assert stop.value.code == 2
    assert message.replace("MISSING", missing) in capsys.readouterr().err


PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'stabl_chunk' for 'sm_90a'
ptxas info    : Function properties for stabl_chunk
    1848 bytes stack frame, 2912 bytes spill stores, 3008 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 1848 bytes cumulative stack size
"""


def test_the_ptxas_report_is_read_for_the_kernel_and_the_ptx_target(tmp_path):
    """A fake ``ptxas`` (a real report's lines): the kernel's PTX compiled for its ``.target``."""
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "a.ptx").write_text(".target sm_90a\n.visible .entry exp3_chunk(\n")
    (dump / "b.ptx").write_text("//\n.version 8.4\n.target sm_90a\n.visible .entry stabl_chunk(\n")
    args = tmp_path / "args"
    ptxas = tmp_path / "ptxas"
    ptxas.write_text(f"#!/bin/sh\necho \"$@\" > {args}\ncat >&2 <<'END'\n{PTXAS_LOG}END\n")
    ptxas.chmod(0o755)
    report = gpu_compile.ptxas_report(str(ptxas), dump, "stabl_chunk")
    spills = {"spill_store_bytes": 2912, "spill_load_bytes": 3008}
    assert report == {"stack_bytes": 1848, **spills, "registers": 255}
    assert args.read_text().split()[:3] == ["-v", "-arch=sm_90a", str(dump / "b.ptx")]
    assert gpu_compile.ptxas_report(str(ptxas), dump, "saol_chunk") is None  # no such kernel
