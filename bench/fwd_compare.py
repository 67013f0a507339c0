"""One table from several bench/gpu_fwd.py logs of the same run: per configuration, each log's
kernel time and share of the copy, side by side (bench/device_run.sh's `variants` step times
one log per kernel variant of bench/kernel_variants.sh).

    python bench/fwd_compare.py NAME=LOG [NAME=LOG ...]
"""
import sys


def rows(path):
    """{(shape, dtype, layout): (us, % of copy)} from a gpu_fwd table."""
    out = {}
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| (") and len(cells) == 10:
                out[tuple(cells[:3])] = (cells[3], cells[6])
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
        cells = [" ".join(tables[n].get(k, ("-", ""))) for n, _ in logs]
        print(f"| {' | '.join(k)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
