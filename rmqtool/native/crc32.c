/* CRC-32 (zlib's, Java's java.util.zip.CRC32: reflected polynomial 0x04C11DB7), the kernel's own
 *
 * RocketMQ's body CRC, the 5.x __CRC32# entry and QMQ's payload CRC are all this CRC-32, the
 * one computation every record's check makes over its whole body. Three paths, one picked at load by what the
 * CPU has: carry-less multiplication folding 32-byte lanes (VPCLMULQDQ with AVX2), or 16-byte
 * lanes (PCLMULQDQ), each folding 128 bytes (64 with PCLMULQDQ) a step and reducing the last
 * 16 bytes to 8 for one table step; else tables, 8 bytes a step. The fold constants are
 * x^n mod P for the lane distances used, bit-reflected (tests/test_native_crc32.py derives
 * them again from the polynomial and holds every path against zlib and crcmod).
 *
 * rmq_crc32 continues a CRC as zlib.crc32(data, value) does (value 0 for a new one). */
#include "kernel.h"

static uint32_t table8[8][256];

static uint32_t table_crc(uint32_t state, const unsigned char *p, size_t n)
{
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);  /* little-endian: the byte order the reflected CRC consumes */
        v ^= state;
        state = table8[7][v & 0xff] ^ table8[6][(v >> 8) & 0xff] ^ table8[5][(v >> 16) & 0xff] ^
                table8[4][(v >> 24) & 0xff] ^ table8[3][(v >> 32) & 0xff] ^ table8[2][(v >> 40) & 0xff] ^
                table8[1][(v >> 48) & 0xff] ^ table8[0][v >> 56];
    }
    while (n--)
        state = table8[0][(state ^ *p++) & 0xff] ^ (state >> 8);
    return state;
}

static uint32_t crc_by_table(uint32_t crc, const unsigned char *p, size_t n)
{
    return ~table_crc(~crc, p, n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_FOLD 1

/* A 16-byte lane folded over a distance of D bits: its low qword (the high-degree half, the
 * CRC being reflected) times x^(D+63) mod P, its high qword times x^(D-1) mod P; each
 * constant bit-reflected into 64 bits. FOLD(lo, hi) is that pair as _mm_set_epi64x takes it. */
#define FOLD(lo, hi) (long long)(hi##ULL), (long long)(lo##ULL)
#define FOLD_1024 FOLD(0x7d657a1000000000, 0x7406fa9500000000)
#define FOLD_768 FOLD(0x759fc69d00000000, 0x101a233100000000)
#define FOLD_512 FOLD(0x653d982200000000, 0xcad38e8f00000000)
#define FOLD_384 FOLD(0x69ccfc0d00000000, 0x2a28386200000000)
#define FOLD_256 FOLD(0x9570d49500000000, 0x01b5fd1d00000000)
#define FOLD_128 FOLD(0x65673b4600000000, 0x9ba54c6f00000000)
/* 16 bytes to 8: the low qword's low and high 32 bits times x^95 and x^63 mod P, reflected */
#define REDUCE_95 0xccaa009eLL
#define REDUCE_63 0xb8bc6765LL

#define PCLMUL_TARGET __attribute__((target("pclmul,sse4.1")))
#define VPCLMUL_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.1")))
/* inlined into each path, so the VPCLMULQDQ path keeps to VEX encoding (no SSE/AVX switch) */
#define INLINE static inline __attribute__((always_inline))
#define PREFETCH_AHEAD 1024  /* a record's body read from the page cache, not a cache: ask ahead (never faults) */
#define LOAD16(p) _mm_loadu_si128((const __m128i *)(p))
#define LOAD32(p) _mm256_loadu_si256((const __m256i *)(p))

PCLMUL_TARGET INLINE __m128i fold16(__m128i x, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* the state after the 16 bytes folded into acc, then the n < 16 bytes at tail */
PCLMUL_TARGET INLINE uint32_t fold_finish(__m128i acc, const unsigned char *tail, size_t n)
{
    const __m128i k = _mm_set_epi64x(REDUCE_63, REDUCE_95);
    const __m128i low = _mm_clmulepi64_si128(_mm_and_si128(acc, _mm_set_epi64x(0, 0xffffffffLL)), k, 0x00);
    const __m128i high = _mm_clmulepi64_si128(_mm_srli_epi64(acc, 32), k, 0x10);
    const __m128i eight = _mm_xor_si128(_mm_xor_si128(low, high), _mm_unpackhi_epi64(acc, acc));
    unsigned char bytes[8];
    _mm_storel_epi64((__m128i *)bytes, eight);
    return table_crc(table_crc(0, bytes, 8), tail, n);
}

PCLMUL_TARGET static uint32_t crc_by_pclmul(uint32_t crc, const unsigned char *p, size_t n)
{
    if (n < 64)
        return crc_by_table(crc, p, n);
    const __m128i k512 = _mm_set_epi64x(FOLD_512), k128 = _mm_set_epi64x(FOLD_128);
    __m128i x0 = _mm_xor_si128(LOAD16(p), _mm_cvtsi32_si128((int)~crc));
    __m128i x1 = LOAD16(p + 16), x2 = LOAD16(p + 32), x3 = LOAD16(p + 48);
    for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
        x0 = _mm_xor_si128(fold16(x0, k512), LOAD16(p));
        x1 = _mm_xor_si128(fold16(x1, k512), LOAD16(p + 16));
        x2 = _mm_xor_si128(fold16(x2, k512), LOAD16(p + 32));
        x3 = _mm_xor_si128(fold16(x3, k512), LOAD16(p + 48));
    }
    /* the four lanes onto the last, each over its own distance (independent multiplies) */
    __m128i acc = _mm_xor_si128(_mm_xor_si128(fold16(x0, _mm_set_epi64x(FOLD_384)), fold16(x1, _mm_set_epi64x(FOLD_256))),
                                _mm_xor_si128(fold16(x2, k128), x3));
    for (; n >= 16; p += 16, n -= 16)
        acc = _mm_xor_si128(fold16(acc, k128), LOAD16(p));
    return ~fold_finish(acc, p, n);
}

VPCLMUL_TARGET INLINE __m256i fold32(__m256i x, __m256i k)
{
    return _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11));
}

VPCLMUL_TARGET static uint32_t crc_by_vpclmul(uint32_t crc, const unsigned char *p, size_t n)
{
    if (n < 128)
        return crc_by_pclmul(crc, p, n);
    const __m256i k1024 = _mm256_set_epi64x(FOLD_1024, FOLD_1024), k256 = _mm256_set_epi64x(FOLD_256, FOLD_256);
    __m256i y0 = _mm256_xor_si256(LOAD32(p), _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)~crc)));
    __m256i y1 = LOAD32(p + 32), y2 = LOAD32(p + 64), y3 = LOAD32(p + 96);
    for (p += 128, n -= 128; n >= 128; p += 128, n -= 128) {
        _mm_prefetch((const char *)p + PREFETCH_AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)p + PREFETCH_AHEAD + 64, _MM_HINT_T0);
        y0 = _mm256_xor_si256(fold32(y0, k1024), LOAD32(p));
        y1 = _mm256_xor_si256(fold32(y1, k1024), LOAD32(p + 32));
        y2 = _mm256_xor_si256(fold32(y2, k1024), LOAD32(p + 64));
        y3 = _mm256_xor_si256(fold32(y3, k1024), LOAD32(p + 96));
    }
    __m256i y = _mm256_xor_si256(_mm256_xor_si256(fold32(y0, _mm256_set_epi64x(FOLD_768, FOLD_768)),
                                                  fold32(y1, _mm256_set_epi64x(FOLD_512, FOLD_512))),
                                 _mm256_xor_si256(fold32(y2, k256), y3));
    for (; n >= 32; p += 32, n -= 32)
        y = _mm256_xor_si256(fold32(y, k256), LOAD32(p));
    const __m128i k128 = _mm_set_epi64x(FOLD_128);
    __m128i acc = _mm_xor_si128(fold16(_mm256_castsi256_si128(y), k128), _mm256_extracti128_si256(y, 1));
    if (n >= 16) {
        acc = _mm_xor_si128(fold16(acc, k128), LOAD16(p));
        p += 16;
        n -= 16;
    }
    return ~fold_finish(acc, p, n);
}
#endif

typedef uint32_t (*crc_path)(uint32_t, const unsigned char *, size_t);
static const struct {
    const char *name;
    crc_path fn;
} paths[] = {
#ifdef HAVE_FOLD
    {"vpclmulqdq", crc_by_vpclmul},
    {"pclmulqdq", crc_by_pclmul},
#endif
    {"table", crc_by_table},
};
#define PATHS ((int)(sizeof(paths) / sizeof(paths[0])))

static int path_usable(int i)
{
#ifdef HAVE_FOLD
    __builtin_cpu_init();
    if (paths[i].fn == crc_by_vpclmul)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") &&
               __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    if (paths[i].fn == crc_by_pclmul)
        return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
    return paths[i].fn == crc_by_table;
}

static crc_path chosen = crc_by_table;
static const char *chosen_name = "table";

void rmq_crc32_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (c & 1 ? 0xEDB88320u : 0);
        table8[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table8[t][i] = (table8[t - 1][i] >> 8) ^ table8[0][table8[t - 1][i] & 0xff];
    for (int i = 0; i < PATHS; i++)
        if (path_usable(i)) {
            chosen = paths[i].fn;
            chosen_name = paths[i].name;
            break;
        }
}

uint32_t rmq_crc32(uint32_t crc, const unsigned char *p, size_t n)
{
    return chosen(crc, p, n);
}

/* the buffer and start value of crc32(data, value=0); 0, or -1 with an error set */
static int crc_args(PyObject *const *args, Py_ssize_t nargs, int first, Py_buffer *view, uint32_t *value)
{
    if (nargs < first + 1 || nargs > first + 2) {
        PyErr_SetString(PyExc_TypeError, "crc32: (data, value=0)");
        return -1;
    }
    *value = 0;
    if (nargs == first + 2) {
        const unsigned long v = PyLong_AsUnsignedLongMask(args[first + 1]);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            return -1;
        *value = (uint32_t)v;
    }
    return PyObject_GetBuffer(args[first], view, PyBUF_SIMPLE);
}

static PyObject *run_path(crc_path fn, PyObject *const *args, Py_ssize_t nargs, int first)
{
    Py_buffer view;
    uint32_t value;
    if (crc_args(args, nargs, first, &view, &value) < 0)
        return NULL;
    uint32_t crc;
    if (view.len >= 65536) {  /* long enough to be worth letting other threads run */
        Py_BEGIN_ALLOW_THREADS
        crc = fn(value, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = fn(value, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* crc32(data, value=0) -> int: zlib.crc32's value, by the path chosen at load */
static PyObject *crc32_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return run_path(chosen, args, nargs, 0);
}

/* crc32_by(path, data, value=0): by one path (the tests hold each against zlib); ValueError
 * when this CPU or build has not that path */
static PyObject *crc32_by(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs < 1 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "crc32_by: (path, data, value=0)");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[0]);
    if (name == NULL)
        return NULL;
    for (int i = 0; i < PATHS; i++)
        if (strcmp(name, paths[i].name) == 0 && path_usable(i))
            return run_path(paths[i].fn, args, nargs, 1);
    PyErr_Format(PyExc_ValueError, "crc32_by: no path %s here", name);
    return NULL;
}

/* crc32_paths() -> (the path in use, then every path this CPU and build have) */
static PyObject *crc32_paths(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (int i = -1; i < PATHS; i++) {
        if (i >= 0 && !path_usable(i))
            continue;
        PyObject *name = PyUnicode_FromString(i < 0 ? chosen_name : paths[i].name);
        if (name == NULL || PyList_Append(out, name) < 0) {
            Py_XDECREF(name);
            goto error;
        }
        Py_DECREF(name);
    }
    PyObject *tuple = PyList_AsTuple(out);
    Py_DECREF(out);
    return tuple;
error:
    Py_XDECREF(out);
    return NULL;
}

PyMethodDef rmq_crc32_methods[] = {
    {"crc32", (PyCFunction)(void (*)(void))crc32_py, METH_FASTCALL,
     "crc32(data, value=0) -> int: the CRC-32 zlib.crc32 gives, by the fastest path this CPU has"},
    {"crc32_by", (PyCFunction)(void (*)(void))crc32_by, METH_FASTCALL,
     "crc32_by(path, data, value=0) -> int: by one path (vpclmulqdq, pclmulqdq, table)"},
    {"crc32_paths", crc32_paths, METH_NOARGS, "crc32_paths() -> (path in use, every path usable here)"},
    {NULL, NULL, 0, NULL},
};
