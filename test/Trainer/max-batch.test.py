"""--max-batch-for SIZE end to end: the batch it names compiles under
--memory-limit SIZE, the next one is refused with its bytes, and the
trainer at the named batch reports the plan's bytes, the device's
allocation and its peak resident set, both within 10 % of the plan."""
import json
import re
import subprocess
import sys

gpuc, model, size, limit, work = sys.argv[1:6]
limit = int(limit)
out = subprocess.run([gpuc, "compile", model, "--max-batch-for", size],
                     check=True, capture_output=True, text=True).stdout
print(out)
m = re.search(r"without remat: batch (\d+) needs (\d+) bytes.*; batch (\d+) "
              r"needs (\d+) bytes", out)
assert m, out
batch, need, above, above_need = (int(g) for g in m.groups())
assert need <= limit < above_need and above == batch + 1, out
# With remat: the batch above is refused with the lowest total remat
# reached there, over the limit.
m = re.search(r"with remat   : batch (\d+) needs (\d+) bytes.*; batch (\d+) "
              r"needs (\d+) bytes \(.*\) with remat at best", out)
assert m, out
remat_batch, remat_need, remat_above, remat_above_need = (
    int(g) for g in m.groups())
assert remat_batch >= batch and remat_above == remat_batch + 1, out
assert remat_need <= limit < remat_above_need, out

refused = subprocess.run([gpuc, "compile", model, "--batch", str(above),
                          "--memory-limit", size, "-o", work + "/above"],
                         capture_output=True, text=True)
assert refused.returncode == 1, refused
assert ("at batch %d the step needs %d bytes" % (above, above_need)
        in refused.stderr), refused.stderr

subprocess.run([gpuc, "compile", model, "--batch", str(batch),
                "--memory-limit", size, "--target", "cpu", "-o",
                work + "/fits"], check=True, capture_output=True)
bench = subprocess.run([work + "/fits/train", "--bench-steps", "1"],
                       check=True, capture_output=True, text=True).stdout
r = json.loads(bench.strip().splitlines()[-1])
print(r)
assert r["plan_bytes"] == need, (r, need)
for key in ("device_bytes", "peak_rss_bytes"):
    ratio = r[key] / r["plan_bytes"]
    print("%s / plan = %.3f" % (key, ratio))
    assert 0.9 <= ratio <= 1.1, (key, ratio)
