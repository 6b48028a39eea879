#!/usr/bin/env bash
# Sums a heap profile's in-use bytes by Go package (docs/benchmarks/ANALYSIS.md,
# issue 23's footprint). Usage: hack/heap-by-package.sh heap.pb.gz [pprof flags]
# By the package that called the allocator; with
#   -hide='^(runtime|reflect|encoding|strings|bytes|sync|internal|bufio|compress|fmt|strconv|math|sort|slices|maps|io|os|unique|net|crypto|time|context|errors|regexp|text|mime|syscall|hash|container|path|unicode|vendor|iter|weak|log|flag|html|embed|go)[./]'
# by the first package outside the standard library on the allocation's stack.
set -euo pipefail
prof=$1
shift
go tool pprof -top -nodecount=1000000 -nodefraction=0 -edgefraction=0 -sample_index=inuse_space "$@" "$prof" 2>/dev/null |
  awk '
    f && NF >= 6 {
      n = $1; u = $1; sub(/[a-zA-Z]+$/, "", n); sub(/^[0-9.]+/, "", u)
      m = (u == "kB") ? 1024 : (u == "MB") ? 1048576 : (u == "GB") ? 1073741824 : 1
      fn = $6; pre = ""
      if (match(fn, /^[^ (]*\//)) { pre = substr(fn, 1, RLENGTH); fn = substr(fn, RLENGTH + 1) }
      sub(/[.( ].*/, "", fn)
      s[pre fn] += n * m; t += n * m
    }
    /flat%/ { f = 1 }
    END {
      for (k in s) printf "%10.2f MiB %5.1f%%  %s\n", s[k] / 1048576, 100 * s[k] / t, k
      printf "%10.2f MiB total\n", t / 1048576
    }' | sort -rn
