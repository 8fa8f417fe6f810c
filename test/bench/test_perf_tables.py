"""The perf table's targets and the kernel profile's table (bench/), from hand-made inputs.

    python3 -m unittest discover -s test/bench     # from the repository root; no GPU, no torch
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import compare_torch  # noqa: E402
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


if __name__ == "__main__":
    unittest.main()
