"""CPU and wall ratios of one `python -m bench` run with --base: ``python cpu_table.py results.csv``."""

import csv
import sys


def main(path: str) -> None:
    by: dict = {}
    for r in csv.DictReader(open(path)):
        by.setdefault(r["workload"], {})[r["system"]] = r
    print("| workload | composites | cep CPU s best (median) | cep base CPU s best (median) | base/cep CPU best (median) "
          "| Esper CPU s best (median) | Esper/cep CPU best | cep/Esper wall best (median) "
          "| cep base/Esper wall best (median) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for w, d in by.items():
        c, b, e = d.get("cep"), d.get("cep base"), d.get("esper")
        if not (c and b and e):
            continue

        def f(r: dict, k: str) -> float:
            return float(r[k])

        print(f"| {w} | {int(c['composites']):,} | {f(c, 'cpu_s_best'):.3f} ({f(c, 'cpu_s_median'):.3f}) "
              f"| {f(b, 'cpu_s_best'):.3f} ({f(b, 'cpu_s_median'):.3f}) "
              f"| {f(b, 'cpu_s_best') / f(c, 'cpu_s_best'):.2f}x ({f(b, 'cpu_s_median') / f(c, 'cpu_s_median'):.2f}x) "
              f"| {f(e, 'cpu_s_best'):.3f} ({f(e, 'cpu_s_median'):.3f}) | {f(e, 'cpu_s_best') / f(c, 'cpu_s_best'):.2f}x "
              f"| {f(e, 'run_s') / f(c, 'run_s'):.2f}x ({f(e, 'run_s_median') / f(c, 'run_s_median'):.2f}x) "
              f"| {f(e, 'run_s') / f(b, 'run_s'):.2f}x ({f(e, 'run_s_median') / f(b, 'run_s_median'):.2f}x) |")


if __name__ == "__main__":
    main(sys.argv[1])
