/*
 * tyr.c: the glue between cc/tyr.h and a Tyr model library compiled by Lean.
 *
 * Tyr/Export.lean exports two Lean functions (names fixed by its @[export] attributes):
 *   tyr_lean_models : Unit -> IO String                 JSON array of model names
 *   tyr_lean_graph  : String -> String -> IO String     graph IR of (name, config JSON)
 * This file initialises the Lean runtime once, calls them, and copies the Lean strings into
 * malloc'd buffers that the host frees with tyr_free, turning Lean errors into
 * tyr_last_error text. The ownership rules are the ones of tyr.h.
 *
 * Build settings (lakefile.lean passes them; docs/abi.md):
 *   TYR_LEAN_INIT      the initializer of the library's root module, e.g. initialize_tyr_TyrModels
 *                      (Lean names it initialize_<package>_<Module_Path> in recent versions,
 *                      initialize_<Module_Path> in older ones).
 *   TYR_LEAN_IO_WORLD  1 if the toolchain still passes the IO "world" token to compiled IO
 *                      functions and module initializers (Lean before the "zero cost BaseIO"
 *                      change, lean4#10625); 0, the default, for the pinned toolchain.
 */
#include <lean/lean.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tyr.h"

#ifndef TYR_LEAN_INIT
#error "define TYR_LEAN_INIT as the initializer of the library's root module (see docs/abi.md)"
#endif
#ifndef TYR_LEAN_IO_WORLD
#define TYR_LEAN_IO_WORLD 0
#endif

/* The exports of Tyr/Export.lean and the runtime entry points this file needs. */
#if TYR_LEAN_IO_WORLD
#define TYR_WORLD , lean_io_mk_world()
extern lean_object *TYR_LEAN_INIT(uint8_t builtin, lean_object *world);
extern lean_object *tyr_lean_models(lean_object *unit, lean_object *world);
extern lean_object *tyr_lean_graph(lean_object *name, lean_object *config, lean_object *world);
#else
#define TYR_WORLD
extern lean_object *TYR_LEAN_INIT(uint8_t builtin);
extern lean_object *tyr_lean_models(lean_object *unit);
extern lean_object *tyr_lean_graph(lean_object *name, lean_object *config);
#endif
extern void lean_initialize(void);
extern void lean_initialize_thread(void);
extern lean_object *lean_io_error_to_string(lean_object *err);

/* ---- buffers and errors (no Lean here) ----------------------------------------------- */

static atomic_size_t live_buffers;

/* Per-thread error text: tyr.h promises the pointer stays valid until this thread's next
 * call, which a thread-local array gives without any locking. */
static _Thread_local char last_error[2048];

static void set_error(const char *prefix, const char *text, size_t len) {
    int n = snprintf(last_error, sizeof last_error, "%s", prefix);
    size_t used = n < 0 ? 0 : (size_t)n;
    if (used >= sizeof last_error - 1)
        return;
    size_t room = sizeof last_error - 1 - used;
    if (len > room) {
        len = room;
        /* Cut at a UTF-8 character boundary, so the host always decodes whole characters. */
        while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80)
            len--;
    }
    memcpy(last_error + used, text, len);
    last_error[used + len] = '\0';
}

static int32_t fail(const char *message) {
    set_error("", message, strlen(message));
    return TYR_ERROR;
}

/* A new caller-owned copy of `len` bytes; NULL if memory is exhausted. */
static uint8_t *new_buffer(const char *data, size_t len) {
    uint8_t *buf = malloc(len > 0 ? len : 1); /* a success never returns NULL (tyr.h) */
    if (buf == NULL)
        return NULL;
    memcpy(buf, data, len);
    atomic_fetch_add(&live_buffers, 1);
    return buf;
}

/* ---- the Lean runtime ----------------------------------------------------------------- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool init_ok;
static char init_error[1024];

/* Lean objects are reference counted without atomics unless marked multi-threaded, and the
 * model registry is shared, so every call into Lean holds this lock. */
static pthread_mutex_t lean_lock = PTHREAD_MUTEX_INITIALIZER;

/* Runs once per process (pthread_once): module initializers are not thread-safe. */
static void init_lean(void) {
    lean_initialize(); /* includes the runtime module; Tyr.Export imports the Lean package */
    lean_object *res = TYR_LEAN_INIT(1 TYR_WORLD);
    if (lean_io_result_is_ok(res)) {
        init_ok = true;
    } else {
        lean_object *err = lean_io_result_get_error(res);
        lean_inc(err);
        lean_object *text = lean_io_error_to_string(err);
        snprintf(init_error, sizeof init_error,
                 "the model library's Lean modules failed to initialise: %s",
                 lean_string_cstr(text));
        lean_dec(text);
    }
    lean_dec(res);
    lean_io_mark_end_initialization();
}

/* Initialise the runtime (first call) and this thread (first call on it); lock. */
static bool enter_lean(void) {
    static _Thread_local bool thread_ready;
    pthread_once(&init_once, init_lean);
    if (!init_ok) {
        fail(init_error);
        return false;
    }
    if (!thread_ready) {
        /* Threads not created by Lean must be registered before running Lean code. They are
         * never finalised: the host's threads outlive their calls, and this costs one small
         * per-thread heap. */
        lean_initialize_thread();
        thread_ready = true;
    }
    pthread_mutex_lock(&lean_lock);
    return true;
}

/* Turn the IO result of a Tyr export into a buffer or an error; consumes `res`. */
static int32_t finish(lean_object *res, uint8_t **out, size_t *out_len) {
    int32_t status;
    if (lean_io_result_is_ok(res)) {
        lean_object *s = lean_io_result_get_value(res); /* borrowed from res */
        size_t len = lean_string_size(s) - 1;            /* the size counts the final NUL */
        uint8_t *buf = new_buffer(lean_string_cstr(s), len);
        if (buf == NULL) {
            status = fail("out of memory copying the result");
        } else {
            *out = buf;
            *out_len = len;
            status = TYR_OK;
        }
    } else {
        lean_object *err = lean_io_result_get_error(res);
        lean_inc(err); /* lean_io_error_to_string consumes its argument */
        lean_object *text = lean_io_error_to_string(err);
        set_error("", lean_string_cstr(text), lean_string_size(text) - 1);
        lean_dec(text);
        status = TYR_ERROR;
    }
    lean_dec(res);
    pthread_mutex_unlock(&lean_lock);
    return status;
}

/* ---- the ABI -------------------------------------------------------------------------- */

uint32_t tyr_abi_version(void) { return TYR_ABI_VERSION; }

int32_t tyr_list_models(uint8_t **out, size_t *out_len) {
    last_error[0] = '\0';
    if (out == NULL || out_len == NULL)
        return fail("tyr_list_models: out and out_len must not be NULL");
    *out = NULL;
    *out_len = 0;
    if (!enter_lean())
        return TYR_ERROR;
    return finish(tyr_lean_models(lean_box(0) TYR_WORLD), out, out_len);
}

int32_t tyr_model_graph(const char *name, const uint8_t *config, size_t config_len,
                        uint8_t **out, size_t *out_len) {
    last_error[0] = '\0';
    if (out == NULL || out_len == NULL)
        return fail("tyr_model_graph: out and out_len must not be NULL");
    *out = NULL;
    *out_len = 0;
    if (name == NULL || (config == NULL && config_len > 0))
        return fail("tyr_model_graph: name and config must not be NULL");
    if (!enter_lean())
        return TYR_ERROR;
    /* Both strings are consumed by the export (exported parameters are owned). Invalid
     * UTF-8 is replaced by the runtime, and then fails to parse as JSON in Lean. */
    lean_object *lname = lean_mk_string_from_bytes(name, strlen(name));
    lean_object *lconfig = lean_mk_string_from_bytes((const char *)config, config_len);
    return finish(tyr_lean_graph(lname, lconfig TYR_WORLD), out, out_len);
}

const char *tyr_last_error(void) { return last_error; }

void tyr_free(uint8_t *buf) {
    if (buf == NULL)
        return;
    free(buf);
    atomic_fetch_sub(&live_buffers, 1);
}

size_t tyr_live_buffers(void) { return atomic_load(&live_buffers); }
