"""gpuc.linear_token_scores in the interpreter against its definition in
numpy (the summed cross-entropy of the rows, and the rows whose first
largest logit is the label's; a label of -1 counts in neither), and its
chunked lowering (gpuc-decompose: rows in chunks of 4, the vocabulary of
1,030 padded to 1,088) against the interpreter.

    token-scores.test.py GPUC WORKDIR
"""
import os
import subprocess
import sys

import numpy as np

gpuc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
N, C, V = 12, 3, 1030
rng = np.random.default_rng(3)
h = rng.standard_normal((N, C)).astype(np.float32)
w = rng.standard_normal((V, C)).astype(np.float32)
b = rng.standard_normal(V).astype(np.float32)
# Class 7 ties class 2 for every row; rows 4 and 5 point at them, so
# that their largest logit is the tie. Row 4 is labelled 7 (not correct:
# the first largest is 2's), row 5 labelled 2 (correct).
w[2] = w[7] = 3
b[2] = b[7] = 2
h[4] = h[5] = 1
z64 = h.astype(np.float64) @ w.astype(np.float64).T + b
top = z64.argmax(1)
assert top[4] == top[5] == 2, top
y = rng.integers(0, V, N)
y[:4] = top[:4]                     # correct
y[4], y[5] = 7, 2
y[11] = -1                          # padding: counted in neither
rows = y >= 0
lse = np.log(np.exp(z64 - z64.max(1, keepdims=True)).sum(1)) + z64.max(1)
loss = float((lse[rows] - z64[rows, y[rows]]).sum())
correct = int((top[rows] == y[rows]).sum())
for name, v in (("h", h), ("w", w), ("b", b), ("y", y.astype(np.int64))):
    np.save(os.path.join(work, name + ".npy"), v)

module = os.path.join(work, "scores.mlir")
with open(module, "w") as f:
    f.write(f"""
func.func @scores(%h: tensor<{N}x{C}xf32> {{gpuc.input = "h"}}, %w: tensor<{V}x{C}xf32> {{gpuc.input = "w"}}, %b: tensor<{V}xf32> {{gpuc.input = "b"}}, %y: tensor<{N}xi64> {{gpuc.input = "y"}}) -> (tensor<f32> {{gpuc.output = "loss_sum"}}, tensor<f32> {{gpuc.output = "correct"}}) {{
  %s:2 = gpuc.linear_token_scores %h, %w, %y bias %b : tensor<{V}xf32> ignore_index = -1 : (tensor<{N}x{C}xf32>, tensor<{V}x{C}xf32>, tensor<{N}xi64>) -> (tensor<f32>, tensor<f32>)
  return %s#0, %s#1 : tensor<f32>, tensor<f32>
}}
""")


def run(path, out):
    subprocess.run([gpuc, "run", path, "--func",
                    "scores"] + sum((["--input", "%s=%s/%s.npy" % (n, work, n)]
                                     for n in "hwby"), []) +
                   ["--output-dir", out], check=True, capture_output=True)
    return (float(np.load(os.path.join(out, "loss_sum.npy"))),
            float(np.load(os.path.join(out, "correct.npy"))))


got_loss, got_correct = run(module, os.path.join(work, "interpreted"))
ok = abs(got_loss - loss) <= 1e-5 * abs(loss) and got_correct == correct
print("interpreter: loss_sum %.6f (numpy %.6f) correct %d of %d (numpy %d), %s"
      % (got_loss, loss, got_correct, rows.sum(), correct,
         "ok" if ok else "FAIL"))

chunked = os.path.join(work, "chunked.mlir")
subprocess.run([os.path.join(os.path.dirname(gpuc), "gpuc-opt"), module,
                "--gpuc-decompose=loss-chunk-rows=4 pad-classes=64", "-o",
                chunked], check=True)
text = open(chunked).read()
assert "linear_token_scores" not in text and "1088" in text, text
chunk_loss, chunk_correct = run(chunked, os.path.join(work, "chunked"))
ok = abs(chunk_loss - got_loss) <= 1e-5 * abs(got_loss) and \
    chunk_correct == got_correct
print("chunked: loss_sum %.6f correct %d, %s" %
      (chunk_loss, chunk_correct, "ok" if ok else "FAIL"))
