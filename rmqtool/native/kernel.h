/* rmqtool's optional native kernel: the declarations every part shares.
 *
 * Each part (scan.c, ...) defines its functions and a PyMethodDef table ending in a
 * {NULL} entry; module.c joins the tables. Field positions, magic codes and sizes are never
 * written here: the Python side derives them from formats/ and passes them in. */
#ifndef RMQTOOL_NATIVE_KERNEL_H
#define RMQTOOL_NATIVE_KERNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* big-endian reads: every integer RocketMQ and QMQ write is big-endian (Java's ByteBuffer) */
static inline int32_t rmq_i32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static inline int64_t rmq_i64(const unsigned char *p)
{
    return (int64_t)(((uint64_t)(uint32_t)rmq_i32(p) << 32) | (uint64_t)(uint32_t)rmq_i32(p + 4));
}

static inline int16_t rmq_i16(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

/* properties.c: the one C reading of a record's properties (the common string only).
 * rmq_properties_spans: each entry's name and value as spans, the count, or -1 when the string
 * is not the common one or has more than max entries (declined); *ascii says whether every byte
 * is ASCII. rmq_properties_dict: a dict of them; NULL with no error set when declined (the caller
 * takes the Python reading), NULL with an error set when Python ran out of memory. */
typedef struct {
    Py_ssize_t name_at, name_len, value_at, value_len;
} rmq_property_span;
#define RMQ_MAX_PROPERTIES 64
int rmq_properties_spans(const unsigned char *p, Py_ssize_t n, rmq_property_span *out, int max, int *ascii);
PyObject *rmq_properties_dict(const unsigned char *p, Py_ssize_t n);

/* each part's method table (module.c joins them); a part not written yet has an empty one */
extern PyMethodDef rmq_properties_methods[];
extern PyMethodDef rmq_scan_methods[];
extern PyMethodDef rmq_columns_methods[];
extern PyMethodDef rmq_rows_methods[];
extern PyMethodDef rmq_messages_methods[];
extern PyMethodDef rmq_append_methods[];
extern PyMethodDef rmq_timer_methods[];
extern PyMethodDef rmq_table_methods[];

#endif
