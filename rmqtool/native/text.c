/* Writing numbers, times, base64 and escaped text into a byte buffer: the one C writing of
 * them, for the parts that write a record's text (rows.c's JSON Lines rows, table.c's lines).
 *
 * Each writer writes at w and returns where it stopped (a cursor in a local: writes through
 * char pointers would make the compiler reload a length kept in memory after each byte); the
 * caller made room for it first. */
#include "kernel.h"
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

const char rmq_hex_upper[16] = "0123456789ABCDEF";
const char rmq_hex_lower[16] = "0123456789abcdef";

static const char DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* how many decimal digits u has (1 for 0) */
static inline int decimal_digits(uint64_t u)
{
    static const uint64_t POW10[] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
                                     100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL,
                                     1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
                                     1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
                                     1000000000000000000ULL, 10000000000000000000ULL};
    if (u < 10)
        return 1;
    const int guess = ((64 - __builtin_clzll(u)) * 1233) >> 12;  /* floor(log10(2^bits)) */
    return guess + (u >= POW10[guess]);
}

char *rmq_put_int(char *w, int64_t v)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        *w++ = '-';
    char *const end = w + decimal_digits(u);
    char *p = end;  /* written from the last digit back, two at a time */
    while (u >= 100) {
        const unsigned r = (unsigned)(u % 100);
        u /= 100;
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * r, 2);
    }
    if (u >= 10)
        memcpy(p - 2, DIGIT_PAIRS + 2 * u, 2);
    else
        p[-1] = (char)('0' + u);
    return end;
}

char *rmq_put_hex_upper(char *w, uint64_t v, int digits)
{
    for (int k = digits - 1; k >= 0; k--)
        *w++ = rmq_hex_upper[(v >> (4 * k)) & 15];
    return w;
}

/* v (not negative) in exactly ``digits`` decimal digits, zeros in front */
static char *put_digits(char *w, int64_t v, int digits)
{
    for (int k = digits - 1; k >= 0; k--) {
        w[k] = (char)('0' + v % 10);
        v /= 10;
    }
    return w + digits;
}

/* the last second datetime reads (9999-12-31T23:59:59): past it columns.iso_ms shows the number */
#define LAST_SECOND INT64_C(253402300799)
/* the seconds whose text is in time_head (as columns.iso_ms keeps it): records of a run share them */
static int64_t last_time = -1;
static char time_head[20];

char *rmq_put_time(char *w, int64_t ms)
{
    if (ms <= 0 || ms / 1000 > LAST_SECOND)
        return rmq_put_int(w, ms);
    int64_t sec = ms / 1000, milli = ms % 1000;
    if (sec != last_time) {  /* days to a civil date (H. Hinnant's days_from_civil, inverted) */
        int64_t z = sec / 86400 + 719468, rem = sec % 86400;
        int64_t era = z / 146097, doe = z - era * 146097;
        int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
        int64_t day = doy - (153 * mp + 2) / 5 + 1, month = mp < 10 ? mp + 3 : mp - 9;
        int64_t year = yoe + era * 400 + (month <= 2);
        char *h = time_head;
        h = put_digits(h, year, 4);
        *h++ = '-';
        h = put_digits(h, month, 2);
        *h++ = '-';
        h = put_digits(h, day, 2);
        *h++ = 'T';
        h = put_digits(h, rem / 3600, 2);
        *h++ = ':';
        h = put_digits(h, rem / 60 % 60, 2);
        *h++ = ':';
        put_digits(h, rem % 60, 2);
        last_time = sec;
    }
    memcpy(w, time_head, 19);
    w += 19;
    *w++ = '.';
    w = put_digits(w, milli, 3);
    *w++ = 'Z';
    return w;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static char B64_PAIRS[4096][2];  /* 12 bits -> two letters; filled by rmq_text_init */

void rmq_text_init(void)
{
    for (int b = 0; b < 4096; b++) {
        B64_PAIRS[b][0] = B64[b >> 6];
        B64_PAIRS[b][1] = B64[b & 63];
    }
}

char *rmq_put_base64(char *w, const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    /* six bytes (eight letters) a step, read as one 8-byte load while 8 bytes are left to read */
    for (; i + 8 <= n; i += 6) {
        uint64_t v = (uint64_t)rmq_i64(s + i);
        char out[8];
        memcpy(out, B64_PAIRS[v >> 52], 2);
        memcpy(out + 2, B64_PAIRS[(v >> 40) & 4095], 2);
        memcpy(out + 4, B64_PAIRS[(v >> 28) & 4095], 2);
        memcpy(out + 6, B64_PAIRS[(v >> 16) & 4095], 2);
        memcpy(w, out, 8);
        w += 8;
    }
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        memcpy(w, B64_PAIRS[v >> 12], 2);
        memcpy(w + 2, B64_PAIRS[v & 4095], 2);
        w += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *w++ = B64[v >> 18];
        *w++ = B64[(v >> 12) & 63];
        *w++ = '=';
        *w++ = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        *w++ = B64[v >> 18];
        *w++ = B64[(v >> 12) & 63];
        *w++ = B64[(v >> 6) & 63];
        *w++ = '=';
    }
    return w;
}

/* one byte as orjson writes it inside a string */
static inline char *json_escaped_byte(char *w, unsigned char c)
{
    if (c >= 0x20 && c != '"' && c != '\\') {
        *w++ = (char)c;
        return w;
    }
    *w++ = '\\';
    switch (c) {
    case '"': *w++ = '"'; break;
    case '\\': *w++ = '\\'; break;
    case '\b': *w++ = 'b'; break;
    case '\t': *w++ = 't'; break;
    case '\n': *w++ = 'n'; break;
    case '\f': *w++ = 'f'; break;
    case '\r': *w++ = 'r'; break;
    default:
        *w++ = 'u';
        *w++ = '0';
        *w++ = '0';
        *w++ = rmq_hex_lower[c >> 4];
        *w++ = rmq_hex_lower[c & 15];
    }
    return w;
}

char *rmq_put_json_escaped(char *w, const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
#ifdef __SSE2__
    /* 16 bytes at a time while none needs escaping (a byte of 0x80 or more goes the byte way
     * too): the 16 are stored whole, the room for 6 bytes a byte leaving space for them */
    const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    while (i + 16 <= n) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(s + i));
        const __m128i special = _mm_or_si128(_mm_cmplt_epi8(x, space),
                                             _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)));
        const int mask = _mm_movemask_epi8(special);
        _mm_storeu_si128((__m128i *)w, x);
        if (mask == 0) {
            w += 16;
            i += 16;
            continue;
        }
        const int plain = __builtin_ctz((unsigned)mask);
        w += plain;
        i += plain;
        w = json_escaped_byte(w, s[i++]);
    }
#endif
    for (; i < n; i++)
        w = json_escaped_byte(w, s[i]);
    return w;
}

char *rmq_put_terminal_safe(char *w, const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != 0x7F) {
            *w++ = (char)c;
        } else {
            *w++ = '\\';
            *w++ = 'x';
            *w++ = rmq_hex_lower[c >> 4];
            *w++ = rmq_hex_lower[c & 15];
        }
    }
    return w;
}

int rmq_ascii(const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] >= 0x80)
            return 0;
    return 1;
}

int rmq_utf8(const unsigned char *s, Py_ssize_t n)
{
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
    if (text == NULL) {
        PyErr_Clear();  /* not UTF-8 (or no memory): declined either way */
        return 0;
    }
    Py_DECREF(text);
    return 1;
}
