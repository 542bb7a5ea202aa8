/* MessageDecoder.string2messageProperties for the common string: the one C reading of a
 * record's properties, which every native part that needs them calls.
 *
 * The common string: valid UTF-8, every entry exactly one "name \x01 value" with neither empty,
 * entries joined by \x02, at most one trailing \x02 (5.x writes it). Any other string is
 * declined, and the caller takes formats/properties.bytes_to_properties, which reads it
 * as the broker's loop does. The separators come from formats/properties.py
 * (set_separators), never written here. */
#include "kernel.h"

static unsigned char property_separator = 0, name_value_separator = 0;

int rmq_properties_spans(const unsigned char *p, Py_ssize_t n, rmq_property_span *out, int max, int *ascii)
{
    *ascii = 1;
    if (property_separator == 0)
        return -1;  /* set_separators not called: decline */
    for (Py_ssize_t k = 0; k < n && *ascii; k++)
        *ascii = p[k] < 0x80;
    if (n == 0)
        return 0;
    if (p[n - 1] == property_separator)
        n--;
    int count = 0;
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t name_at = i, nv = -1;
        for (; i < n && p[i] != property_separator; i++) {
            if (p[i] == name_value_separator) {
                if (nv >= 0)
                    return -1;  /* two: Java's split gives three items */
                nv = i;
            }
        }
        if (nv <= name_at || nv + 1 >= i || count >= max)
            return -1;  /* no separator, or an empty name or value (and an empty entry) */
        out[count].name_at = name_at;
        out[count].name_len = nv - name_at;
        out[count].value_at = nv + 1;
        out[count].value_len = i - nv - 1;
        count++;
        if (i >= n)
            return count;
        i++;  /* past the separator; an entry must follow it */
    }
}

PyObject *rmq_properties_dict(const unsigned char *p, Py_ssize_t n)
{
    rmq_property_span spans[RMQ_MAX_PROPERTIES];
    int ascii;
    int count = rmq_properties_spans(p, n, spans, RMQ_MAX_PROPERTIES, &ascii);
    if (count < 0)
        return NULL;
    /* the separators are ASCII, so no UTF-8 sequence spans them: the entries decode alone as
     * the whole string does, and an invalid string has an invalid entry */
    PyObject *(*decode)(const char *, Py_ssize_t, const char *) = ascii ? PyUnicode_DecodeASCII : PyUnicode_DecodeUTF8;
    PyObject *dict = PyDict_New();
    if (dict == NULL)
        return NULL;
    for (int k = 0; k < count; k++) {
        PyObject *name = decode((const char *)p + spans[k].name_at, spans[k].name_len, NULL);
        PyObject *value = name == NULL ? NULL : decode((const char *)p + spans[k].value_at, spans[k].value_len, NULL);
        if (value == NULL || PyDict_SetItem(dict, name, value) < 0) {
            Py_XDECREF(name);
            Py_XDECREF(value);
            Py_DECREF(dict);
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                PyErr_Clear();  /* not UTF-8, declined: Java's replacement characters are the Python reading's */
            return NULL;
        }
        Py_DECREF(name);
        Py_DECREF(value);
    }
    return dict;
}

static PyObject *properties_dict(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *dict = rmq_properties_dict(view.buf, view.len);
    PyBuffer_Release(&view);
    if (dict == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return dict;
}

static PyObject *set_separators(PyObject *self, PyObject *args)
{
    unsigned char property, name_value;
    if (!PyArg_ParseTuple(args, "bb", &property, &name_value))
        return NULL;
    property_separator = property;
    name_value_separator = name_value;
    Py_RETURN_NONE;
}

PyMethodDef rmq_properties_methods[] = {
    {"properties_dict", properties_dict, METH_O,
     "properties_dict(raw) -> dict, or None when raw is not the common string (take the Python reading)"},
    {"set_separators", set_separators, METH_VARARGS,
     "set_separators(property_separator, name_value_separator): from formats/properties.py, once at import"},
    {NULL, NULL, 0, NULL},
};
