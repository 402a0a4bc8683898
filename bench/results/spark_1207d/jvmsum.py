"""Per label: JVM CPU s per steady micro-batch (driver + executors, user + system), tree, workers; by round."""
import glob, json, re, sys, statistics
rows = {}
for f in sorted(glob.glob(sys.argv[1])):
    d = json.load(open(f)); n = d["steady_batches"]
    m = re.search(r"-kg(\w+)-(\d+)\.json", f)
    c = d["steady_cpu_user_sys"]
    jvm = (sum(c["driver JVM"]) + sum(c["executor JVMs"])) / n
    rows.setdefault(m.group(1), {})[int(m.group(2))] = (round(jvm, 3), round(d["steady_cpu_total"] / n, 3),
                                                          round(sum(c["python workers"]) / n, 3))
for lab in sorted(rows):
    r = rows[lab]
    print(lab, "JVMs", [r[k][0] for k in sorted(r)], "median", round(statistics.median(v[0] for v in r.values()), 3),
          "| tree", [r[k][1] for k in sorted(r)], "median", round(statistics.median(v[1] for v in r.values()), 3),
          "| workers median", round(statistics.median(v[2] for v in r.values()), 3))
