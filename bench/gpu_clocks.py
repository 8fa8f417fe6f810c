#!/usr/bin/env python3
"""The GPU's SM clock, power and throttle reasons while a benchmark ran, from nvidia-smi samples.

Sampled every 100 ms beside bench/compare_torch.py's `ours` phase, asking this file which
fields (QUERY_FIELDS, the order `parse` reads), into the phases' --out directory:

    nvidia-smi --query-gpu=$(python3 bench/gpu_clocks.py --query) \
        --format=csv,noheader,nounits -lms 100 > OUT/gpu-samples.csv

and bench/compare_torch.py judges the long-sequence target with them: a kernel that is as fast
per flop at 128K as at 16K can still run slower there when the board reaches its power limit
and lowers the clock (docs/performance.md, "The targets' gaps, what explains each").

    python3 bench/gpu_clocks.py gpu-samples.csv      # a summary of all the busy samples
    python3 bench/gpu_clocks.py --query              # the fields for nvidia-smi --query-gpu
"""
import sys
import time

SAMPLES_FILE = "gpu-samples.csv"
QUERY_FIELDS = ("timestamp", "clocks.sm", "power.draw", "temperature.gpu",
                "clocks_event_reasons.active", "utilization.gpu")
# nvidia-smi's clocks_event_reasons bit for the software power cap (the board at its power limit).
SW_POWER_CAP = 0x4
# A sample counts when a kernel ran through most of its period (utilization.gpu, percent): a
# bench call's window also holds its compile and its float64 check on the CPU, with the GPU idle
# at full clock and a tenth of its power (the first try, without this, averaged those in).
BUSY_PERCENT = 90.0


def parse_time(text):
    """nvidia-smi's `2026/12/03 14:43:31.123` (the machine's local time) as epoch seconds."""
    whole, _, frac = text.strip().partition(".")
    t = time.mktime(time.strptime(whole, "%Y/%m/%d %H:%M:%S"))
    return t + (float("0." + frac) if frac.isdigit() else 0.0)


def parse(lines):
    """Samples as (epoch s, SM MHz, W, C, throttle reasons, GPU utilization %); lines that do not
    parse are skipped (a header, `[N/A]`, a line cut off when the sampler was stopped)."""
    samples = []
    for line in lines:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(QUERY_FIELDS):
            continue
        try:
            samples.append((parse_time(fields[0]), float(fields[1]), float(fields[2]),
                            float(fields[3]), int(fields[4], 16), float(fields[5])))
        except ValueError:
            continue
    return samples


def read(path):
    try:
        with open(path) as f:
            return parse(f)
    except OSError:
        return []


def summary(samples, t0=None, t1=None):
    """Mean SM clock and power, peak temperature and the share of samples under the power cap,
    over the busy samples taken in [t0, t1] (all when no window); None when there are none."""
    sel = [s for s in samples if (t0 is None or s[0] >= t0) and (t1 is None or s[0] <= t1)
           and s[5] >= BUSY_PERCENT]
    if not sel:
        return None
    n = len(sel)
    return {"samples": n,
            "sm_mhz": sum(s[1] for s in sel) / n,
            "watts": sum(s[2] for s in sel) / n,
            "max_c": max(s[3] for s in sel),
            "power_capped": sum(1 for s in sel if s[4] & SW_POWER_CAP) / n}


def describe(s):
    return (f"SM {s['sm_mhz']:.0f} MHz, {s['watts']:.0f} W, power cap in "
            f"{s['power_capped'] * 100:.0f}% of {s['samples']} busy samples")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gpu_clocks.py SAMPLES.csv | --query")
    if sys.argv[1] == "--query":
        print(",".join(QUERY_FIELDS))
    else:
        s = summary(read(sys.argv[1]))
        print(describe(s) if s else "no samples")
