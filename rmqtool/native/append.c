/* the append path's record encoding */
#include "kernel.h"

PyMethodDef rmq_append_methods[] = {
    {NULL, NULL, 0, NULL},
};
