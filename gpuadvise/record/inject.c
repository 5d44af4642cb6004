/* gpuadvise record: the CUDA injection library (CUDA_INJECTION64_PATH).
 *
 * The CUDA driver loads this library when a program initialises CUDA and calls
 * InitializeInjection(). It starts the recorder, gpuadvise.record.boot.start_injected(), in
 * Python: the program's own interpreter when the program is Python, else the shared libpython
 * named by GPUADVISE_RECORD_LIBPYTHON, embedded, with GPUADVISE_RECORD_SYSPATH as its path. At
 * exit it calls finish_injected(). No header but the C library's: the few Python functions it
 * needs are looked up with dlsym. Built by gpuadvise record with: cc -shared -fPIC inject.c -ldl
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*int_void)(void);
typedef void (*void_int)(int);
typedef int (*run_string)(const char *);
typedef int (*gil_ensure)(void);
typedef void (*gil_release)(int);
typedef void *(*save_thread)(void);

static run_string run;
static int_void is_initialized;
static gil_ensure ensure;
static gil_release release;
static int started;

static void *symbol(void *lib, const char *name) {
    void *p = dlsym(RTLD_DEFAULT, name);
    return p ? p : (lib ? dlsym(lib, name) : NULL);
}

static void call(const char *code) {
    int state = ensure();
    if (run(code) != 0)
        fprintf(stderr, "gpuadvise record: the recorder failed (see above)\n");
    release(state);
}

/* Only for a Python this library embedded. A Python program finishes the recording from its
   own atexit (boot.py); by the time the C library's exit handlers run, its interpreter is
   finalised, and taking its GIL then is a segmentation fault (seen as signal 11 at the exit of
   CuPy scripts). */
static void at_exit(void) {
    if (started && is_initialized && is_initialized())
        call("import gpuadvise.record.boot as b\nb.finish_injected()\n");
}

int InitializeInjection(void) {
    if (started)
        return 1;
    void *lib = NULL;
    int_void is_init = (int_void)dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    if (!is_init) {
        const char *path = getenv("GPUADVISE_RECORD_LIBPYTHON");
        lib = path && *path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
        if (!lib) {
            fprintf(stderr, "gpuadvise record: cannot load the Python library %s: %s\n",
                    path ? path : "(GPUADVISE_RECORD_LIBPYTHON unset)", dlerror());
            return 0;
        }
        is_init = (int_void)symbol(lib, "Py_IsInitialized");
    }
    void_int init = (void_int)symbol(lib, "Py_InitializeEx");
    run = (run_string)symbol(lib, "PyRun_SimpleString");
    ensure = (gil_ensure)symbol(lib, "PyGILState_Ensure");
    release = (gil_release)symbol(lib, "PyGILState_Release");
    save_thread save = (save_thread)symbol(lib, "PyEval_SaveThread");
    if (!is_init || !init || !run || !ensure || !release || !save) {
        fprintf(stderr, "gpuadvise record: the Python library lacks its C API\n");
        return 0;
    }
    is_initialized = is_init;
    int embedded = !is_init();
    if (embedded) {
        /* this Python's home (GPUADVISE_RECORD_PYTHONHOME) for its start only: the program's
           own PYTHONHOME, if any, is put back after */
        const char *home = getenv("GPUADVISE_RECORD_PYTHONHOME");
        const char *was = getenv("PYTHONHOME");
        char *old = was ? strdup(was) : NULL;
        if (home && *home)
            setenv("PYTHONHOME", home, 1);
        init(0); /* no signal handlers: the program keeps its own */
        if (old) {
            setenv("PYTHONHOME", old, 1);
            free(old);
        } else if (home && *home) {
            unsetenv("PYTHONHOME");
        }
        run("import os, sys\n"
            "sys.path[:] = [p for p in os.environ.get('GPUADVISE_RECORD_SYSPATH', '')"
            ".split(os.pathsep) if p] or sys.path\n"
            "sys.argv = [a.decode('utf-8', 'replace') for a in "
            "open('/proc/self/cmdline', 'rb').read().split(b'\\0')[:-1]]\n");
        save(); /* the GIL goes back: CUPTI calls in from the program's threads */
    }
    started = 1;
    call("import gpuadvise.record.boot as b\nb.start_injected()\n");
    if (embedded)
        atexit(at_exit);
    return 1;
}
