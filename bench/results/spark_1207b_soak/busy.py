"""Owners with a SPARK BENCH START and no END after it in /work/coord/STATUS.md (soak excluded): exit 1 if any."""
import re
import sys

open_ = {}
for line in open("/work/coord/STATUS.md"):
    m = re.search(r"SPARK BENCH (START|END)\s+(.*)", line)
    if not m:
        continue
    words = [w for w in m.group(2).split() if not w.isdigit()]
    if words:
        open_[words[0]] = (m.group(1) == "START", line.strip())
busy = [v[1] for k, v in open_.items() if v[0] and k != "soak"]
print("\n".join(busy))
sys.exit(1 if busy else 0)
