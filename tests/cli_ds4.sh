#!/bin/sh
# deepseek4 from the CLI: debug taps (--dump), --graph official|mainline|fork (--official), run/chat switches.
. tests/lib.sh
I=$SHARED/models/tiny-deepseek4-idx.gguf
T=$(head -c 200 "$SHARED/golden/tokens-300-v1024.txt" | cut -d, -f1-24)  # 24 ids: the indexer selects from 19

# --dump: named intermediate tensors, per layer, for every decode step (so the last block is one token)
if "$MOERUN" logits -m "$I" --tokens "$T" --decode -t 1 -o "$TMPD/d.lgts" \
     --dump attn_norm,KVcompress,indexer_scores,indexer_topk,ffn_moe_hash_topk,result_norm >"$TMPD/o" 2>"$TMPD/e"; then
  if grep -q "^dump attn_norm-0 \[256 x 1\]" "$TMPD/e" && grep -q "^dump KVcompress-1 \[128 x 1\]" "$TMPD/e" &&
     grep -q "^dump indexer_topk-2 \[4 x 1\]" "$TMPD/e" && grep -q "^dump indexer_scores-1 \[6 x 1\]" "$TMPD/e" &&
     grep -q "^dump ffn_moe_hash_topk-0 \[2 x 1\]" "$TMPD/e" && grep -q "^dump result_norm \[256 x 1\]" "$TMPD/e" &&
     ! grep -q "^dump q_lora" "$TMPD/e"; then ok ds4_dump; else fail ds4_dump "$(grep -c '^dump' "$TMPD/e") dump lines: $(head -c 400 "$TMPD/e")"; fi
else fail ds4_dump "exit $?: $(head -c 300 "$TMPD/e")"; fi
# 24 decode steps x 3 layers of attn_norm
n=$(grep -c "^dump attn_norm-" "$TMPD/e"); [ "$n" = 72 ] && ok ds4_dump_per_token || fail ds4_dump_per_token "$n attn_norm lines"

# the graphs differ once the indexer selects (fork: no indexer QAT) and everywhere (mainline: no FP8
# KV rows); the default is the official one, --official says the same; a prefill equals the decode
expect_ok ds4_logits_default "$MOERUN" logits -m "$I" --tokens "$T" -t 1 -o "$TMPD/r.lgts"
expect_ok ds4_logits_official "$MOERUN" logits -m "$I" --tokens "$T" -t 1 --official -o "$TMPD/o.lgts"
expect_ok ds4_logits_fork "$MOERUN" logits -m "$I" --tokens "$T" -t 1 --graph fork -o "$TMPD/f.lgts"
expect_ok ds4_logits_mainline "$MOERUN" logits -m "$I" --tokens "$T" -t 1 --graph mainline -o "$TMPD/m.lgts"
if cmp -s "$TMPD/r.lgts" "$TMPD/o.lgts" && ! cmp -s "$TMPD/r.lgts" "$TMPD/f.lgts" && ! cmp -s "$TMPD/r.lgts" "$TMPD/m.lgts" &&
   ! cmp -s "$TMPD/f.lgts" "$TMPD/m.lgts" && cmp -s "$TMPD/r.lgts" "$TMPD/d.lgts"; then ok ds4_graphs_differ
else fail ds4_graphs_differ "default != official, a graph equal to another, or decode differs from prefill"; fi
expect_err ds4_graph_bad "want official, mainline or fork" "$MOERUN" logits -m "$I" --tokens "$T" --graph llama -o "$TMPD/x.lgts"

# run / chat accept --official
expect_ok ds4_run_official "$MOERUN" run -m "$I" -p "hello" -n 4 --temp 0 -t 1 --official
if printf 'hi\n/exit\n' | "$MOERUN" chat -m "$I" -n 4 --temp 0 -t 1 --official --show-prompt >"$TMPD/o" 2>"$TMPD/e" &&
   grep -q "</think>" "$TMPD/e"; then ok ds4_chat_official; else fail ds4_chat_official "$(head -c 300 "$TMPD/e")"; fi
