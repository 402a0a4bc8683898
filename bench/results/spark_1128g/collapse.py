"""JFR recordings -> collapsed stacks, one line per distinct stack: ``thread;root;...;leaf count``.

    python collapse.py JFR[,JFR...] [SINCE_EPOCH_S] > STACKS     (only samples taken after SINCE, if given)
"""

import collections
import json
import re
import subprocess
import sys
from datetime import datetime


def main() -> None:
    out: collections.Counter = collections.Counter()
    since = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    for f in sys.argv[1].split(","):
        r = subprocess.run(["jfr", "print", "--json", "--stack-depth", "1024", "--events", "jdk.ExecutionSample", f],
                           capture_output=True, text=True, check=True)
        for ev in json.loads(r.stdout)["recording"]["events"]:
            v = ev["values"]
            t = datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", v["startTime"]).replace("Z", "+00:00"))
            if t.timestamp() < since or not v.get("stackTrace"):
                continue
            thread = re.sub(r"[\d#-]+", "", (v.get("sampledThread") or {}).get("javaName") or "?").strip()[:30]
            frames = [f'{x["method"]["type"]["name"].replace("/", ".").split("$$Lambda")[0].rsplit(".", 1)[-1]}'
                      f'.{x["method"]["name"]}' for x in v["stackTrace"]["frames"]]
            out[";".join([thread, *frames[::-1]])] += 1
    for stack, n in out.items():
        print(stack, n)


if __name__ == "__main__":
    main()
