/* Expert parallelism in a build without MPI (the default): --ep is refused with how to get it. */
#include "moerun.h"
#include "base/base.h"

#include <string.h>

int mr_ep_start(int *argc, char ***argv) {
    for (int i = 0; i < *argc; i++)
        if (!strcmp((*argv)[i], "--ep")) {
            mr_set_error("--ep: this moerun was built without MPI (build it with `make MPI=1`, which needs libopenmpi-dev, and start it with mpirun)");
            return -1;
        }
    return 0;
}
int mr_ep_active(void) { return 0; }
int mr_ep_rank(void) { return 0; }
int mr_ep_size(void) { return 1; }
int mr_ep_attach(mr_model *m) { (void)m; return 0; }
int mr_ep_serve(mr_model *m) { (void)m; mr_set_error("ep: built without MPI"); return -1; }
void mr_ep_stop(void) {}
