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
 *                                the error with its words.
 *   cc1d_pyargs_caller()         a new reference to a Python function
 *                                pack_call(entry, header, scalars_at, scalars, tensors, like):
 *                                packs as cc1d_pyargs_pack into a buffer of its own (like: None,
 *                                or (i, j), j < i: tensor i has tensor j's shape, strides, dtype
 *                                and device, so only its data pointer is read), copies the bytes
 *                                `scalars` (the struct's scalars, packed) to offset scalars_at,
 *                                then calls the op's entry point at address `entry` with the
 *                                buffer, the GIL released, and returns its status. Returns None,
 *                                having called nothing, where cc1d_pyargs_pack returns -1. One
 *                                Python call instead of two ctypes calls and a ctypes array: the
 *                                fast path's cost was mostly ctypes'. */
#define Py_LIMITED_API 0x03090000
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "cc1d/cc1d.h"

#define CC1D_PYARGS_ABI 2
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

/* cc1d_pyargs_pack's work; -1 (any Python error cleared) for a tensor it cannot describe.
 * Tensor copy_to (> copy_from, or -1) is described as tensor copy_from but for its data pointer. */
static int pack(PyObject* tensors, char* buf, Py_ssize_t header, Py_ssize_t copy_to, Py_ssize_t copy_from) {
  const Py_ssize_t n = g_get_device == NULL ? -1 : PyTuple_Size(tensors);
  if (n < 0) {
    PyErr_Clear();
    return -1;
  }
  const uint32_t size = (uint32_t)header;
  memcpy(buf, &size, sizeof size);
  cc1d_tensor* d = (cc1d_tensor*)(buf + header);
  const cc1d_tensor* src = NULL;
  /* The pointers follow struct_size at pointer alignment, in the order of the tuple. */
  const size_t first = (sizeof(uint32_t) + sizeof(void*) - 1) / sizeof(void*) * sizeof(void*);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = PyTuple_GetItem(tensors, i);
    if (t == Py_None) continue;
    if (i == copy_to && src != NULL) {
      *d = *src;
      PyObject* v = PyObject_CallMethodObjArgs(t, g_data_ptr, NULL);
      d->data = v ? PyLong_AsVoidPtr(v) : NULL;
      Py_DecRef(v);  /* NULL-safe */
      if (d->data == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
      }
    } else if (describe(t, d) != 0) {
      PyErr_Clear();
      return -1;
    }
    if (i == copy_from) src = d;
    memcpy(buf + first + i * sizeof(void*), &d, sizeof d);
    ++d;
  }
  return 0;
}

EXPORT int cc1d_pyargs_pack(PyObject* tensors, void* buf, int64_t header) {
  return pack(tensors, (char*)buf, (Py_ssize_t)header, -1, -1);
}

typedef int (*entry_fn)(const void* args);

/* pack_call(entry, header, scalars_at, scalars, tensors, like); see the contract above. A wrong layout
 * from the caller raises ValueError rather than writing past the buffer. */
static PyObject* pack_call(PyObject* self, PyObject* args) {
  (void)self;
  _Alignas(16) char buf[2048];
  if (PyTuple_Size(args) != 6) {
    PyErr_SetString(PyExc_TypeError, "pack_call(entry, header, scalars_at, scalars, tensors, like) takes 6 arguments");
    return NULL;
  }
  const entry_fn entry = (entry_fn)PyLong_AsVoidPtr(PyTuple_GetItem(args, 0));
  const Py_ssize_t header = PyLong_AsSsize_t(PyTuple_GetItem(args, 1));
  const Py_ssize_t scalars_at = PyLong_AsSsize_t(PyTuple_GetItem(args, 2));
  char* scalars = NULL;
  Py_ssize_t nscalars = 0;
  if (PyErr_Occurred() || PyBytes_AsStringAndSize(PyTuple_GetItem(args, 3), &scalars, &nscalars) != 0) return NULL;
  PyObject* tensors = PyTuple_GetItem(args, 4);
  PyObject* like = PyTuple_GetItem(args, 5);
  Py_ssize_t copy_to = -1, copy_from = -1;
  if (like != Py_None) {
    copy_to = PyLong_AsSsize_t(PyTuple_GetItem(like, 0));
    copy_from = PyLong_AsSsize_t(PyTuple_GetItem(like, 1));
    if (PyErr_Occurred()) return NULL;
  }
  const Py_ssize_t n = PyTuple_Size(tensors);
  const Py_ssize_t used = header + n * (Py_ssize_t)sizeof(cc1d_tensor);
  if (entry == NULL || n < 0 || header < (Py_ssize_t)sizeof(uint32_t) || scalars_at < 0 ||
      scalars_at + nscalars > header || (copy_to >= 0 && copy_from >= copy_to) || used > (Py_ssize_t)sizeof buf) {
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "pack_call: entry is NULL, tensors is not a tuple, like is not (i, j) with "
                                      "j < i, or the layout does not fit (scalars past the header, or more than "
                                      "2048 bytes)");
    return NULL;
  }
  memset(buf, 0, (size_t)used);  /* absent pointers stay NULL */
  if (pack(tensors, buf, header, copy_to, copy_from) != 0) {
    Py_IncRef(Py_None);
    return Py_None;
  }
  memcpy(buf + scalars_at, scalars, (size_t)nscalars);
  PyThreadState* ts = PyEval_SaveThread();  /* as ctypes does: other Python threads run meanwhile */
  const int status = entry(buf);
  PyEval_RestoreThread(ts);
  return PyLong_FromLong(status);
}

static PyMethodDef g_pack_call = {"pack_call", pack_call, METH_VARARGS,
                                  "pack_call(entry, header, scalars_at, scalars, tensors, like) -> status or None"};

EXPORT PyObject* cc1d_pyargs_caller(void) { return PyCFunction_NewEx(&g_pack_call, NULL, NULL); }
