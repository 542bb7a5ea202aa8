/* dump's table lines: a window's clean records written as report/table.py's TextTable._line
 * writes their message_record rows, byte for byte, once the table's layout is fixed.
 *
 * The Python line (message_record, then TextTable._line: the cell's text, escaped, cut with an
 * ellipsis, padded, the line's end stripped) is the definition; this is a fast copy of its
 * common case. table_records picks, when the window is scanned, the records whose row has no
 * finding (the rest stay Messages, the Python way); table_lines writes their lines given the
 * layout's cells, and stops at a record it does not cover (its line is then made in Python).
 * Declined: a compressed body, a failed CRC, a physicalOffset naming another place, a topic or
 * properties that are not UTF-8, properties that are not the common string, a property name
 * twice, a shown cell whose text is not ASCII (wide and combining characters, escapes past
 * ASCII: the Python line's), a file name that is not ASCII, a cell source it does not know (the
 * caller then takes the Python path for the layout). A host's text and the msgId's head are
 * asked of Python (message_record's own), once for each host in a row of records.
 *
 * The record's reading is record.c's (its layout set from Python, set_record_layout), its text's
 * writing text.c's; the cells (which value, width, alignment, how it may be cut) come from the
 * table's layout, each call. A cell longer than its width that may not be cut here (a number,
 * an ID, a name not yet shown cut: report/shorten.py's rules, which may widen the column) ends
 * the lines at its record, which is declined: TextTable makes its line, then asks again. */
#include "kernel.h"
#include <string.h>

/* where a cell's value comes from; table_sources() gives Python these names in this order */
enum { SRC_CONST, SRC_OFFSET, SRC_POSITION, SRC_INT, SRC_TIME, SRC_MAGIC, SRC_VERSION, SRC_BODY_LENGTH,
       SRC_BODY_CRC_OK, SRC_PROPERTY_CRC_OK, SRC_BODY_BASE64, SRC_TOPIC, SRC_PROPERTIES, SRC_PROPERTIES_RAW,
       SRC_TAGS, SRC_KEYS, SRC_UNIQ, SRC_FILE, SRC_BODY_TEXT, SRC_HOST, SRC_MSG_ID, N_SOURCES };
static const char *SOURCE_NAMES[N_SOURCES] = {
    "const", "offset", "position", "int", "time", "magic", "version", "body_length", "body_crc_ok",
    "property_crc_ok", "body_base64", "topic", "properties", "properties_raw", "tags", "keys", "uniq", "file",
    "body_text", "host", "msg_id"};

#define MAX_CELLS 64
/* how a cell longer than its width may be cut (report/table_rows.py's _KERNEL_CUTS) */
enum { CUT_NONE, CUT_END, CUT_END_SHOWN, CUT_FRONT_SHOWN, N_CUTS };
typedef struct {
    int source, arg, right, cut;
    Py_ssize_t width;
    const char *text;  /* SRC_CONST's */
    Py_ssize_t text_len;
    PyObject *shown;  /* CUT_*_SHOWN: the texts (bytes) the table shows cut, a frozenset (borrowed) */
} cell_t;

/* --- hosts: their text from Python ----------------------------------------------------------- */
/* A host's text and the msgId's head are message_record's own, asked of Python (a callable
 * (ip, port) -> (host text, msgId head), ASCII bytes) once for each host in a row of records. */
enum { HOST_BORN, HOST_STORE };
typedef struct {
    PyObject *texts;  /* the callable; NULL: a host cell is not written */
    struct {
        unsigned char ip[16];
        Py_ssize_t ip_len;
        int64_t port;
        PyObject *value;  /* owned */
    } slot[2];
} hosts_t;

static void hosts_release(hosts_t *h)
{
    for (int k = 0; k < 2; k++)
        Py_CLEAR(h->slot[k].value);
}

/* the (host text, msgId head) of the record's born or store host (a reference the slot holds);
 * NULL when the callable fails or gives what is not two ASCII bytes objects (declined) */
static PyObject *host_texts(hosts_t *h, const rmq_record *r, int which)
{
    int ip_field = which == HOST_BORN ? RMQ_F_BORN_IP : RMQ_F_STORE_IP;
    int port_field = which == HOST_BORN ? RMQ_F_BORN_PORT : RMQ_F_STORE_PORT;
    const unsigned char *ip = r->rec + rmq_layout.at[r->kind][ip_field];
    Py_ssize_t ip_len = rmq_layout.size[r->kind][ip_field];
    int64_t port = rmq_field(r->rec, r->kind, port_field);
    if (h->texts == NULL || ip_len > 16)
        return NULL;
    if (h->slot[which].value != NULL && h->slot[which].ip_len == ip_len && h->slot[which].port == port
        && memcmp(h->slot[which].ip, ip, (size_t)ip_len) == 0)
        return h->slot[which].value;
    Py_CLEAR(h->slot[which].value);
    PyObject *got = PyObject_CallFunction(h->texts, "y#L", (const char *)ip, ip_len, (long long)port);
    if (got == NULL || !PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 2) {
        PyErr_Clear();
        Py_XDECREF(got);
        return NULL;
    }
    for (int k = 0; k < 2; k++) {
        PyObject *text = PyTuple_GET_ITEM(got, k);
        if (!PyBytes_Check(text) || !rmq_ascii((const unsigned char *)PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text))
            || PyBytes_GET_SIZE(text) > 256) {
            Py_DECREF(got);
            return NULL;
        }
    }
    memcpy(h->slot[which].ip, ip, (size_t)ip_len);
    h->slot[which].ip_len = ip_len;
    h->slot[which].port = port;
    h->slot[which].value = got;
    return got;
}

/* --- a cell's text (before cutting): escaped as columns.terminal_safe escapes ---------------- */
/* base64 of s (as message_record's), only of its first bytes when ``most`` letters are all that
 * is shown (a whole multiple of 3 bytes: the letters are then the whole text's first ones) */
static char *put_base64(char *t, const unsigned char *s, Py_ssize_t n, Py_ssize_t most)
{
    if (most >= 0 && most / 4 * 3 + 3 < n)
        n = most / 4 * 3 + 3;
    return rmq_put_base64(t, s, n);
}

static char *put_value(char *t, const rmq_record *r, int a)
{
    return a < 0 ? t : rmq_put_terminal_safe(t, r->props + r->sp[a].value_at, r->sp[a].value_len);
}

/* records.render_body's text of a body, cut to ``preview`` letters (-1: whole) when its letters
 * up to there are ASCII (then they are its bytes); -1 when they are not (declined) */
static Py_ssize_t body_text_bytes(const rmq_record *r, int preview)
{
    Py_ssize_t n = preview >= 0 && r->body_len > preview ? preview : r->body_len;
    return rmq_ascii(r->body, n) ? n : -1;
}

/* The cell's text into t (room: cell_room), escaped; ``most``: the letters shown, -1 for all.
 * *ellipsis: 1 when the text ends in an ellipsis (a body preview cut short), else 0. */
static char *cell_text(char *t, const cell_t *c, const rmq_record *r, const unsigned char *v,
                       const hosts_t *hosts, const char *file, Py_ssize_t file_len, Py_ssize_t most, int *ellipsis)
{
    const unsigned char *rec = r->rec;
    *ellipsis = 0;
    switch (c->source) {
    case SRC_CONST: return rmq_put_terminal_safe(t, (const unsigned char *)c->text, c->text_len);
    case SRC_OFFSET: return rmq_put_int(t, r->offset);
    case SRC_POSITION: return rmq_put_int(t, r->position);
    case SRC_INT: return rmq_put_int(t, rmq_field(rec, r->kind, c->arg));
    case SRC_TIME: return rmq_put_time(t, rmq_field(rec, r->kind, c->arg));
    case SRC_MAGIC: {
        *t++ = '0';
        *t++ = 'x';
        return rmq_put_hex_upper(t, (uint32_t)rmq_field(rec, r->kind, RMQ_F_MAGIC), 8);
    }
    case SRC_VERSION: return rmq_put_int(t, (uint32_t)rmq_field(rec, r->kind, RMQ_F_MAGIC) == rmq_layout.magic_v2 ? 2 : 1);
    case SRC_BODY_LENGTH: return rmq_put_int(t, r->body_len);
    case SRC_BODY_CRC_OK:  /* verdicts are there only when checked, and a taken record's hold */
        return v == NULL ? t : rmq_put_terminal_safe(t, (const unsigned char *)"yes", 3);
    case SRC_PROPERTY_CRC_OK:  /* a field of the row only with a __CRC32# entry */
        return v == NULL || !v[RMQ_V_HAS_ENTRY] ? t : rmq_put_terminal_safe(t, (const unsigned char *)"yes", 3);
    case SRC_BODY_BASE64: return put_base64(t, r->body, r->body_len, most);
    case SRC_TOPIC: return rmq_put_terminal_safe(t, r->topic, r->topic_len);
    case SRC_PROPERTIES:  /* the dict as cell_text joins it: name=value, a space between */
        for (int a = 0; a < r->np; a++) {
            if (a)
                *t++ = ' ';
            t = rmq_put_terminal_safe(t, r->props + r->sp[a].name_at, r->sp[a].name_len);
            *t++ = '=';
            t = put_value(t, r, a);
        }
        return t;
    case SRC_PROPERTIES_RAW: return put_base64(t, r->props, r->props_len, most);
    case SRC_TAGS: return put_value(t, r, r->tags);
    case SRC_UNIQ: return put_value(t, r, r->uniq);
    case SRC_KEYS:
        if (r->keys >= 0) {  /* the keys joined by spaces */
            const unsigned char *kv = r->props + r->sp[r->keys].value_at;
            Py_ssize_t i = 0, at, len;
            for (int first = 1; (at = rmq_next_key(kv, r->sp[r->keys].value_len, &i, &len)) >= 0; first = 0) {
                if (!first)
                    *t++ = ' ';
                t = rmq_put_terminal_safe(t, kv + at, len);
            }
        }
        return t;
    case SRC_FILE: return rmq_put_terminal_safe(t, (const unsigned char *)file, file_len);
    case SRC_HOST: {  /* covered() asked for it */
        PyObject *host = PyTuple_GET_ITEM(hosts->slot[c->arg].value, 0);
        return rmq_put_terminal_safe(t, (const unsigned char *)PyBytes_AS_STRING(host), PyBytes_GET_SIZE(host));
    }
    case SRC_MSG_ID: {  /* the head, then the commit log offset in 16 hex digits (records.message_record) */
        PyObject *head = PyTuple_GET_ITEM(hosts->slot[HOST_STORE].value, 1);
        t = rmq_put_terminal_safe(t, (const unsigned char *)PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head));
        return rmq_put_hex_upper(t, (uint64_t)r->offset, 16);
    }
    case SRC_BODY_TEXT: {  /* ASCII up to the preview (table_lines checked it): its bytes, "…" when longer */
        Py_ssize_t n = body_text_bytes(r, c->arg);
        if (n < 0)
            return t;
        *ellipsis = n < r->body_len;
        return rmq_put_terminal_safe(t, r->body, most >= 0 && most < n ? most : n);
    }
    default: return t;
    }
}

/* --- the line ---------------------------------------------------------------------------- */
static const char ELLIPSIS[] = "\xe2\x80\xa6";  /* U+2026, one terminal cell */

static char *put_spaces(char *w, Py_ssize_t n)
{
    if (n > 0) {
        memset(w, ' ', (size_t)n);
        w += n;
    }
    return w;
}

/* 1 when the cell's text t (n letters) may be cut to the cell's width: free text, or a name or
 * file the table shows cut already (its cut then tells it from every other one shown) */
static int may_cut(const cell_t *c, const char *t, Py_ssize_t n)
{
    if (c->cut == CUT_END)
        return 1;
    if (c->cut == CUT_NONE || c->shown == NULL)
        return 0;
    PyObject *key = PyBytes_FromStringAndSize(t, n);
    int in = key == NULL ? -1 : PySet_Contains(c->shown, key);
    Py_XDECREF(key);
    if (in < 0)
        PyErr_Clear();
    return in == 1;
}

/* the cell's text t (n letters, ASCII, then an ellipsis when ``ellipsis``) as TextTable._line
 * writes it: cut (columns.cut, or shorten.cut_front for a path) unless wide, padded to the width */
static char *put_cell(char *w, const cell_t *c, const char *t, Py_ssize_t n, int ellipsis, int wide)
{
    Py_ssize_t width = c->width, cells = n + ellipsis;
    if (wide || cells <= width) {
        if (c->right)
            w = put_spaces(w, width - cells);
        memcpy(w, t, (size_t)n);
        w += n;
        if (ellipsis)
            w = rmq_put(w, ELLIPSIS, 3);
        return c->right ? w : put_spaces(w, width - cells);
    }
    /* longer than the width: width - 1 letters and the ellipsis (just the ellipsis at width 1 or
     * less; the letters kept are ASCII: an ellipsis of the text's own is its last letter); the cut
     * text is width cells wide, so no pad but at width 0 (where it is one cell over) */
    Py_ssize_t keep = width > 1 ? width - 1 : 0;
    if (c->cut == CUT_FRONT_SHOWN) {
        w = rmq_put(w, ELLIPSIS, 3);
        memcpy(w, t + n - keep, (size_t)keep);
        return w + keep;
    }
    memcpy(w, t, (size_t)keep);
    w += keep;
    return rmq_put(w, ELLIPSIS, 3);
}

/* the room one cell's text may take: every string of a record at most 4 bytes a byte (escaped),
 * the file's name alike, numbers and times in 32, a host's texts (256 bytes at most) alike */
static Py_ssize_t cell_room(const rmq_record *r, Py_ssize_t file_len, const cell_t *cells, int n_cells)
{
    Py_ssize_t room = 2200 + 4 * file_len + 4 * (Py_ssize_t)(r->props_len + r->topic_len + r->body_len);
    for (int c = 0; c < n_cells; c++)
        if (cells[c].source == SRC_CONST && 4 * cells[c].text_len + 64 > room)
            room = 4 * cells[c].text_len + 64;
    return room;
}

/* buffers kept between calls, grown as needed: the lines, and one cell's text */
static char *lines = NULL, *text = NULL;
static Py_ssize_t lines_cap = 0, text_cap = 0;

static int grow(char **p, Py_ssize_t *cap, Py_ssize_t need)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t to = *cap ? *cap : 1 << 16;
    while (to < need) {
        if (to > PY_SSIZE_T_MAX / 2)
            return -1;
        to *= 2;
    }
    char *q = PyMem_RawRealloc(*p, (size_t)to);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = to;
    return 0;
}

/* table_records(buf, spans, verdicts, first, offset0, position0) -> the count of records from
 * first on that table_lines covers (none of them with a finding); 0 before set_record_layout */
static PyObject *table_records(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *spans_obj, *verdicts_obj;
    Py_ssize_t first;
    long long offset0, position0;
    if (!PyArg_ParseTuple(args, "OOOnLL", &buf_obj, &spans_obj, &verdicts_obj, &first, &offset0, &position0))
        return NULL;
    rmq_window win;
    if (rmq_window_get(&win, buf_obj, spans_obj, verdicts_obj) < 0)
        return NULL;
    const int64_t *s = win.spans.buf;
    const unsigned char *v = win.have_verdicts ? win.verdicts.buf : NULL;
    Py_ssize_t k = first < 0 ? win.n : first;
    if (rmq_layout.ready) {
        rmq_record r;
        for (; k < win.n; k++)
            if (!rmq_read_record(&r, win.buf.buf, win.buf.len, s + k * RMQ_N_SPANS, v ? v + k * RMQ_N_VERDICTS : NULL,
                             offset0, position0))
                break;
    }
    Py_ssize_t taken = rmq_layout.ready && first >= 0 && k > first ? k - first : 0;
    rmq_window_release(&win);
    return PyLong_FromSsize_t(taken);
}

/* the cells: a tuple of (source, arg, width, right, cut, text, shown) from Python (report/table_rows.py) */
static int get_cells(PyObject *cells_obj, cell_t *cells, int *n_cells)
{
    Py_ssize_t n = PyTuple_GET_SIZE(cells_obj);
    if (n < 1 || n > MAX_CELLS) {
        PyErr_SetString(PyExc_ValueError, "table_lines: 1 to 64 cells");
        return -1;
    }
    for (Py_ssize_t c = 0; c < n; c++) {
        cell_t *cell = &cells[c];
        PyObject *shown;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(cells_obj, c), "iinpiy#O", &cell->source, &cell->arg, &cell->width,
                              &cell->right, &cell->cut, &cell->text, &cell->text_len, &shown))
            return -1;
        cell->shown = PyFrozenSet_Check(shown) ? shown : NULL;
        if (cell->source < 0 || cell->source >= N_SOURCES || cell->width < 0 || cell->width > 1 << 20
            || cell->cut < 0 || cell->cut >= N_CUTS
            || cell->text_len > 1 << 20
            || ((cell->source == SRC_INT || cell->source == SRC_TIME) && (cell->arg < 0 || cell->arg >= RMQ_N_FIELDS))
            || (cell->source == SRC_HOST && cell->arg != HOST_BORN && cell->arg != HOST_STORE)) {
            PyErr_SetString(PyExc_ValueError, "table_lines: a cell out of range");
            return -1;
        }
    }
    *n_cells = (int)n;
    return 0;
}

static int value_ascii(const rmq_record *r, int a)
{
    return r->props_ascii || a < 0 || rmq_ascii(r->props + r->sp[a].value_at, r->sp[a].value_len);
}

/* 1 when the record's cells are ones this part writes (read_record's, and the text of each cell
 * ASCII: a body shown as text as far as it is shown) */
static int covered(rmq_record *r, const rmq_window *win, Py_ssize_t k, int64_t offset0, int64_t position0,
                   const cell_t *cells, int n_cells, hosts_t *hosts)
{
    const unsigned char *v = win->have_verdicts ? (const unsigned char *)win->verdicts.buf + k * RMQ_N_VERDICTS : NULL;
    if (!rmq_read_record(r, win->buf.buf, win->buf.len, (const int64_t *)win->spans.buf + k * RMQ_N_SPANS, v, offset0,
                     position0))
        return 0;
    for (int c = 0; c < n_cells; c++) {
        switch (cells[c].source) {
        case SRC_BODY_TEXT:
            if (body_text_bytes(r, cells[c].arg) < 0)
                return 0;
            break;
        case SRC_TOPIC:
            if (!r->topic_ascii)
                return 0;
            break;
        case SRC_PROPERTIES:
            if (!r->props_ascii)
                return 0;
            break;
        case SRC_TAGS:
            if (!value_ascii(r, r->tags))
                return 0;
            break;
        case SRC_KEYS:
            if (!value_ascii(r, r->keys))
                return 0;
            break;
        case SRC_UNIQ:
            if (!value_ascii(r, r->uniq))
                return 0;
            break;
        case SRC_HOST:
        case SRC_MSG_ID: {
            int which = cells[c].source == SRC_HOST ? cells[c].arg : HOST_STORE;
            if (host_texts(hosts, r, which) == NULL)
                return 0;
            break;
        }
        default:
            break;
        }
    }
    return 1;
}

/* table_lines(buf, spans, verdicts, first, offset0, position0, cells, file, gap, wide, hosts)
 * -> (text, lines, declined): the lines (joined by newlines, none after the last) of the records
 * from first on up to the first one declined, and how many records from there it declines in a
 * row (their lines are the Python path's); file: the records' file name (ASCII), or None when
 * it is not; hosts: the callable host_texts asks (None: no host cell is written). None when a
 * cell needs what is not there (set_record_layout not called, the file, hosts). */
static PyObject *table_lines(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *spans_obj, *verdicts_obj, *cells_obj, *file_obj, *texts_obj;
    Py_ssize_t first, gap;
    long long offset0, position0;
    int wide;
    if (!PyArg_ParseTuple(args, "OOOnLLO!OnpO", &buf_obj, &spans_obj, &verdicts_obj, &first, &offset0, &position0,
                          &PyTuple_Type, &cells_obj, &file_obj, &gap, &wide, &texts_obj))
        return NULL;
    cell_t cells[MAX_CELLS];
    int n_cells;
    if (get_cells(cells_obj, cells, &n_cells) < 0)
        return NULL;
    const char *file = NULL;
    Py_ssize_t file_len = 0;
    if (file_obj != Py_None) {
        if (!PyBytes_Check(file_obj)) {
            PyErr_SetString(PyExc_TypeError, "table_lines: file must be bytes or None");
            return NULL;
        }
        file = PyBytes_AS_STRING(file_obj);
        file_len = PyBytes_GET_SIZE(file_obj);
        if (!rmq_ascii((const unsigned char *)file, file_len) || file_len > 1 << 20)
            file = NULL;
    }
    if (gap < 0 || gap > 16) {
        PyErr_SetString(PyExc_ValueError, "table_lines: gap out of range");
        return NULL;
    }
    int usable = rmq_layout.ready && first >= 0;
    hosts_t hosts = {PyCallable_Check(texts_obj) ? texts_obj : NULL, {{{0}, 0, 0, NULL}, {{0}, 0, 0, NULL}}};
    for (int c = 0; c < n_cells; c++)
        if ((cells[c].source == SRC_FILE && file == NULL)
            || ((cells[c].source == SRC_HOST || cells[c].source == SRC_MSG_ID) && hosts.texts == NULL))
            usable = 0;
    if (!usable)
        Py_RETURN_NONE;
    rmq_window win;
    if (rmq_window_get(&win, buf_obj, spans_obj, verdicts_obj) < 0)
        return NULL;
    const unsigned char *v = win.have_verdicts ? win.verdicts.buf : NULL;
    PyObject *result = NULL;
    Py_ssize_t widths = 0;
    for (int c = 0; c < n_cells; c++)
        widths += cells[c].width + 3 + gap;  /* a cut cell: its ellipsis takes 3 bytes */
    Py_ssize_t len = 0, k = first;
    int stopped = 0;  /* a cell of record k may not be cut here: it is declined */
    rmq_record r;
    for (; k < win.n; k++) {
        if (!covered(&r, &win, k, offset0, position0, cells, n_cells, &hosts))
            break;
        const unsigned char *vk = v ? v + k * RMQ_N_VERDICTS : NULL;
        Py_ssize_t room = cell_room(&r, file_len, cells, n_cells);
        /* a line: each cell at most its width and an ellipsis, or (wide) its whole text */
        Py_ssize_t line_room = widths + 1 + (wide ? n_cells * room : 0);
        if (grow(&text, &text_cap, room) < 0 || grow(&lines, &lines_cap, len + line_room) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        char *w = lines + len;
        if (k > first)
            *w++ = '\n';
        char *line = w;
        for (int c = 0; c < n_cells && !stopped; c++) {
            const cell_t *cell = &cells[c];
            /* a cell cut at its end shows its first width letters at most: no need to make more */
            Py_ssize_t most = wide || cell->cut != CUT_END ? -1 : cell->width + 1;
            int ellipsis;
            char *end = cell_text(text, cell, &r, vk, &hosts, file, file_len, most, &ellipsis);
            if (!wide && end - text + ellipsis > cell->width && !may_cut(cell, text, end - text)) {
                stopped = 1;  /* the line so far is dropped: len still ends the last one */
                break;
            }
            if (c)
                w = put_spaces(w, gap);
            w = put_cell(w, cell, text, end - text, ellipsis, wide);
        }
        if (stopped)
            break;
        while (w > line && w[-1] == ' ')  /* the line's end stripped, as str.rstrip (no other blank is left) */
            w--;
        len = w - lines;
    }
    Py_ssize_t declined = stopped ? k + 1 : k;
    while (!stopped && declined < win.n && !covered(&r, &win, declined, offset0, position0, cells, n_cells, &hosts))
        declined++;
    PyObject *out = PyUnicode_DecodeUTF8(lines, len, NULL);
    if (out != NULL)
        result = Py_BuildValue("Nnn", out, k - first, declined - k);
done:
    hosts_release(&hosts);
    rmq_window_release(&win);
    return result;
}

static PyObject *table_sources(PyObject *self, PyObject *unused)
{
    PyObject *names = PyTuple_New(N_SOURCES);
    if (names == NULL)
        return NULL;
    for (int k = 0; k < N_SOURCES; k++) {
        PyObject *name = PyUnicode_FromString(SOURCE_NAMES[k]);
        if (name == NULL) {
            Py_DECREF(names);
            return NULL;
        }
        PyTuple_SET_ITEM(names, k, name);
    }
    return names;
}

PyMethodDef rmq_table_methods[] = {
    {"table_records", table_records, METH_VARARGS,
     "table_records(buf, spans, verdicts, first, offset0, position0) -> the count of records from first on "
     "that table_lines writes (none with a finding)"},
    {"table_lines", table_lines, METH_VARARGS,
     "table_lines(buf, spans, verdicts, first, offset0, position0, cells, file, gap, wide, hosts) -> (text, lines, "
     "declined): lines up to the first record declined, and the records declined from there; None when the cells "
     "cannot be written"},
    {"table_sources", table_sources, METH_NOARGS, "table_sources() -> the cell sources' names, in their codes' order"},
    {NULL, NULL, 0, NULL},
};
