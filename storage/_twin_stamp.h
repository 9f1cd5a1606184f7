/* What a compiled twin was built from: setup.py defines TWIN_SOURCE_HASH (a digest of the
   files in TWIN_SOURCES, by compactlog/twin_hash.py's rule) and the module carries both, so
   compactlog/twins.py can tell a build older than its sources (a checkout pulled but not
   rebuilt) and use the pure twin instead of stale code. */
#ifndef COMPACTLOG_TWIN_STAMP_H
#define COMPACTLOG_TWIN_STAMP_H

#include <Python.h>

#ifndef TWIN_SOURCE_HASH
#define TWIN_SOURCE_HASH ""
#endif
#ifndef TWIN_SOURCES
#define TWIN_SOURCES ""
#endif

/* ``m`` with SOURCE_HASH and SOURCES set; NULL (``m`` released) when that fails. */
static inline PyObject *twin_stamped(PyObject *m) {
    if (m && (PyModule_AddStringConstant(m, "SOURCE_HASH", TWIN_SOURCE_HASH) < 0 ||
              PyModule_AddStringConstant(m, "SOURCES", TWIN_SOURCES) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

#endif
