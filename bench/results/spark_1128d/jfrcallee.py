import collections
import json
import re
import subprocess
import sys
from datetime import datetime

files = sys.argv[1].split(",")
since = float(sys.argv[2])
until = float(sys.argv[3])
target = sys.argv[4]
depth = int(sys.argv[5])
c = collections.Counter()
callers = collections.Counter()
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
        frames = [
            fr["method"]["type"]["name"].replace("/", ".").split("$$Lambda")[0]
            + "."
            + fr["method"]["name"]
            for fr in v["stackTrace"]["frames"]
        ]
        idx = [i for i, fr in enumerate(frames) if target in fr]
        if not idx:
            continue
        i = idx[-1]
        n += 1
        c[" <- ".join(frames[max(0, i - depth) : i][::-1])] += 1
        callers[" <- ".join(frames[i : i + depth])] += 1
print("samples with", target, n)
for k, v in c.most_common(25):
    print(f"{v:5d} {k}")
print("-- callers")
for k, v in callers.most_common(8):
    print(f"{v:5d} {k}")
