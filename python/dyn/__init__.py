"""dyn -- the dyn compiler from Python: sessions, functions called on NumPy arrays and
PyTorch tensors in place, results that own their memory, errors as exceptions with places.

A binding of libdyn's C interface (include/dyn/dyn.h) written with ctypes, so installing it
needs no compiler and no build step: the library it loads is found as _library() says.
Arguments cross through DLPack (__dlpack__ capsules) and results come back the same way,
so neither is copied.  doc/api.md is the manual.
"""
import ctypes
import os
import sys

import numpy as np

__all__ = ["Session", "Function", "Error", "live_results", "version"]

# make install writes the installed library's path here
_INSTALLED_LIBRARY = None


def _library():
    """libdyn: $DYN_LIBRARY, else the path make install wrote, else the build tree this
    module sits in (python/dyn -> .libs), else the system's search."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("DYN_LIBRARY"), _INSTALLED_LIBRARY,
                  os.path.join(here, "..", "..", ".libs", "libdyn.so.0")]
    for path in candidates:
        if path and os.path.exists(path):
            return ctypes.CDLL(path)
    return ctypes.CDLL("libdyn.so.0")


# ---- the C types (include/dyn/dyn.h and dyn/dlpack.h) ----

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]


class _Options(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("threads", ctypes.c_int), ("target", ctypes.c_char_p),
                ("hw", ctypes.c_char_p), ("no_prelude", ctypes.c_int), ("out", ctypes.c_void_p),
                ("interactive", ctypes.c_int)]


class _Note(ctypes.Structure):
    _fields_ = [("file", ctypes.c_char_p), ("line", ctypes.c_int), ("column", ctypes.c_int),
                ("message", ctypes.c_char_p)]


class _Diagnostic(ctypes.Structure):
    _fields_ = [("is_error", ctypes.c_int), ("code", ctypes.c_char_p), ("file", ctypes.c_char_p),
                ("line", ctypes.c_int), ("column", ctypes.c_int), ("message", ctypes.c_char_p),
                ("text", ctypes.c_char_p), ("nnotes", ctypes.c_int), ("notes", ctypes.POINTER(_Note))]


class _Param(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("elem", ctypes.c_char_p), ("dtype", _DLDataType),
                ("is_size", ctypes.c_int), ("rank", ctypes.c_int),
                ("dims", ctypes.POINTER(ctypes.c_char_p))]


class _Signature(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("text", ctypes.c_char_p), ("nparams", ctypes.c_int),
                ("params", ctypes.POINTER(_Param)), ("nresults", ctypes.c_int),
                ("results", ctypes.POINTER(_Param)), ("nsizes", ctypes.c_int),
                ("sizes", ctypes.POINTER(ctypes.c_char_p))]


class _Timing(ctypes.Structure):
    _fields_ = [("median_ms", ctypes.c_double), ("min_ms", ctypes.c_double), ("max_ms", ctypes.c_double),
                ("runs", ctypes.c_int), ("target", ctypes.c_char_p), ("evaluator_runs", ctypes.c_int),
                ("function", ctypes.c_char_p), ("gflops", ctypes.c_double), ("gbs", ctypes.c_double),
                ("bound", ctypes.c_char_p), ("roof", ctypes.c_double), ("roof_percent", ctypes.c_double),
                ("predicted_ms", ctypes.c_double), ("text", ctypes.c_char_p)]


class _Schedule(ctypes.Structure):
    _fields_ = [("function", ctypes.c_char_p), ("target", ctypes.c_char_p), ("hardware", ctypes.c_char_p),
                ("threads", ctypes.c_int), ("compiles", ctypes.c_int), ("compile_ms", ctypes.c_double),
                ("predicted_ms", ctypes.c_double), ("text", ctypes.c_char_p)]


_lib = _library()
_P = ctypes.c_void_p
_lib.dyn_version.restype = ctypes.c_char_p
_lib.dyn_session_new.argtypes = [ctypes.POINTER(_Options), ctypes.POINTER(ctypes.c_void_p)]
_lib.dyn_session_new.restype = _P
_lib.dyn_session_free.argtypes = [_P]
_lib.dyn_free_string.argtypes = [_P]
_lib.dyn_take_output.argtypes = [_P]
_lib.dyn_take_output.restype = _P
_lib.dyn_diagnostic_count.argtypes = [_P]
_lib.dyn_diagnostic_get.argtypes = [_P, ctypes.c_int]
_lib.dyn_diagnostic_get.restype = ctypes.POINTER(_Diagnostic)
_lib.dyn_run.argtypes = [_P, ctypes.c_char_p, ctypes.c_char_p]
_lib.dyn_run_file.argtypes = [_P, ctypes.c_char_p]
_lib.dyn_signature_get.argtypes = [_P, ctypes.c_char_p]
_lib.dyn_signature_get.restype = ctypes.POINTER(_Signature)
# no argtypes: Function.__call__ passes ready ctypes objects, and converting is the cost
_callv = _lib.dyn_callv
_lib.dyn_live_results.restype = ctypes.c_long
_lib.dyn_gathered_bytes.argtypes = [_P]
_lib.dyn_gathered_bytes.restype = ctypes.c_int64
_lib.dyn_get.argtypes = [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
_lib.dyn_time.argtypes = [_P, ctypes.c_char_p, ctypes.POINTER(_Timing)]
_lib.dyn_sched.argtypes = [_P, ctypes.c_char_p, _P, _P, ctypes.c_int, ctypes.POINTER(_Schedule)]

# DLPack capsules: a pointer in, a pointer out, through the C API of Python itself
_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_get.restype = ctypes.c_void_p
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_new.restype = ctypes.py_object
_DLTENSOR = b"dltensor"          # lives as long as the module, as the capsules need

_ndarray = np.ndarray
_from_dlpack = np.from_dlpack
_ELEMS = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32, "i64": np.int64,
          "bool": np.bool_}     # bf16 has no NumPy type: torch.bfloat16 through DLPack
_OK_KINDS = frozenset(np.dtype(t).char for t in _ELEMS.values())


def version():
    """The version of the libdyn loaded: "0.1.0"."""
    return _lib.dyn_version().decode()


def live_results():
    """Results handed out by any session and not yet freed (their arrays not yet collected)."""
    return _lib.dyn_live_results()


def _s(b):
    return b.decode("utf-8", "replace") if b is not None else None


class Error(Exception):
    """A dyn error: message, and where (file, line, column: None when the error has no
    place, as a call's own); notes: [(file, line, column, message)]; code: "E_ARG_TYPE";
    text: the diagnostic as dyn prints it; diagnostics: every record of the operation."""

    def __init__(self, diagnostics):
        first = next((d for d in diagnostics if d["is_error"]), diagnostics[0] if diagnostics else None)
        first = first or {"file": None, "line": 0, "column": 0, "message": "failed", "notes": [],
                          "code": "", "text": "dyn: error: failed\n", "is_error": 1}
        self.diagnostics = diagnostics
        self.file, self.line, self.column = first["file"], first["line"] or None, first["column"] or None
        self.message, self.notes, self.code, self.text = first["message"], first["notes"], first["code"], first["text"]
        if self.file is None:
            self.line = self.column = None
        where = "%s:%d:%d: " % (self.file, self.line, self.column) if self.file else ""
        super().__init__(where + self.message)


class _Export:
    """Hands one result's DLManagedTensor to np.from_dlpack, which then owns it: the array
    calls its deleter (in C) when it is collected."""
    __slots__ = ("capsule",)

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


class Function:
    """A function of a session, called on arrays: f(A, B) -> array, or a tuple of them.
    Arguments: NumPy arrays of f32, f64, i32, i64 or bool (read in place whatever their
    strides), PyTorch CPU tensors, or Python numbers (for size parameters and scalars)."""

    def __init__(self, session, name):
        self._session = session
        self.name = name
        self._bname = name.encode()
        sig = _lib.dyn_signature_get(session._h, self._bname)
        if not sig:
            raise session._error()
        sg = sig.contents
        self.signature = {
            "name": _s(sg.name), "text": _s(sg.text),
            "params": [self._param(sg.params[i]) for i in range(sg.nparams)],
            "results": [self._param(sg.results[i]) for i in range(sg.nresults)],
            "sizes": [_s(sg.sizes[i]) for i in range(sg.nsizes)]}
        self._nparams = sg.nparams
        self._nres = max(sg.nresults, 1)
        self._params = self.signature["params"]
        self._results = (ctypes.c_void_p * self._nres)()
        self._argv = (ctypes.c_void_p * max(sg.nparams, 1))()
        self._nout = ctypes.c_int()
        # the call's pointers made once: a small call's cost is mostly ctypes' conversions
        self._c_results = ctypes.c_void_p(ctypes.addressof(self._results))
        self._c_argv = ctypes.c_void_p(ctypes.addressof(self._argv))
        self._c_nout = ctypes.c_void_p(ctypes.addressof(self._nout))
        self._c = session._c     # shared: close() empties it, and a call then fails cleanly
        self._bools = [r["elem"] == "bool" for r in self.signature["results"]]
        self._bf16 = any(r["elem"] == "bf16" for r in self.signature["results"])
        self._single = sg.nresults == 1
        self._export = _Export()

    @staticmethod
    def _param(p):
        return {"name": _s(p.name), "elem": _s(p.elem), "is_size": bool(p.is_size), "rank": p.rank,
                "dims": [_s(p.dims[d]) for d in range(p.rank)]}

    def __repr__(self):
        return "<dyn function %s>" % self.signature["text"]

    def _capsule(self, x, i, keep):
        """The DLTensor's address of argument i, for what the fast path of __call__ does not
        take (read-only and bool arrays, numbers); keep holds what it points into."""
        if isinstance(x, (bool, int, float, np.generic)):
            p = self._params[i] if i < len(self._params) else None
            x = np.asarray(x, dtype=_ELEMS["i64" if p is None or p["is_size"] else p["elem"]])
        if isinstance(x, np.ndarray):
            if x.dtype.char not in _OK_KINDS or not x.dtype.isnative:
                raise Error([_plain("%s: argument %d is a NumPy array of %s; dyn takes float32, float64, float16, "
                                    "int32, int64 and bool" % (self.name, i + 1, x.dtype))])
            return _dltensor(x, keep), False
        if not hasattr(x, "__dlpack__"):
            raise Error([_plain("%s: argument %d is a %s; dyn takes NumPy arrays, tensors with __dlpack__ "
                                "and numbers" % (self.name, i + 1, type(x).__name__))])
        cap = x.__dlpack__()
        keep.append(x)
        keep.append(cap)
        return _capsule_get(cap, _DLTENSOR), type(x).__module__.startswith("torch")

    def __call__(self, *args):
        # Written for a small call, where this is most of the cost: locals, no helper calls,
        # one pass over the arguments.  The fast path takes what exports itself through
        # DLPack (NumPy's writeable arrays, torch's tensors); _capsule the rest.
        argv = self._argv
        keep = []
        foreign = False
        i = 0
        if self._bf16 and not any(type(x).__module__.startswith("torch") for x in args):
            raise Error([_plain("%s returns bf16, which NumPy has no type for: return f32(...) of it, "
                                "or pass torch tensors" % self.name)])
        try:
            for x in args:
                c = x.__dlpack__()
                keep.append(c)
                argv[i] = _capsule_get(c, _DLTENSOR)
                i += 1
                if type(x) is not _ndarray:
                    foreign = True
        except (AttributeError, BufferError, TypeError, RuntimeError, IndexError):
            if len(args) > len(argv):
                raise Error([_plain("%s takes %d argument%s, not %d" % (
                    self.name, self._nparams, "" if self._nparams == 1 else "s", len(args)))]) from None
            keep, foreign = [], False
            for i, x in enumerate(args):
                argv[i], t = self._capsule(x, i, keep)
                foreign = foreign or t
        if _callv(self._c, self._bname, self._c_argv, len(args), self._c_results, self._nres, self._c_nout):
            raise self._session._error()
        res = self._results
        if self._single and not foreign:
            e = self._export        # one per function: a session serves one thread at a time
            e.capsule = _capsule_new(res[0], _DLTENSOR, None)
            r = _from_dlpack(e)
            return r.view(np.bool_) if self._bools[0] else r
        outs = []
        torch_out = foreign and any(type(x).__module__.startswith("torch") for x in args)
        for k in range(self._nout.value):
            e = _Export()
            e.capsule = _capsule_new(res[k], _DLTENSOR, None)
            if torch_out:
                import torch.utils.dlpack
                r = torch.utils.dlpack.from_dlpack(e.capsule)
                outs.append(r.view(torch.bool) if self._bools[k] else r)
            else:
                r = _from_dlpack(e)
                outs.append(r.view(np.bool_) if self._bools[k] else r)
        return outs[0] if len(outs) == 1 else tuple(outs)


def _plain(msg):
    """A record for an error found here, before the library saw the call."""
    return {"is_error": True, "code": "", "file": None, "line": 0, "column": 0, "message": msg,
            "text": "dyn: error: %s\n" % msg, "notes": []}


_CODES = {"f": 2, "i": 0, "b": 1}


def _dltensor(x, keep):
    """A DLTensor over array x built here, for what NumPy does not export through DLPack
    (a read-only array, bool before NumPy 1.25): slower than __dlpack__, still no copy."""
    nd = x.ndim
    shape = (ctypes.c_int64 * max(nd, 1))(*x.shape)
    strides = (ctypes.c_int64 * max(nd, 1))(*[st // x.itemsize for st in x.strides])
    t = _DLTensor(x.__array_interface__["data"][0], _DLDevice(1, 0), nd,
                  _DLDataType(_CODES[x.dtype.kind], x.itemsize * 8, 1), shape, strides, 0)
    keep.extend((x, shape, strides, t))
    return ctypes.addressof(t)


class Session:
    """A dyn session: definitions, imports and bindings, as the REPL keeps them.
    threads: 0 for every core; target: "cpu", "gpu", "gpu:tf32", "gpu:bf16" or "ref";
    hw: a hardware model's name or file; prelude: import linalg and nn at the start;
    interactive: a bare expression prints its value, as in the REPL (a notebook).
    One thread uses a session at a time; different sessions run in parallel."""

    def __init__(self, threads=0, target=None, hw=None, prelude=True, interactive=False):
        o = _Options(ctypes.sizeof(_Options), threads, target.encode() if target else None,
                     hw.encode() if hw else None, 0 if prelude else 1, None, 1 if interactive else 0)
        why = ctypes.c_void_p()
        self._h = _lib.dyn_session_new(ctypes.byref(o), ctypes.byref(why))
        if not self._h:
            msg = ctypes.string_at(why.value).decode() if why.value else "cannot start a session"
            _lib.dyn_free_string(why)
            raise Error([_plain(msg)])
        self._c = ctypes.c_void_p(self._h)
        self._functions = {}

    def close(self):
        """End the session (results already handed out stay valid)."""
        if getattr(self, "_h", None):
            self._c.value = None
            _lib.dyn_session_free(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def gathered_bytes(self):
        """The bytes of arguments the last call copied into C order on the way in: 0 on the
        CPU, which reads them in place whatever their strides (the GPU gathers strided ones)."""
        return _lib.dyn_gathered_bytes(self._h) if self._h else 0

    def diagnostics(self):
        """The records of the last operation: dicts with is_error, code, file, line, column,
        message, text and notes."""
        out = []
        for i in range(_lib.dyn_diagnostic_count(self._h)):
            d = _lib.dyn_diagnostic_get(self._h, i).contents
            notes = [(_s(d.notes[k].file), d.notes[k].line, d.notes[k].column, _s(d.notes[k].message))
                     for k in range(d.nnotes)]
            out.append({"is_error": bool(d.is_error), "code": _s(d.code), "file": _s(d.file), "line": d.line,
                        "column": d.column, "message": _s(d.message), "text": _s(d.text), "notes": notes})
        return out

    def _error(self):
        if not self._h:
            return Error([_plain("the session is closed")])
        return Error(self.diagnostics())

    def _flush_output(self):
        p = _lib.dyn_take_output(self._h)
        if p:
            text = ctypes.string_at(p).decode("utf-8", "replace")
            _lib.dyn_free_string(p)
            if text:
                sys.stdout.write(text)

    def run(self, source, origin=None):
        """Run dyn source (definitions, imports, statements); what print() prints goes to
        sys.stdout.  Raises Error at the first error; what ran before it stays."""
        self._functions.clear()
        r = _lib.dyn_run(self._h, source.encode(), origin.encode() if origin else None)
        self._flush_output()
        if r:
            raise self._error()

    def run_file(self, path):
        """Run a dyn file, as run() runs text."""
        self._functions.clear()
        r = _lib.dyn_run_file(self._h, os.fsencode(path))
        self._flush_output()
        if r:
            raise self._error()

    def value(self, name):
        """The tensor bound to name at top level, as a NumPy array over the session's memory
        (no copy; read it, do not write it).  Error when nothing is bound or not a tensor."""
        p = ctypes.c_void_p()
        if _lib.dyn_get(self._h, name.encode(), ctypes.byref(p)):
            raise self._error()
        e = _Export()
        e.capsule = _capsule_new(p.value, _DLTENSOR, None)
        try:
            r = _from_dlpack(e)
        except RuntimeError:     # the one dtype dyn has and NumPy has not
            raise Error([_plain("%s is bf16, which NumPy has no type for: bind f32(%s) and take that"
                                % (name, name))]) from None
        return r.view(np.bool_) if r.dtype == np.uint8 else r    # dyn's one byte type is bool

    def __getitem__(self, name):
        f = self._functions.get(name)
        if f is None:
            try:
                f = self._functions[name] = Function(self, name)
            except Error as e:
                raise KeyError(e.message) from None
        return f

    def function(self, name):
        """The session's function name (Error if there is none)."""
        f = self._functions.get(name)
        if f is None:
            f = self._functions[name] = Function(self, name)
        return f

    def time(self, statement):
        """Run one statement as :time does; the figures as a dict."""
        t = _Timing()
        if _lib.dyn_time(self._h, statement.encode(), ctypes.byref(t)):
            raise self._error()
        return {"median_ms": t.median_ms, "min_ms": t.min_ms, "max_ms": t.max_ms, "runs": t.runs,
                "target": _s(t.target), "evaluator_runs": t.evaluator_runs, "function": _s(t.function),
                "gflops": t.gflops, "gbs": t.gbs, "bound": _s(t.bound), "roof": t.roof,
                "roof_percent": t.roof_percent, "predicted_ms": t.predicted_ms, "text": _s(t.text)}

    def sched(self, name, **sizes):
        """What :sched shows of function name, at sizes (M=64, N=64, ...) if given, as a dict."""
        names = (ctypes.c_char_p * max(len(sizes), 1))(*[k.encode() for k in sizes])
        vals = (ctypes.c_int64 * max(len(sizes), 1))(*sizes.values())
        sc = _Schedule()
        if _lib.dyn_sched(self._h, name.encode(), names, vals, len(sizes), ctypes.byref(sc)):
            raise self._error()
        return {"function": _s(sc.function), "target": _s(sc.target), "hardware": _s(sc.hardware),
                "threads": sc.threads, "compiles": sc.compiles, "compile_ms": sc.compile_ms,
                "predicted_ms": sc.predicted_ms, "text": _s(sc.text)}
