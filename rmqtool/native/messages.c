/* Message objects of a window's clean records (the full decode) */
#include "kernel.h"

PyMethodDef rmq_messages_methods[] = {
    {NULL, NULL, 0, NULL},
};
