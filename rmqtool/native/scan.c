/* the totalSize chain (hop) and CRC-32 of many byte ranges */
#include "kernel.h"

PyMethodDef rmq_scan_methods[] = {
    {NULL, NULL, 0, NULL},
};
