"""Runs the commands of the code blocks of README.md and of every page
under docs/, and checks their links, so the documentation cannot drift from
the code.

A code block is a run of lines indented by four spaces after a blank line
or a heading (fenced blocks are shown text, not commands). Its command
lines (backslash continuations joined) run in a scratch directory that sees
the repository's examples/, test/, scripts/ and bench/, with gpuc on PATH.
Some cannot run here, and are listed as skipped with the reason: synopses
with placeholders (DIR, MODEL, [a|b]), the install/build scripts, and the
GPU bundle. Training commands run one epoch on 1,280 samples (--epochs N
becomes --epochs 1 --limit-train 1280): the flags are the documentation's,
the time is a test's. The DSL example (the block under the heading "The
model DSL") is compiled and trained, and must report a test accuracy. Every
relative link must name a file that exists (and a heading of it, after
'#'), and README.md must link every page of docs/. Any failure fails the
test.

usage: readme.test.py README.md GPUC_BIN_DIR SCRATCH
       readme.test.py --links-only README.md
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

links_only = sys.argv[1] == "--links-only"
if links_only:
    readme, bin_dir, scratch = sys.argv[2], None, None
else:
    readme, bin_dir, scratch = sys.argv[1:4]
repo = os.path.dirname(os.path.abspath(readme))
pages = [readme] + sorted(glob.glob(os.path.join(repo, "docs", "*.md")))


def code_blocks(path):
    """The four-space-indented blocks of `path`, with their headings."""
    lines = open(path).read().splitlines()
    blocks, current, previous, fenced = [], None, "", False
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("    ") and (
                current is not None or previous == "" or
                previous.startswith("#")):
            if current is None:
                current = {"page": os.path.relpath(path, repo),
                           "line": number, "heading": "", "text": []}
                for back in range(number - 2, -1, -1):
                    if lines[back].startswith("#"):
                        current["heading"] = lines[back]
                        break
                blocks.append(current)
            current["text"].append(line[4:])
        else:
            current = None
        previous = line
    return blocks


def slug(heading):
    """The anchor a Markdown renderer gives a heading."""
    text = heading.lstrip("#").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def check_links(path):
    """The broken relative links of `path`, as messages."""
    text = open(path).read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path),
                                                 file)) if file else path
        if not os.path.exists(resolved):
            broken.append("%s: link to missing %s" % (
                os.path.relpath(path, repo), target))
            continue
        if anchor and resolved.endswith(".md"):
            headings = [slug(l) for l in open(resolved).read().splitlines()
                        if l.startswith("#")]
            if anchor not in headings:
                broken.append("%s: link to missing heading %s" % (
                    os.path.relpath(path, repo), target))
    return broken


blocks = [b for page in pages for b in code_blocks(page)]
failed = []
for page in pages:
    for problem in check_links(page):
        print("broken link: " + problem)
        failed.append(problem)
readme_text = open(readme).read()
for page in pages[1:]:
    name = os.path.relpath(page, repo)
    if "(%s" % name not in readme_text:
        print("README.md does not link " + name)
        failed.append(name)
print("links: %d pages checked" % len(pages))
if links_only:
    sys.exit(1 if failed else 0)

SKIP = [
    (r"^scripts/(demo|test)\.sh", "installs and builds: CI runs it"),
    (r"^scripts/gpu-bundle\.sh", "GPU bundle: test/GPU/bundle.test builds it"),
    (r"^gpu-bundle/", "runs on a GPU machine"),
    (r"\[[^\]]*\|[^\]]*\]|\b(DIR|MODEL|SIZE|FILE|OUT)\b|\.\.\.", "synopsis"),
]
os.makedirs(scratch, exist_ok=True)
for name in ("examples", "test", "scripts", "bench"):
    link = os.path.join(scratch, name)
    if not os.path.exists(link):
        os.symlink(os.path.join(repo, name), link)
# mpirun runs as root in CI containers, on however many cores there are.
env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"],
           OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
if not shutil.which("mpirun"):
    SKIP.append((r"^mpirun\b|data_parallel_vs_ddp",
                 "no mpirun (scripts/install-deps.sh installs Open MPI)"))

ran, skipped = 0, 0
for block in blocks:
    if "The model DSL" in block["heading"]:
        continue
    commands, pending = [], ""
    for text in block["text"]:
        text = text.split("  #")[0].rstrip()
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        if pending + text:
            commands.append((pending + text).strip())
        pending = ""
    for command in commands:
        reason = next((why for pattern, why in SKIP
                       if re.search(pattern, command)), None)
        if reason:
            print("skipped (%s): %s" % (reason, command))
            skipped += 1
            continue
        words = shlex.split(command)
        if "train" in os.path.basename(words[0]) and "--epochs" in words:
            i = words.index("--epochs")
            words[i + 1:i + 2] = ["1", "--limit-train", "1280"]
        r = subprocess.run(words, cwd=scratch, env=env, capture_output=True,
                           text=True, timeout=600)
        status = "ok" if r.returncode == 0 else "FAILED (%d)" % r.returncode
        print("%s (%s line %d): %s" % (status, block["page"], block["line"],
                                        " ".join(words)))
        ran += 1
        if r.returncode != 0:
            failed.append(command)
            print(r.stdout[-2000:] + r.stderr[-2000:])

# The DSL example, as the README shows it.
dsl = next(b for b in blocks if "The model DSL" in b["heading"])
model = [t for t in dsl["text"]
         if re.match(r"(input|param|output)\b|\w+ = ", t)]
path = os.path.join(scratch, "readme.gdsl")
with open(path, "w") as f:
    f.write("\n".join(model) + "\n")
subprocess.run([os.path.join(bin_dir, "gpuc"), "compile", path, "--batch",
                "64", "--target", "cpu", "-o", "dsl-out"], cwd=scratch,
               check=True, capture_output=True)
r = subprocess.run(["dsl-out/train", "--data",
                    "/usr/share/datasets/fashion-mnist", "--epochs", "1",
                    "--limit-train", "1280"], cwd=scratch, check=True,
                   capture_output=True, text=True)
m = re.search(r"final test_accuracy ([0-9.]+)", r.stdout)
print("DSL example (%s line %d): %s" % (
    dsl["page"], dsl["line"], m.group(0) if m else r.stdout[-500:]))
if not m or not 0.0 < float(m.group(1)) <= 1.0:
    failed.append("the DSL example")
ran += 1

print("documentation commands: %d ran, %d skipped, %d failed" %
      (ran, skipped, len(failed)))
sys.exit(1 if failed or ran < 4 else 0)
