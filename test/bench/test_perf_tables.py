"""The perf table's targets, the kernel profile's table and the GPU clock summaries (bench/), from
hand-made inputs.

    python3 -m unittest discover -s test/bench     # from the repository root; no GPU, no torch
"""
import contextlib
import io
import os
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import compare_torch  # noqa: E402
import gpu_clocks  # noqa: E402
import profile_table  # noqa: E402

# Two kernels as kernel-profile.sh prints them (Nsight Compute's lines, runs of spaces squeezed).
LOG = """\
== ncu bwd d=128 (kernels of the op: 2)
 bwd_q_d128_m128_n128_w8p_s2_bf16_sm_90a (128, 16, 1)x(384, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
 SM Frequency Ghz 1.79
 Duration ms 5.11
 Issue Slots Busy % 41.58
 Tensor (FP) % 66.59
 XU % 22.20
 Tensor (FP) % 68.94
 Stall Barrier inst 1.03
 Stall Wait inst 0.94
 Stall Not Selected inst 0.36
 Stall Long Scoreboard inst 0.76
 Registers Per Thread register/thread 168
 Achieved Occupancy % 14.08
 bwd_kv_d128_m64_n64_w4_s2_bf16_sm_90a (256, 16, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
 Duration ms 7.98
 Tensor (FP) % 56.72
 Registers Per Thread register/thread 255
"""


class ProfileTableTest(unittest.TestCase):
    def test_rows_take_each_kernels_first_figures(self):
        rows = profile_table.parse(LOG.splitlines())
        self.assertEqual([r["kernel"] for r in rows],
                         ["bwd_q_d128_m128_n128_w8p_s2_bf16_sm_90a", "bwd_kv_d128_m64_n64_w4_s2_bf16_sm_90a"])
        q, kv = rows
        self.assertEqual((q["op"], q["d"], q["ms"], q["tensor %"], q["registers"]), ("bwd", "128", "5.11", "66.59", "168"))
        self.assertEqual((kv["ms"], kv["tensor %"], kv["registers"]), ("7.98", "56.72", "255"))
        self.assertNotIn("XU %", kv)  # not printed for it: a dash in the table, not bwd_q's value
        table = profile_table.table(rows).splitlines()
        self.assertIn("barrier 1.03, wait 0.94, long scoreboard 0.76", table[2])
        self.assertTrue(table[3].endswith("| 56.72 | - | - | - | - | 255 | - | - |"), table[3])


def bench(op, d, causal, n, ms, tflops):
    return {"op": op, "d": d, "causal": causal, "N": n, "status": "ok",
            "bench": {"median_ms": ms, "tflops": tflops}}


class TargetsTest(unittest.TestCase):
    def targets(self, ours, sdpa):
        o = {(r["op"], r["d"], r["causal"], r["N"]): r for r in ours}
        ts = {("sdpa-cudnn", d, c, n): {"status": "ok", f"{op}_ms": t} for (op, d, c, n, t) in sdpa}
        with tempfile.TemporaryDirectory() as out:
            return "\n".join(compare_torch.targets_section(o, ts, out))

    def test_sdpa_ratio_judged_on_the_worst_n(self):
        text = self.targets([bench("fwd", 64, False, 4096, 1.0, 1), bench("fwd", 64, False, 8192, 1.0, 1),
                             bench("fwd", 64, False, 1024, 1.0, 1)],
                            [("fwd", 64, False, 4096, 1.05), ("fwd", 64, False, 8192, 0.95),
                             ("fwd", 64, False, 1024, 0.5)])
        self.assertIn("| fwd cuDNN/ours >= 1.0 | fwd d=64, N >= 4K | 0.95x at N = 8K (best 1.05x) | **no** (gap 0.05) |", text)
        self.assertIn("| fwd cuDNN/ours >= 0.9 | fwd d=64, N >= 1K | 0.50x at N = 1K (best 1.05x) | **no** (gap 0.40) |", text)

    def test_met_targets_say_yes(self):
        text = self.targets([bench("bob", 128, False, 16384, 1.0, 560.0), bench("bob", 128, False, 131072, 1.0, 550.0)], [])
        self.assertIn("| BoB >= 550 TFLOP/s | bob d=128, N >= 16K | 550.0 at N = 128K | yes |", text)
        self.assertIn("| BoB at 128K within 3% of 16K | bob d=128 | 550.0 vs 560.0 | yes |", text)
        self.assertIn("Not run in this call", text)  # no profile.log

    def test_long_sequence_loss_beyond_three_percent(self):
        text = self.targets([bench("bob", 64, True, 16384, 1.0, 400.0), bench("bob", 64, True, 131072, 1.0, 380.0)], [])
        self.assertIn("| BoB >= 480 TFLOP/s | bob d=64 causal, N >= 16K | 380.0 at N = 128K | **no** (gap 100 TFLOP/s) |", text)
        self.assertIn("| 380.0 vs 400.0 | **no** (5.0% slower) |", text)

    def test_long_sequence_row_shows_the_clocks_of_both_calls(self):
        slow = {"samples": 40, "sm_mhz": 1880.4, "watts": 654.2, "max_c": 63.0, "power_capped": 0.65}
        fast = {"samples": 5, "sm_mhz": 1975.0, "watts": 380.0, "max_c": 59.0, "power_capped": 0.0}
        long_, short = bench("bob", 128, False, 131072, 1.0, 378.0), bench("bob", 128, False, 16384, 1.0, 420.0)
        long_["clocks"], short["clocks"] = slow, fast
        text = self.targets([long_, short], [])
        self.assertIn("| 378.0 vs 420.0 (128K: SM 1880 MHz, 654 W, power cap in 65% of 40 busy samples; "
                      "16K: SM 1975 MHz, 380 W, power cap in 0% of 5 busy samples) | **no** (10.0% slower) |", text)
        self.assertIn("In parentheses: the GPU during each of those calls", text)

    def test_no_clocks_no_parentheses(self):
        text = self.targets([bench("bob", 64, False, 16384, 1.0, 400.0), bench("bob", 64, False, 131072, 1.0, 399.0)], [])
        self.assertIn("| 399.0 vs 400.0 | yes |", text)
        self.assertNotIn("In parentheses", text)

    def test_gaps_come_from_their_section_of_the_performance_doc(self):
        with tempfile.TemporaryDirectory() as out:
            doc = os.path.join(out, "performance.md")
            with open(doc, "w") as f:
                f.write("# Notes\n## Before\nnot this\n## The targets' gaps, what explains each\n"
                        "- **Forward**: the exp2s.\n- **BoB**: registers.\n\n## After\nnor this\n")
            text = "\n".join(compare_torch.targets_section({}, {}, out, doc_path=doc))
            missing = "\n".join(compare_torch.targets_section({}, {}, out, doc_path=os.path.join(out, "none.md")))
        self.assertIn("### What explains each gap, and what was tried", text)
        self.assertIn("- **Forward**: the exp2s.\n- **BoB**: registers.\n", text)
        self.assertNotIn("not this", text)
        self.assertNotIn("nor this", text)
        self.assertIn("docs/performance.md has no section \"The targets' gaps, what explains each\".", missing)

    def test_the_performance_doc_has_the_section(self):
        self.assertTrue(compare_torch.gaps_section().startswith("The perf table prints this section"))


# nvidia-smi --query-gpu=$(gpu_clocks.py --query) --format=csv,noheader,nounits, as it prints them:
# an idle GPU first (its 0x1 is "GPU idle"), a clock it could not read, and a line cut off when the
# sampler was killed.
SAMPLES = """\
2026/12/03 14:43:31.000, 345, 77.17, 34, 0x0000000000000001, 0
2026/12/03 14:43:31.100, 1980, 120.50, 40, 0x0000000000000000, 100
2026/12/03 14:43:31.200, 1980, 640.00, 58, 0x0000000000000000, 100
2026/12/03 14:43:31.300, 1860, 690.00, 62, 0x0000000000000004, 100
2026/12/03 14:43:31.400, [N/A], 690.00, 62, 0x0000000000000004, 100
2026/12/03 14:43:31.500, 1900, 670.00, 63, 0x0000000000000004, 94
2026/12/03 14:43:31.6
"""


class GpuClocksTest(unittest.TestCase):
    def test_parse_skips_what_is_not_a_sample(self):
        samples = gpu_clocks.parse(SAMPLES.splitlines())
        self.assertEqual(len(samples), 5)
        self.assertAlmostEqual(samples[2][0] - samples[1][0], 0.1, places=6)
        self.assertEqual(samples[3][1:], (1860.0, 690.0, 62.0, 4, 100.0))

    def test_summary_over_a_window_of_busy_samples(self):
        samples = gpu_clocks.parse(SAMPLES.splitlines())
        second = samples[0][0]  # 14:43:31; busy samples at .1, .2, .3 and .5
        s = gpu_clocks.summary(samples, second + 0.15, second + 0.45)
        self.assertEqual(s["samples"], 2)  # .2 and .3
        s = gpu_clocks.summary(samples, second - 1, second + 0.55)
        self.assertEqual(s["samples"], 4)  # not the idle one at .0
        self.assertAlmostEqual(s["sm_mhz"], (1980 + 1980 + 1860 + 1900) / 4)
        self.assertAlmostEqual(s["watts"], (120.5 + 640 + 690 + 670) / 4)
        self.assertAlmostEqual(s["power_capped"], 2 / 4)
        self.assertEqual(s["max_c"], 63.0)
        self.assertEqual(gpu_clocks.describe(gpu_clocks.summary(samples, second + 0.15, second + 0.55)),
                         "SM 1913 MHz, 667 W, power cap in 67% of 3 busy samples")
        self.assertIsNone(gpu_clocks.summary(samples, second - 0.05, second + 0.05))  # idle only


class TableClocksTest(unittest.TestCase):
    def test_table_phase_gives_each_call_the_samples_of_its_window(self):
        second = gpu_clocks.parse(SAMPLES.splitlines())[0][0]
        long_, short = bench("bob", 128, False, 131072, 1.0, 378.0), bench("bob", 128, False, 16384, 1.0, 420.0)
        long_.update(t0=second + 0.25, t1=second + 0.55)   # .3 and .5: both power-capped
        short.update(t0=second - 0.05, t1=second + 0.15)   # .1 alone busy (.0 is idle)
        with tempfile.TemporaryDirectory() as out:
            compare_torch.write_json(os.path.join(out, "ours.json"), {"results": [long_, short]})
            with open(os.path.join(out, gpu_clocks.SAMPLES_FILE), "w") as f:
                f.write(SAMPLES)
            with contextlib.redirect_stdout(io.StringIO()):  # it prints the table too
                compare_torch.make_table(types.SimpleNamespace(out=out))
            with open(os.path.join(out, "perf-table.md")) as f:
                table = f.read()
            raw = compare_torch.read_json(os.path.join(out, "perf-raw.json"))
        self.assertIn("(128K: SM 1880 MHz, 680 W, power cap in 100% of 2 busy samples; "
                      "16K: SM 1980 MHz, 120 W, power cap in 0% of 1 busy samples)", table)
        self.assertEqual(raw["ours"]["results"][0]["clocks"]["samples"], 2)


if __name__ == "__main__":
    unittest.main()
