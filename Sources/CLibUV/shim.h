#ifndef DIFFCAST_CLIBUV_SHIM_H
#define DIFFCAST_CLIBUV_SHIM_H

#include <uv.h>

/* Casts between libuv handle types, kept in C so Swift never puns pointers itself. */
static inline uv_stream_t *dc_stream(void *handle) { return (uv_stream_t *)handle; }
static inline uv_handle_t *dc_handle(void *handle) { return (uv_handle_t *)handle; }

#endif
