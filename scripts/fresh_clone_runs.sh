#!/usr/bin/env bash
# Fresh-clone `make test` runs, one after the other (docs/development.md, "Fresh-clone runs").
#   scripts/fresh_clone_runs.sh N [quiet|load]   (load: two busy loops keep both cores busy meanwhile)
# Each run clones this repository's HEAD into /tmp, runs `make test` there, appends one line to
# $OUT/summary.txt (default OUT=/tmp/topicflow-fresh-runs) and removes the clone.
set -u
n=$1; mode=${2:-quiet}; out=${OUT:-/tmp/topicflow-fresh-runs}; mkdir -p $out
repo=$(git rev-parse --show-toplevel)
for i in $(seq 1 $n); do
  dir=/tmp/topicflow-fresh-$mode-$i; rm -rf $dir; git clone -q $repo $dir
  commit=$(git -C $dir rev-parse --short HEAD)
  pids=""
  if [[ "$mode" == load* ]]; then
    python3 -c "while True: pass" & pids="$pids $!"
    python3 -c "while True: pass" & pids="$pids $!"
  fi
  start=$(date +%s)
  (cd $dir && make test) > $out/$mode-$i.log 2>&1; rc=$?
  end=$(date +%s)
  [ -n "$pids" ] && kill $pids
  summary=$(grep -E "passed|failed" $out/$mode-$i.log | tail -1)
  echo "$mode run $i commit $commit rc=$rc wall=$((end-start))s $summary" >> $out/summary.txt
  rm -rf $dir
done
