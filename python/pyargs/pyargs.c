/* pyargs.c — libcc1d_pyargs: the Python package's fast-path argument packer, in C.
 *
 * The eager fast path of causal_conv1d_fn and causal_conv1d_update packs an op's argument struct
 * (cc1d.h: struct_size, the `const cc1d_tensor*` members, the scalars) and one cc1d_tensor per
 * present tensor into one buffer (python/causal_conv1d/_pack.py, ArgPacker). Done in Python,
 * reading five attributes of each torch tensor and packing them took about half of the Python
 * side of a call; here the same reads are C calls into torch's bindings, without the
 * interpreter between them.
 *
 * Not a Python extension module: the package loads it with ctypes.PyDLL (the GIL is held during
 * the calls), and the Python symbols it uses come from the running interpreter. It uses the
 * limited API of CPython 3.9 only, and only its functions (Py_IncRef, not the macros that read
 * an object's header), so one build serves every CPython from 3.9 on, as the wheel (py3-none)
 * promises. Where it cannot serve (another Python implementation, a free-threaded CPython, whose
 * objects have another header, a build without Python headers) the package packs in Python, with
 * the same bytes. Nothing here links libpython, libtorch or libcc1d.
 *
 * Contract (_pack.py is the only caller; both sides come from one build):
 *   cc1d_pyargs_abi()            CC1D_PYARGS_ABI << 16 | sizeof(cc1d_tensor); the caller refuses
 *                                any other value.
 *   cc1d_pyargs_init(codes)      codes: a tuple of (torch dtype, cc1d_dtype code) pairs, kept for
 *                                the process. Returns 0, or -1 with a Python exception set.
 *   cc1d_pyargs_pack(tensors, buf, header)
 *                                tensors: a tuple of torch tensors or None, in the struct's
 *                                pointer order; buf: a zeroed buffer of header + len(tensors) *
 *                                sizeof(cc1d_tensor) bytes; header: sizeof the argument struct.
 *                                Writes struct_size, each present tensor's descriptor (after the
 *                                header, in order) and the pointer to it; leaves the scalars and
 *                                absent pointers alone. Returns 0, or -1 with no exception set
 *                                when a tensor is one it cannot describe (not a tensor, a dtype
 *                                without a code, a device other than cpu and cuda, a rank above
 *                                CC1D_MAX_RANK): the caller then packs in Python, which raises
 *                                the error with its words. */
#define Py_LIMITED_API 0x03090000
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "cc1d/cc1d.h"

#define CC1D_PYARGS_ABI 1
#define EXPORT __attribute__((visibility("default")))
enum { kMaxDtypes = 8 };

static PyObject* g_dtypes[kMaxDtypes];
static int32_t g_codes[kMaxDtypes];
static int g_ndtypes;
static PyObject *g_shape, *g_stride, *g_data_ptr, *g_dtype, *g_is_cuda, *g_is_cpu, *g_get_device;

EXPORT int cc1d_pyargs_abi(void) { return CC1D_PYARGS_ABI << 16 | (int)sizeof(cc1d_tensor); }

EXPORT int cc1d_pyargs_init(PyObject* codes) {
  const Py_ssize_t n = PyTuple_Size(codes);
  if (n < 0) return -1;
  if (n > kMaxDtypes) {
    PyErr_SetString(PyExc_ValueError, "cc1d_pyargs_init: more dtypes than this build holds");
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* pair = PyTuple_GetItem(codes, i);
    PyObject* dtype = pair ? PyTuple_GetItem(pair, 0) : NULL;
    PyObject* code = dtype ? PyTuple_GetItem(pair, 1) : NULL;
    const long c = code ? PyLong_AsLong(code) : -1;
    if (c == -1 && PyErr_Occurred()) return -1;
    Py_IncRef(dtype);  /* kept for the process, as torch keeps its dtype objects */
    g_dtypes[i] = dtype;
    g_codes[i] = (int32_t)c;
  }
  g_ndtypes = (int)n;
  g_shape = PyUnicode_InternFromString("shape");
  g_stride = PyUnicode_InternFromString("stride");
  g_data_ptr = PyUnicode_InternFromString("data_ptr");
  g_dtype = PyUnicode_InternFromString("dtype");
  g_is_cuda = PyUnicode_InternFromString("is_cuda");
  g_is_cpu = PyUnicode_InternFromString("is_cpu");
  g_get_device = PyUnicode_InternFromString("get_device");
  return g_get_device ? 0 : -1;
}

/* The n ints of a tuple (torch.Size or the tuple of stride()) into out; steals the reference. */
static int take_ints(PyObject* seq, int64_t* out, Py_ssize_t n) {
  if (seq == NULL) return -1;
  int ok = PyTuple_Size(seq) == n;  /* -1 (an error, cleared by the caller) when not a tuple */
  for (Py_ssize_t i = 0; ok && i < n; ++i) {
    out[i] = PyLong_AsLongLong(PyTuple_GetItem(seq, i));
    ok = !(out[i] == -1 && PyErr_Occurred());
  }
  Py_DecRef(seq);
  return ok ? 0 : -1;
}

/* 1 if t's attribute `name` is True, 0 if not, -1 on error. */
static int flag(PyObject* t, PyObject* name) {
  PyObject* v = PyObject_GetAttr(t, name);
  if (v == NULL) return -1;
  const int r = v == Py_True;
  Py_DecRef(v);
  return r;
}

static int describe(PyObject* t, cc1d_tensor* d) {
  PyObject* v = PyObject_GetAttr(t, g_dtype);
  if (v == NULL) return -1;
  int k = 0;
  while (k < g_ndtypes && v != g_dtypes[k]) ++k;
  Py_DecRef(v);
  if (k == g_ndtypes) return -1;
  d->dtype = g_codes[k];

  const int cuda = flag(t, g_is_cuda);
  if (cuda < 0) return -1;
  if (cuda) {
    v = PyObject_CallMethodObjArgs(t, g_get_device, NULL);
    if (v == NULL) return -1;
    const long index = PyLong_AsLong(v);
    Py_DecRef(v);
    if (index < 0) return -1;
    d->device_type = CC1D_DEVICE_CUDA;
    d->device_index = (int32_t)index;
  } else {
    if (flag(t, g_is_cpu) != 1) return -1;
    d->device_type = CC1D_DEVICE_CPU;
    d->device_index = 0;
  }

  PyObject* shape = PyObject_GetAttr(t, g_shape);
  if (shape == NULL) return -1;
  const Py_ssize_t n = PyTuple_Size(shape);
  if (n < 0 || n > CC1D_MAX_RANK) {
    Py_DecRef(shape);
    return -1;
  }
  d->ndim = (int32_t)n;
  if (take_ints(shape, d->shape, n) || take_ints(PyObject_CallMethodObjArgs(t, g_stride, NULL), d->strides, n))
    return -1;

  v = PyObject_CallMethodObjArgs(t, g_data_ptr, NULL);
  if (v == NULL) return -1;
  d->data = PyLong_AsVoidPtr(v);
  Py_DecRef(v);
  return d->data == NULL && PyErr_Occurred() ? -1 : 0;
}

EXPORT int cc1d_pyargs_pack(PyObject* tensors, void* buf, int64_t header) {
  const Py_ssize_t n = g_get_device == NULL ? -1 : PyTuple_Size(tensors);
  if (n < 0) {
    PyErr_Clear();
    return -1;
  }
  char* b = (char*)buf;
  const uint32_t size = (uint32_t)header;
  memcpy(b, &size, sizeof size);
  cc1d_tensor* d = (cc1d_tensor*)(b + header);
  /* The pointers follow struct_size at pointer alignment, in the order of the tuple. */
  const size_t first = (sizeof(uint32_t) + sizeof(void*) - 1) / sizeof(void*) * sizeof(void*);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = PyTuple_GetItem(tensors, i);
    if (t == Py_None) continue;
    if (describe(t, d) != 0) {
      PyErr_Clear();
      return -1;
    }
    memcpy(b + first + i * sizeof(void*), &d, sizeof d);
    ++d;
  }
  return 0;
}
