#!/bin/sh
# Expert parallelism over MPI (make MPI=1; mpirun): logits byte-identical to one process at 2 and 3
# ranks, prefill and decode, resident and paged on every rank, for qwen3moe (kjv-moe), mixtral-style
# llama and deepseek4 (hash layers included); --ep without MPI is a clear error.
. tests/lib.sh
K=$SHARED/models/kjv-moe-q8_0.gguf
expect_err ep_without_mpi "built without MPI" "$MOERUN" run -m "$K" -p hi --ep
MPIBIN=build/mpi/moerun
if [ ! -x "$MPIBIN" ] || ! command -v mpirun >/dev/null 2>&1; then
  ok "ep_skipped_no_mpi_build (install libopenmpi-dev openmpi-bin: make test then builds $MPIBIN)"
else
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  T=$SHARED/golden/ppl/kjv-valid.txt
  for M in kjv-moe-q8_0 tiny-mixtral-q4_k_m tiny-deepseek4 tiny-deepseek4-iq3s-mxfp4; do
    F=$SHARED/models/$M.gguf
    "$MOERUN" perplexity -m "$F" -f "$T" -c 64 --chunks 2 -t 1 --save-logits "$TMPD/one.bin" >/dev/null 2>"$TMPD/e1"
    a=$("$MOERUN" run -m "$F" -p "And God said" --temp 0 -n 16 -t 1 --show-ids 2>/dev/null | grep '^ids')
    # 2 ranks resident, 3 ranks paged (a 1 MiB expert arena on every rank)
    for np in 2 3; do
      bud=""; [ $np = 3 ] && bud="--ram-budget 1M"
      for _ in once; do
        name=ep_${M}_np${np}$( [ -n "$bud" ] && echo _paged)
        # shellcheck disable=SC2086
        mpirun --oversubscribe -np $np "$MPIBIN" perplexity -m "$F" -f "$T" -c 64 --chunks 2 -t 1 --ep $bud \
          --save-logits "$TMPD/ep.bin" >/dev/null 2>"$TMPD/e" &&
        # shellcheck disable=SC2086
        b=$(mpirun --oversubscribe -np $np "$MPIBIN" run -m "$F" -p "And God said" --temp 0 -n 16 -t 1 --ep $bud --show-ids 2>"$TMPD/e2" | grep '^ids')
        if cmp -s "$TMPD/one.bin" "$TMPD/ep.bin" && [ -n "$a" ] && [ "$a" = "$b" ] && grep -q "served [1-9]" "$TMPD/e2"; then ok "$name"
        else fail "$name" "$(cat "$TMPD/e" "$TMPD/e2" | tail -n 4 | head -c 400)"; fi
      done
    done
  done
fi
