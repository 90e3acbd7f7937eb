/* Shared by the chat files: the output buffer the renderers write into (chat.c), the thinking
 * variants of the templates (think.c), the Kimi-K2, GLM, gpt-oss and DeepSeek-V3.1 formats (formats.c). */
#ifndef MR_CHAT_IMPL_H
#define MR_CHAT_IMPL_H
#include "moerun.h"

#include <stddef.h>

/* DeepSeek-V3.1's call markers (fullwidth bars, U+2581 for spaces) */
#define DS_BAR "\xef\xbd\x9c"
#define DS_LOW "\xe2\x96\x81"
#define DS31_CALLS "<" DS_BAR "tool" DS_LOW "calls" DS_LOW "begin" DS_BAR ">"
#define DS31_CALLS_END "<" DS_BAR "tool" DS_LOW "calls" DS_LOW "end" DS_BAR ">"
#define DS31_CALL "<" DS_BAR "tool" DS_LOW "call" DS_LOW "begin" DS_BAR ">"
#define DS31_CALL_END "<" DS_BAR "tool" DS_LOW "call" DS_LOW "end" DS_BAR ">"
#define DS31_SEP "<" DS_BAR "tool" DS_LOW "sep" DS_BAR ">"

/* rendered text: like snprintf, len may exceed size (the text is then truncated) */
typedef struct { char *buf; int size, len; } mr_chat_buf;
void mr_chat_put(mr_chat_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 1 when the model's chatml template opens the reasoning in its generation prompt (Qwen3.5) */
int mr_chat_qwen_opens_think(const mr_model *m);
/* 1 when the model's chatml template is Qwen3's thinking one (it mentions <think>, or Qwen3.5) */
int mr_chat_qwen_thinks(const mr_model *m);
/* 1 when the model's embedded template mentions s */
int mr_chat_template_has(const mr_model *m, const char *s);

/* Kimi-K2 (formats.c): the conversation as its reference template renders it (thinking: the
 * Kimi-K2-Thinking variant), and its tool calls parsed from p (at the section marker) */
void mr_chat_render_kimi(mr_chat_buf *b, const mr_chat_msg *msgs, int n, const char *const *tools, int n_tools, int thinking,
                         int add_assistant);
int mr_chat_parse_kimi(const char *p, const char *end, mr_chat_tool_call *calls, int max);
/* GLM-4.5 / 4.6 (formats.c): as its reference template renders it (no tools); thinking -1 / 0 / 1 */
void mr_chat_render_glm(mr_chat_buf *b, const mr_chat_msg *msgs, int n, int thinking, int add_assistant);
/* DeepSeek-V3.1 (formats.c): as its reference template renders it (calls, no tool list); thinking
 * -1 / 0 / 1; its calls parsed from p (at <｜tool▁calls▁begin｜>) */
void mr_chat_render_ds31(mr_chat_buf *b, const mr_chat_msg *msgs, int n, int thinking, int add_assistant);
int mr_chat_parse_ds31(const char *p, const char *end, mr_chat_tool_call *calls, int max);
/* gpt-oss (formats.c): harmony as its reference template renders it, tools and calls too; its calls
 * parsed from p (at "to=functions.") */
void mr_chat_render_harmony(mr_chat_buf *b, const mr_chat_msg *msgs, int n, const char *const *tools, int n_tools, const mr_chat_opts *o,
                            int add_assistant);
int mr_chat_parse_harmony(const char *p, const char *end, mr_chat_tool_call *calls, int max);
#endif
