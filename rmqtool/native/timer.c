/* the timer log and wheel checks */
#include "kernel.h"

PyMethodDef rmq_timer_methods[] = {
    {NULL, NULL, 0, NULL},
};
