/* The module rmqtool.native._kernel: every part's functions in one module. */
#include "kernel.h"

/* every part's table, in order; a part adds its table here */
static PyMethodDef *parts[] = {
    rmq_properties_methods, rmq_scan_methods, rmq_columns_methods, rmq_rows_methods, rmq_messages_methods,
    rmq_append_methods, rmq_timer_methods, rmq_table_methods, rmq_record_methods, rmq_crc32_methods,
};

static PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT, "rmqtool.native._kernel",
    "rmqtool's optional native kernel (see rmqtool/native/__init__.py).", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void)
{
    rmq_text_init();
    rmq_crc32_init();
    PyObject *module = PyModule_Create(&kernel_module);
    if (module == NULL)
        return NULL;
    for (size_t t = 0; t < sizeof(parts) / sizeof(parts[0]); t++) {
        if (PyModule_AddFunctions(module, parts[t]) < 0) {
            Py_DECREF(module);
            return NULL;
        }
    }
    /* bumped when a function's contract changes: a stale build is not used */
    if (PyModule_AddIntConstant(module, "ABI", 4) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
