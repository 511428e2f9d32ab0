/*
 * tyr.h: the C ABI through which a compiled Tyr model library hands its graphs to a host
 * (pytyr loads it with cffi). This header is the whole ABI; docs/abi.md explains it.
 *
 * A model library exports the six functions below. The host asks which models it has and,
 * for a model and a configuration (JSON text), gets that model's graph IR (JSON text,
 * docs/ir.md). The graph is data: the host validates it like any untrusted document.
 *
 * VERSIONING
 *   TYR_ABI_VERSION names this set of functions and this contract. tyr_abi_version() has
 *   the same signature in every version, so a host calls it first, before anything else,
 *   and refuses a library whose version differs from its own: the other five may have
 *   other signatures in another version. Any change below (a function, an argument, a
 *   rule of this comment) is a new version. The IR inside the buffers carries its own
 *   version ("version" key), checked by the host's validator.
 *
 * OWNERSHIP CONTRACT
 *   - Buffers returned through `out` are allocated by the library and owned by the caller,
 *     who gives each back with exactly one tyr_free(). They are not NUL-terminated; their
 *     length is *out_len. The caller never frees them any other way (the library may use
 *     any allocator) and never frees them twice.
 *   - tyr_live_buffers() is the number of buffers handed out and not yet freed: a leak
 *     monitor for this boundary. A host that has freed everything sees 0.
 *   - Arguments are borrowed for the duration of the call: the library copies what it
 *     keeps and never frees or writes them. `name` is NUL-terminated UTF-8; `config` is
 *     `config_len` bytes of UTF-8 JSON (a JSON object), not necessarily NUL-terminated.
 *   - tyr_last_error() returns a pointer owned by the library: NUL-terminated UTF-8 text,
 *     valid until the next call of a tyr_ function on the same thread. The caller copies
 *     it and never frees it. The error state is per thread.
 *
 * RESULTS
 *   Functions returning int32_t return TYR_OK (0) on success and a nonzero status on
 *   failure. On success *out is a buffer (never NULL) and *out_len its length. On failure
 *   *out is NULL, *out_len is 0, nothing needs freeing, and tyr_last_error() says what went
 *   wrong as a sentence (e.g. "no model named 'gpt2' (models: mlp)").
 *
 * THREADS
 *   Every function may be called from any thread. A library built on the Lean runtime
 *   (cc/tyr.c) initialises the runtime once, on the first call, and serialises calls into
 *   Lean; the host never initialises anything itself. A library is never unloaded.
 */
#ifndef TYR_H
#define TYR_H

#include <stddef.h>
#include <stdint.h>

/* The version of this ABI; tyr_abi_version() of a conforming library returns it. */
#define TYR_ABI_VERSION 1

/* Status of a call: success; any other value is a failure (see tyr_last_error). */
#define TYR_OK 0
#define TYR_ERROR 1

#ifdef __cplusplus
extern "C" {
#endif

/* The declarations between the two markers are read by pytyr (pytyr/abi/loader.py) as its
 * cffi cdef, comments and preprocessor lines removed: keep them plain C declarations. */
/* tyr:cdef:begin */

/* The ABI version the library was built against (TYR_ABI_VERSION of its tyr.h). Never
 * fails, allocates nothing; its signature is the same in every version. */
uint32_t tyr_abi_version(void);

/* The names of the models the library exports, as a JSON array of strings
 * (["mlp","gpt"]) in a new buffer. */
int32_t tyr_list_models(uint8_t **out, size_t *out_len);

/* The graph IR (docs/ir.md) of model `name` instantiated with `config`, a JSON object of
 * argument values ({"c":{"hidden":64},"b":128}), in a new buffer. */
int32_t tyr_model_graph(const char *name, const uint8_t *config, size_t config_len,
                        uint8_t **out, size_t *out_len);

/* Text of the last failure on the calling thread; "" if there was none. Borrowed. */
const char *tyr_last_error(void);

/* Give back a buffer returned by this library. NULL is allowed and does nothing. */
void tyr_free(uint8_t *buf);

/* How many buffers this library has returned and not yet had back (leak monitor). */
size_t tyr_live_buffers(void);

/* tyr:cdef:end */

#ifdef __cplusplus
}
#endif

#endif /* TYR_H */
