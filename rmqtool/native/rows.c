/* dump's JSON Lines rows */
#include "kernel.h"

PyMethodDef rmq_rows_methods[] = {
    {NULL, NULL, 0, NULL},
};
