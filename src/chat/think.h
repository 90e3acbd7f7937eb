/* Shared by the chat templates (chat.c) and the thinking formats (think.c). */
#ifndef MR_CHAT_THINK_H
#define MR_CHAT_THINK_H
#include "moerun.h"

/* 1 when the model's chatml template opens the reasoning in its generation prompt (Qwen3.5) */
int mr_chat_qwen_opens_think(const mr_model *m);
/* 1 when the model's chatml template is Qwen3's thinking one (it mentions <think>, or Qwen3.5) */
int mr_chat_qwen_thinks(const mr_model *m);
#endif
