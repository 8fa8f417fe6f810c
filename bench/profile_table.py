#!/usr/bin/env python3
"""The markdown table of scripts/device/kernel-profile.sh's log (Nsight Compute's details).

    python3 bench/profile_table.py profile.log

One row per kernel: its time, the share of elapsed cycles its tensor pipe was busy (wgmma), the
XU pipe's share of peak instructions (exp2 and the other special functions, the softmax's),
ALU and FMA, issue slots busy, registers per thread, achieved occupancy, and the three stall
reasons that cost the most cycles per issued instruction (what a warp waited for).
"""
import re
import sys

FIRST = {  # metric line prefix -> column; the first occurrence in a kernel's block counts
    "Duration ms": "ms",
    "SM Frequency Ghz": "GHz",
    "Tensor (FP) %": "tensor %",
    "XU %": "XU %",
    "ALU %": "ALU %",
    "FMA %": "FMA %",
    "Issue Slots Busy %": "issue %",
    "Registers Per Thread register/thread": "registers",
    "Achieved Occupancy %": "occupancy %",
}
COLUMNS = ["op", "d", "kernel"] + list(FIRST.values()) + ["top stalls (cycles per issued instruction)"]


def parse(lines):
    rows, op, d, row = [], None, None, None
    for raw in lines:
        line = raw.strip()
        m = re.match(r"== ncu (\w+) d=(\d+)", line)
        if m:
            op, d = m.group(1), m.group(2)
            continue
        m = re.match(r"([a-z_]+_d\d+\S*) \(", line)
        if m and op:
            row = {"op": op, "d": d, "kernel": m.group(1), "stalls": {}}
            rows.append(row)
            continue
        if row is None:
            continue
        m = re.match(r"Stall ([A-Za-z ]+?) inst ([0-9.]+)$", line)
        if m:
            row["stalls"][m.group(1)] = float(m.group(2))
            continue
        for prefix, column in FIRST.items():
            if line.startswith(prefix + " ") and column not in row:
                row[column] = line[len(prefix):].strip()
    return rows


def table(rows):
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        top = sorted(r["stalls"].items(), key=lambda kv: -kv[1])[:3]
        cells = [r.get(c, "-") for c in COLUMNS[:-1]]
        cells.append(", ".join(f"{name.lower()} {value:.2f}" for name, value in top) or "-")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: profile_table.py LOG (the output of scripts/device/kernel-profile.sh)")
    with open(sys.argv[1]) as f:
        rows = parse(f)
    if not rows:
        sys.exit(f"profile_table.py: no kernel found in {sys.argv[1]}")
    print(table(rows))


if __name__ == "__main__":
    main()
