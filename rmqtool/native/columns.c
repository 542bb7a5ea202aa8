/* the clean records' properties as columns (verify, redispatch) */
#include "kernel.h"

PyMethodDef rmq_columns_methods[] = {
    {NULL, NULL, 0, NULL},
};
