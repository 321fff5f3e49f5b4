#!/usr/bin/env bash
# Several phases of run.sh in one device command, each under its own time
# limit, so that one that runs long (scale's torch.compile peers take
# minutes) leaves the others their time; each phase's log and the packed
# results land in $OUT (at most 8 files come back from a device command).
#
#   OUT=DIR ./run-phases.sh checks:60 profile:40 scale:460
#
# The scale phase runs with --rounds 2 --scale-steps 5 here
# (GPUC_SCALE_MODELS=gpt2 for GPT-2 alone, GPUC_SCALE_VARIANTS=bf16,bf16-nchw
# for those artifacts alone).
set -u
bundle=$(cd "$(dirname "$0")" && pwd)
out=${OUT:?run-phases.sh: set OUT to the folder that collects the results}
results=$(mktemp -d)
start=$(date +%s)
stamp() { echo "== $(date +%T) +$(($(date +%s) - start))s $*" | tee -a "$out/timeline.txt"; }
for spec in "$@"; do
  phase=${spec%%:*} limit=${spec##*:}
  [[ $phase != "$spec" && $limit =~ ^[0-9]+$ ]] ||
    { echo "run-phases.sh: '$spec' is not PHASE:SECONDS" >&2; exit 2; }
  mkdir -p "$results/$phase"
  extra=()
  [[ $phase == scale ]] && extra=(--rounds 2 --scale-steps 5)
  stamp "$phase (at most ${limit}s)"
  # The log goes straight to $OUT: a command cut short by the device's
  # limit still brings back what each phase had printed.
  OUT=$results/$phase timeout -k 5 "$limit" "$bundle/run.sh" "$phase" "${extra[@]}" \
    >"$out/$phase.log" 2>&1
  stamp "$phase exit $?"
done
tar -C "$results" -cJf "$out/results.tar.xz" .
stamp packed
