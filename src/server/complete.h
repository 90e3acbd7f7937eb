/* A generation request (POST /v1/chat/completions, /v1/completions, /v1/messages): parsed, its prompt
 * built, run on a slot of the scheduler, answered by its API's writer. */
#ifndef MR_SERVER_COMPLETE_H
#define MR_SERVER_COMPLETE_H
#include "server/conf.h"
#include "server/http.h"
#include "server/sched.h"

void srv_complete(const srv_conf *cf, srv_sched *sc, mr_http_req *r, int api);
#endif
