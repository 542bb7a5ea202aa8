/* A window's table lines (report/table.py's TextTable rows) for the common record: empty part. */
#include "kernel.h"

PyMethodDef rmq_table_methods[] = {
    {NULL, NULL, 0, NULL},
};
