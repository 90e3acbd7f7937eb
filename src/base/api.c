/* Small public entry points of the base module. */
#include "moerun.h"
#include "base/base.h"

const char *mr_version(void) { return "0.1.0"; }
const char *mr_last_error(void) { return mr_get_error(); }
void mr_set_log_level(int level) { mr_log_level = level; }
