"""flashbob.bench (`python -m flashbob.bench`): its pure parts (the command line, the flop counts,
the grid, the plan of a run with its OOM and time-limit rules, the failure classes, the tables,
the CSV, the plot's data) from hand-made results, with neither torch nor a GPU; then, where torch
>= 2.4 sees a CUDA GPU, a tiny real run (skipped elsewhere, saying why).

    python3 -m pytest -q test/python/test_bench.py     # PYTHONPATH=python, or the wheel installed
"""

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flashbob.bench import _args, _env, _plot, _report, _result, _spec
from flashbob.bench._plan import Planner
from flashbob.bench._result import FAILED, OK, OOM, REFUSED, SKIPPED, Result
from flashbob.bench._spec import Cell

ENV = {"gpu": "NVIDIA H100 80GB HBM3", "sm": "sm_90", "sms": 132, "memory_gib": 79.1,
       "driver": "570.86.15", "torch": "2.7.0+cu126", "cuda": "12.6", "cudnn": "9.5.1",
       "python": "3.11.7", "flashbob": "0.9.0", "commit": "abc1234", "date": "2026-12-08 10:00 UTC",
       "flush_mib": 256}


def config(*argv):
    return _args.parse(list(argv))


def result(op, impl, n, d=64, causal=False, status=OK, ms=None, peak=None, detail="", ceiling=800.0,
           heads=16):
    times = [ms * 0.98, ms, ms * 1.05] if ms is not None else []
    return Result(Cell(op, impl, n, d, causal), 1, heads, "bf16", status, times_ms=times,
                  peak_bytes=peak, detail=detail, ceiling_tflops=ceiling)


# --- the command line ---------------------------------------------------------------------------

def test_defaults_are_the_readme_grid():
    c = config()
    assert c.ns == [1024, 2048, 4096, 8192, 16384, 32768]
    assert c.head_dims == [64, 128] and c.causal_modes == [False, True]
    assert c.ops == list(_spec.OPS) and c.impls == list(_spec.IMPLS)
    assert (c.batch, c.heads, c.dtype, c.warmup, c.iters) == (1, 16, "bf16", 1, 10)
    assert c.time_limit is None and not c.quick


def test_quick_is_small_and_explicit_options_win():
    q = config("--quick")
    assert q.quick and q.ns == [1024, 2048] and q.head_dims == [64] and q.iters == 3
    assert len(q.ns) * len(q.head_dims) * len(q.causal_modes) < len(config().ns) * 4
    q = config("--quick", "--ns", "4K", "--heads", "2", "--iters", "5")
    assert (q.ns, q.heads, q.iters) == ([4096], 2, 5)


def test_lists_sizes_and_names():
    c = config("--ns", "4K,1024,1M,4096", "--head-dims", "128,64,128", "--causal", "yes",
               "--ops", "hvp,fwd", "--impls", "eager,flashbob", "--dtype", "fp16")
    assert c.ns == [1024, 4096, 1 << 20]  # sorted, each once
    assert c.head_dims == [128, 64] and c.causal_modes == [True]
    assert c.ops == ["fwd", "hvp"] and c.impls == ["flashbob", "eager"]  # canonical order
    assert c.dtype == "fp16"
    assert config("--causal", "no").causal_modes == [False]
    assert _args.parse_size(" 32k ") == 32768


@pytest.mark.parametrize("argv,named", [
    (["--ns", "abc"], "--ns"),
    (["--ns", "0"], "--ns"),
    (["--ops", "fwd,bwd"], "--ops"),
    (["--impls", "sdpa-triton"], "--impls"),
    (["--head-dims", "-64"], "--head-dims"),
    (["--iters", "0"], "--iters"),
    (["--warmup", "-1"], "--warmup"),
    (["--time-limit", "0"], "--time-limit"),
    (["--dtype", "fp32"], "--dtype"),
])
def test_bad_arguments_exit_2_naming_the_argument(argv, named, capsys):
    with pytest.raises(SystemExit) as e:
        _args.parse(argv)
    assert e.value.code == 2
    assert named in capsys.readouterr().err


def test_help_needs_no_torch():
    """--help in a fresh interpreter that cannot import torch (a stand-in module that raises)."""
    package_root = Path(_spec.__file__).resolve().parents[2]
    code = ("import sys; sys.modules['torch'] = None\n"
            "from flashbob.bench import main\n"
            "main(['--help'])\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(package_root)})
    assert p.returncode == 0, p.stderr
    assert "--quick" in p.stdout and "python -m flashbob.bench" in p.stdout


def test_flashbob_bench_compare_hands_over_to_the_module(capsys):
    """The wheel's `flashbob` command (flashbob.__main__) runs `bench --compare` in Python, before
    the library is loaded: --help names the command it was given as."""
    from flashbob.__main__ import main as flashbob_main
    with pytest.raises(SystemExit) as e:
        flashbob_main(["bench", "--compare", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: flashbob bench --compare") and "--quick" in out


# --- flop counts and the grid -------------------------------------------------------------------

def test_flop_counts():
    n, d, h = 4096, 128, 16
    fwd = _spec.flops("fwd", 1, h, n, n, d, False)
    assert fwd == 4 * n * n * d * h
    backward = _spec.flops("fwd-bwd", 1, h, n, n, d, False) - fwd
    assert backward == 2.5 * fwd  # backward = 2.5x the forward
    assert _spec.flops("bob", 1, h, n, n, d, False) == 36 * n * n * d * h
    assert _spec.flops("hvp", 1, h, n, n, d, False) == fwd + backward + _spec.flops("bob", 1, h, n, n, d, False)
    assert _spec.flops("fwd-jvp", 1, h, n, n, d, False) == 3 * fwd
    for op in _spec.OPS:
        assert _spec.flops(op, 2, h, n, n, d, True) == _spec.flops(op, 1, h, n, n, d, False)


def test_tflops_matches_the_cli_table():
    # bench/results/2026-12-04-h200-perf-table.md: BoB, d = 128, 16 heads, N = 16K: 47.4 ms
    # (rounded), 417.4 TFLOP/s by `flashbob bench`.
    assert _spec.tflops("bob", 1, 16, 16384, 16384, 128, False, 47.4) == pytest.approx(417.4, abs=0.5)
    assert _spec.tflops("bob", 1, 16, 16384, 16384, 128, False, 0) is None


def test_grid_runs_n_outermost():
    cells = list(_spec.grid([1024, 2048], [64, 128], [False, True], ["fwd", "bob"], ["flashbob", "eager"]))
    assert len(cells) == 2 * 2 * 2 * 2 * 2
    assert [c.n for c in cells] == sorted(c.n for c in cells)
    assert cells[0] == Cell("fwd", "flashbob", 1024, 64, False)
    assert cells[1] == Cell("fwd", "eager", 1024, 64, False)
    assert _spec.format_n(32768) == "32K" and _spec.format_n(1 << 20) == "1M" and _spec.format_n(1000) == "1000"


# --- failures: OOM, refused, failed ---------------------------------------------------------------

def test_out_of_memory_is_oom_for_every_implementation():
    msg = ("CUDA out of memory. Tried to allocate 32.00 GiB. GPU 0 has a total capacity of "
           "79.19 GiB of which 12.00 GiB is free.")
    assert _result.classify("eager", "OutOfMemoryError", msg) == (OOM, "tried to allocate 32.00 GiB")
    assert _result.classify("flashbob", "OutOfMemoryError", msg)[0] == OOM
    assert _result.classify("sdpa-cudnn", "RuntimeError", "cuDNN error: CUDNN_STATUS_ALLOC_FAILED")[0] == OOM
    assert _result.classify("flashbob", "FlashBobError", "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY")[0] == OOM


def test_a_backend_that_refuses_is_marked_refused_with_its_reasons():
    status, detail = _result.classify(
        "sdpa-flash", "RuntimeError", "No available kernel. Aborting execution.",
        ["Flash attention kernel not used because: (Triggered internally at ../sdpa_utils.cpp:1)",
         "Flash attention kernel not used because: (Triggered internally at ../sdpa_utils.cpp:1)",
         "Flash Attention does not support head dimension 512."])
    assert status == REFUSED
    assert detail == ("RuntimeError: No available kernel. Aborting execution. (Flash Attention does "
                      "not support head dimension 512.)")
    status, detail = _result.classify(
        "sdpa-cudnn", "RuntimeError",
        "derivative for aten::_scaled_dot_product_cudnn_attention_backward is not implemented\nmore")
    assert status == REFUSED and detail.endswith("is not implemented")


def test_flashbob_raising_is_a_failure():
    assert _result.classify("flashbob", "ValueError", "head_dim 72: not supported") == (
        FAILED, "ValueError: head_dim 72: not supported")


# --- the plan: OOM at a smaller N, the time limit --------------------------------------------------

class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_after_oom_larger_n_is_not_tried_for_that_cell_only():
    p = Planner(config("--ns", "8K,16K,32K"))
    p.record(result("hvp", "eager", 16384, status=OOM, detail="tried to allocate 40 GiB"))
    assert p.verdict(Cell("hvp", "eager", 32768, 64, False)) == (OOM, "not tried: out of memory at N = 16K")
    assert p.verdict(Cell("hvp", "eager", 16384, 128, False)) is None  # another head dim
    assert p.verdict(Cell("hvp", "eager", 32768, 64, True)) is None    # another mask
    assert p.verdict(Cell("bob", "eager", 32768, 64, False)) is None   # another operation
    assert p.verdict(Cell("hvp", "flashbob", 32768, 64, False)) is None


def test_time_limit_skips_what_would_not_fit():
    clock = Clock()
    p = Planner(config("--time-limit", "60", "--iters", "10", "--warmup", "1"), clock=clock)
    assert p.verdict(Cell("bob", "flashbob", 1024, 64, False)) is None  # nothing known: runs
    p.record(result("bob", "flashbob", 8192, ms=100.0))
    # 16K: 12 runs of 4 x 100 ms + 0.5 s = 5.3 s, fits; 64K: 12 x 6.4 s, does not.
    assert p.estimate_s(Cell("bob", "flashbob", 16384, 64, False)) == pytest.approx(5.3)
    assert p.verdict(Cell("bob", "flashbob", 16384, 64, False)) is None
    status, detail = p.verdict(Cell("bob", "flashbob", 65536, 64, False))
    assert status == SKIPPED and detail == "time limit: estimated 77.3 s, 60.0 s left"
    clock.t += 61
    assert p.verdict(Cell("fwd", "eager", 1024, 64, False)) == (SKIPPED, "time limit (60 s) reached")


def test_without_a_limit_nothing_is_skipped_for_time():
    clock = Clock()
    p = Planner(config(), clock=clock)
    p.record(result("bob", "flashbob", 1024, ms=1e6))
    clock.t += 1e9
    assert p.verdict(Cell("bob", "flashbob", 1 << 20, 64, False)) is None


# --- the tables and the CSV -----------------------------------------------------------------------

def sample():
    c = config("--ns", "1K,32K", "--head-dims", "64", "--causal", "no", "--ops", "bob",
               "--impls", "flashbob,sdpa-flash,sdpa-math,eager", "--commit", "abc1234")
    rs = [
        result("bob", "flashbob", 1024, ms=0.125, peak=30 << 20),
        result("bob", "sdpa-flash", 1024, status=REFUSED,
               detail="RuntimeError: derivative for aten::_flash_attention_backward is not implemented"),
        result("bob", "sdpa-math", 1024, ms=1.5, peak=1 << 30),
        result("bob", "eager", 1024, ms=0.9, peak=400 << 20),
        result("bob", "flashbob", 32768, ms=104.3, peak=800 << 20),
        result("bob", "sdpa-flash", 32768, status=REFUSED,
               detail="RuntimeError: derivative for aten::_flash_attention_backward is not implemented"),
        result("bob", "sdpa-math", 32768, status=OOM, detail="tried to allocate 32.00 GiB"),
        result("bob", "eager", 32768, status=OOM, detail="not tried: out of memory at N = 16K"),
    ]
    ceiling = {"tflops": 800.0, "size": 8192, "sizes": [4096, 8192, 16384]}
    check = {"passed": True, "worst": ("gQ d=64", 2.4e-3), "bound": 5e-3, "dtype": "bf16",
             "shape": "batch 1, 2 heads, N = M = 256, outputs gQ, gK, gV, gdO"}
    return c, rs, ceiling, check


def test_markdown_header_states_machine_software_and_command():
    c, rs, ceiling, check = sample()
    text = _report.markdown(ENV, c, ceiling, check, rs, "python -m flashbob.bench")
    for fact in ("NVIDIA H100 80GB HBM3", "sm_90", "132 SMs", "driver 570.86.15", "torch 2.7.0+cu126",
                 "cuDNN 9.5.1", "flashbob 0.9.0", "commit abc1234",
                 "`python -m flashbob.bench --ns 1K,32K --head-dims 64 --causal no --ops bob",
                 "**800.0 TFLOP/s** (at 8192^3)", "worst relative L2 error 2.4e-03 (gQ d=64)", "PASS",
                 "batch 1, 16 heads, bf16"):
        assert fact in text, fact


def test_markdown_table_cells():
    c, rs, ceiling, check = sample()
    lines = _report.tables(rs, c)
    assert lines[0] == "## " + _spec.OP_TITLES["bob"] + "; d = 64, not causal"
    assert lines[2] == "| N | FlashBoB | SDPA flash | SDPA math | eager | fastest other / FlashBoB |"
    row_1k = lines[4]
    # 36 * 1024^2 * 64 * 16 flops in 0.125 ms: 309.2 TFLOP/s, 39% of 800.
    assert row_1k.startswith("| 1K | 0.125 ms · 309.2 TFLOP/s · 39% · 30 MiB | refused | 1.500 ms")
    assert row_1k.endswith("| 7.20x (eager) |")
    row_32k = lines[5]
    assert "| 104.3 ms · " in row_32k and "0.78 GiB" in row_32k
    assert row_32k.endswith("| refused | OOM | OOM | no other ran |")


def test_notes_list_each_refusal_once_and_every_failure():
    c, rs, ceiling, check = sample()
    rs.append(result("bob", "flashbob", 2048, status=FAILED, detail="FlashBobError: launch failed"))
    notes = "\n".join(_report.notes(rs))
    assert notes.count("derivative for aten::_flash_attention_backward") == 1
    assert "## Failures" in notes and "N = 2K: FlashBobError: launch failed" in notes


def test_check_failure_reads_as_fail():
    check = {"passed": False, "worst": ("dK d=128 causal", 0.3), "bound": 5e-3, "dtype": "bf16", "shape": "x"}
    assert "**FAIL**" in _report.check_sentence(check) and "3.0e-01 (dK d=128 causal)" in _report.check_sentence(check)


def test_csv_has_a_row_per_cell():
    c, rs, ceiling, check = sample()
    rows = list(csv.DictReader(io.StringIO(_report.csv_text(rs))))
    assert len(rows) == len(rs)
    assert tuple(rows[0]) == _report.CSV_FIELDS
    first = rows[0]
    assert (first["op"], first["impl"], first["n"], first["m"], first["d"], first["causal"]) == (
        "bob", "flashbob", "1024", "1024", "64", "0")
    assert first["status"] == "ok" and first["median_ms"] == "0.1250" and first["runs"] == "3"
    assert float(first["tflops"]) == pytest.approx(309.24, abs=0.01)
    assert first["peak_bytes"] == str(30 << 20)
    oom = rows[6]
    assert oom["status"] == "OOM" and oom["median_ms"] == "" and oom["detail"] == "tried to allocate 32.00 GiB"


def test_no_ceiling_no_percentage():
    r = result("fwd", "flashbob", 1024, ms=1.0, ceiling=None)
    assert r.pct_ceiling is None
    assert _report.cell_text(r).count("·") == 2  # time, TFLOP/s, memory


# --- the plot ---------------------------------------------------------------------------------------

def test_plot_series_and_layout():
    c, rs, _, _ = sample()
    data = _plot.series(rs, c, "tflops")
    (g,) = data
    assert (g.op, g.d, g.causal) == ("bob", 64, False)
    assert set(data[g]) == {"flashbob", "sdpa-math", "eager"}  # refused everywhere: no line
    assert [n for n, _ in data[g]["flashbob"]] == [1024, 32768]
    assert data[g]["sdpa-math"] == [(1024, pytest.approx(rs[2].tflops))]
    times = _plot.series(rs, c, "time")
    assert times[g]["flashbob"] == [(1024, 0.125), (32768, 104.3)]
    with pytest.raises(ValueError):
        _plot.series(rs, c, "watts")
    full = config("--ops", "fwd,bob", "--head-dims", "64,128")
    rows, cols, where = _plot.layout(full)
    assert (rows, cols) == (2, 4)
    assert where[_spec.Group("bob", 128, True)] == (1, 3)


def test_plot_is_drawn_when_matplotlib_is_installed(tmp_path):
    missing = _plot.matplotlib_missing()
    if missing:
        pytest.skip(f"{missing}: the plot's data is tested above, drawing it is not")
    c, rs, _, _ = sample()
    path = tmp_path / "perf.png"
    assert _plot.draw(str(path), rs, c, "tflops", "test") is None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- the environment ------------------------------------------------------------------------------

def test_commit_given_then_recorded_then_none(tmp_path):
    assert _env.find_commit(tmp_path, "deadbee") == "deadbee"
    (tmp_path / _env.BUILD_COMMIT_FILE).write_text("0123abc\n")
    assert _env.find_commit(tmp_path) == "0123abc"
    os.remove(tmp_path / _env.BUILD_COMMIT_FILE)
    assert _env.find_commit(tmp_path) is None  # not a checkout, nothing recorded


def test_version_tuple():
    assert _env.version_tuple("2.4.1+cu124") == (2, 4)
    assert _env.version_tuple("1.13.0a0") == (1, 13)
    assert _env.version_tuple("nightly") is None


# --- with a GPU -----------------------------------------------------------------------------------

def test_without_a_usable_torch_the_run_says_why(capsys):
    problem = _env.torch_problem()
    if problem is None:
        pytest.skip("torch >= 2.4 with a GPU is here: the real run below is the test")
    from flashbob.bench import main
    assert main(["--quick"]) == 1
    assert problem in capsys.readouterr().err


def test_a_tiny_real_run(tmp_path, capsys):
    problem = _env.torch_problem()
    if problem is not None:
        pytest.skip(problem)
    from flashbob.bench import main
    table = tmp_path / "t.md"
    table_csv = tmp_path / "t.csv"
    code = main(["--ns", "256,512", "--head-dims", "64", "--heads", "2", "--warmup", "0",
                 "--iters", "2", "--impls", "flashbob,sdpa-math,eager", "--markdown", str(table),
                 "--csv", str(table_csv)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.strip() == table.read_text().strip()
    assert "Check: FlashBoB against eager float64" in out and "PASS" in out
    rows = list(csv.DictReader(table_csv.open()))
    assert len(rows) == 2 * 2 * len(_spec.OPS) * 3
    for r in rows:
        if r["impl"] in ("flashbob", "eager"):
            assert r["status"] == "ok", r
            assert float(r["median_ms"]) > 0 and float(r["tflops"]) > 0 and int(r["peak_bytes"]) > 0, r
