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
#include <string.h>

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

/* text.c: numbers, times, base64 and escaped text written into a byte buffer. Each writes at w
 * and returns where it stopped; the caller made room for it first. */
extern const char rmq_hex_upper[16], rmq_hex_lower[16];
void rmq_text_init(void);  /* module.c, once: base64's tables */
char *rmq_put_int(char *w, int64_t v);
char *rmq_put_hex_upper(char *w, uint64_t v, int digits);  /* the low ``digits`` hex digits of v */
/* columns.cell_text of a *_timestamp: epoch ms > 0 as 2023-11-14T22:13:20.000Z, else the number */
char *rmq_put_time(char *w, int64_t ms);
char *rmq_put_base64(char *w, const unsigned char *s, Py_ssize_t n);  /* padded, as base64.b64encode */
/* ASCII bytes as orjson writes a string's content (at most 6 bytes a byte) */
char *rmq_put_json_escaped(char *w, const unsigned char *s, Py_ssize_t n);
/* ASCII bytes as columns.terminal_safe escapes them: C0 controls and DEL as \xNN (at most 4 a byte) */
char *rmq_put_terminal_safe(char *w, const unsigned char *s, Py_ssize_t n);
int rmq_ascii(const unsigned char *s, Py_ssize_t n);
int rmq_utf8(const unsigned char *s, Py_ssize_t n);  /* valid as Python's strict decoding says */

static inline char *rmq_put(char *w, const char *s, Py_ssize_t n)
{
    memcpy(w, s, (size_t)n);
    return w + n;
}

static inline int rmq_same(const unsigned char *a, Py_ssize_t a_len, const unsigned char *b, Py_ssize_t b_len)
{
    return a_len == b_len && memcmp(a, b, (size_t)a_len) == 0;
}

/* record.c: a clean record's parts as dump's rows (rows.c) and table lines (table.c) read them.
 * The header fields, in report/native_records.py FIELDS' order; their positions and sizes by
 * hosts kind, the property names read and the flags are set from Python (set_record_layout). */
enum { RMQ_F_STORE_SIZE, RMQ_F_MAGIC, RMQ_F_BODY_CRC, RMQ_F_QUEUE_ID, RMQ_F_FLAG, RMQ_F_QUEUE_OFFSET,
       RMQ_F_PHYSICAL_OFFSET, RMQ_F_SYS_FLAG, RMQ_F_BORN_TIMESTAMP, RMQ_F_BORN_IP, RMQ_F_BORN_PORT,
       RMQ_F_STORE_TIMESTAMP, RMQ_F_STORE_IP, RMQ_F_STORE_PORT, RMQ_F_RECONSUME, RMQ_F_PREPARED, RMQ_N_FIELDS };
#define RMQ_HOST_KINDS 4
#define RMQ_NAME_MAX 64
typedef struct {
    int ready;
    Py_ssize_t at[RMQ_HOST_KINDS][RMQ_N_FIELDS], size[RMQ_HOST_KINDS][RMQ_N_FIELDS], header_size[RMQ_HOST_KINDS];
    unsigned char tags[RMQ_NAME_MAX], keys[RMQ_NAME_MAX], uniq[RMQ_NAME_MAX];
    Py_ssize_t tags_len, keys_len, uniq_len;
    unsigned char key_separator;
    uint32_t magic_v2;
    int64_t compressed_flag;
} rmq_record_layout;
extern rmq_record_layout rmq_layout;

/* a header field of the record at rec (hosts kind ``kind``); set_record_layout checked it lies in the header */
static inline int64_t rmq_field(const unsigned char *rec, int kind, int f)
{
    const unsigned char *p = rec + rmq_layout.at[kind][f];
    switch (rmq_layout.size[kind][f]) {
    case 2: return rmq_i16(p);
    case 4: return rmq_i32(p);
    case 8: return rmq_i64(p);
    default: return 0;
    }
}

/* the next key of a KEYS value kv[0..n) from *i on, split at the key separator with empty pieces
 * left out (formats/properties.split_keys): its start (its length in *len, *i moved past it), -1 when none is left */
static inline Py_ssize_t rmq_next_key(const unsigned char *kv, Py_ssize_t n, Py_ssize_t *i, Py_ssize_t *len)
{
    while (*i < n) {
        Py_ssize_t at = *i, j = at;
        while (j < n && kv[j] != rmq_layout.key_separator)
            j++;
        *i = j + 1;
        if (j > at) {
            *len = j - at;
            return at;
        }
    }
    return -1;
}

/* spans: int64 rows of (position, end, hosts, body_at, body_end, topic_at, topic_end, properties_at) */
enum { RMQ_S_POS, RMQ_S_END, RMQ_S_HOSTS, RMQ_S_BODY_AT, RMQ_S_BODY_END, RMQ_S_TOPIC_AT, RMQ_S_TOPIC_END,
       RMQ_S_PROPS_AT, RMQ_N_SPANS };
/* verdicts: uint8 rows of (body CRC holds, has a __CRC32# entry, the entry holds) */
enum { RMQ_V_BODY_OK, RMQ_V_HAS_ENTRY, RMQ_V_ENTRY_OK, RMQ_N_VERDICTS };

/* a window's buffers, checked: spans int64 rows of RMQ_N_SPANS, verdicts (or None) uint8 rows of RMQ_N_VERDICTS */
typedef struct {
    Py_buffer buf, spans, verdicts;
    int have_verdicts;
    Py_ssize_t n;
} rmq_window;
int rmq_window_get(rmq_window *win, PyObject *buf_obj, PyObject *spans_obj, PyObject *verdicts_obj);
void rmq_window_release(rmq_window *win);

/* a record's parts, checked once; tags, keys, uniq: the entry of that name, or -1 */
typedef struct {
    const unsigned char *rec, *topic, *props, *body;
    Py_ssize_t topic_len, props_len, body_len;
    int kind, np, tags, keys, uniq, topic_ascii, props_ascii;
    int64_t offset, position, sys_flag;
    rmq_property_span sp[RMQ_MAX_PROPERTIES];
} rmq_record;
/* 1 when the record's row has no finding (then its parts are in r), 0 when declined; s its spans,
 * v its verdicts (NULL: not checked), offset0 and position0 the window's */
int rmq_read_record(rmq_record *r, const unsigned char *buf, Py_ssize_t buf_len, const int64_t *s,
                    const unsigned char *v, int64_t offset0, int64_t position0);

/* crc32.c: CRC-32 as zlib.crc32(data, value) computes it (value 0 for a new one), by the
 * fastest path the CPU has; rmq_crc32_init (module.c, once) builds the tables and picks it */
void rmq_crc32_init(void);
uint32_t rmq_crc32(uint32_t crc, const unsigned char *p, size_t n);

/* each part's method table (module.c joins them); a part not written yet has an empty one */
extern PyMethodDef rmq_properties_methods[];
extern PyMethodDef rmq_scan_methods[];
extern PyMethodDef rmq_columns_methods[];
extern PyMethodDef rmq_rows_methods[];
extern PyMethodDef rmq_messages_methods[];
extern PyMethodDef rmq_append_methods[];
extern PyMethodDef rmq_timer_methods[];
extern PyMethodDef rmq_table_methods[];
extern PyMethodDef rmq_record_methods[];
extern PyMethodDef rmq_crc32_methods[];

#endif
