#!/bin/sh
# Expert parallelism over MPI (make MPI=1; mpirun): logits byte-identical to one process at 2 and 3
# ranks, prefill and decode, resident and paged on every rank, for qwen3moe (kjv-moe), mixtral-style
# llama and deepseek4 (hash layers included); --ep without MPI is a clear error. `logits --ep`: the
# file rank 0 writes equals one process's byte for byte, the other ranks served experts; `server
# --ep`: rank 0 answers HTTP, a greedy request gives the one-process server's text.
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

  # logits: 2 ranks resident, 3 ranks paged (a 2 MiB arena on every rank)
  ids=1,200,300,400,500,17,33,99
  for M in kjv-moe-q8_0 tiny-deepseek4; do
    F=$SHARED/models/$M.gguf
    "$MOERUN" logits -m "$F" --tokens $ids -o "$TMPD/one.lgts" -t 1 2>/dev/null
    for np in 2 3; do
      bud=""; [ $np = 3 ] && bud="--ram-budget 2M"
      name=ep_logits_${M}_np${np}$( [ -n "$bud" ] && echo _paged)
      rm -f "$TMPD/ep.lgts"
      # shellcheck disable=SC2086
      mpirun --oversubscribe -np $np "$MPIBIN" logits -m "$F" --tokens $ids -o "$TMPD/ep.lgts" -t 1 --ep $bud 2>"$TMPD/e"
      if [ -s "$TMPD/one.lgts" ] && cmp -s "$TMPD/one.lgts" "$TMPD/ep.lgts" && [ "$(grep -c "served [1-9]" "$TMPD/e")" = $((np - 1)) ]; then ok "$name"
      else fail "$name" "$(tail -n 4 "$TMPD/e" | head -c 400)"; fi
    done
  done
  # server: one greedy request to a 2-rank server equals the same request to a one-process server
  K=$SHARED/models/kjv-moe-q8_0.gguf
  req='{"prompt":"And God said","max_tokens":12,"temperature":0}'
  serve_one() { # PORT: start, wait for /health, one request into $TMPD/$2, stop
    for _ in $(seq 1 150); do curl -s "http://127.0.0.1:$1/health" 2>/dev/null | grep -q '"ok"' && break; sleep 0.2; done
    curl -s "http://127.0.0.1:$1/v1/completions" -d "$req" | sed -n 's/.*"text":"\([^"]*\)".*/\1/p' >"$TMPD/$2"
  }
  if command -v curl >/dev/null 2>&1; then
    P1=$((20000 + ($$ + 101) % 20000)); P2=$((20000 + ($$ + 202) % 20000))
    "$MOERUN" server -m "$K" --port $P1 -t 1 >/dev/null 2>"$TMPD/s1" &
    S1=$!
    serve_one $P1 one.txt
    kill $S1 2>/dev/null; wait $S1 2>/dev/null
    mpirun --oversubscribe -np 2 "$MPIBIN" server -m "$K" --port $P2 -t 1 --ep >/dev/null 2>"$TMPD/s2" &
    S2=$!
    serve_one $P2 ep.txt
    # stop rank 0 like a user would (SIGTERM): it sends stop to rank 1, both print their counts and
    # mpirun ends normally; mpirun itself is killed only if that has not happened within 20 s
    for c in $(pgrep -P $S2); do
      grep -qz '^OMPI_COMM_WORLD_RANK=0$' /proc/$c/environ 2>/dev/null && kill -TERM $c
    done
    for _ in $(seq 1 100); do kill -0 $S2 2>/dev/null || break; sleep 0.2; done
    kill $S2 2>/dev/null; wait $S2 2>/dev/null
    if [ -s "$TMPD/one.txt" ] && cmp -s "$TMPD/one.txt" "$TMPD/ep.txt" && grep -q "rank 0 of 2 sent [1-9]" "$TMPD/s2" &&
       grep -q "rank 1 of 2 served [1-9]" "$TMPD/s2"; then ok ep_server_np2
    else fail ep_server_np2 "one '$(cat "$TMPD/one.txt")' ep '$(cat "$TMPD/ep.txt")' $(tail -n 3 "$TMPD/s2" | head -c 300)"; fi
    # rank 1's own copy of the model shrinks under it (mpirun's MPMD form gives each rank its
    # file): the request fails with rank 1's message, the server stays up and the next request on
    # rank 0's side is answered (rank 1 keeps answering with the error)
    A=$TMPD/a.gguf; B=$TMPD/b.gguf
    cp "$K" "$A"; cp "$K" "$B"; size=$(wc -c <"$B")
    P3=$((20000 + ($$ + 303) % 20000))
    mpirun --oversubscribe -np 1 "$MPIBIN" server -m "$A" --port $P3 -t 1 --ep : \
      -np 1 "$MPIBIN" server -m "$B" --port $P3 -t 1 --ep >/dev/null 2>"$TMPD/s3" &
    S3=$!
    serve_one $P3 before.txt
    truncate -s $((size / 2)) "$B"
    code=$(curl -s -o "$TMPD/b3" -w '%{http_code}' "http://127.0.0.1:$P3/v1/completions" -d "$req")
    health=$(curl -s "http://127.0.0.1:$P3/health")
    for c in $(pgrep -P $S3); do
      grep -qz '^OMPI_COMM_WORLD_RANK=0$' /proc/$c/environ 2>/dev/null && kill -TERM $c
    done
    for _ in $(seq 1 100); do kill -0 $S3 2>/dev/null || break; sleep 0.2; done
    kill $S3 2>/dev/null; wait $S3 2>/dev/null
    if cmp -s "$TMPD/one.txt" "$TMPD/before.txt" && [ "$code" = 500 ] && grep -q "ep: rank 1: .*b.gguf: the file shrank" "$TMPD/b3" &&
       echo "$health" | grep -q '"ok"' && grep -q "rank 1 of 2 served [1-9].*, 1 batches failed" "$TMPD/s3"; then ok ep_server_rank1_file_shrank
    else fail ep_server_rank1_file_shrank "code $code $(head -c 200 "$TMPD/b3") $(tail -n 3 "$TMPD/s3" | head -c 300)"; fi
  else fail ep_server_curl "curl is not installed"; fi
fi
