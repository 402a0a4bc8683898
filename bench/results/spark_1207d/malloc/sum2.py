import glob, json, re, sys, statistics
rows = {}
for f in sorted(glob.glob(sys.argv[1])):
    d = json.load(open(f)); n = d["steady_batches"]
    m = re.search(r"-(kg\w+)-(\d+)\.json", f)
    rows.setdefault(m.group(1), []).append((round(d["steady_cpu_total"] / n, 3),
        {k: (round(v[0] / n, 3), round(v[1] / n, 3), round(d["steady_minor_faults"][k] / n)) for k, v in d["steady_cpu_user_sys"].items()}))
for lab, rs in sorted(rows.items()):
    print(lab, "tree", [r[0] for r in rs], "median", statistics.median(r[0] for r in rs))
    for k in ("executor JVMs", "python workers", "driver JVM"):
        print("   ", k, "user/sys/faults", [r[1][k] for r in rs])
