"""One table from several logs of bench/gpu_fwd.py, or of bench/gpu_bwd.py, taken in the same run:
per configuration, each log's kernel time and share of the copy, side by side (bench/device_run.sh's
`variants` step takes one log per kernel variant of bench/kernel_variants.sh). From gpu_bwd's
logs it takes the "direct" columns: the backward without autograd's hand-off.

    python bench/compare_logs.py NAME=LOG [NAME=LOG ...]
"""
import sys


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def rows(path):
    """{(shape, dtype, layout): (us, % of copy)} from a benchmark's main table."""
    out, cols = {}, None
    with open(path) as f:
        for line in f:
            c = cells(line)
            if line.startswith("| shape (B,D,L) |"):
                time_col = "direct us" if "direct us" in c else "ours us"
                share_col = "direct % of copy" if "direct % of copy" in c else "% of copy"
                cols = (len(c), c.index(time_col), c.index(share_col))
            elif line.startswith("| (") and cols and len(c) == cols[0]:
                out[tuple(c[:3])] = (c[cols[1]], c[cols[2]])
    return out


def main(argv):
    if not argv:
        raise SystemExit(__doc__)
    logs = [a.split("=", 1) for a in argv]
    tables = {name: rows(path) for name, path in logs}
    keys = []
    for t in tables.values():
        keys += [k for k in t if k not in keys]
    print("| shape | dtype | layout | " + " | ".join(f"{n} us (% of copy)" for n, _ in logs) + " |")
    print("|---|---|---|" + "---|" * len(logs))
    for k in keys:
        row = [" ".join(tables[n].get(k, ("-", ""))) for n, _ in logs]
        print(f"| {' | '.join(k)} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
