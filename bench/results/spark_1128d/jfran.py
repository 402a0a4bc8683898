import collections
import json
import re
import subprocess
import sys
from datetime import datetime

files = sys.argv[1].split(",")
since = float(sys.argv[2])
until = float(sys.argv[3])
top = int(sys.argv[4]) if len(sys.argv) > 4 else 25
thr = collections.Counter()
selfc = collections.defaultdict(collections.Counter)
incl = collections.defaultdict(collections.Counter)
n = 0
for f in files:
    r = subprocess.run(
        ["jfr", "print", "--json", "--stack-depth", "200", "--events", "jdk.ExecutionSample", f],
        capture_output=True,
        text=True,
        check=True,
    )
    for ev in json.loads(r.stdout)["recording"]["events"]:
        v = ev["values"]
        t = datetime.fromisoformat(
            re.sub(r"(\.\d{6})\d*", r"\1", v["startTime"]).replace("Z", "+00:00")
        ).timestamp()
        if not (since <= t <= until) or not v.get("stackTrace"):
            continue
        tn = re.sub(
            r"[\d#-]+", "", v["sampledThread"]["javaName"] or v["sampledThread"]["osName"]
        ).strip()
        thr[tn] += 1
        n += 1
        frames = [
            fr["method"]["type"]["name"].replace("/", ".").split("$$Lambda")[0]
            + "."
            + fr["method"]["name"]
            for fr in v["stackTrace"]["frames"]
        ]
        selfc[tn][frames[0]] += 1
        for fr in dict.fromkeys(frames):
            incl[tn][fr] += 1
print("samples", n)
for t, c in thr.most_common(12):
    print(f"{c:6d} {t}")
for t, _ in thr.most_common(int(sys.argv[5]) if len(sys.argv) > 5 else 3):
    print("\n==", t, "self")
    [print(f"{c:6d} {m}") for m, c in selfc[t].most_common(12)]
    print("== inclusive")
    [print(f"{c:6d} {m}") for m, c in incl[t].most_common(top)]
