#ifndef MR_SYNTH_H
#define MR_SYNTH_H
/* see include/moerun.h: mr_synth, mr_synth_list */
#endif
